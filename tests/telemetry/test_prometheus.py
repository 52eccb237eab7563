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
    assert value(reg, "failover_recoveries_total", route="r", workflow="fallback", reason="provider_server_error") == 1
    assert value(reg, "failover_backoffs_total", target="a", reason="backoff") == 1
    (wait,) = resp.record.waits
    assert value(reg, "failover_backoff_seconds_total", target="a", reason="backoff") == pytest.approx(
        wait.end - wait.start
    )
    model_a, model_b = ta.model, tb.model
    gen_b = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "anthropic", "gen_ai_request_model": model_b}
    assert value(reg, "gen_ai_client_token_usage_sum", **gen_b, gen_ai_token_type="input", failover_target="b") == 10
    assert value(reg, "gen_ai_client_token_usage_sum", **gen_b, gen_ai_token_type="output", failover_target="b") == 5
    assert value(reg, "gen_ai_client_token_usage_count", **gen_b, gen_ai_token_type="output", failover_target="b") == 1
    assert value(reg, "failover_cost_usd_total", route="r", tenant="acme") == pytest.approx(resp.record.total_cost)
    assert resp.record.total_cost > 0
    ok_b = {**gen_b, "error_type": "", "failover_target": "b"}
    assert value(reg, "gen_ai_client_operation_duration_seconds_count", **ok_b) == 1
    assert value(reg, "gen_ai_client_operation_duration_seconds_sum", **ok_b) == pytest.approx(0.2)
    assert value(reg, "gen_ai_client_operation_duration_seconds_bucket", **ok_b, le="0.16") == 0
    assert value(reg, "gen_ai_client_operation_duration_seconds_bucket", **ok_b, le="0.32") == 1
    failed_a = {
        "gen_ai_operation_name": "chat",
        "gen_ai_provider_name": "openai",
        "gen_ai_request_model": model_a,
        "error_type": "provider_server_error",
        "failover_target": "a",
    }
    assert value(reg, "gen_ai_client_operation_duration_seconds_count", **failed_a) == 2
    request = {"route": "r", "workflow": "fallback", "answered_by": "fallback", "outcome": "ok"}
    assert value(reg, "failover_request_duration_seconds_count", **request) == 1
    assert value(reg, "failover_request_duration_seconds_sum", **request) == pytest.approx(
        resp.record.elapsed_ms / 1000
    )
    assert value(reg, "failover_deadline_exhausted_total", route="r") is None
    assert value(reg, "failover_no_eligible_candidate_total", route="r") is None
    # not streamed: no time to first chunk; a 500 is not billed, so no failed-attempt cost
    assert "gen_ai_client_operation_time_to_first_chunk_seconds_count" not in generate_latest(reg).decode()
    assert value(reg, "failover_failed_attempt_cost_usd_total", route="r", target="a") is None

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
    # the first recovered from the 429 itself, the next four from the cool-down that followed it
    assert value(reg, "failover_recoveries_total", route="r", workflow="fallback", reason="rate_limited") == 1
    assert value(reg, "failover_recoveries_total", route="r", workflow="fallback", reason="held") == 4
    held = {"route": "r", "workflow": "fallback", "answered_by": "fallback", "outcome": "ok"}
    assert value(reg, "failover_request_duration_seconds_count", **held) == 5


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
    assert value(reg, "failover_limiter_wait_seconds_count", target="a") == len(waits)
    assert value(reg, "failover_backoffs_total", target="a", reason="rate_limit") == len(waits)
    assert value(reg, "failover_limiter_wait_seconds_sum", target="a") == pytest.approx(
        sum(w.end - w.start for w in waits)
    )
    longest = max(w.end - w.start for w in waits)
    assert value(reg, "failover_limiter_wait_seconds_bucket", target="a", le="+Inf") == len(waits)
    assert value(reg, "failover_limiter_wait_seconds_bucket", target="a", le="81.92") == sum(
        w.end - w.start <= 81.92 for w in waits
    )
    assert longest > 10  # the queue reached into the next minute's window
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
    """One dashboard for both: every metric the gateway and the hook share has one name, one
    label set and one bucket layout, those of its definition in _instruments."""
    from failover.gateway._metrics import GatewayMetrics
    from failover.telemetry._instruments import INSTRUMENTS

    a = FakeProvider("a", "openai", Script.always(Reply.ok()))
    r = router([target(a)], [], a)
    gateway = GatewayMetrics(lambda: r, lambda: 0, lambda: False)
    hook, _ = metrics()

    def families(registry: CollectorRegistry) -> dict[str, tuple[str, tuple[str, ...]]]:
        out = {}
        for collector in list(registry._collector_to_names):  # the registered metric objects
            name = getattr(collector, "_name", None)
            if name is not None:
                out[name] = (collector._type, tuple(collector._labelnames))  # type: ignore[attr-defined]
        return out

    ours, theirs = families(hook.registry), families(gateway.registry)
    for instrument in INSTRUMENTS:
        kind = "counter" if instrument.kind == "counter" else "histogram"
        want = (kind, instrument.labels)
        assert ours[instrument.prometheus_name] == want == theirs[instrument.prometheus_name], instrument.name
        for m in (hook, gateway):
            metric = next(
                c for c in m.registry._collector_to_names if getattr(c, "_name", "") == instrument.prometheus_name
            )
            if kind == "histogram":
                assert tuple(metric._upper_bounds[:-1]) == instrument.buckets  # type: ignore[attr-defined]


async def test_input_and_cached_input_tokens_per_route_and_target_from_every_attempt_with_usage() -> None:
    """A truncated attempt's usage is paid for and counted like the answer's; an attempt with no
    usage (a 500) adds nothing. The ratio of the two counters is the prompt-cache hit ratio."""
    hook, reg = metrics()
    a = FakeProvider("a", "openai", Script.always(Reply.truncate(usage=(400, 50, 100))))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", usage=(1000, 5, 750))))
    c = FakeProvider("c", "gemini", Script.always(Reply.server_error()))
    r = router([target(c), target(a, attempts=2)], [target(b)], a, b, c)
    r.hooks = Hooks([hook])
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.record is not None and [x.target for x in resp.record.attempts] == ["c", "a", "a", "b"]
    assert value(reg, "failover_input_tokens_total", route="r", target="a") == 2 * 400
    assert value(reg, "failover_cached_input_tokens_total", route="r", target="a") == 2 * 100
    assert value(reg, "failover_input_tokens_total", route="r", target="b") == 1000
    assert value(reg, "failover_cached_input_tokens_total", route="r", target="b") == 750
    assert value(reg, "failover_input_tokens_total", route="r", target="c") is None
