"""The gateway: section of the config file, parsed by the gateway's own model."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from failover import ConfigError, SideEffectMode
from failover.gateway import load_gateway_config

BASE = """
targets:
  a:
    dialect: openai
    base_url: http://a.fake/v1
    model: gpt-4o-mini
    api_key_env: A_KEY
routes:
  chat: {primary: [a]}
  other: {primary: [a]}
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "failover.yaml"
    p.write_text(text)
    return p


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def test_gateway_section_loads_beside_the_routes(tmp_path: Path) -> None:
    text = (
        BASE
        + f"""
gateway:
  admin: {{key_sha256: [{sha("admin")}]}}
  tenants:
    acme: {{key_sha256: [{sha("acme-key")}], routes: [chat]}}
    ops: {{key_env: OPS_KEY}}
  envelope: {{deadline_ms: 8000, max_attempts: 3, side_effects: read_only, allow_fallback: false}}
  limits: {{max_body_bytes: 2048, max_json_depth: 10}}
  cors: {{allow_origins: ["https://app.example.com"]}}
"""
    )
    cfg, s = load_gateway_config(_write(tmp_path, text), env={"A_KEY": "sk-a", "OPS_KEY": "ops-key"})
    assert set(cfg.routes) == {"chat", "other"}
    acme = s.tenant_for("acme-key")
    assert acme is not None and acme.name == "acme" and acme.allows("chat") and not acme.allows("other")
    ops = s.tenant_for("ops-key")
    assert ops is not None and ops.allows("other")
    assert s.is_admin("admin") and not s.is_admin("acme-key")
    assert s.envelope.deadline_ms == 8000 and s.envelope.max_attempts == 3
    assert s.envelope.side_effects is SideEffectMode.READ_ONLY and not s.envelope.allow_fallback
    assert s.max_body_bytes == 2048 and s.max_json_depth == 10
    assert s.cors_origins == ("https://app.example.com",)


def test_without_a_gateway_section_the_gateway_is_open(tmp_path: Path) -> None:
    _, s = load_gateway_config(_write(tmp_path, BASE), env={"A_KEY": "sk-a"})
    assert s.open


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("tenants: {acme: {key_sha256: [abc]}}", "gateway.tenants.acme.key_sha256"),
        (f"tenants: {{acme: {{key_sha256: ['{'0' * 64}'], routes: [nope]}}}}", "gateway.tenants.acme.routes[0]"),
        ("tenants: {acme: {routes: [chat]}}", "gateway.tenants.acme"),
        ("tenants: {acme: {key_env: MISSING_KEY}}", "gateway.tenants.acme.key_env"),
        ("tenant: {}", "gateway.tenant"),
        ("envelope: {deadline_ms: 0}", "gateway.envelope.deadline_ms"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, section: str, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_gateway_config(_write(tmp_path, BASE + "\ngateway:\n  " + section + "\n"), env={"A_KEY": "sk-a"})
    assert exc.value.field == field
    assert exc.value.fix
