"""Targets on a cloud: Bedrock by region, Vertex AI by project and location, credential chains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from failover import ConfigError
from failover.config import check_config, config_from_dict
from failover.config._yaml import Document
from failover.model import Auth, AuthKind, Dialect, Vertex


def _file(**targets: dict[str, Any]) -> dict[str, Any]:
    names = list(targets)
    return {"targets": targets, "routes": {"r": {"primary": names[:1], "fallbacks": names[1:]}}}


def test_a_bedrock_target_is_called_in_its_region_with_the_aws_chain() -> None:
    cfg = config_from_dict(
        _file(c={"dialect": "bedrock", "model": "us.anthropic.claude-x-v1:0", "region": "us-west-2"})
    )
    t = cfg.targets["c"]
    assert t.dialect is Dialect.BEDROCK and t.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"
    assert t.auth is None and t.api_key is None  # the default chain: effective_auth gives AWS's


def test_vertex_targets_get_the_regional_or_the_global_endpoint() -> None:
    cfg = config_from_dict(
        _file(
            g={"dialect": "gemini", "model": "gemini-2.5-pro", "vertex": {"project": "p", "location": "global"}},
            c={
                "dialect": "anthropic",
                "model": "claude-x@2025",
                "vertex": {"project": "p", "location": "us-east5"},
                "auth": {"kind": "google", "scope": "https://www.googleapis.com/auth/cloud-platform"},
            },
        )
    )
    assert cfg.targets["g"].base_url == "https://aiplatform.googleapis.com"
    assert cfg.targets["g"].vertex == Vertex(project="p", location="global")
    assert cfg.targets["c"].base_url == "https://us-east5-aiplatform.googleapis.com"
    assert cfg.targets["c"].auth == Auth(kind=AuthKind.GOOGLE, scope="https://www.googleapis.com/auth/cloud-platform")


def test_an_azure_entra_target_needs_no_key_and_auth_has_a_shorthand() -> None:
    t = {"dialect": "openai", "base_url": "https://res.openai.azure.com", "model": "dep", "azure_deployment": True}
    report = check_config(Document(data=_file(a={**t, "auth": "azure"})), env={})
    assert not report.errors and not any("credential" in str(w) for w in report.warnings)
    assert report.loaded().targets["a"].auth == Auth(kind=AuthKind.AZURE)


@pytest.mark.parametrize(
    ("target", "field", "fix"),
    [
        ({"dialect": "bedrock", "model": "m"}, "targets.t.region", "set region:"),
        ({"dialect": "openai", "model": "m"}, "targets.t.base_url", "set base_url:"),
        (
            {"dialect": "openai", "model": "m", "vertex": {"project": "p", "location": "global"}},
            "targets.t.vertex",
            "dialect: gemini",
        ),
        (
            {"dialect": "gemini", "model": "m", "base_url": "https://x", "auth": {"kind": "aws"}},
            "targets.t.auth.kind",
            "dialect: bedrock",
        ),
        (
            {"dialect": "openai", "model": "m", "base_url": "https://x", "auth": {"kind": "kerberos"}},
            "targets.t.auth.kind",
            "",
        ),
    ],
)
def test_a_cloud_mistake_names_the_field_and_the_fix(target: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(ConfigError) as ei:
        config_from_dict(_file(t={"api_key_env": None, **target}))
    text = str(ei.value)
    assert field in text and fix in text, text


def test_a_service_account_file_must_exist_unless_offline(tmp_path: Path) -> None:
    vertex = {"project": "p", "location": "global"}
    t = {
        "dialect": "gemini",
        "model": "m",
        "vertex": vertex,
        "auth": {"kind": "google", "credentials_file": str(tmp_path / "sa.json")},
    }
    report = check_config(Document(data=_file(t=t)), env={})
    assert any("credentials_file" in str(e) for e in report.errors)
    offline = check_config(Document(data=_file(t=t)), env={}, offline=True)
    assert not offline.errors and any("sa.json" in n for n in offline.needs)


def test_an_undeclared_context_window_is_unknown_and_a_declared_one_must_be_positive() -> None:
    base = {"dialect": "openai", "model": "m", "base_url": "https://x.example/v1"}
    cfg = config_from_dict(_file(a=base, b={**base, "context_window": 8192}))
    assert cfg.targets["a"].context_window is None  # not 128000: unknown
    assert cfg.targets["b"].context_window == 8192
    with pytest.raises(ConfigError, match="context_window"):
        config_from_dict(_file(a={**base, "context_window": 0}))
