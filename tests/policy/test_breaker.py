from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import DISPOSITIONS, Dialect, Failure, FailureKind, HealthEffect, Target
from failover.policy.breakers._board import (
    SCOPES_KEPT,
    BreakerBoard,
    BreakerConfig,
    BreakerEvent,
    BreakerState,
    CircuitBreaker,
    Outcome,
    Permit,
    breaker_params,
    classify,
    key_model_scope,
)

CLOSED, OPEN, HALF = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN

# The open periods these tests were written with (the defaults until they became 2 s x 1.5 up
# to 5 s): the rules they check do not depend on the numbers.
Cfg = partial(BreakerConfig, open_duration=30.0, open_duration_growth=2.0, max_open_duration=300.0)


def fail(kind: FailureKind) -> Failure:
    return Failure(kind=kind, message=str(kind))


E503 = fail(FailureKind.PROVIDER_SERVER_ERROR)
E429 = fail(FailureKind.RATE_LIMITED)
E400 = fail(FailureKind.INVALID_REQUEST)


def target(name: str = "a", credential: str = "KEY_A", region: str | None = None) -> Target:
    return Target(
        name=name,
        dialect=Dialect.OPENAI,
        model="m1",
        base_url="http://p.fake/v1",
        credential=credential,
        region=region,
    )


def call(b: CircuitBreaker, now: float, outcome: Outcome, duration: float = 0.0) -> None:
    p = b.try_acquire(now)
    assert p is not None, f"rejected at {now}: {b.rejection(now)}"
    b.release(p, now, outcome=outcome, duration=duration)


def opened(cfg: BreakerConfig, now: float = 0.0, events: list[BreakerEvent] | None = None) -> CircuitBreaker:
    """A breaker opened at ``now`` by ``min_calls`` failures."""
    b = CircuitBreaker(cfg, "s", events.append if events is not None else None)
    for _ in range(cfg.min_calls):
        call(b, now, "failure")
    assert b.state(now) is OPEN
    return b


# -- configuration ------------------------------------------------------------------------


def test_defaults() -> None:
    c = BreakerConfig()
    assert (c.window_kind, c.window_size, c.window_seconds, c.min_calls) == ("count", 20, 60, 10)
    assert (c.failure_rate, c.slow_call_rate, c.slow_call_duration) == (0.5, 1.0, 30.0)
    assert (c.open_duration, c.open_duration_growth, c.max_open_duration, c.open_cap) == (2.0, 1.5, None, 5.0)
    assert (c.half_open_probes, c.successes_to_close, c.slow_rule) == (2, 2, False)
    assert [c.open_period(n) for n in range(1, 7)] == [2.0, 3.0, 4.5, 5.0, 5.0, 5.0]


def test_default_open_periods_are_short_and_capped_so_a_recovered_provider_is_probed_within_5s() -> None:
    c = BreakerConfig()
    assert [c.open_period(n) for n in range(1, 9)] == [2.0, 3.0, 4.5, 5.0, 5.0, 5.0, 5.0, 5.0]
    # a failed probe's period counts from its start: one that hung 2 s reopens for 3 s, not 5
    assert c.open_period(6, probe_duration=2.0) == 3.0
    # but never for less than open_duration after it ended
    assert c.open_period(6, probe_duration=60.0) == 2.0
    assert c.open_period(1, probe_duration=0.5) == 2.0


def test_the_cap_follows_a_longer_base_unless_set() -> None:
    assert BreakerConfig(open_duration=30.0).open_cap == 30.0  # a longer base than 5 s: no growth
    assert BreakerConfig(open_duration=1.0).open_cap == 5.0
    assert BreakerConfig(open_duration=10.0, max_open_duration=60.0).open_period(3) == 22.5
    assert breaker_params(BreakerConfig()).max_open_duration == 5.0


def test_the_next_probe_is_due_at_most_max_open_duration_after_the_last_one_started() -> None:
    """However the probes fail (fast, or hanging up to a 3 s attempt cap), the next is admitted
    at most max_open_duration (5 s) after the previous one started (open_duration after it
    ended, for a probe that took longer than max_open_duration - open_duration)."""
    for took in (0.0, 0.5, 2.0, 3.0, 4.0):
        b = opened(BreakerConfig(min_calls=2, window_size=2, half_open_probes=1))
        gaps = []
        for _ in range(8):
            assert b.retry_at is not None
            start = b.retry_at
            p = b.try_acquire(start)
            assert p is not None and p.probe
            b.release(p, start + took, outcome="failure", duration=took)
            assert b.retry_at is not None
            gaps.append(b.retry_at - start)
        assert max(gaps) == pytest.approx(max(5.0, took + 2.0)), (took, gaps)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"window_kind": "sliding"}, "window_kind"),
        ({"window_size": 0}, "window_size"),
        ({"min_calls": 0}, "min_calls"),
        ({"min_calls": 21}, "could never open"),
        ({"failure_rate": 0.0}, "failure_rate"),
        ({"failure_rate": 1.5}, "failure_rate"),
        ({"slow_call_rate": math.nan}, "slow_call_rate"),
        ({"open_duration": 0}, "open_duration"),
        ({"open_duration_growth": 0.5}, "open_duration_growth"),
        ({"open_duration": 30, "max_open_duration": 10}, "max_open_duration 10 < open_duration"),
        ({"half_open_probes": 0}, "half_open_probes"),
        ({"probe_successes_to_close": 0}, "probe_successes_to_close"),
    ],
)
def test_config_rejects_nonsense(kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match="BreakerConfig") as info:
        BreakerConfig(**kw)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_time_window_may_need_more_calls_than_its_seconds() -> None:
    assert Cfg(window_kind="time", window_seconds=5, min_calls=50).min_calls == 50


# -- the state machine ----------------------------------------------------------------------


def test_opens_at_the_threshold_only_after_min_calls() -> None:
    b = CircuitBreaker(Cfg(window_size=10, min_calls=6, failure_rate=0.5), "s")
    for i in range(5):
        call(b, float(i), "failure")
    assert b.state(5.0) is CLOSED  # 5/5 failed, but fewer than min_calls
    call(b, 5.0, "success")  # 6 calls, 5/6 failed >= 50 %
    assert b.state(5.0) is OPEN
    assert b.rejection(5.0) == "circuit open for 30.0s more (5/6 failed)"


def test_stays_closed_below_the_threshold() -> None:
    b = CircuitBreaker(Cfg(window_size=10, min_calls=10, failure_rate=0.5), "s")
    for i in range(40):  # 4 failures in every 10: 40 %
        call(b, float(i), "failure" if i % 10 < 4 else "success")
    assert b.state(40.0) is CLOSED
    assert b.snapshot(40.0).failure_rate == pytest.approx(0.4)


def test_count_window_forgets_the_oldest_call() -> None:
    b = CircuitBreaker(Cfg(window_size=4, min_calls=4, failure_rate=0.75), "s")
    for outcome in ("failure", "failure", "success", "success", "failure", "success"):
        call(b, 0.0, outcome)
    s = b.snapshot(0.0)
    assert (s.calls, s.failures, s.state) == (4, 1, CLOSED)


def test_slow_calls_open_only_when_the_slow_rule_is_on() -> None:
    off = CircuitBreaker(Cfg(min_calls=5, window_size=5, slow_call_duration=10.0), "s")
    on = CircuitBreaker(Cfg(min_calls=5, window_size=5, slow_call_duration=10.0, slow_call_rate=0.6), "s")
    for b in (off, on):
        for i in range(5):
            call(b, float(i), "success", duration=12.0 if i < 3 else 10.0)  # 10.0 is not slower than 10
    assert off.state(5.0) is CLOSED
    assert off.snapshot(5.0).slow_rate == pytest.approx(0.6)
    assert on.state(5.0) is OPEN
    assert on.rejection(5.0) == "circuit open for 29.0s more (3/5 slower than 10s)"  # opened at 4.0


def test_open_rejects_until_the_open_period_has_passed() -> None:
    b = opened(Cfg(min_calls=2, window_size=2, open_duration=30.0), now=100.0)
    assert b.retry_at == 130.0
    assert b.try_acquire(100.0) is None
    assert b.try_acquire(129.999) is None
    assert b.rejection(117.7) == "circuit open for 12.3s more (2/2 failed)"
    assert b.state(129.999) is OPEN
    p = b.try_acquire(130.0)
    assert p is not None and p.probe
    assert b.state(130.0) is HALF
    assert b.retry_at is None


def test_half_open_admits_exactly_n_concurrent_probes() -> None:
    b = opened(Cfg(min_calls=2, window_size=2, half_open_probes=3))
    permits = [b.try_acquire(30.0) for _ in range(10)]
    granted = [p for p in permits if p is not None]
    assert len(granted) == 3
    assert b.rejection(30.0) == "half-open: 3 probes already in flight"
    assert b.snapshot(30.0).probes_in_flight == 3


def test_n_probe_successes_close() -> None:
    events: list[BreakerEvent] = []
    b = opened(Cfg(min_calls=2, window_size=2, half_open_probes=2), events=events)
    p1, p2 = b.try_acquire(30.0), b.try_acquire(30.0)
    assert p1 is not None and p2 is not None
    b.release(p1, 31.0, outcome="success", duration=1.0)
    assert b.state(31.0) is HALF
    assert b.try_acquire(31.0) is not None  # the freed slot takes another probe
    b.release(p2, 32.0, outcome="success", duration=2.0)
    assert b.state(32.0) is CLOSED
    assert [(e.old, e.new, e.reason) for e in events] == [
        (CLOSED, OPEN, "2/2 failed"),
        (OPEN, HALF, "open period of 30s elapsed"),
        (HALF, CLOSED, "2/2 probes succeeded"),
    ]
    assert b.snapshot(32.0).calls == 0  # a closed breaker starts with an empty window


def test_more_successes_than_probe_slots_can_be_required() -> None:
    b = opened(Cfg(min_calls=2, window_size=2, half_open_probes=1, probe_successes_to_close=3))
    for t in (30.0, 31.0, 32.0):
        assert b.state(t) is HALF
        call(b, t, "success")
    assert b.state(33.0) is CLOSED


def test_a_failed_probe_reopens_with_a_grown_period_capped() -> None:
    cfg = Cfg(min_calls=2, window_size=2, open_duration=10.0, open_duration_growth=3.0, max_open_duration=60.0)
    events: list[BreakerEvent] = []
    b = opened(cfg, events=events)
    start, periods = 0.0, []  # from the opening, then from each failed probe's start
    for _ in range(4):
        assert b.retry_at is not None
        periods.append(b.retry_at - start)
        start = b.retry_at
        p = b.try_acquire(start)
        assert p is not None
        b.release(p, start + 1.0, outcome="failure", duration=1.0)
        why = b.rejection(start + 1.0)
        assert b.state(start + 1.0) is OPEN and why is not None and why.endswith("(probe failed)")
    assert periods == [10.0, 30.0, 60.0, 60.0]
    # each after a probe that took 1 s: the grown period less the second it took
    assert [e.open_for for e in events if e.new is OPEN] == [10.0, 29.0, 59.0, 59.0, 59.0]
    assert b.snapshot(start + 1.0).open_count == 5


def test_a_close_resets_the_growth() -> None:
    cfg = Cfg(min_calls=2, window_size=2, half_open_probes=1, open_duration=10.0)
    b = opened(cfg)
    call(b, 10.0, "failure")  # probe fails: open for 20
    assert b.retry_at == 30.0
    call(b, 30.0, "success")  # probe succeeds: closed
    assert b.state(30.0) is CLOSED
    call(b, 31.0, "failure")
    call(b, 31.0, "failure")
    assert b.state(31.0) is OPEN
    assert b.retry_at == 41.0  # back to the base period


def test_a_slow_probe_reopens_when_the_slow_rule_is_on() -> None:
    cfg = Cfg(min_calls=2, window_size=2, slow_call_rate=0.9, slow_call_duration=5.0, half_open_probes=1)
    b = opened(cfg)
    p = b.try_acquire(30.0)
    assert p is not None
    b.release(p, 36.0, outcome="success", duration=6.0)
    assert b.state(36.0) is OPEN
    # the second period (60 s) counts from the probe's start (30.0)
    assert b.rejection(36.0) == "circuit open for 54.0s more (probe slower than 5s)"


def test_time_window_expires_old_buckets() -> None:
    cfg = Cfg(window_kind="time", window_seconds=10, min_calls=4, failure_rate=0.5)
    b = CircuitBreaker(cfg, "s")
    for t in (0.2, 0.9, 1.5):
        call(b, t, "failure")
    assert b.snapshot(9.99).calls == 3  # seconds 0..9 are all in the window at 9.99
    assert b.snapshot(10.0).calls == 1  # second 0 left at 10.0; second 1 is still in
    assert b.snapshot(11.0).calls == 0
    for t in (12.0, 12.5, 13.0):
        call(b, t, "success")
    call(b, 13.5, "failure")  # 1/4: the three old failures are gone
    assert b.state(13.5) is CLOSED
    call(b, 14.0, "failure")  # 2/5
    assert b.state(14.0) is CLOSED
    call(b, 14.0, "failure")  # 3/6
    assert b.state(14.0) is OPEN


def test_ignored_outcomes_do_not_count() -> None:
    b = CircuitBreaker(Cfg(min_calls=2, window_size=2), "s")
    for _ in range(50):
        call(b, 0.0, "ignored", duration=1000.0)
    s = b.snapshot(0.0)
    assert (s.state, s.calls) == (CLOSED, 0)


def test_an_ignored_probe_frees_its_slot_without_counting() -> None:
    b = opened(Cfg(min_calls=2, window_size=2, half_open_probes=1, probe_successes_to_close=1))
    p = b.try_acquire(30.0)
    assert p is not None and b.try_acquire(30.0) is None
    b.release(p, 31.0, outcome="ignored", duration=1.0)  # e.g. cancelled
    assert b.state(31.0) is HALF and b.snapshot(31.0).calls == 0
    call(b, 31.0, "success")
    assert b.state(31.0) is CLOSED


def test_double_release_raises() -> None:
    b = CircuitBreaker(Cfg(), "s")
    p = b.try_acquire(0.0)
    assert p is not None
    b.release(p, 0.0, outcome="success", duration=0.0)
    with pytest.raises(RuntimeError, match="released twice"):
        b.release(p, 0.0, outcome="success", duration=0.0)
    assert b.snapshot(0.0).calls == 1


def test_misuse_raises() -> None:
    a, other = CircuitBreaker(Cfg(), "a"), CircuitBreaker(Cfg(), "b")
    p = a.try_acquire(0.0)
    assert p is not None
    with pytest.raises(ValueError, match="released on breaker 'b'"):
        other.release(p, 0.0, outcome="success")
    with pytest.raises(ValueError, match="outcome"):
        a.release(p, 0.0, outcome="ok")  # type: ignore[arg-type]
    assert not p.released
    a.release(p, 2.5, outcome="success")  # duration defaults to now - acquired_at
    assert p.released


def test_a_permit_from_an_earlier_state_is_dropped() -> None:
    b = CircuitBreaker(Cfg(min_calls=2, window_size=2, half_open_probes=1), "s")
    early = b.try_acquire(0.0)  # granted while closed
    assert early is not None
    call(b, 0.0, "failure")
    call(b, 0.0, "failure")
    assert b.state(0.0) is OPEN
    probe = b.try_acquire(30.0)
    assert probe is not None
    b.release(early, 30.0, outcome="failure", duration=30.0)  # says nothing about the probe
    assert b.state(30.0) is HALF and b.snapshot(30.0).probes_in_flight == 1
    with pytest.raises(RuntimeError):
        b.release(early, 30.0, outcome="failure")


def test_rates_in_events_describe_the_window_being_left() -> None:
    events: list[BreakerEvent] = []
    b = CircuitBreaker(Cfg(min_calls=4, window_size=4), "s", events.append)
    for outcome in ("success", "failure", "success", "failure"):
        call(b, 1.0, outcome)
    (e,) = events
    assert (e.scope, e.layer, e.old, e.new, e.at) == ("s", "target", CLOSED, OPEN, 1.0)
    assert (e.failure_rate, e.slow_rate, e.calls, e.open_for, e.reason) == (0.5, 0.0, 4, 30.0, "2/4 failed")


# -- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(FailureKind))
def test_classify_follows_the_disposition(kind: FailureKind) -> None:
    effect = DISPOSITIONS[kind].health
    assert classify(fail(kind)) == ("ignored" if effect is HealthEffect.NONE else "failure")


def test_classify_examples() -> None:
    assert classify(None) == "success"
    for kind in (
        FailureKind.INVALID_REQUEST,
        FailureKind.CONTEXT_OVERFLOW,
        FailureKind.CONTENT_FILTERED,
        FailureKind.SCHEMA_INVALID,
        FailureKind.TOOL_CALL_MALFORMED,
        FailureKind.DEADLINE_EXHAUSTED,
    ):
        assert classify(fail(kind)) == "ignored"
    assert classify(E503) == classify(E429) == "failure"


# -- the board --------------------------------------------------------------------------------


def attempt(board: BreakerBoard, t: Target, failure: Failure | None, now: float = 0.0) -> str | None:
    permits, why = board.admit(t, now)
    if why is None:
        assert len(permits) == 2
        board.record(t, permits, failure, 0.5, now)
    else:
        assert permits == []
    return why


def test_a_429_on_key_a_opens_only_key_a_key_model_breaker() -> None:
    # the target breaker is provider-wide here, so "not the whole provider" is visible
    board = BreakerBoard(Cfg(min_calls=5, window_size=5), scope=lambda t: t.base_url)
    a, b = target("a", "KEY_A"), target("b", "KEY_B")
    for _ in range(5):
        assert attempt(board, a, E429) is None
    assert board.key_breaker(a).state(0.0) is OPEN
    assert board.key_breaker(b).state(0.0) is CLOSED
    assert board.breaker(a) is board.breaker(b)  # one provider-wide target breaker...
    assert board.breaker(a).state(0.0) is CLOSED  # ...that the 429s did not touch
    assert board.breaker(a).snapshot(0.0).calls == 0
    assert attempt(board, a, None, 1.0) == "key+model circuit open for 29.0s more (5/5 failed)"
    assert board.rejection(a, 1.0) == "key+model circuit open for 29.0s more (5/5 failed)"
    assert attempt(board, b, None, 1.0) is None
    assert board.rejection(b, 1.0) is None
    assert board.key_breaker(a).scope == key_model_scope(a) == "http://p.fake/v1|KEY_A|m1"


def test_a_429_on_one_key_does_not_touch_another_region_of_the_same_key() -> None:
    board = BreakerBoard(Cfg(min_calls=2, window_size=2))
    us, eu = target("us", region="us"), target("eu", region="eu")
    assert board.breaker(us) is not board.breaker(eu)
    assert board.key_breaker(us) is board.key_breaker(eu)  # same key + model: same quota
    attempt(board, us, E429)
    attempt(board, eu, E429)
    assert board.rejection(us, 0.0) == board.rejection(eu, 0.0) is not None
    assert board.breaker(us).state(0.0) is board.breaker(eu).state(0.0) is CLOSED


def test_the_responses_api_fails_apart_from_chat_completions_but_shares_its_quota() -> None:
    board = BreakerBoard(Cfg(min_calls=2, window_size=2))
    chat = target("chat")
    responses = replace(chat, name="responses", dialect=Dialect.OPENAI_RESPONSES)
    assert board.breaker(chat) is not board.breaker(responses)
    assert board.key_breaker(chat) is board.key_breaker(responses)  # one key + model: one quota
    attempt(board, chat, E503)
    attempt(board, chat, E503)
    assert board.breaker(chat).state(0.0) is OPEN
    assert board.rejection(responses, 0.0) is None  # the other API is still called
    attempt(board, responses, E429)
    attempt(board, responses, E429)
    assert board.rejection(responses, 0.0) == "key+model circuit open for 30.0s more (2/2 failed)"
    assert board.key_breaker(chat).state(0.0) is OPEN  # the 429s on one API hold the other too


def test_provider_failures_open_the_target_breaker_not_the_key_breaker() -> None:
    board = BreakerBoard(Cfg(min_calls=3, window_size=3))
    a = target()
    for _ in range(3):
        attempt(board, a, E503)
    assert board.breaker(a).state(0.0) is OPEN
    assert board.key_breaker(a).snapshot(0.0).calls == 0
    assert attempt(board, a, None, 0.0) == "circuit open for 30.0s more (3/3 failed)"


@pytest.mark.parametrize(
    "kind", [k for k in FailureKind if DISPOSITIONS[k].health is HealthEffect.NONE], ids=lambda k: str(k)
)
def test_caller_faults_never_open_anything(kind: FailureKind) -> None:
    board = BreakerBoard(Cfg(min_calls=1, window_size=1, failure_rate=0.01))
    a = target()
    for i in range(100):
        assert attempt(board, a, fail(kind), float(i)) is None
    assert {(s.state, s.calls) for s in board.snapshots(100.0)} == {(CLOSED, 0)}


def test_admit_gives_back_the_first_permit_when_the_second_breaker_rejects() -> None:
    board = BreakerBoard(Cfg(min_calls=1, window_size=1, half_open_probes=1))
    a = target()
    attempt(board, a, E503, 0.0)  # target breaker open until 30
    attempt(board, a, None, 30.0)  # its probe succeeds: closed (closing needs 1 success)
    attempt(board, a, E503, 31.0)  # open again, until 61
    p, why = board.admit(a, 61.0)  # probe
    assert why is None
    board.record(a, p, E429, 0.5, 61.5)  # probe's 429: target probe ignored, key breaker opens
    assert board.breaker(a).state(61.5) is HALF
    assert board.key_breaker(a).state(61.5) is OPEN
    assert board.admit(a, 62.0) == ([], "key+model circuit open for 29.5s more (1/1 failed)")
    assert board.breaker(a).snapshot(62.0).probes_in_flight == 0  # the probe slot was given back


def test_discard_releases_without_a_verdict() -> None:
    board = BreakerBoard(Cfg(min_calls=1, window_size=1))
    a = target()
    permits, _ = board.admit(a, 0.0)
    board.discard(permits, 0.0)
    assert all(p.released for p in permits)
    assert [s.calls for s in board.snapshots(0.0)] == [0, 0]
    with pytest.raises(RuntimeError):
        board.record(a, permits, None, 0.1, 0.0)


def test_record_refuses_permits_of_another_target() -> None:
    board = BreakerBoard()
    permits, _ = board.admit(target("a", "KEY_A"), 0.0)
    with pytest.raises(ValueError, match="recorded against target 'b'"):
        board.record(target("b", "KEY_B"), permits, None, 0.1, 0.0)
    assert not any(p.released for p in permits)


def test_a_board_knows_which_breakers_are_not_closed() -> None:
    # rejection and hold answer at once while every breaker is closed: the board follows each
    # breaker's transitions, and one that is open (or half-open) anywhere is asked again
    board = BreakerBoard(Cfg(min_calls=1, window_size=1, half_open_probes=1))
    a, b = target("a", "KEY_A"), target("b", "KEY_B")
    attempt(board, a, E503, 0.0)  # a's target breaker: open until 30
    assert board.rejection(a, 1.0) == "circuit open for 29.0s more (1/1 failed)"
    assert board.hold(a, 1.0) is not None
    assert board.rejection(b, 1.0) is None and board.hold(b, 1.0) is None
    permits, why = board.admit(a, 30.0)  # the probe: half-open, its one slot taken
    assert why is None
    assert board.rejection(a, 30.0) == "half-open: 1 probes already in flight"
    board.record(a, permits, None, 0.5, 30.5)  # it succeeds: closed again
    assert board.breaker(a).state(30.5) is CLOSED
    assert board.rejection(a, 30.5) is None and board.hold(a, 30.5) is None
    attempt(board, b, E429, 31.0)  # b's key + model breaker opens
    assert board.rejection(b, 31.0) == "key+model circuit open for 30.0s more (1/1 failed)"
    assert board.rejection(a, 31.0) is None  # another key


def test_a_board_scopes_each_target_object_and_forgets_them_past_its_bound() -> None:
    board = BreakerBoard(Cfg(min_calls=1, window_size=1))
    a = target("a", region="us")
    attempt(board, a, E503, 0.0)
    eu = replace(a, region="eu")  # another object, another scope: another target breaker
    assert board.rejection(eu, 1.0) is None and board.breaker(eu) is not board.breaker(a)
    many = [target(f"t{i}", credential=f"KEY_{i}") for i in range(SCOPES_KEPT + 10)]
    for t in many:
        assert board.rejection(t, 1.0) is None
    assert len(board._scopes) <= SCOPES_KEPT  # bounded: the earliest were forgotten...
    assert board.rejection(a, 1.0) == "circuit open for 29.0s more (1/1 failed)"  # ...and found again
    assert board.breaker(replace(a, name="a2")) is board.breaker(a)  # same scope, same breaker


def test_hooks_get_events_in_order() -> None:
    seen: list[tuple[str, str, str]] = []
    board = BreakerBoard(
        Cfg(min_calls=2, window_size=2, half_open_probes=1, probe_successes_to_close=1),
        hooks=[lambda e: seen.append((e.layer, e.old.value, e.new.value))],
    )
    a = target()
    attempt(board, a, E503, 0.0)  # target 1/1 (fewer than min_calls); key: ignored
    attempt(board, a, E503, 1.0)  # target 2/2: open
    assert attempt(board, a, E429, 1.0) is not None  # rejected by the target breaker: the key breaker sees nothing
    attempt(board, a, None, 31.0)  # target: half-open, the probe succeeds, closed; key: 0/1
    attempt(board, a, E429, 32.0)  # target: ignored; key: 1/2 failed: open
    assert seen == [
        ("target", "closed", "open"),
        ("target", "open", "half_open"),
        ("target", "half_open", "closed"),
        ("key_model", "closed", "open"),
    ]


def test_a_failing_hook_is_logged_and_breaks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[BreakerState] = []

    def broken(e: BreakerEvent) -> None:
        raise RuntimeError("metrics backend down")

    board = BreakerBoard(Cfg(min_calls=1, window_size=1), hooks=[broken, lambda e: seen.append(e.new)])
    a = target()
    with caplog.at_level(logging.ERROR, logger="failover.breaker"):
        attempt(board, a, E503, 0.0)
        assert attempt(board, a, None, 30.0) is None
    assert seen == [OPEN, HALF]
    assert board.breaker(a).state(30.0) is HALF
    assert [r.name for r in caplog.records] == ["failover.breaker", "failover.breaker"]
    assert "metrics backend down" in caplog.text


def test_snapshots_for_metrics() -> None:
    board = BreakerBoard(Cfg(min_calls=4, window_size=4))
    a = target()
    attempt(board, a, E503, 0.0)
    attempt(board, a, None, 0.0)
    attempt(board, a, E429, 0.0)
    tgt, key = board.snapshots(0.0)
    assert (tgt.layer, tgt.scope, tgt.state, tgt.calls, tgt.failures, tgt.failure_rate) == (
        "target",
        a.scope,
        CLOSED,
        2,
        1,
        0.5,
    )
    assert (key.layer, key.calls, key.failures, key.open_count, key.retry_at) == ("key_model", 2, 1, 0, None)


# -- concurrency on loop time -----------------------------------------------------------------


@pytest.mark.looptime
async def test_100_arrivals_at_the_end_of_the_open_period_let_exactly_n_probes_through() -> None:
    loop = asyncio.get_running_loop()
    n = 3
    board = BreakerBoard(Cfg(min_calls=4, window_size=4, open_duration=30.0, half_open_probes=n))
    a = target()
    for _ in range(4):
        attempt(board, a, E503, loop.time())
    reopen = board.breaker(a).retry_at
    assert reopen is not None
    reached: list[float] = []
    rejected: list[str] = []

    async def provider() -> None:  # a fake provider that takes 2 s to answer
        reached.append(loop.time())
        await asyncio.sleep(2.0)

    async def request() -> None:
        await asyncio.sleep(reopen - loop.time())
        permits, why = board.admit(a, loop.time())
        if why is not None:
            rejected.append(why)
            return
        start = loop.time()
        try:
            await provider()
        except BaseException:
            board.discard(permits, loop.time())
            raise
        board.record(a, permits, None, loop.time() - start, loop.time())

    await asyncio.gather(*(request() for _ in range(100)))
    assert reached == [reopen] * n
    assert rejected == [f"half-open: {n} probes already in flight"] * (100 - n)
    assert board.breaker(a).state(loop.time()) is CLOSED
    assert loop.time() == pytest.approx(reopen + 2.0)


# -- the window, checked against a direct computation ----------------------------------------

steps = st.lists(
    st.tuples(
        st.sampled_from(["success", "failure", "ignored"]),
        st.floats(min_value=0.0, max_value=20.0),  # duration
        st.floats(min_value=0.0, max_value=4.0),  # time to the next call
    ),
    max_size=120,
)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["count", "time"]),
    size=st.integers(1, 12),
    min_calls_frac=st.floats(0.0, 1.0),
    failure_rate=st.sampled_from([0.2, 0.5, 0.75, 1.0]),
    slow_call_rate=st.sampled_from([0.5, 1.0]),
    seq=steps,
)
def test_reported_rates_equal_the_window_contents(
    kind: str,
    size: int,
    min_calls_frac: float,
    failure_rate: float,
    slow_call_rate: float,
    seq: list[tuple[Outcome, float, float]],
) -> None:
    cfg = Cfg(
        window_kind=kind,  # type: ignore[arg-type]
        window_size=size,
        window_seconds=size,
        min_calls=max(1, round(min_calls_frac * size)),
        failure_rate=failure_rate,
        slow_call_rate=slow_call_rate,
        slow_call_duration=10.0,
        open_duration=5.0,
        half_open_probes=1,
    )
    events: list[BreakerEvent] = []
    b = CircuitBreaker(cfg, "s", events.append)
    recorded: list[tuple[float, bool, bool]] = []  # since the last state change

    def window(now: float) -> list[tuple[float, bool, bool]]:
        if kind == "count":
            return recorded[-size:]
        return [r for r in recorded if math.floor(r[0]) > math.floor(now) - size]

    now = 0.0
    for outcome, duration, dt in seq:
        now += dt
        before = len(events)
        state = b.state(now)
        p: Permit | None = b.try_acquire(now)
        if len(events) != before:
            recorded.clear()
        if p is None:
            assert state is OPEN
        else:
            before = len(events)
            b.release(p, now, outcome=outcome, duration=duration)
            if outcome != "ignored":
                recorded.append((now, outcome == "failure", duration > 10.0))
            w = window(now)
            calls = len(w)
            fails = sum(f for _, f, _ in w)
            slows = sum(s for _, _, s in w)
            should_open = state is CLOSED and calls >= cfg.min_calls and outcome != "ignored"
            should_open = should_open and (
                fails / calls >= failure_rate or (slow_call_rate < 1.0 and slows / calls >= slow_call_rate)
            )
            if state is CLOSED:
                assert (len(events) > before) == should_open
            if len(events) != before:
                recorded.clear()
        w = window(now)
        snap = b.snapshot(now)
        assert snap.calls == len(w)
        assert snap.failure_rate == (sum(f for _, f, _ in w) / len(w) if w else 0.0)
        assert snap.slow_rate == (sum(s for _, _, s in w) / len(w) if w else 0.0)
