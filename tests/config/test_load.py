from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from failover import Capability, ConfigError, Router, load_config
from failover.config import config_from_dict
from failover.model import Auth, AuthKind, Dialect, Secret

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "failover.yaml"
KEYS = {
    "OPENAI_API_KEY": "sk-openai-secret",
    "AZURE_OPENAI_API_KEY": "az-secret",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "GEMINI_API_KEY": "gm-secret",
    "DEEPSEEK_API_KEY": "ds-secret",
}


def minimal(**target: Any) -> dict[str, Any]:
    t = {"dialect": "openai", "base_url": "https://api.example.com/v1", "model": "m", **target}
    return {"targets": {"a": t}, "routes": {"r": {"primary": ["a"]}}}


def test_the_example_file_loads() -> None:
    cfg = load_config(EXAMPLE, env=KEYS)
    route = cfg.routes["support_triage_v3"]
    assert [t.name for t in route.primary] == ["gpt-4o-us", "gpt-4o-azure-eu"]
    assert [t.name for t in route.fallbacks] == ["claude-sonnet", "gemini-flash"]
    assert route.contract.capabilities == {Capability.CHAT, Capability.STRUCTURED_OUTPUT}
    a = cfg.targets["gpt-4o-us"]
    assert a.api_key == Secret("sk-openai-secret") and a.credential == "env:OPENAI_API_KEY"
    assert a.timeouts.total == 60 and a.max_attempts == 3 and a.limits.rpm == 500
    assert cfg.targets["gpt-4o-azure-eu"].query == (("api-version", "2024-10-21"),)
    assert cfg.retry_budget.ratio == 0.1 and cfg.backoff.cap == 30


def test_secrets_never_show_in_reprs() -> None:
    cfg = load_config(EXAMPLE, env=KEYS)
    text = repr(cfg) + str(cfg.targets) + repr(cfg.routes)
    for secret in KEYS.values():
        assert secret not in text


def test_router_from_config() -> None:
    from failover.config import Config

    cfg = load_config(EXAMPLE, env=KEYS)
    assert isinstance(cfg, Config)
    router = Router.from_config(cfg)
    assert set(router.routes) == {"support_triage_v3", "agent", "chat"}
    assert router.retry_budget is cfg.retry_budget


def test_the_example_puts_claude_on_three_clouds_in_one_equivalence_class() -> None:
    cfg = load_config(EXAMPLE, env=KEYS)
    agent = cfg.routes["agent"]
    assert [t.name for t in agent.primary] == ["claude-sonnet", "claude-sonnet-bedrock", "claude-sonnet-vertex"]
    assert {t.equivalence_key for t in agent.primary} == {"claude-sonnet-4-5"}
    bedrock, vertex = agent.primary[1], agent.primary[2]
    assert bedrock.dialect is Dialect.BEDROCK and bedrock.base_url == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert vertex.dialect is Dialect.ANTHROPIC and vertex.vertex is not None and vertex.vertex.location == "us-east5"
    assert bedrock.api_key is None and vertex.api_key is None  # their clouds' credential chains, not keys
    assert {t.equivalence_key for t in agent.fallbacks} == {"gpt-4o"}
    assert cfg.targets["gpt-4o-azure-entra"].auth == Auth(kind=AuthKind.AZURE)


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (minimal(modle="x"), "targets.a.modle", "did you mean 'model'?"),
        (minimal(dialect="cohere"), "targets.a.dialect", "openai"),
        (minimal(base_url="api.example.com"), "targets.a.base_url", "http://"),
        (minimal(capabilities=["chat", "telepathy"]), "targets.a.capabilities[1]", "vision"),
        (minimal(max_attempts=0), "targets.a.max_attempts", "greater than or equal to 1"),
        (minimal(timeouts={"total": -1}), "targets.a.timeouts.total", "greater than 0"),
        ({"targets": {}, "routes": {}}, "targets", "at least 1"),
        ([1, 2], "(top level)", "mapping"),
    ],
)
def test_bad_values_name_the_field_and_the_fix(data: Any, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as ei:
        config_from_dict(data, env={})
    assert ei.value.field == field
    assert words in str(ei.value)
    assert "Fix:" in str(ei.value)


def test_unknown_target_in_a_route() -> None:
    data = minimal()
    data["routes"]["r"]["fallbacks"] = ["b"]
    with pytest.raises(ConfigError) as ei:
        config_from_dict(data, env={})
    assert ei.value.field == "routes.r.fallbacks[0]"
    assert "unknown target 'b'" in str(ei.value) and "known: a" in str(ei.value)


def test_primary_targets_must_be_equivalent() -> None:
    data = minimal()
    data["targets"]["b"] = {"dialect": "anthropic", "base_url": "https://x/v1", "model": "claude"}
    data["routes"]["r"]["primary"] = ["a", "b"]
    with pytest.raises(ConfigError) as ei:
        config_from_dict(data, env={})
    assert ei.value.field == "routes.r.primary"
    assert "move the other models to fallbacks" in str(ei.value)


def test_missing_credential_env_var_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as ei:
        config_from_dict(minimal(api_key_env="NOPE_KEY"), env={})
    assert ei.value.field == "targets.a.api_key_env"
    assert "NOPE_KEY is not set" in str(ei.value)


def test_api_key_file(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("sk-from-file\n")
    cfg = config_from_dict(minimal(api_key_file=str(secret)), env={})
    assert cfg.targets["a"].api_key == Secret("sk-from-file")
    with pytest.raises(ConfigError, match="cannot read"):
        config_from_dict(minimal(api_key_file=str(tmp_path / "missing")), env={})


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets:\n  a: {dialect: openai\nroutes: {}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(bad)
    assert ei.value.field.startswith(str(bad) + ":")
    assert "not valid YAML" in str(ei.value)


def test_check_config_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from failover.cli import main

    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    assert main(["check-config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "route support_triage_v3: gpt-4o-us -> gpt-4o-azure-eu (fallbacks: claude-sonnet, gemini-flash)" in out
    monkeypatch.delenv("OPENAI_API_KEY")
    assert main(["check-config", str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert "targets.gpt-4o-us.api_key_env" in err
    for secret in KEYS.values():
        assert secret not in err


def test_capacity_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from failover.cli import main

    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    assert main(["capacity", "--qps", "20", "--input", "6000", "--output", "800"]) == 0
    out = capsys.readouterr().out
    assert "needs 1,200 RPM, 7.2M input TPM, 960K output TPM" in out
    assert main(["capacity", "--qps", "20", "--input", "6000", "--output", "800", "--config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "gpt-4o-us" in out and "SHORT" in out
    assert (
        main(["capacity", "--qps", "1", "--input", "1", "--output", "1", "--config", str(EXAMPLE), "--route", "x"]) == 2
    )
    assert "--route: no route 'x'" in capsys.readouterr().err


def test_max_tokens_policy_is_cap_by_default_and_refuse_when_set() -> None:
    assert config_from_dict(minimal(), env={}).routes["r"].max_tokens_policy == "cap"
    data = minimal()
    data["routes"]["r"]["max_tokens_policy"] = "refuse"
    assert config_from_dict(data, env={}).routes["r"].max_tokens_policy == "refuse"
    data["routes"]["r"]["max_tokens_policy"] = "clamp"
    with pytest.raises(ConfigError) as ei:
        config_from_dict(data, env={})
    assert ei.value.field == "routes.r.max_tokens_policy"
    assert "cap" in str(ei.value) and "refuse" in str(ei.value)
