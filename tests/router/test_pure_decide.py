"""decide is pure: asked twice about the same state it answers the same and changes nothing.

The engine is asked through the router's own Policies adapter over real boards (breakers,
health, retry budget, rate limits), so a read that moves a breaker, trims a budget or drops a
cool-down shows up here; the backoff's jitter comes from the source passed in.
"""

from __future__ import annotations

import copy
import random
from types import SimpleNamespace

import pytest

from failover import Dialect, Envelope, Failure, FailureKind, Phase, Request, Target, Timeouts
from failover.policy import Backoff, BreakerBoard, BreakerConfig, Candidate, HealthBoard, RetryBudget, WindowBoard
from failover.policy.breakers._board import BreakerEvent, BreakerState, CircuitBreaker
from failover.policy.limits._buckets import TokenBucket, WindowBucket
from failover.router._engine import Lane, RunState, Sleep, decide
from failover.router._router import _Policies

SERVER_ERROR = Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message="500", status=500)
LIMITED = Failure(kind=FailureKind.RATE_LIMITED, message="429", status=429, retry_after=0.5)
CONFIG = BreakerConfig(min_calls=1, window_size=1, open_duration=2.0)


def tgt(name: str) -> Target:
    return Target(
        name=name,
        dialect=Dialect.OPENAI,
        model=f"m-{name}",
        base_url=f"http://{name}.test/v1",
        credential=f"KEY_{name.upper()}",
        timeouts=Timeouts(connect=2.0, total=2.0, min_useful=0.05),
        max_attempts=3,
    )


A, B = tgt("a"), tgt("b")


def opened(board: BreakerBoard, target: Target, at: float) -> None:
    """One failed attempt on ``target`` at ``at``: its breaker opens for CONFIG.open_duration."""
    permits, why = board.admit(target, at)
    assert why is None
    board.record(target, permits, SERVER_ERROR, 0.1, at)
    assert board.breaker(target).state(at) is BreakerState.OPEN


def test_decide_twice_answers_the_same_and_changes_no_board() -> None:
    events: list[BreakerEvent] = []
    board = BreakerBoard(CONFIG, hooks=[events.append])
    opened(board, B, 0.0)  # B's breaker: open until 2.0, elapsed at 3.0
    health = HealthBoard()
    health.observe(A, LIMITED, 0.1, 0.0)  # A's key cools down until 0.5: over at 3.0
    budget = RetryBudget()
    parts = SimpleNamespace(
        retry_budget=budget, health=health, breakers=board, limiters=None, backoff=Backoff(), windows=WindowBoard()
    )
    p = _Policies(parts)  # type: ignore[arg-type]
    env = Envelope(budget=10.0)
    s = RunState(
        envelope=env,
        t0=0.0,
        deadline_at=env.budget,
        candidates=(Candidate(target=A, phase=Phase.PRIMARY), Candidate(target=B, phase=Phase.FALLBACK)),
    )
    ln = Lane(target=A, phase=Phase.PRIMARY, request=Request.simple("hi"), after=1, pool=budget.pool_of(A))
    s.pay(ln, ln.pool, False)
    s.attempted(ln, SERVER_ERROR, 2.9)  # A failed: a replay after a backoff
    events.clear()
    cooldowns = copy.deepcopy(health._cooldown)
    pools = dict(budget._pools)
    breaker_b = board.breaker(B)

    first = decide(s, ln, p, 3.0, random.Random(5))
    second = decide(s, ln, p, 3.0, random.Random(5))

    assert isinstance(first, Sleep) and first.source == "backoff" and first.seconds > 0
    assert first == second
    assert events == []  # B's elapsed breaker was asked about (next_eligible), and did not move
    assert breaker_b.retry_at == 2.0  # still open inside: it moves on the next permit
    assert breaker_b.state(3.0) is BreakerState.HALF_OPEN  # but reads as half-open
    assert health._cooldown == cooldowns  # A's expired cool-down was read, not dropped
    assert budget._pools == pools  # A's pool was asked, not made
    assert decide(s, ln, p, 3.0, random.Random(6)) != first  # the jitter is the source's


def test_reading_an_elapsed_breaker_moves_nothing_until_a_permit_is_taken() -> None:
    events: list[BreakerEvent] = []
    b = CircuitBreaker(CONFIG, "s", events.append)
    b.release(b.try_acquire(0.0), 0.0, outcome="failure", duration=0.1)  # type: ignore[arg-type]
    assert [e.new for e in events] == [BreakerState.OPEN]
    events.clear()

    for _ in range(2):
        assert b.state(2.5) is BreakerState.HALF_OPEN
        assert b.rejection(2.5) is None  # the next permit is a probe
        assert b.hold(2.5) is None
        snap = b.snapshot(2.5)
        assert snap.state is BreakerState.HALF_OPEN
        assert (snap.calls, snap.probes_in_flight, snap.retry_at, snap.open_for) == (0, 0, None, None)
        assert snap.open_count == 1
    assert events == []
    assert b.retry_at == 2.0  # the breaker itself is still open

    permit = b.try_acquire(2.5)
    assert permit is not None and permit.probe
    assert [(e.old, e.new, e.at) for e in events] == [(BreakerState.OPEN, BreakerState.HALF_OPEN, 2.5)]
    assert b.retry_at is None
    assert b.snapshot(2.5).probes_in_flight == 1


def test_a_time_window_read_drops_no_bucket() -> None:
    cfg = BreakerConfig(window_kind="time", window_seconds=10, min_calls=5)
    b = CircuitBreaker(cfg, "s")
    for t in (0.0, 1.0, 2.0):
        b.release(b.try_acquire(t), t, outcome="failure", duration=0.1)  # type: ignore[arg-type]
    assert b.snapshot(10.5).calls == 2  # the call at 0.0 left the window
    assert b.snapshot(5.0).calls == 3  # ... but a read for a later moment dropped nothing


def test_budget_available_is_a_read() -> None:
    budget = RetryBudget(ratio=0.5, floor=1, window=10.0)
    for t in (0.0, 1.0, 2.0, 3.0):
        budget.record_request(t, "p")
    assert budget.try_withdraw(3.0, "p")
    assert budget.available(3.0, "p") == 1 + 2 - 1
    assert budget.available(60.0, "p") == 1  # everything left the window by then
    assert budget.available(3.0, "p") == 2  # ... and a read for 60.0 trimmed nothing
    assert budget.available(3.0, "other") == 1  # an unknown pool reads as the floor
    assert set(budget._pools) == {"p"}  # ... and is not made
    budget.record_request(60.0, "p")  # writes trim
    assert list(budget._pools["p"].requests) == [60.0]


def test_health_cooling_is_a_read() -> None:
    health = HealthBoard()
    health.observe(A, LIMITED, 0.1, 0.0)
    assert health.cooling(A, 0.2) == (pytest.approx(0.3), LIMITED.label)
    table = dict(health._cooldown)
    assert health.cooling(A, 1.0) is None  # over
    assert health._cooldown == table  # ... and kept until the next write
    health.observe(B, LIMITED, 0.1, 1.0)  # a write drops what is over
    assert list(health._cooldown) == [HealthBoard.key_model(B)]


def test_bucket_reads_store_nothing() -> None:
    tb = TokenBucket(10, 1.0)
    assert tb.reserve(10, 0.0)
    assert tb.time_until(10, 20.0) == 0.0  # full again by 20.0
    assert tb.level(5.0) == 5.0  # a read for 20.0 did not refill it for 5.0
    assert tb.reserve(5, 5.0) and not tb.reserve(1, 5.0)

    wb = WindowBucket(10, 60.0)
    assert wb.reserve(10, 0.0)
    assert wb.level(61.0) == 10.0 and wb.time_until(10, 61.0) == 0.0
    assert wb.level(30.0) == 0.0  # the entry read as expired at 61.0 is still there at 30.0
    assert wb.time_until(3, 30.0) == 30.0
