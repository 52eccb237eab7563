"""Every exclusion carries an ExclusionCode, and every decision on exclusions reads the code.

The asserts here are on codes, not on wording: a reason may be reworded (conclude's tests at
the end reword them on purpose) without any behaviour changing.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from failover import (
    Attempt,
    Capability,
    Contract,
    Envelope,
    Exclusion,
    ExclusionCode,
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Phase,
    Price,
    Request,
    Route,
    Router,
    Unavailable,
)
from failover.policy import RetryBudget, Unlimited, contract_check, embedding_check
from failover.router._conclude import conclude
from failover.router._engine import Next
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import ALL, router, target
from .test_engine import HANG, OVERLOADED, Policies, decide, failed, lane, limited, state, tgt

X = ExclusionCode
OA, AN = "openai", "anthropic"
IMG = Request(messages=(Message.user("what is it?", ImagePart(url="data:image/png;base64,AAAA")),), max_tokens=64)


def codes(excluded: tuple[Exclusion, ...]) -> list[tuple[str, ExclusionCode, bool]]:
    return [(e.target, e.code, e.replay) for e in excluded]


# -- the engine's decisions ----------------------------------------------------------------------


def test_no_replay_after_x_should_retry_false_or_a_clients_own_retry() -> None:
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, Failure(kind=FailureKind.PROVIDER_OVERLOADED, message="503", should_retry=False), at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.code is X.NO_REPLAY
    s = state(tgt("a"), tgt("b"), env=Envelope(budget=5.0, client_retry=True))
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.code is X.NO_REPLAY


def test_a_timeout_moves_on_with_no_replay() -> None:
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, HANG, at=2.0)
    d = decide(s, ln, Policies(), 2.0)
    assert isinstance(d, Next) and d.code is X.NO_REPLAY


def test_the_last_attempt_kept_for_the_next_and_its_reserve() -> None:
    s = state(tgt("a"), tgt("b"), env=Envelope(budget=10.0, max_attempts=2))
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.code is X.MAX_ATTEMPTS
    s = state(tgt("a"), tgt("b"), budget=1.2)  # b keeps 1.05 s: a replay after any backoff eats into it
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.code is X.RESERVE


def test_time_latency_cost_window_and_repair() -> None:
    s = state(tgt("a"), budget=2.0)
    ln = lane(s)
    failed(s, ln, limited(5.0), at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.code is X.SHORT_OF_TIME
    s = state(tgt("a"), tgt("b"), env=Envelope(budget=10, max_added_latency=0.5))
    ln = lane(s)
    failed(s, ln, limited(1.0), at=0.2)
    d = decide(s, ln, Policies(), 0.2)
    assert isinstance(d, Next) and d.code is X.MAX_ADDED_LATENCY
    priced = replace(tgt("a"), price=Price(input_per_mtok=1e6, output_per_mtok=1e6))
    s = state(priced, env=Envelope(budget=10, max_cost=0.5))
    s.launched = 1  # not the request's first, unchecked attempt
    d = decide(s, lane(s), Policies(), 0.0)
    assert isinstance(d, Next) and d.code is X.MAX_COST
    s = state(tgt("a"), tgt("b"))
    s.min_window = 10_000
    d = decide(s, lane(s, 1), Policies(windows={"b": 8_000}), 0.1)
    assert isinstance(d, Next) and d.code is X.CONTEXT_WINDOW
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, Failure(kind=FailureKind.TRUNCATED, message="cut"), at=0.1)
    ln.no_repair = True
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.code is X.NO_REPAIR


def test_the_temporary_ones_held_rate_limited_and_the_retry_budget() -> None:
    from failover.policy._selection import Hold

    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, limited(1.0), at=0.1)
    hold = Hold("a", 30.0, FailureKind.PROVIDER_OVERLOADED, "circuit open")
    d = decide(s, ln, Policies(holds={"a": hold}), 0.1)
    assert isinstance(d, Next) and (d.code, d.temporary) == (X.HELD, True)
    d = decide(s, ln, Policies(block={"a": 10.0}), 0.1)
    assert isinstance(d, Next) and (d.code, d.temporary, d.limited) == (X.RATE_LIMITED, True, True)
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=0.01)
    d = decide(s, ln, Policies(budget=RetryBudget(ratio=0.0, floor=0)), 0.01)
    assert isinstance(d, Next) and (d.code, d.temporary, d.budget_spent) == (X.RETRY_BUDGET, True, True)


def test_an_exclusion_needs_both_its_code_and_its_reason() -> None:
    assert Next().code is None  # leaving with nothing to record: the attempts say why
    with pytest.raises(ValueError):
        Next(reason="why")
    with pytest.raises(ValueError):
        Next(X.HELD)


# -- the selection -------------------------------------------------------------------------------


def test_each_contract_term_has_its_code() -> None:
    base = replace(
        tgt("a"),
        capabilities=frozenset({Capability.CHAT}),
        context_window=1_000,
        max_output_tokens=500,
        region="us",
        retention=frozenset({"zdr"}),
        safety_profiles=frozenset({"strict"}),
        languages=frozenset({"en"}),
    )
    need = frozenset({Capability.CHAT})

    def check(contract: Contract, *, required: frozenset[Capability] = need, tokens: int = 10, out: int = 10) -> object:
        v = contract_check(base, Route(name="r", primary=(base,), contract=contract), required, tokens, out)
        return None if v is None else v.code

    ok = Contract()
    assert check(ok) is None
    assert check(ok, required=frozenset({Capability.VISION})) is X.CAPABILITY
    assert check(Contract(min_context=2_000)) is X.MIN_CONTEXT
    assert check(ok, tokens=990, out=20) is X.CONTEXT_WINDOW
    assert check(ok, out=600) is X.MAX_OUTPUT
    assert check(Contract(regions=frozenset({"eu"}))) is X.DATA_BOUNDARY
    assert check(Contract(retention=frozenset({"no_training"}))) is X.DATA_BOUNDARY
    assert check(Contract(safety_profile="lenient")) is X.CONTRACT
    assert check(Contract(languages=frozenset({"de"}))) is X.CONTRACT


def test_embedding_checks_have_their_codes_and_a_long_input_is_a_window() -> None:
    a = replace(tgt("a"), context_window=100)
    other = tgt("b")
    route = Route(name="e", primary=(a, other))
    assert embedding_check(a, route, a, None, 10) is None
    v = embedding_check(a, route, a, None, 500)  # one input longer than the window, reworded
    assert v is not None and v.code is X.CONTEXT_WINDOW and "an input of ~500 tokens" in v.reason
    v = embedding_check(other, route, a, None, 10)
    assert v is not None and v.code is X.EMBEDDING_MODEL_DIFFERS
    sized = replace(a, dimensions=256)
    v = embedding_check(sized, Route(name="e", primary=(a, sized)), a, None, 10)
    assert v is not None and v.code is X.DIMENSIONS_DIFFER


# -- the record, through the router ---------------------------------------------------------------


@pytest.mark.looptime
async def test_capability_window_and_max_cost_at_selection() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.ok("from a")))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    c = FakeProvider("c", OA, Script.always(Reply.ok("from c")))
    tb = target(b, caps=ALL - {Capability.VISION})
    tc = target(c, window=100)
    resp = await router([target(a)], [tb, tc], a, b, c).complete("r", IMG, Envelope(budget=5.0))
    assert resp.record is not None
    # a answers; b and c are left out before anything is sent (c's window: the image's tokens)
    assert codes(resp.record.excluded) == [("b", X.CAPABILITY, False), ("c", X.CONTEXT_WINDOW, False)]
    dear = target(b, price=Price(input_per_mtok=1e6, output_per_mtok=1e6))
    r = router([target(a)], [dear], a, b)
    resp = await r.complete("r", Request.simple("hi", max_tokens=10), Envelope(budget=5.0, max_cost=0.01))
    assert resp.record is not None and codes(resp.record.excluded) == [("b", X.MAX_COST, False)]


@pytest.mark.looptime
async def test_a_timeout_no_replay_and_the_retry_budget_are_recorded_as_replays() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.hang()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    resp = await router([target(a, attempts=2)], [target(b)], a, b).complete(
        "r", Request.simple("hi"), Envelope(budget=5.0)
    )
    assert resp.record is not None and codes(resp.record.excluded) == [("a", X.NO_REPLAY, True)]
    a = FakeProvider("a", OA, Script.always(Reply.overloaded()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    r = router([target(a, attempts=3)], [target(b)], a, b, budget=RetryBudget(ratio=0.0, floor=0))
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.record is not None
    (e,) = resp.record.excluded
    assert (e.target, e.code, e.replay, e.temporary) == ("a", X.RETRY_BUDGET, True, True)


@pytest.mark.looptime
async def test_a_cooling_key_is_held_and_a_canary_share_refuses() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.rate_limit(retry_after=30)))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    r = router([target(a)], [target(b)], a, b)
    await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))  # a cools down for 30 s
    assert resp.record is not None
    (e,) = resp.record.excluded
    assert (e.target, e.code, e.temporary, e.replay) == ("a", X.HELD, True, False)
    assert resp.record.recovery_kind == "held"

    a = FakeProvider("a", OA, Script.always(Reply.server_error()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    ta, tb = target(a), target(b)
    canary = Router(
        [Route(name="r", primary=(ta,), fallbacks=(tb,), canary=(("b", 0.01),))],
        transport=FakeNetwork(a, b),
        retry_budget=Unlimited(),
        canary_rng=random.Random(1),  # its first draw is 0.134...: outside a 1% share
    )
    with pytest.raises(Unavailable) as ei:
        await canary.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert codes(ei.value.record.excluded) == [("b", X.CANARY, False)]


def test_the_serialised_record_has_each_exclusions_code() -> None:
    from failover import RouteRecord, Workflow

    rec = RouteRecord(
        request_id="r1", route="r", workflow=Workflow.STOP, outcome="rate_limited", attempts=(), waits=(),
        excluded=(Exclusion(target="a", phase=Phase.PRIMARY, code=X.HELD, reason="circuit open", temporary=True),),
        recovered=False, recovery_reason=None, target_used=None, elapsed_ms=1.0, added_latency_ms=0.0, total_cost=0.0,
    )  # fmt: skip
    assert rec.to_dict()["excluded"] == [
        {
            "target": "a",
            "phase": "primary",
            "code": "held",
            "reason": "circuit open",
            "temporary": True,
            "replay": False,
        }
    ]


# -- conclude reads codes, not words -------------------------------------------------------------


def _failed_on(name: str, failure: Failure) -> Attempt:
    return Attempt(
        index=0, target=name, model=f"m-{name}", phase=Phase.PRIMARY, start=0.0, end=0.1, connect_timeout=2.0,
        total_timeout=2.0, outcome=failure.label, failure=failure,
    )  # fmt: skip


def test_conclude_says_why_the_last_target_was_not_tried_again_whatever_the_wording() -> None:
    s = state(tgt("a"), tgt("b"), budget=5.0)
    why = "the provider asked us to leave it alone"  # no "no replay" in it
    excluded = [
        Exclusion(target="b", phase=Phase.FALLBACK, code=X.CAPABILITY, reason="cannot see"),
        Exclusion(target="a", phase=Phase.PRIMARY, code=X.NO_REPLAY, reason=why, replay=True),
    ]
    stop = conclude(s, [_failed_on("a", limited(30.0))], excluded, 0.1, 5.0)
    assert stop.message.endswith(f"; {why}")
    # and a reason that says "no replay" but was not recorded after a's attempts is not told as one
    excluded = [Exclusion(target="a", phase=Phase.PRIMARY, code=X.HELD, reason="no replay: held")]
    stop = conclude(s, [_failed_on("a", limited(30.0))], excluded, 0.1, 5.0)
    assert "held" not in stop.message


def test_conclude_lists_the_small_windows_after_an_overflow_whatever_the_wording() -> None:
    s = state(tgt("a"), tgt("b"), tgt("c"), budget=5.0)
    overflow = Failure(kind=FailureKind.CONTEXT_OVERFLOW, message="too long", status=400)
    excluded = [
        Exclusion(target="b", phase=Phase.FALLBACK, code=X.CONTEXT_WINDOW, reason="too small for it"),
        Exclusion(target="c", phase=Phase.FALLBACK, code=X.MIN_CONTEXT, reason="below the route's minimum"),
        Exclusion(target="d", phase=Phase.FALLBACK, code=X.CAPABILITY, reason="context window says nothing"),
    ]
    stop = conclude(s, [_failed_on("a", overflow)], excluded, 0.1, 5.0)
    assert stop.kind is FailureKind.CONTEXT_OVERFLOW
    assert stop.message.endswith("; b: too small for it; c: below the route's minimum")
