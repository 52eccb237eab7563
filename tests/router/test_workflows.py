"""The core router's workflows on virtual loop time, through the fault-injection kit."""

from __future__ import annotations

import asyncio

import pytest

from failover import (
    Capability,
    Envelope,
    FailureKind,
    ImagePart,
    Message,
    Phase,
    Request,
    ResponseFormat,
    Tool,
    Unavailable,
    Workflow,
)
from failover.policy import Backoff, RetryBudget, Unlimited
from failover.testing import FakeProvider, Outcome, Reply, Script

from ._kit import router, target

pytestmark = pytest.mark.looptime

OA, AN, GE = "openai", "anthropic", "gemini"
IMG = Request(messages=(Message.user("what is it?", ImagePart(url="data:image/png;base64,AAAA")),), max_tokens=64)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def now() -> float:
    return asyncio.get_running_loop().time()


async def test_a_cancelled_at_its_cap_then_b_succeeds_within_the_budget() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.hang()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b", latency=0.4)))
    r = router([target(a, cap=1.0)], [target(b)], a, b)
    t0 = now()
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert now() - t0 == pytest.approx(1.4)  # A's cap + B's latency, nothing else
    assert resp.text == "from b"
    rec = resp.record
    assert rec is not None
    assert [(x.target, x.outcome, x.start, x.end) for x in rec.attempts] == [
        ("a", "timeout:total", 0.0, pytest.approx(1.0)),
        ("b", "ok", pytest.approx(1.0), pytest.approx(1.4)),
    ]
    assert (rec.recovered, rec.workflow, rec.target_used) == (True, Workflow.FALLBACK, "b")
    assert rec.added_latency_ms == pytest.approx(1000.0)
    assert rec.recovery_reason == "timeout:total on a; recovered by cross-model fallback to b"
    # A really went away at its cap: the fake saw the client leave at t=1.0
    (call,) = a.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.disconnected_at is not None and call.disconnected_at - t0 == pytest.approx(1.0)


async def test_a_retries_consume_the_whole_budget_and_b_is_never_called() -> None:
    """The seed's trade-off, still expressible: with no time kept back for the next tier
    (``fallback_reserve=0``), A's replays may use the whole deadline and B is never called."""
    a = FakeProvider("a", OA, Script.always(Reply.hang()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    r = router(
        [target(a, cap=1.0, attempts=5)], [target(b)], a, b, backoff=Backoff(base=0.0, cap=0.0), fallback_reserve=0.0
    )
    t0 = now()
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=3.0))
    err = ei.value
    assert err.reason is FailureKind.DEADLINE_EXHAUSTED and err.retryable
    assert now() - t0 == pytest.approx(3.0)
    assert len(a.calls) == 3 and len(b.calls) == 0
    assert [x.outcome for x in err.record.attempts] == ["timeout:total"] * 3
    assert err.record.target_used is None and err.record.outcome == "deadline_exhausted"
    assert any(e.target == "b" and "left" in e.reason for e in err.record.excluded)


async def test_the_last_attempt_is_capped_by_what_is_left_of_the_deadline() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.hang()))
    r = router([target(a, cap=1.0, attempts=5)], [], a, backoff=Backoff(base=0.0, cap=0.0))
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=2.5))
    caps = [x.total_timeout for x in ei.value.record.attempts]
    assert caps == [pytest.approx(1.0), pytest.approx(1.0), pytest.approx(0.5)]
    assert ei.value.record.elapsed_ms == pytest.approx(2500.0)


async def test_a_candidate_lacking_a_capability_is_healthy_yet_receives_nothing() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.overloaded()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b can't see")))
    c = FakeProvider("c", GE, Script.always(Reply.ok("a cat")))
    no_vision = frozenset({Capability.CHAT, Capability.STRUCTURED_OUTPUT})
    r = router([target(a)], [target(b, caps=no_vision), target(c)], a, b, c)
    resp = await r.complete("r", IMG, Envelope(budget=5.0))
    assert resp.text == "a cat"
    assert len(b.calls) == 0 and len(a.calls) == 1 and len(c.calls) == 1
    assert resp.record is not None
    assert [(e.target, e.reason) for e in resp.record.excluded] == [("b", "missing capability: vision")]


async def test_retry_after_longer_than_the_time_left_means_no_retry_on_that_target() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.rate_limit(retry_after=10.0, latency=0.1)))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b", latency=0.2)))
    # fallback_reserve=0 keeps nothing back for b, so only the time left can refuse the wait
    r = router([target(a, attempts=3)], [target(b)], a, b, fallback_reserve=0.0)
    t0 = now()
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert len(a.calls) == 1 and resp.text == "from b"
    assert now() - t0 == pytest.approx(0.3)  # no waiting for a Retry-After that cannot fit
    assert resp.record is not None
    assert any(
        "no replay: retry_after 10.000s + 0.050s for an attempt exceeds the" in e.reason for e in resp.record.excluded
    )


async def test_retry_after_longer_than_the_fallback_needs_goes_to_it_at_once() -> None:
    """A 429 saying "come back in 20 s", a 30 s deadline, a fallback that answers in 0.2 s: the
    fallback answers now, A is not called again, and its cool-down keeps the next request away."""
    a = FakeProvider("a", OA, Script.always(Reply.rate_limit(retry_after=20.0, latency=0.1)))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b", latency=0.2)))
    r = router([target(a, attempts=3)], [target(b)], a, b)
    t0 = now()
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=30.0))
    assert resp.text == "from b" and now() - t0 == pytest.approx(0.3)
    assert (len(a.calls), len(b.calls)) == (1, 1)
    rec = resp.record
    assert rec is not None and rec.recovered and rec.workflow is Workflow.FALLBACK and not rec.waits
    assert [(e.target, e.code, e.reason) for e in rec.excluded] == [
        ("a", "no_replay", "no replay: retry_after 20.000s is longer than the 1.050s b needs: it is tried at once")
    ]
    again = await r.complete("r", Request.simple("hi"), Envelope(budget=30.0))
    assert again.text == "from b" and len(a.calls) == 1  # a is cooling down for its 20 s


async def test_when_the_fallback_fails_too_the_caller_gets_the_retry_after_it_was_not_made_to_wait() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.rate_limit(retry_after=20.0, latency=0.1)))
    b = FakeProvider("b", AN, Script.always(Reply.server_error(latency=0.2)))
    r = router([target(a, attempts=3)], [target(b, attempts=1)], a, b)
    t0 = now()
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=30.0))
    assert now() - t0 == pytest.approx(0.3) and (len(a.calls), len(b.calls)) == (1, 1)
    # b's 500 may pass at any moment, so no time is promised; a's own 20 s is on its attempt
    err = ei.value
    assert err.retryable and err.retry_after_ms is None
    (a_attempt,) = [x for x in err.record.attempts if x.target == "a"]
    assert a_attempt.failure is not None and a_attempt.failure.retry_after == pytest.approx(20.0)

    # b rate limited for longer than a: a's hint is the caller's (20 s from a's answer)
    a2 = FakeProvider("a", OA, Script.always(Reply.rate_limit(retry_after=20.0, latency=0.1)))
    b2 = FakeProvider("b", AN, Script.always(Reply.rate_limit(retry_after=40.0, latency=0.2)))
    r2 = router([target(a2, attempts=3)], [target(b2, attempts=1)], a2, b2)
    with pytest.raises(Unavailable) as ei2:
        await r2.complete("r", Request.simple("hi"), Envelope(budget=30.0))
    assert (len(a2.calls), len(b2.calls)) == (1, 1)
    assert ei2.value.retry_after_ms == pytest.approx(19_800, abs=5)


async def test_retry_after_that_fits_is_honoured_instead_of_the_backoff_schedule() -> None:
    a = FakeProvider("a", OA, Script.of(Reply.rate_limit(retry_after=2.0), default=Reply.ok("second time")))
    r = router([target(a, attempts=3)], [], a)
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "second time"
    assert [c.time - a.calls[0].time for c in a.calls] == [0.0, pytest.approx(2.0)]
    assert resp.record is not None
    (w,) = resp.record.waits
    assert (w.reason, w.end - w.start) == ("retry_after", pytest.approx(2.0))
    assert resp.record.workflow is Workflow.RETRY_FAILOVER


async def test_rate_limited_alone_reports_retry_after_ms() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.rate_limit(retry_after=30.0)))
    r = router([target(a, attempts=3)], [], a)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    err = ei.value
    assert err.reason is FailureKind.RATE_LIMITED and err.retryable
    assert err.retry_after_ms == 30_000
    # the next request does not walk into the same 429: the key cools down
    with pytest.raises(Unavailable) as ei2:
        await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert len(a.calls) == 1
    assert ei2.value.reason is FailureKind.RATE_LIMITED and ei2.value.retry_after_ms == 30_000
    assert "cooling down after rate_limited" in ei2.value.record.excluded[0].reason


@pytest.mark.parametrize(
    ("reply", "kind", "retryable"),
    [
        (Reply.overloaded(), FailureKind.PROVIDER_OVERLOADED, True),
        (Reply.server_error(), FailureKind.PROVIDER_SERVER_ERROR, True),
        (Reply.unauthorized(), FailureKind.AUTHENTICATION_OR_PERMISSION, False),
        (Reply.not_found(), FailureKind.MODEL_NOT_FOUND, False),
        (Reply.reset(), FailureKind.TRANSPORT_TRANSIENT, True),
    ],
)
async def test_all_candidates_fail_with_the_right_reason_and_no_text(
    reply: Reply, kind: FailureKind, retryable: bool
) -> None:
    ps = [FakeProvider(n, d, Script.always(reply)) for n, d in (("a", OA), ("b", AN), ("c", GE))]
    r = router([target(ps[0])], [target(ps[1]), target(ps[2])], *ps)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=10.0))
    err = ei.value
    assert (err.reason, err.retryable) == (kind, retryable)
    assert [len(p.calls) for p in ps] == [1, 1, 1]
    assert err.record.target_used is None and not err.record.recovered
    assert err.record.workflow is Workflow.FALLBACK
    assert not hasattr(err, "text")
    assert err.to_dict()["status"] == "unavailable" and err.to_dict()["reason"] == kind.value


async def test_no_nested_retries_the_provider_sees_exactly_what_the_policy_allows() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.server_error()))
    b = FakeProvider("b", AN, Script.always(Reply.server_error()))
    r = router([target(a, attempts=3)], [target(b, attempts=2)], a, b)
    with pytest.raises(Unavailable):
        await r.complete("r", Request.simple("hi"), Envelope(budget=60.0, max_attempts=10))
    assert (len(a.calls), len(b.calls)) == (3, 2)

    a2 = FakeProvider("a", OA, Script.always(Reply.server_error()))
    b2 = FakeProvider("b", AN, Script.always(Reply.server_error()))
    r2 = router([target(a2, attempts=3)], [target(b2, attempts=2)], a2, b2)
    with pytest.raises(Unavailable) as ei:
        await r2.complete("r", Request.simple("hi"), Envelope(budget=60.0, max_attempts=2))
    # A may not spend the envelope's last attempt on a replay while B could still take it
    assert (len(a2.calls), len(b2.calls)) == (1, 1)
    assert "max_attempts 2 spent" in str(ei.value)
    assert ("a", "no replay: the last of max_attempts 2 is kept for b") in [
        (e.target, e.reason) for e in ei.value.record.excluded
    ]


async def test_a_content_filter_is_never_retried_or_routed_around() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.refuse("I can't help with that.")))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b would answer")))
    r = router([target(a, attempts=3)], [target(b)], a, b)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("bad"), Envelope(budget=5.0))
    assert ei.value.reason is FailureKind.CONTENT_FILTERED and not ei.value.retryable
    assert (len(a.calls), len(b.calls)) == (1, 0)
    assert ei.value.record.workflow is Workflow.STOP


async def test_an_invalid_request_stops_at_once() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.invalid("messages[1].content: bad")))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b")))
    r = router([target(a, attempts=3)], [target(b)], a, b)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert ei.value.reason is FailureKind.INVALID_REQUEST
    assert (len(a.calls), len(b.calls)) == (1, 0)


async def test_context_overflow_moves_only_to_a_larger_window() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.context_overflow()))
    small = FakeProvider("small", AN, Script.always(Reply.ok("small")))
    big = FakeProvider("big", GE, Script.always(Reply.ok("big")))
    r = router(
        [target(a, window=32_000, attempts=3)],
        [target(small, window=16_000), target(big, window=1_000_000)],
        a,
        small,
        big,
    )
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "big"
    assert (len(a.calls), len(small.calls), len(big.calls)) == (1, 0, 1)


async def test_quota_exhausted_moves_on_without_replay_and_cools_the_key() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.quota()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b")))
    r = router([target(a, attempts=3)], [target(b)], a, b)
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "b" and len(a.calls) == 1
    await r.complete("r", Request.simple("again"), Envelope(budget=5.0))
    assert len(a.calls) == 1 and len(b.calls) == 2


async def test_transient_connect_error_is_replayed_on_the_same_target() -> None:
    a = FakeProvider("a", OA, Script.of(Reply.connect_error(), default=Reply.ok("second")))
    r = router([target(a, attempts=2)], [], a, backoff=Backoff(base=0.2, cap=1.0))
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "second"
    assert resp.record is not None
    assert [x.outcome for x in resp.record.attempts] == ["transport_transient", "ok"]
    assert [x.phase for x in resp.record.attempts] == [Phase.PRIMARY, Phase.PRIMARY]


async def test_truncation_is_repaired_once_with_a_larger_max_tokens() -> None:
    a = FakeProvider("a", OA, Script.of(Reply.truncate("Once upon a", usage=(10, 50)), default=Reply.ok("done")))
    r = router([target(a, attempts=1)], [], a)
    req = Request(messages=(Message.user("story"),), max_tokens=50)
    resp = await r.complete("r", req, Envelope(budget=5.0))
    assert resp.text == "done"
    assert [c.json["max_tokens"] for c in a.calls] == [50, 100]
    assert resp.record is not None
    assert [(x.phase, x.outcome) for x in resp.record.attempts] == [
        (Phase.PRIMARY, "truncated"),
        (Phase.REPAIR, "ok"),
    ]
    # the truncated attempt was paid for and counts in the total
    assert resp.record.attempts[0].cost == pytest.approx((10 * 1.0 + 50 * 2.0) / 1e6)
    assert resp.record.total_cost > resp.record.attempts[0].cost


async def test_schema_invalid_output_is_sent_back_once_then_validated() -> None:
    a = FakeProvider("a", OA, Script.of(Reply.schema_invalid({"wrong": 1}), default=Reply.ok(json={"answer": "fixed"})))
    r = router([target(a)], [], a)
    req = Request(messages=(Message.user("classify"),), response_format=ResponseFormat.json_schema(SCHEMA))
    resp = await r.complete("r", req, Envelope(budget=5.0))
    assert resp.parsed == {"answer": "fixed"}
    second = a.calls[1].json["messages"]
    assert "'answer' is a required property" in second[-1]["content"]
    assert resp.record is not None and resp.record.validation.contract is True


async def test_schema_invalid_twice_is_not_a_success() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.schema_invalid({"wrong": 1})))
    r = router([target(a, attempts=3)], [], a)
    req = Request(messages=(Message.user("classify"),), response_format=ResponseFormat.json_schema(SCHEMA))
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", req, Envelope(budget=5.0))
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE  # answers came, none met the contract
    assert "schema_invalid" in str(ei.value)
    assert len(a.calls) == 2  # the first try and one repair: never a third


async def test_malformed_tool_arguments_are_repaired_once() -> None:
    tool = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    a = FakeProvider(
        "a",
        OA,
        Script.of(
            Reply.malformed_tool_args("get_weather"),
            default=Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})]),
        ),
    )
    r = router([target(a)], [], a)
    resp = await r.complete("r", Request(messages=(Message.user("weather?"),), tools=(tool,)), Envelope(budget=5.0))
    assert [c.name for c in resp.tool_calls] == ["get_weather"]
    assert resp.tool_calls[0].parsed == {"city": "Paris"}
    assert len(a.calls) == 2


async def test_equivalent_failover_comes_before_cross_model_fallback() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.overloaded()))
    a_eu = FakeProvider("a-eu", OA, Script.always(Reply.ok("from the EU pool")))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b")))
    r = router([target(a, key="m"), target(a_eu, key="m")], [target(b)], a, a_eu, b)
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "from the EU pool" and len(b.calls) == 0
    assert resp.record is not None
    assert resp.record.workflow is Workflow.RETRY_FAILOVER
    assert [x.phase for x in resp.record.attempts] == [Phase.PRIMARY, Phase.FAILOVER]


async def test_fallback_only_when_the_envelope_allows_it() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.overloaded()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b")))
    r = router([target(a)], [target(b)], a, b)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=5.0, allow_fallback=False))
    assert ei.value.reason is FailureKind.PROVIDER_OVERLOADED and len(b.calls) == 0
    assert ei.value.record.excluded[0].reason == "cross-model fallback not allowed by the envelope"


async def test_max_added_latency_stops_recovery() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.hang()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("b")))
    r = router([target(a, cap=2.0)], [target(b)], a, b)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=10.0, max_added_latency=1.5))
    assert len(b.calls) == 0 and "max_added_latency" in str(ei.value)


async def test_max_cost_counts_failed_attempts() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.truncate("x", usage=(1000, 1000))))
    r = router([target(a)], [], a)
    req = Request(messages=(Message.user("story"),), max_tokens=1000)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", req, Envelope(budget=5.0, max_cost=0.004))
    # first attempt cost 0.003; a repair with max_tokens 2000 is estimated beyond what is left
    assert len(a.calls) == 1
    assert ei.value.record.total_cost == pytest.approx(0.003)
    assert "exceeds max_cost" in ei.value.record.excluded[-1].reason


async def test_schema_version_mismatch_is_a_contract_failure_before_any_call() -> None:
    from failover import Contract, Route, Router
    from failover.testing import FakeNetwork

    a = FakeProvider("a", OA, Script.always(Reply.ok("a")))
    route = Route(name="r", contract=Contract(schema_version="v3"), primary=(target(a),))
    r = Router([route], transport=FakeNetwork(a))
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(schema_version="v4"))
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE and len(a.calls) == 0


@pytest.mark.parametrize("use_budget", [True, False])
async def test_retry_budget_caps_amplification_under_an_outage(use_budget: bool) -> None:
    a = FakeProvider("a", OA, Script.always(Reply.overloaded(latency=0.05)))
    budget = RetryBudget(ratio=0.1, floor=10, window=10.0) if use_budget else Unlimited()
    r = router([target(a, attempts=3)], [], a, budget=budget, backoff=Backoff(base=0.05, cap=0.2))
    results = await asyncio.gather(
        *(r.complete("r", Request.simple(f"q{i}"), Envelope(budget=5.0)) for i in range(1000)),
        return_exceptions=True,
    )
    assert all(isinstance(x, Unavailable) for x in results)
    if use_budget:
        assert len(a.calls) <= 1.1 * 1000 + 10
        assert sum(x.record.retry_budget_exhausted for x in results if isinstance(x, Unavailable)) > 800
    else:
        assert len(a.calls) == 3000  # what the budget prevents: every request tried 3 times


async def test_truncation_spent_on_thinking_is_repaired_with_less_effort() -> None:
    a = FakeProvider("a", OA, Script.of(Reply.truncate("", usage=(10, 4000)), default=Reply.ok("done")))
    r = router([target(a, attempts=1)], [], a)
    req = Request(messages=(Message.user("prove it"),), max_tokens=4096, reasoning_effort="high")
    resp = await r.complete("r", req, Envelope(budget=5.0))
    assert resp.text == "done"
    # at the target's max output already (4096): no room to grow, so think less instead
    assert [(c.json["reasoning_effort"], c.json["max_tokens"]) for c in a.calls] == [("high", 4096), ("medium", 4096)]


@pytest.mark.parametrize("budget", [0.3, 0.7, 1.1, 2.9, 7.3])
async def test_a_hang_cut_by_the_deadline_is_deadline_exhausted_whatever_the_float_sum(budget: float) -> None:
    """A hanging target whose attempt the deadline cuts: the request ends because time ran
    out (504 deadline_exhausted), not as the target's own timeout. On virtual time the cut
    lands at start + (deadline - start), which a float sum may leave a hair short of the
    deadline: that must not turn the answer into a retryable 503."""
    a = FakeProvider("a", OA, Script.always(Reply.hang()))
    r = router([target(a, cap=60.0, attempts=1)], [], a)
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("hi"), Envelope(budget=budget))
    assert ei.value.reason is FailureKind.DEADLINE_EXHAUSTED, ei.value
    assert ei.value.record.elapsed_ms == pytest.approx(budget * 1000)
