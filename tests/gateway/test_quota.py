"""Per-tenant rate limits (rpm, tpm) and cost budgets, enforced before routing."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import httpx
import pytest

from failover.gateway import Tenant, create_app, hash_key, settings_from_dict
from failover.gateway._quota import TenantQuotas, period_bounds
from failover.model import ConfigError

from ._kit import ACME_KEY, Kit, chat_body


def _app(kit: Kit, **limits: object) -> tuple[httpx.AsyncClient, object]:
    tenant = Tenant(name="acme", key_hashes=(hash_key(ACME_KEY),), **limits)  # type: ignore[arg-type]
    app = create_app(kit.router, dataclasses.replace(kit.settings, tenants=(tenant,)))
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"authorization": f"Bearer {ACME_KEY}"},
        timeout=30,
    )
    return client, app.state.gateway


async def test_rpm_refuses_with_429_and_retry_after() -> None:
    kit = Kit()
    c, _ = _app(kit, rpm=2)
    async with c:
        for _ in range(2):
            assert (await c.post("/v1/chat/completions", json=chat_body())).status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 429
        err = r.json()["error"]
        assert err["code"] == "rate_limit_exceeded" and err["type"] == "requests"
        assert 55 <= int(r.headers["retry-after"]) <= 60
        assert (r.headers["x-should-retry"], r.headers["x-failover-retryable"]) == ("false", "true")
        # a refused request was never routed
        assert len(kit.net.calls) == 2
        # another request on a stream counts too
        r = await c.post("/v1/chat/completions", json=chat_body(stream=True))
        assert r.status_code == 429


async def test_tpm_refuses_once_the_minute_is_spent() -> None:
    kit = Kit()
    c, _ = _app(kit, tpm=5)  # the first answer alone uses more than 5 tokens
    async with c:
        assert (await c.post("/v1/chat/completions", json=chat_body())).status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 429
        assert r.json()["error"]["type"] == "tokens"
        assert int(r.headers["retry-after"]) >= 1


async def test_budget_is_charged_and_then_exhausted() -> None:
    # max_tokens 3, what the fake writes: a request is estimated at its input by the local count
    # (with the chat format's overhead) and 3 tokens of output, under twice what it costs
    body = chat_body(max_tokens=3)
    c, gw = _app(Kit(), budget_usd=1.0)
    async with c:
        assert (await c.post("/v1/chat/completions", json=body)).status_code == 200
    one = gw.quotas.spent("acme")  # type: ignore[attr-defined]
    assert one > 0
    c, gw = _app(Kit(), budget_usd=one * 2.5, budget_period="day")
    async with c:
        # with no max_tokens a request may write the target's whole max output (4,096 tokens),
        # more than the budget holds: refused before any attempt
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 422 and r.headers["x-failover-attempts"] == "0"
        r = await c.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        # what is left (1.5 times what it cost, less than its estimate) is passed on as
        # Envelope.max_cost: the router refuses before any attempt rather than overspend
        r = await c.post("/v1/chat/completions", json=body)
        assert r.status_code == 422 and r.headers["x-failover-attempts"] == "0"
        assert "max_cost" in r.json()["error"]["message"]
        gw.quotas._states["acme"].spent = one * 2.5  # type: ignore[attr-defined]
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 429
        err = r.json()["error"]
        assert err["code"] == "budget_exhausted" and err["type"] == "insufficient_quota"
        assert r.headers["x-should-retry"] == "false"
        assert 1 <= int(r.headers["retry-after"]) <= 86_400
        # the next period starts afresh
        gw.quotas.wall = lambda: datetime(2099, 1, 1, tzinfo=UTC).timestamp()  # type: ignore[attr-defined]
        assert (await c.post("/v1/chat/completions", json=body)).status_code == 200


async def test_failed_attempts_are_charged() -> None:
    kit = Kit({"x": ["overloaded"]})
    c, gw = _app(kit, budget_usd=10.0)
    async with c:
        r = await c.post("/v1/chat/completions", json=chat_body("flaky"))
        assert r.status_code == 200 and r.headers["x-failover-recovered"] == "true"
    spent = gw.quotas.spent("acme")  # type: ignore[attr-defined]
    assert spent > 0


def test_admit_passes_the_smaller_cost_ceiling() -> None:
    t = Tenant(name="t", key_hashes=(b"",), budget_usd=1.0)
    q = TenantQuotas([t])
    assert q.admit(t, None) == 1.0
    assert q.admit(t, 0.25) == 0.25
    assert q.admit(t, 5.0) == 1.0
    free = Tenant(name="free", key_hashes=(b"",))
    assert q.admit(free, 0.3) == 0.3 and q.admit(None, None) is None


@pytest.mark.parametrize(
    ("period", "start", "end"),
    [
        ("minute", "2026-03-04T05:06:00", "2026-03-04T05:07:00"),
        ("hour", "2026-03-04T05:00:00", "2026-03-04T06:00:00"),
        ("day", "2026-03-04T00:00:00", "2026-03-05T00:00:00"),
        ("week", "2026-03-02T00:00:00", "2026-03-09T00:00:00"),
        ("month", "2026-03-01T00:00:00", "2026-04-01T00:00:00"),
    ],
)
def test_period_bounds(period: str, start: str, end: str) -> None:
    now = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()
    s, e = period_bounds(period, now)  # type: ignore[arg-type]
    iso = lambda x: datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
    assert (iso(s), iso(e)) == (start, end)


def test_config_reads_limits() -> None:
    h = "a" * 64
    s = settings_from_dict(
        {"tenants": {"acme": {"key_sha256": [h], "rpm": 60, "tpm": 1000, "budget_usd": 50, "budget_period": "week"}}}
    )
    t = s.tenants[0]
    assert (t.rpm, t.tpm, t.budget_usd, t.budget_period) == (60, 1000, 50, "week")
    with pytest.raises(ConfigError) as exc:
        settings_from_dict({"tenants": {"acme": {"key_sha256": [h], "budget_period": "fortnight"}}})
    assert "budget_period" in str(exc.value)
