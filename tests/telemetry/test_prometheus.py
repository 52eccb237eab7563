"""PrometheusHook: the router over fakes, the numbers read back from an isolated registry."""

from __future__ import annotations

import asyncio
import dataclasses

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from failover import Envelope, ImagePart, Limits, Message, Request, Response, Unavailable
from failover.policy import BreakerBoard, BreakerConfig
from failover.telemetry import Hooks, PrometheusHook
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import C, router, target

pytestmark = pytest.mark.looptime


def metrics() -> tuple[PrometheusHook, CollectorRegistry]:
    registry = CollectorRegistry()
    return PrometheusHook(registry), registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_a_replay_then_fallback_is_counted_exactly() -> None:
    hook, reg = metrics()
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", latency=0.2, usage=(10, 5))))
    ta, tb = target(a, attempts=2), target(b)
    r = router([ta], [tb], a, b)
    r.hooks = Hooks([hook])

    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0, tenant="acme"))
    assert resp.record is not None

    assert value(reg, "failover_requests_total", route="r", outcome="ok") == 1
    assert value(reg, "failover_attempts_total", target="a", outcome="provider_server_error") == 2
    assert value(reg, "failover_attempts_total", target="b", outcome="ok") == 1
    assert value(reg, "failover_attempt_failures_total", target="a", kind="provider_server_error") == 2
    assert value(reg, "failover_recoveries_total", workflow="fallback") == 1
    assert value(reg, "failover_backoffs_total", target="a", reason="backoff") == 1
    (wait,) = resp.record.waits
    assert value(reg, "failover_backoff_seconds_total", target="a", reason="backoff") == pytest.approx(
        wait.end - wait.start
    )
    assert value(reg, "failover_tokens_total", target="b", kind="input") == 10
    assert value(reg, "failover_tokens_total", target="b", kind="output") == 5
    assert value(reg, "failover_cost_usd_total", route="r", tenant="acme") == pytest.approx(resp.record.total_cost)
    assert resp.record.total_cost > 0
    assert value(reg, "failover_attempt_duration_seconds_count", target="b", result="ok") == 1
    assert value(reg, "failover_attempt_duration_seconds_sum", target="b", result="ok") == pytest.approx(0.2)
    assert value(reg, "failover_attempt_duration_seconds_count", target="a", result="failed") == 2
    assert value(reg, "failover_request_duration_seconds_count", route="r") == 1
    assert value(reg, "failover_deadline_exhausted_total", route="r") is None
    assert value(reg, "failover_no_eligible_candidate_total", route="r") is None

    # a second request adds to the same series
    await r.complete("r", Request.simple("again"), Envelope(budget=5.0))
    assert value(reg, "failover_requests_total", route="r", outcome="ok") == 2
    assert value(reg, "failover_attempts_total", target="a", outcome="provider_server_error") == 4
    assert value(reg, "failover_cost_usd_total", route="r", tenant="-") == pytest.approx(resp.record.total_cost)

    text = generate_latest(reg).decode()
    secrets = [t.api_key.reveal() for t in (ta, tb) if t.api_key is not None]
    assert secrets and not any(s in text for s in secrets)


async def test_a_fallback_after_the_primary_was_held_away_counts_as_a_recovery() -> None:
    """A cool-down keeps the primary away after its 429: every answer is the fallback's, and the
    hook counts each as a fallback recovery, as the record says (the gateway counts the same)."""
    hook, reg = metrics()
    a = FakeProvider("a", "openai", Script.always(Reply.rate_limit(retry_after=60)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    r = router([target(a)], [target(b)], a, b)
    r.hooks = Hooks([hook])
    for _ in range(5):
        resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
        assert resp.record is not None and resp.record.workflow.value == "fallback" and resp.record.recovered
    assert len(a.calls) == 1  # then its key cools down for 60 s
    assert value(reg, "failover_recoveries_total", workflow="fallback") == 5


async def test_deadline_exhausted_and_no_eligible_candidate() -> None:
    hook, reg = metrics()
    a = FakeProvider("a", "openai", Script.always(Reply.parse("hang")))
    r = router([target(a, caps={C.CHAT})], [], a)
    r.hooks = Hooks([hook])

    with pytest.raises(Unavailable) as late:
        await r.complete("r", Request.simple("hi"), Envelope(budget=0.5))
    assert late.value.reason.value == "deadline_exhausted"
    assert value(reg, "failover_deadline_exhausted_total", route="r") == 1
    assert value(reg, "failover_requests_total", route="r", outcome="deadline_exhausted") == 1
    assert value(reg, "failover_attempts_total", target="a", outcome="timeout:total") == 1

    image = Request(messages=(Message.user("what is this?", ImagePart(url="https://example.com/x.png")),))
    with pytest.raises(Unavailable) as refused:
        await r.complete("r", image, Envelope(budget=5))
    assert refused.value.reason.value == "contract_failure" and not refused.value.record.attempts
    assert value(reg, "failover_no_eligible_candidate_total", route="r") == 1
    assert value(reg, "failover_requests_total", route="r", outcome="contract_failure") == 1
    assert len(a.calls) == 1  # the refused request never reached the provider


async def test_breaker_transitions_are_counted() -> None:
    hook, reg = metrics()
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b")))
    ta, tb = target(a), target(b)
    breakers = BreakerBoard(BreakerConfig(window_size=2, min_calls=2, failure_rate=0.5, open_duration=5.0))
    r = router([ta], [tb], a, b, breakers=breakers)
    r.hooks = Hooks([hook])

    for _ in range(3):
        await r.complete("r", Request.simple("hi"), Envelope(budget=5))
    assert len(a.calls) == 2  # the breaker opened after two failures and kept the third away
    assert value(reg, "failover_breaker_transitions_total", scope=ta.scope, layer="target", state="open") == 1
    await asyncio.sleep(6)  # the open period elapses; the next call is a probe
    await r.complete("r", Request.simple("hi"), Envelope(budget=5))
    assert value(reg, "failover_breaker_transitions_total", scope=ta.scope, layer="target", state="half_open") == 1
    assert value(reg, "failover_breaker_transitions_total", scope=ta.scope, layer="target", state="open") == 2


async def test_limiter_waits_use_the_gateways_names() -> None:
    hook, reg = metrics()
    a = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.1)))
    t = dataclasses.replace(target(a, cap=5.0), limits=Limits(rpm=60))
    r = router([t], [], a)
    r.hooks = Hooks([hook])
    results = await asyncio.gather(
        *(r.complete("r", Request.simple(f"q{i}", max_tokens=10), Envelope(budget=90)) for i in range(80)),
        return_exceptions=True,
    )
    records = [x.record for x in results if isinstance(x, Response | Unavailable) and x.record is not None]
    assert len(records) == 80
    waits = [w for rec in records for w in rec.waits if w.reason == "rate_limit"]
    assert waits  # 54 usable per minute: the rest queued locally for the next window
    assert value(reg, "failover_limiter_waits_total", target="a") == len(waits)
    assert value(reg, "failover_backoffs_total", target="a", reason="rate_limit") == len(waits)
    assert value(reg, "failover_limiter_wait_seconds_total", target="a") == pytest.approx(
        sum(w.end - w.start for w in waits)
    )
    assert value(reg, "failover_attempts_total", target="a", outcome="ok") == len(a.calls)


def test_one_hook_per_registry_and_the_global_default(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = CollectorRegistry()
    PrometheusHook(reg)
    with pytest.raises(ValueError, match="Duplicated"):
        PrometheusHook(reg)
    isolated_global = CollectorRegistry()
    monkeypatch.setattr(prometheus_client, "REGISTRY", isolated_global)
    assert PrometheusHook().registry is isolated_global


def test_shared_metrics_have_the_gateways_names_and_labels() -> None:
    """One dashboard for both: where the gateway and the hook count the same thing, they agree."""
    from failover.gateway._metrics import GatewayMetrics

    a = FakeProvider("a", "openai", Script.always(Reply.ok()))
    r = router([target(a)], [], a)
    gateway = GatewayMetrics(lambda: r, lambda: 0, lambda: False)
    hook, _ = metrics()
    shared = (
        "attempts",
        "recoveries",
        "deadline_exhausted",
        "no_candidate",
        "limiter_waits",
        "limiter_wait_seconds",
        "tokens",
        "cost",
    )
    for attr in shared:
        ours, theirs = getattr(hook, attr), getattr(gateway, attr)
        assert (ours._name, ours._labelnames) == (theirs._name, theirs._labelnames), attr
