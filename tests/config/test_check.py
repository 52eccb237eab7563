"""One config file, checked the same by every entry point: every problem at once, each with its
field, line, column and fix; warnings for what is allowed but probably not meant."""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from failover import ConfigError, Router, load_config
from failover.cli import main
from failover.config import ConfigReport, check_config, config_from_dict
from failover.config._spec import ConfigSpec
from failover.gateway import load_gateway_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "failover.yaml"
KEYS = {
    "OPENAI_API_KEY": "sk-openai-secret",
    "AZURE_OPENAI_API_KEY": "az-secret",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "GEMINI_API_KEY": "gm-secret",
    "DEEPSEEK_API_KEY": "ds-secret",
}

# Every section every entry point must accept, in one file.
WHOLE = """\
targets:
  a:
    dialect: openai
    base_url: https://api.example.com/v1
    model: m
    api_key_env: A_KEY
    price: {input_per_mtok: 1, output_per_mtok: 2}
    limits: {rpm: 600}
routes:
  chat: {primary: [a]}
retry_budget: {ratio: 0.2}
backoff: {base: 0.1}
breakers: {min_calls: 5}
upstream: {keepalive_s: 10}
state: {backend: sqlite, path: STATE}
ledger: {backend: sqlite, path: LEDGER}
gateway:
  tenants:
    acme: {key_env: ACME_KEY, routes: [chat], budget_usd: 5}
  envelope: {deadline_ms: 8000, max_cost: 0.5}
  metrics: {require_admin_key: false}
"""
ENV = {"A_KEY": "sk-a-secret-000", "ACME_KEY": "acme-gateway-key"}


def _write(tmp_path: Path, text: str, name: str = "failover.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def _whole(tmp_path: Path, **replace: str) -> Path:
    text = WHOLE.replace("STATE", str(tmp_path / "s.db")).replace("LEDGER", str(tmp_path / "l.db"))
    for old, new in replace.items():
        text = text.replace(old, new)
    return _write(tmp_path, text)


def _line_of(path: Path, needle: str) -> tuple[int, int]:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i, line.index(needle) + 1
    raise AssertionError(needle)


async def test_every_entry_point_reads_the_whole_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _whole(tmp_path)
    cfg = load_config(path, env=ENV)
    assert cfg.gateway is not None and cfg.gateway.envelope.max_cost == 0.5
    assert cfg.ledger is not None and cfg.ledger.backend == "sqlite"
    assert cfg.state.backend == "sqlite" and cfg.upstream is not None and cfg.breakers is not None
    async with Router.from_config(cfg) as router:
        assert set(router.routes) == {"chat"}
    _, settings = load_gateway_config(path, env=ENV)  # what failover serve reads
    assert settings.tenants[0].name == "acme" and settings.ledger is not None
    report = check_config(path, env=ENV)
    assert report.errors == () and report.warnings == () and report.config is not None


def test_the_cli_entry_points_accept_the_whole_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _whole(tmp_path)
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    assert main(["check-config", str(path)]) == 0
    assert "ok (0 errors, 0 warnings)" in capsys.readouterr().out
    assert main(["capacity", "--qps", "5", "--input", "100", "--output", "10", "--config", str(path)]) == 0
    assert "a " in capsys.readouterr().out
    requests = tmp_path / "r.jsonl"
    requests.write_text('{"model": "chat", "messages": [{"role": "user", "content": "hi"}]}\n')
    fake = _write(tmp_path, "a: [ok]\n", "fake.yaml")
    args = ["replay", str(requests), "--config", str(path), "--route", "chat", "--fake", str(fake)]
    assert main([*args, "--candidate", "a", "--json"]) == 0, capsys.readouterr().err


def test_a_mistake_anywhere_in_the_file_is_found_by_every_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _whole(tmp_path, **{"require_admin_key: false": "require_admin_keys: false"})
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    for load in (
        lambda: load_config(path, env=ENV),
        lambda: Router.from_config(path),
        lambda: load_gateway_config(path),
    ):
        with pytest.raises(ConfigError) as ei:
            load()
        assert ei.value.field == "gateway.metrics.require_admin_keys"
        assert "did you mean 'require_admin_key'?" in str(ei.value)


BAD = """\
targets:
  gpt:
    dialect: openai
    base_url: https://api.openai.com/v1
    model: gpt-4o
    api_key: sk-INLINE-SECRET-123456
    capabilites: [chat]
    max_attempts: 0
  claude:
    dialect: anthropic
    base_url: api.anthropic.com
    model: claude
    api_key_env: sk-ant-PASTED-KEY-987654
routes:
  chat:
    primary: [gpt]
    fallbacks: [claude, nope]
gateway:
  tenants:
    acme: {key_env: ACME_KEY, routes: [chat, missing]}
  envelop: {}
"""


def test_every_problem_is_listed_with_its_line_column_and_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, BAD)
    report = check_config(path, env={})
    found = {p.field: p for p in report.errors}
    assert set(found) == {
        "targets.gpt.api_key",
        "targets.gpt.capabilites",
        "targets.gpt.max_attempts",
        "targets.claude.base_url",
        "targets.claude.api_key_env",
        "routes.chat.fallbacks[1]",
        "gateway.tenants.acme.routes[1]",
        "gateway.tenants.acme.key_env",
        "gateway.envelop",
    }
    for field, needle in [
        ("targets.gpt.capabilites", "capabilites"),
        ("targets.claude.base_url", "base_url: api."),
        ("routes.chat.fallbacks[1]", "nope"),
        ("gateway.tenants.acme.routes[1]", "missing"),
        ("gateway.envelop", "envelop"),
    ]:
        assert (found[field].line, found[field].column) == _line_of(path, needle), field
        assert str(found[field]).startswith(f"{path}:{found[field].line}:{found[field].column}: {field}: ")
    assert found["targets.gpt.capabilites"].fix == "did you mean 'capabilities'?"
    assert found["gateway.envelop"].fix == "did you mean 'envelope'?"
    inline = found["targets.gpt.api_key"].fix
    assert "api_key_env" in inline and "api_key_file" in inline
    assert "name of an environment variable" in found["targets.claude.api_key_env"].problem
    assert found["targets.gpt.max_attempts"].problem == "must be greater than or equal to 1 (it is 0)"
    assert [p.line for p in report.errors] == sorted(p.line or 0 for p in report.errors)  # in file order
    text = "\n".join(str(p) for p in report.problems)
    assert "Value error" not in text and "Extra inputs" not in text and "Input should" not in text
    assert "INLINE-SECRET" not in text and "PASTED-KEY" not in text  # a pasted key is never quoted back


def test_load_config_raises_every_error_at_once_one_per_line(tmp_path: Path) -> None:
    path = _write(tmp_path, BAD)
    with pytest.raises(ConfigError) as ei:
        load_config(path, env={})
    lines = str(ei.value).splitlines()
    assert lines[0] == "9 problems:" and len(lines) == 10
    assert ei.value.field == "targets.gpt.api_key" and len(ei.value.problems) == 9


def test_check_config_cli_prints_every_problem_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, BAD)
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len([line for line in err if line.startswith(f"{path}:")]) == 9
    assert err[-1] == f"failover check-config: {path}: 9 errors, 0 warnings"
    assert re.fullmatch(rf"{re.escape(str(path))}:7:5: targets\.gpt\.capabilites: .*capabilities'\?", err[1])


def test_missing_credentials_are_all_listed_or_skipped_offline(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in KEYS:
        monkeypatch.delenv(k, raising=False)
    assert main(["check-config", str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    for var in KEYS:  # all five in one run, not one per run
        assert f"environment variable {var} is not set" in err
    assert "--offline" in err
    assert main(["check-config", "--offline", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "ok (0 errors, 0 warnings)" in out
    assert "environment variables OPENAI_API_KEY, AZURE_OPENAI_API_KEY" in out
    # capacity needs no credentials either
    assert main(["capacity", "--qps", "1", "--input", "10", "--output", "1", "--config", str(EXAMPLE)]) == 0
    assert "gpt-4o-us" in capsys.readouterr().out


def test_offline_checks_everything_but_the_secrets(tmp_path: Path) -> None:
    key = tmp_path / "missing-key-file"
    path = _whole(tmp_path, **{"api_key_env: A_KEY": f"api_key_file: {key}", "budget_usd: 5": "budget_usd: -5"})
    report = check_config(path, env={}, offline=True)
    assert [p.field for p in report.errors] == ["gateway.tenants.acme.budget_usd"]
    assert set(report.needs) == {f"file:{key}", "env:ACME_KEY"}
    online = check_config(path, env={})
    assert {p.field for p in online.errors} == {
        "targets.a.api_key_file",
        "gateway.tenants.acme.key_env",
        "gateway.tenants.acme.budget_usd",
    }


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"gateway": {"envelope": {"max_cost": 0.01}}}, "gateway.envelope.max_cost"),
        ({"gateway": {"tenants": {"t": {"key_sha256": ["0" * 64], "budget_usd": 3}}}}, "gateway.tenants.t.budget_usd"),
    ],
)
def test_a_target_without_a_price_under_a_cost_bound_is_a_warning(
    extra: dict[str, Any], field: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = {
        "targets": {
            "free": {"dialect": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"},
            "priced": {
                "dialect": "openai",
                "base_url": "http://127.0.0.1:2/v1",
                "model": "p",
                "price": {"input_per_mtok": 1},
            },
            "zero": {
                "dialect": "openai",
                "base_url": "http://127.0.0.1:3/v1",
                "model": "z",
                "price": {"input_per_mtok": 0, "output_per_mtok": 0},  # free on purpose: said so
            },
        },
        "routes": {"chat": {"primary": ["priced"], "fallbacks": ["free", "zero"]}},
        **extra,
    }
    report = check_config(data, env={})
    assert report.errors == ()
    (w,) = report.warnings
    assert w.field == "targets.free.price" and field in w.problem and "route chat" in w.problem
    assert "input_per_mtok" in w.fix
    with caplog.at_level(logging.WARNING, logger="failover.config"):
        cfg = config_from_dict(data, env={})  # at load: logged, and kept on the Config
    assert cfg.warnings == (w,)
    assert [r.getMessage() for r in caplog.records if r.name == "failover.config"] == [str(w)]
    del data["gateway"]  # no bound: nothing to warn about
    assert check_config(data, env={}).warnings == ()


def test_a_target_without_a_credential_is_a_warning() -> None:
    def target(**kw: Any) -> dict[str, Any]:
        return {"dialect": "openai", "base_url": "https://api.example.com/v1", "model": "m", **kw}

    data = {
        "targets": {
            "keyless": target(),
            "local": target(base_url="http://localhost:8000/v1"),  # a loopback server: no warning
            "on_purpose": target(api_key_env=None),  # `api_key_env: null`: needs none, said so
            "header": target(headers={"X-Api-Key": "from-a-vault-sidecar"}),
            "env": target(api_key_env="K"),
        },
        "routes": {"r": {"primary": ["keyless"], "fallbacks": ["local", "on_purpose", "header", "env"]}},
    }
    (w,) = check_config(data, env={"K": "k"}).warnings
    assert w.field == "targets.keyless" and "no credential" in w.problem and "api_key_env" in w.fix


def test_a_candidate_that_can_never_meet_the_contract_is_a_warning(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        targets:
          big: {dialect: openai, base_url: 'http://127.0.0.1:1/v1', model: a, capabilities: [chat, vision]}
          small: {dialect: anthropic, base_url: 'http://127.0.0.1:2/v1', model: b, capabilities: [chat]}
          short: {dialect: gemini, base_url: 'http://127.0.0.1:3/v1', model: c, capabilities: [chat, vision],
                  context_window: 8000}
        routes:
          look:
            contract: {capabilities: [chat, vision], min_context: 32000}
            primary: [big]
            fallbacks: [small, short]
        """,
    )
    report = check_config(path, env={})
    assert report.errors == ()
    by_field = {w.field: w for w in report.warnings}
    assert set(by_field) == {"routes.look.fallbacks[0]", "routes.look.fallbacks[1]"}
    assert "missing capability: vision" in by_field["routes.look.fallbacks[0]"].problem
    assert "context window 8000 < contract minimum 32000" in by_field["routes.look.fallbacks[1]"].problem
    assert by_field["routes.look.fallbacks[0]"].line == _line_of(path, "small,")[0]


def test_warnings_do_not_fail_check_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path,
        """\
        targets:
          a: {dialect: openai, base_url: 'https://api.example.com/v1', model: m}
        routes:
          chat: {primary: [a]}
        """,
    )
    assert main(["check-config", str(path)]) == 0
    captured = capsys.readouterr()
    assert f"{path}:2:3: warning: targets.a: no credential" in captured.err
    assert "ok (0 errors, 1 warning)" in captured.out


def test_a_key_given_twice_is_an_error(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """\
        targets:
          a: {dialect: openai, base_url: 'http://127.0.0.1:1/v1', model: m}
        routes:
          chat: {primary: [a]}
        routes:
          other: {primary: [a]}
        """,
    )
    (e,) = check_config(path, env={}).errors
    assert (e.field, e.line, e.column) == ("routes", 5, 1)
    assert "given twice (lines 3 and 5)" in e.problem


def test_an_unreadable_or_broken_file_is_reported(tmp_path: Path) -> None:
    report = check_config(tmp_path / "nope.yaml")
    assert isinstance(report, ConfigReport) and report.config is None
    assert "cannot read the file" in report.errors[0].problem
    broken = _write(tmp_path, "targets:\n  a: {dialect: openai\nroutes: {}\n")
    (e,) = check_config(broken).errors
    assert e.field.startswith(f"{broken}:3:") and "not valid YAML" in e.problem
    empty = _write(tmp_path, "", "empty.yaml")
    assert check_config(empty).errors[0].problem == "the file is empty"


def _deploy_configmap() -> tuple[str, dict[str, str]]:
    text = (ROOT / "docs" / "deploy.md").read_text()
    (k8s,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "apiVersion:" in b]
    docs = {d["kind"]: d for d in yaml.safe_load_all(k8s)}
    return docs["ConfigMap"]["data"]["failover.yaml"], dict(docs["Secret"]["stringData"])


def test_the_kubernetes_example_passes_check_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text, secrets = _deploy_configmap()
    path = _write(tmp_path, text)
    for k in secrets:
        monkeypatch.delenv(k, raising=False)
    assert main(["check-config", "--offline", str(path)]) == 0, capsys.readouterr().err
    assert "ok (0 errors, 0 warnings)" in capsys.readouterr().out
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    assert main(["check-config", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "ok (0 errors, 0 warnings)" in out and "also checked: state (redis), gateway, ledger" in out


def _doc_snippets() -> list[Any]:
    """Every YAML block of the user docs that is (part of) a config file."""
    sections = set(ConfigSpec.model_fields)
    out = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S)):
            if block.startswith("# failover.yaml, with mistakes"):  # test_the_check_config_example_is_real
                continue
            for data in yaml.safe_load_all(block):  # the Kubernetes example holds several documents
                if isinstance(data, dict) and data and set(data) <= sections:
                    out.append(pytest.param(data, id=f"{page.name}-block{i}"))
    return out


@pytest.mark.parametrize("snippet", _doc_snippets())
def test_every_config_snippet_in_the_docs_is_valid(snippet: dict[str, Any]) -> None:
    base = {
        "targets": {"t": {"dialect": "openai", "base_url": "http://x", "model": "m"}},
        "routes": {"r": {"primary": ["t"]}},
    }
    ConfigSpec.model_validate(base | snippet)  # the structure: every key known, every value allowed


def test_the_check_config_example_in_the_docs_is_real(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "docs" / "config.md").read_text()
    m = re.search(
        r"```yaml\n(# failover.yaml, with mistakes\n.*?)```\n\n```\n\$ failover check-config (\S+)\n(.*?)```",
        text,
        re.S,
    )
    assert m is not None
    config, name, shown = m.groups()
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(config)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert main(["check-config", name]) == 2
    captured = capsys.readouterr()
    assert (captured.out + captured.err).splitlines() == shown.splitlines()


@pytest.mark.parametrize("value", ["'no'", "0", "[false]", "null"])
def test_a_target_passthrough_that_is_not_a_boolean_is_an_error_naming_it(tmp_path: Path, value: str) -> None:
    path = _whole(tmp_path, **{"    limits: {rpm: 600}": f"    limits: {{rpm: 600}}\n    passthrough: {value}"})
    report = check_config(path, env=ENV)
    (error,) = report.errors
    assert error.field == "targets.a.passthrough" and (error.line, error.column) == _line_of(path, "passthrough")
    assert "boolean" in error.problem, error


def test_a_target_takes_pass_through_fields_unless_it_says_passthrough_false(tmp_path: Path) -> None:
    assert load_config(_whole(tmp_path), env=ENV).targets["a"].passthrough is True
    strict = _whole(tmp_path, **{"    limits: {rpm: 600}": "    limits: {rpm: 600}\n    passthrough: false"})
    report = check_config(strict, env=ENV)
    assert not report.errors and report.loaded().targets["a"].passthrough is False
