"""``failover serve``: the embedded default and a config file, as real processes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from failover.cli import main
from tests._services import serving as _serving

pytestmark = pytest.mark.e2e


def test_serve_without_config_runs_the_embedded_default() -> None:
    with _serving() as (base, proc):
        r = httpx.get(f"{base}/v1/models")
        assert {m["id"] for m in r.json()["data"]} == {"chat", "flaky", "claude", "embed"}
        r = httpx.post(
            f"{base}/v1/chat/completions",
            json={"model": "flaky", "messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
        )
        assert r.status_code == 200, r.text
        assert r.headers["x-failover-recovered"] == "true"
        assert r.headers["x-failover-target"] == "c"
        with httpx.stream(
            "POST",
            f"{base}/v1/chat/completions",
            json={"model": "chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
        ) as s:
            body = "".join(s.iter_text())
        assert body.rstrip().endswith("data: [DONE]")
        nope = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
        r = httpx.post(f"{base}/v1/chat/completions", json=nope, timeout=10)
        assert r.status_code == 404
    out = proc.stdout.read() if proc.stdout else ""
    assert out.count("gateway is OPEN") == 1, out  # said once, not by both serve and the app
    (refused,) = [line for line in out.splitlines() if "status=404" in line]
    assert "route=- " in refused and "None" not in refused


def test_serve_with_a_config_and_workers(tmp_path: Path) -> None:
    key = "tenant-key-123"
    cfg = tmp_path / "failover.yaml"
    cfg.write_text(
        f"""
targets:
  a: {{dialect: openai, base_url: "http://127.0.0.1:9/v1", model: gpt-4o-mini, api_key_env: GW_TEST_KEY}}
routes:
  chat: {{primary: [a]}}
gateway:
  tenants:
    t: {{key_sha256: ["{hashlib.sha256(key.encode()).hexdigest()}"]}}
"""
    )
    with _serving("--config", str(cfg), "--workers", "2", env={"GW_TEST_KEY": "sk-provider-xyz"}) as (base, proc):
        assert httpx.get(f"{base}/v1/models").status_code == 401
        r = httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {key}"})
        assert [m["id"] for m in r.json()["data"]] == ["chat"]
    out = proc.stdout.read() if proc.stdout else ""
    assert "sk-provider-xyz" not in out


def test_serve_refuses_an_open_gateway_off_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "--host" in capsys.readouterr().err


def test_otel_spans_are_switched_on_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from failover.gateway._serve import telemetry_hooks
    from failover.telemetry import OpenTelemetryHook

    monkeypatch.delenv("FAILOVER_OTEL", raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert telemetry_hooks() == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert telemetry_hooks() == []
    monkeypatch.setenv("FAILOVER_OTEL", "1")
    (hook,) = telemetry_hooks()
    assert isinstance(hook, OpenTelemetryHook)
