"""The recovery engine alone: a pure function of the request's state, driven on a clock of its own.

No event loop, no network: each test builds a RunState and a Lane, asks ``decide`` and checks
the answer; ``drive`` carries decisions out on a simulated clock against a fault schedule, the
way the router's loop does, so the composition of every admission check can be checked over
random schedules (hypothesis) without sleeping.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover import Dialect, Envelope, Failure, FailureKind, Phase, Request, Target, Timeouts
from failover.model import ExclusionCode, TimeoutPhase
from failover.policy import Backoff, BackoffDecision, Candidate, RetryBudget
from failover.policy._selection import Hold
from failover.router._conclude import conclude
from failover.router._engine import (
    QUIET_SHARE,
    RESERVE_FACTOR,
    UNKNOWN_LATENCY,
    Decision,
    Go,
    Lane,
    Next,
    Repair,
    RunState,
    Sleep,
    Stop,
)
from failover.router._engine import decide as _decide

REQ = Request.simple("hi")


def tgt(
    name: str, *, attempts: int = 3, cap: float = 2.0, upstream: str | None = None, min_useful: float = 0.05
) -> Target:
    """A target; ``upstream`` names another target whose endpoint and model it shares (another key)."""
    return Target(
        name=name,
        dialect=Dialect.OPENAI,
        model=f"m-{upstream or name}",
        base_url=f"http://{upstream or name}.test/v1",
        credential=f"KEY_{name.upper()}",
        timeouts=Timeouts(connect=cap, total=cap, min_useful=min_useful),
        max_attempts=attempts,
    )


def pool(t: Target) -> str:
    return RetryBudget().pool_of(t)


@dataclass
class Policies:
    """The policy objects' answers as plain data; the budget is a real RetryBudget."""

    budget: RetryBudget = field(default_factory=lambda: RetryBudget(ratio=0.1, floor=10))
    holds: dict[str, Hold] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    block: dict[str, float] = field(default_factory=dict)
    windows: dict[str, int | None] = field(default_factory=dict)  # learned windows (by target name)
    backoff_: Backoff = field(default_factory=lambda: Backoff(base=0.2, cap=1.0))
    rng: random.Random = field(
        default_factory=lambda: random.Random(7)
    )  # passed to decide, as the router passes its own

    def pool(self, target: Target) -> str:
        return self.budget.pool_of(target)

    def budget_left(self, pool: str, now: float) -> int:
        return self.budget.available(now, pool)

    def hold(self, target: Target, now: float) -> Hold | None:
        h = self.holds.get(target.name)
        return h if h is not None and h.until > now else None

    def limiter_wait(self, target: Target, input_tokens: int, max_output_tokens: int, now: float) -> float:
        return self.block.get(target.name, 0.0)

    def expected_latency(self, target: Target) -> float | None:
        return self.latency.get(target.name)

    def backoff(self, failure: Failure, replay: int, rng: random.Random) -> BackoffDecision:
        return self.backoff_.wait(failure, replay, rng)

    def window(self, target: Target) -> int | None:
        return self.windows.get(target.name, target.context_window)


def decide(s: RunState, ln: Lane, p: Policies, now: float) -> Decision:
    """The engine's decision, its backoff jitter drawn from ``p.rng`` (as the router passes its own)."""
    return _decide(s, ln, p, now, p.rng)


def state(*targets: Target, budget: float = 5.0, env: Envelope | None = None, **kw: object) -> RunState:
    phases = [Phase.PRIMARY] + [Phase.FALLBACK] * (len(targets) - 1)
    env = env or Envelope(budget=budget)
    return RunState(
        envelope=env,
        t0=0.0,
        deadline_at=env.budget,
        candidates=tuple(Candidate(target=t, phase=p) for t, p in zip(targets, phases, strict=True)),
        **kw,  # type: ignore[arg-type]
    )


def lane(s: RunState, i: int = 0) -> Lane:
    c = s.candidates[i]
    return Lane(target=c.target, phase=c.phase, request=REQ, after=i + 1)


def failed(s: RunState, ln: Lane, f: Failure, at: float) -> None:
    """Book one paid, failed attempt on the lane (as the loop does)."""
    s.pay(ln, pool(ln.target), pool(ln.target) in s.pools)
    s.attempted(ln, f, at)


OVERLOADED = Failure(kind=FailureKind.PROVIDER_OVERLOADED, message="503", status=503)
HANG = Failure(kind=FailureKind.TIMEOUT, phase=TimeoutPhase.TOTAL, message="cut at its cap")


def limited(seconds: float) -> Failure:
    return Failure(kind=FailureKind.RATE_LIMITED, message="429", status=429, retry_after=seconds)


# -- single decisions ----------------------------------------------------------------------------


def test_a_fresh_lane_deposits_and_keeps_the_next_tier_its_time() -> None:
    # alone on its route, the first attempt has the whole deadline and no silence cap
    solo = state(tgt("a"))
    assert decide(solo, lane(solo), Policies(), 0.0) == Go(pool=ANY, until=5.0, retry=False)
    # with an eligible next candidate, a first attempt too ends by the deadline less b's reserve,
    # and may stay silent for at most QUIET_SHARE of the time it has
    s = state(tgt("a"), tgt("b"))
    d = decide(s, lane(s), Policies(), 0.0)
    keep = 0.05 + UNKNOWN_LATENCY
    assert d == Go(
        pool=ANY, until=pytest.approx(5.0 - keep), retry=False, quiet=pytest.approx(QUIET_SHARE * (5.0 - keep))
    )
    # fallback_reserve: 0 keeps nothing back (the old rule: the next tier may never be called)
    s0 = state(tgt("a"), tgt("b"), fallback_reserve=0.0)
    assert decide(s0, lane(s0), Policies(), 0.0) == Go(pool=ANY, until=5.0, retry=False)
    # too little time for both: the first candidate gets what is left rather than nothing
    tight = state(tgt("a"), tgt("b"), budget=1.0)
    assert decide(tight, lane(tight), Policies(), 0.0) == Go(pool=ANY, until=1.0, retry=False)


def test_a_target_that_was_silent_long_then_failed_is_not_replayed_while_another_can_answer() -> None:
    p = Policies(backoff_=Backoff(base=0.0, cap=0.0))
    s = state(tgt("a", attempts=2), tgt("b"), budget=30.0)
    ln = lane(s)
    ln.took = 15.0  # silent for 15 s, then the connection closed
    failed(s, ln, Failure(kind=FailureKind.TRANSPORT_TRANSIENT, message="closed"), at=15.0)
    d = decide(s, ln, p, 15.0)
    assert isinstance(d, Next) and "took 15.000s: b is tried at once" in (d.reason or "")
    # a fast drop is replayed as before
    s2 = state(tgt("a", attempts=2), tgt("b"), budget=30.0)
    ln2 = lane(s2)
    ln2.took = 0.01
    failed(s2, ln2, Failure(kind=FailureKind.TRANSPORT_TRANSIENT, message="reset"), at=0.01)
    assert isinstance(decide(s2, ln2, p, 0.01), Go)


def test_a_wait_that_the_envelope_would_refuse_is_not_slept_and_the_hint_is_kept() -> None:
    """max_attempts 1 and a 429 with retry-after 3: the answer is Stop, now, not Sleep(3)."""
    s = state(tgt("a"), env=Envelope(budget=10, max_attempts=1))
    ln = lane(s)
    failed(s, ln, limited(3.0), at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Stop) and d.kind is FailureKind.RATE_LIMITED and "max_attempts 1 spent" in d.message
    s.note_end("a", ln.failure, ln.failed_at)
    assert s.retry_after(0.1) == pytest.approx(3.1)  # the provider's own Retry-After reaches the caller


def test_a_replay_the_budget_refuses_is_not_slept_and_the_fallback_may_still_go() -> None:
    p = Policies(budget=RetryBudget(ratio=0.0, floor=0))
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=0.01)
    d = decide(s, ln, p, 0.01)
    assert isinstance(d, Next) and d.budget_spent and d.temporary
    assert d.reason == (
        "no replay: the retry budget of a's upstream (http://a.test/v1|m-a) is spent: it is failing for many requests"
    )
    # B's pool is its own: its first attempt deposits there, whatever A's pool has left
    assert decide(s, lane(s, 1), p, 0.01) == Go(pool=ANY, until=5.0, retry=False)


def test_another_key_of_the_same_upstream_shares_its_pool_another_region_does_not() -> None:
    p = Policies(budget=RetryBudget(ratio=0.0, floor=0))
    s = state(tgt("a"), tgt("a2", upstream="a"), tgt("eu"))
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=0.01)
    s.leave(ln, Next())
    d = decide(s, lane(s, 1), p, 0.01)
    assert isinstance(d, Next) and d.budget_spent and "the retry budget of a2's upstream" in (d.reason or "")
    assert decide(s, lane(s, 2), p, 0.01) == Go(pool=ANY, until=5.0, retry=False)


def test_after_a_key_fault_another_key_of_the_pool_deposits_the_same_key_withdraws() -> None:
    """A 429 (a quota, a refused key) is the key's own fault: the failover to another key of the
    same upstream is that key's first attempt, while a replay to the same key withdraws."""
    p = Policies(budget=RetryBudget(ratio=0.0, floor=0))  # no extra attempt allowed at all
    for fault in (limited(0.0), Failure(kind=FailureKind.AUTHENTICATION_OR_PERMISSION, message="401", status=401)):
        s = state(tgt("a"), tgt("a2", upstream="a"))
        ln = lane(s)
        failed(s, ln, fault, at=0.01)
        if fault.kind is FailureKind.RATE_LIMITED:  # the same key again: an extra attempt, refused
            d = decide(s, ln, p, 0.01)
            assert isinstance(d, Next) and d.budget_spent, d
        s.leave(ln, Next())
        ln2 = lane(s, 1)
        assert decide(s, ln2, p, 0.01) == Go(pool=ANY, until=5.0, retry=False), fault.kind
        s.pay(ln2, pool(ln2.target), False)
        s.attempted(ln2, limited(0.0), 0.02)  # a2 answers 429 too: replaying a2 is extra
        assert isinstance(decide(s, ln2, p, 0.02), Next)
    # while a's attempt is still running (a hedge), another key of its pool is an extra attempt
    s = state(tgt("a"), tgt("a2", upstream="a"))
    s.pay(lane(s), pool(tgt("a")), False)
    d = decide(s, lane(s, 1), p, 0.0)
    assert isinstance(d, Next) and d.budget_spent


def test_a_client_retry_deposits_nowhere() -> None:
    p = Policies(budget=RetryBudget(ratio=0.1, floor=0))
    s = state(tgt("a"), env=Envelope(budget=5, client_retry=True))
    d = decide(s, lane(s), p, 0.0)
    assert isinstance(d, Next) and d.budget_spent
    for _ in range(10):  # ten first attempts of other requests make room for one retry
        p.budget.record_request(0.0, pool(tgt("a")))
    assert decide(s, lane(s), p, 0.0) == Go(pool=ANY, until=5.0, retry=True)


def test_a_timeout_moves_to_the_next_eligible_candidate_at_once() -> None:
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, HANG, at=2.0)
    d = decide(s, ln, Policies(), 2.0)
    assert d == Next(ExclusionCode.NO_REPLAY, "no replay after timeout:total: b is tried at once")


def test_a_timeout_is_replayed_when_nothing_else_can_serve_or_the_route_says_so() -> None:
    s = state(tgt("a"))
    ln = lane(s)
    failed(s, ln, HANG, at=2.0)
    assert isinstance(decide(s, ln, Policies(), 2.0), Sleep)  # the last tier spends what it has
    for kw in ({"fallback_reserve": 0.0}, {"replay_timeouts": True}):
        s = state(tgt("a"), tgt("b"), **kw)
        ln = lane(s)
        failed(s, ln, HANG, at=2.0)
        assert isinstance(decide(s, ln, Policies(), 2.0), Sleep), kw


def test_a_held_next_candidate_does_not_count_as_an_alternative() -> None:
    p = Policies(holds={"b": Hold("b", 60.0, FailureKind.PROVIDER_OVERLOADED, "circuit open for 60.0s more")})
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, HANG, at=2.0)
    assert isinstance(decide(s, ln, p, 2.0), Sleep)


def test_a_replay_keeps_back_what_the_next_candidate_needs() -> None:
    p = Policies(latency={"b": 1.2}, backoff_=Backoff(base=0.0, cap=0.0))
    s = state(tgt("a"), tgt("b"), budget=5.0)
    ln = lane(s)
    failed(s, ln, OVERLOADED, at=1.0)
    d = decide(s, ln, p, 1.0)
    keep = 0.05 + RESERVE_FACTOR * 1.2  # twice the expected latency, never less than UNKNOWN_LATENCY
    assert d == Go(
        pool=ANY, until=pytest.approx(5.0 - keep), retry=True, quiet=pytest.approx(QUIET_SHARE * (4.0 - keep))
    )
    # late in the budget, the replay would eat into B's share: B goes instead
    s2 = state(tgt("a"), tgt("b"), budget=5.0)
    ln2 = lane(s2)
    failed(s2, ln2, OVERLOADED, at=2.6)
    d2 = decide(s2, ln2, p, 2.6)
    assert isinstance(d2, Next) and "it would leave b less than the 2.450s kept back for it" in (d2.reason or "")
    # an unknown latency is assumed, and a fixed reserve replaces the estimate
    assert decide(s, ln, Policies(backoff_=Backoff(base=0.0, cap=0.0)), 1.0) == Go(
        until=pytest.approx(5.0 - 0.05 - UNKNOWN_LATENCY),
        retry=True,
        pool=ANY,
        quiet=pytest.approx(QUIET_SHARE * (4.0 - 0.05 - UNKNOWN_LATENCY)),
    )
    s3 = state(tgt("a"), tgt("b"), fallback_reserve=0.5)
    ln3 = lane(s3)
    failed(s3, ln3, OVERLOADED, at=1.0)
    assert decide(s3, ln3, p, 1.0) == Go(pool=ANY, until=pytest.approx(4.5), retry=True, quiet=pytest.approx(1.75))


def test_a_hold_that_outlasts_the_wait_is_no_reason_to_sleep() -> None:
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, limited(1.0), at=0.1)
    hold = Hold("a", 30.0, FailureKind.PROVIDER_OVERLOADED, "circuit open for 29.9s more (4/4 failed)")
    d = decide(s, ln, Policies(holds={"a": hold}), 0.1)
    assert d == Next(
        ExclusionCode.HELD, "no replay: circuit open for 29.9s more (4/4 failed)", held=hold, temporary=True
    )
    # a cool-down that ends with the wait is no obstacle
    cool = Hold("a", 1.1, FailureKind.RATE_LIMITED, "cooling down")
    assert decide(s, ln, Policies(holds={"a": cool}), 0.1) == Sleep(1.0, "retry_after", True, pool(tgt("a")))


def test_a_limiter_without_room_for_the_replay_is_no_reason_to_sleep() -> None:
    s = state(tgt("a"), tgt("b"), budget=5.0)
    ln = lane(s)
    failed(s, ln, limited(1.0), at=0.1)
    d = decide(s, ln, Policies(block={"a": 10.0}), 0.1)  # its buckets have room only in 10 s
    assert isinstance(d, Next) and d.limited and d.held is not None and d.held.until == pytest.approx(10.1)
    assert "client-side rate limit: no room for 10.000s" in (d.reason or "")
    assert isinstance(decide(s, ln, Policies(block={"a": 0.5}), 0.1), Sleep)  # room before the wait ends


def test_added_latency_is_checked_for_the_moment_the_attempt_would_start() -> None:
    s = state(tgt("a"), tgt("b"), env=Envelope(budget=10, max_added_latency=0.5))
    ln = lane(s)
    failed(s, ln, limited(1.0), at=0.2)
    d = decide(s, ln, Policies(), 0.2)
    assert isinstance(d, Next) and "retry_after 1.000s would exceed max_added_latency 0.500s" in (d.reason or "")
    # B now is fine, and a limiter's queue may hold it until the added latency is spent
    assert decide(s, lane(s, 1), Policies(), 0.2) == Go(pool=ANY, until=10.0, retry=False, start_by=0.5)


def test_a_limiter_queue_longer_than_max_added_latency_moves_on_at_once() -> None:
    """The limiter's expected wait is added latency: a first attempt the queue would hold past
    max_added_latency is not made; the next candidate goes now (the deadline alone would allow it)."""
    s = state(tgt("a"), tgt("b"), env=Envelope(budget=30, max_added_latency=2.0))
    d = decide(s, lane(s), Policies(block={"a": 20.0}), 0.0)
    assert isinstance(d, Next) and d.limited and d.temporary and d.held is not None
    assert d.reason == "client-side rate limit: no room for 20.000s, past max_added_latency 2.000s"
    assert isinstance(decide(s, lane(s), Policies(block={"a": 1.5}), 0.0), Go)  # a queue within it is waited


def test_a_retry_after_longer_than_the_next_candidate_needs_moves_to_it_at_once() -> None:
    """The provider says A cannot answer for 20 s; B is expected to answer in far less: B goes
    now, and the Retry-After is kept for the caller should B fail too."""
    s = state(tgt("a"), tgt("b"), budget=30.0)
    ln = lane(s)
    failed(s, ln, limited(20.0), at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    keep = 0.05 + UNKNOWN_LATENCY
    assert d == Next(
        ExclusionCode.NO_REPLAY,
        f"no replay: retry_after 20.000s is longer than the {keep:.3f}s b needs: it is tried at once",
    )
    s.note_end("a", ln.failure, ln.failed_at)
    assert s.retry_after(0.1) == pytest.approx(20.1)
    # a wait shorter than what B needs is waited out on A (B is known to take 3 s: keep 6.05 s)
    for wait, p in ((0.8, Policies()), (5.0, Policies(latency={"b": 3.0}))):
        s2 = state(tgt("a"), tgt("b"), budget=30.0)
        ln2 = lane(s2)
        failed(s2, ln2, limited(wait), at=0.1)
        assert decide(s2, ln2, p, 0.1) == Sleep(wait, "retry_after", True, pool(tgt("a"))), wait
    # nothing else can answer (no next tier, a held one, or fallback_reserve=0 keeps nothing
    # for it): the Retry-After is waited out
    held = Policies(holds={"b": Hold("b", 60.0, FailureKind.PROVIDER_OVERLOADED, "circuit open")})
    for s3, p3 in (
        (state(tgt("a"), budget=30.0), Policies()),
        (state(tgt("a"), tgt("b"), budget=30.0), held),
        (state(tgt("a"), tgt("b"), budget=30.0, fallback_reserve=0.0), Policies()),
    ):
        ln3 = lane(s3)
        failed(s3, ln3, limited(20.0), at=0.1)
        assert decide(s3, ln3, p3, 0.1) == Sleep(20.0, "retry_after", True, pool(tgt("a")))
    # a backoff of our own (no Retry-After) is not cut short by it
    s4 = state(tgt("a"), tgt("b"), budget=30.0)
    ln4 = lane(s4)
    failed(s4, ln4, OVERLOADED, at=0.1)
    assert isinstance(decide(s4, ln4, Policies(backoff_=Backoff(base=5.0, cap=5.0)), 0.1), Sleep)


def test_a_retry_after_beyond_the_deadline_is_no_replay_and_says_so() -> None:
    s = state(tgt("a"), budget=2.0)
    ln = lane(s)
    failed(s, ln, limited(5.0), at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.reason == (
        "no replay: retry_after 5.000s + 0.050s for an attempt exceeds the 1.900s left"
    )
    assert not d.short_of_time  # the deadline is not spent: the provider asked for more than it has


def test_stop_and_repair_dispositions() -> None:
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, Failure(kind=FailureKind.INVALID_REQUEST, message="bad"), at=0.1)
    assert decide(s, ln, Policies(), 0.1) == Stop(FailureKind.INVALID_REQUEST, "a: bad", stopped=True)
    s = state(tgt("a"), tgt("b"))
    ln = lane(s)
    failed(s, ln, Failure(kind=FailureKind.TRUNCATED, message="cut"), at=0.1)
    assert decide(s, ln, Policies(), 0.1) == Repair()
    s.repair(ln, REQ)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Go) and d.retry  # the repair is an extra attempt on the same pool
    s.pay(ln, pool(ln.target), True)
    s.attempted(ln, Failure(kind=FailureKind.TRUNCATED, message="cut again"), 0.2)
    assert decide(s, ln, Policies(), 0.2) == Next(ExclusionCode.NO_REPAIR, "truncated and no repair left")


def test_conclude_names_the_deadline_the_holds_or_the_last_failure() -> None:
    s = state(tgt("a"), budget=1.0)
    assert conclude(s, [], [], 1.0, 1.0).kind is FailureKind.DEADLINE_EXHAUSTED
    s = state(tgt("a"))
    s.held(Hold("a", 9.0, FailureKind.PROVIDER_OVERLOADED, "open"))
    stop = conclude(s, [], [], 1.0, 5.0)
    assert (stop.kind, stop.retryable) == (FailureKind.PROVIDER_OVERLOADED, True)
    assert s.retry_after(1.0) == 9.0


def test_conclude_says_why_the_last_failure_was_not_tried_again() -> None:
    from failover.model import Attempt, Exclusion

    s = state(tgt("a"), budget=5.0)
    a = Attempt(
        index=0, target="a", model="m-a", phase=Phase.PRIMARY, start=0.0, end=0.1, connect_timeout=2.0,
        total_timeout=2.0, outcome="rate_limited", failure=limited(30.0),
    )  # fmt: skip
    why = "no replay: retry_after 30.000s + 0.050s for an attempt exceeds the 4.900s left"
    ex = Exclusion(target="a", phase=Phase.PRIMARY, code=ExclusionCode.SHORT_OF_TIME, reason=why, replay=True)
    stop = conclude(s, [a], [ex], 0.1, 5.0)
    assert stop.kind is FailureKind.RATE_LIMITED
    assert stop.message == f"every candidate failed (tried a); last failure on a: rate_limited: 429; {why}"


def test_the_retry_after_is_per_target_the_later_of_its_hint_and_its_hold() -> None:
    s = state(tgt("a"), tgt("b"))
    s.note_end("a", limited(4.0), 1.0)
    assert s.retry_after(1.0) == 5.0
    s.held(Hold("a", 31.0, FailureKind.RATE_LIMITED, "key+model circuit open"))  # its breaker outlasts the hint
    assert s.retry_after(1.0) == 31.0
    s.held(Hold("b", 12.0, FailureKind.PROVIDER_OVERLOADED, "circuit open"))  # the earliest target wins
    assert s.retry_after(1.0) == 12.0
    s.note_end("c", OVERLOADED, 1.0)  # a 503 with no hint: a retry might succeed at any moment
    assert s.retry_after(1.0) is None
    s.held(Hold("c", 20.0, FailureKind.PROVIDER_OVERLOADED, "circuit open"))  # unless its breaker opened
    assert s.retry_after(1.0) == 12.0


# -- composition: the engine driven over fault schedules -----------------------------------------

Fault = str  # "ok", "503", "500", "429:<s>", "hang", "reset"


@dataclass
class Run:
    result: str  # "ok:<target>" or the Stop kind
    elapsed: float
    calls: dict[str, int]
    decisions: list[tuple[float, str, Decision]]


def drive(
    s: RunState, p: Policies, faults: Callable[[str, int], Fault], latency: dict[str, float], *, deposit: bool = True
) -> Run:
    """Carry the engine's decisions out on a simulated clock, as the router's loop does."""
    now = s.t0
    calls: dict[str, int] = {}
    log: list[tuple[float, str, Decision]] = []
    for i in range(len(s.candidates)):
        ln = lane(s, i)
        while True:
            d = decide(s, ln, p, now)
            log.append((now, ln.target.name, d))
            if isinstance(d, Next):
                s.leave(ln, d)
                break
            if isinstance(d, Stop):
                return Run(d.kind.value, now - s.t0, calls, log)
            if isinstance(d, Repair):
                s.repair(ln, REQ)
                continue
            pool = p.pool(ln.target)
            if not ln.paid:
                if d.retry:
                    assert p.budget.try_withdraw(now, pool), "the engine let a retry go that the budget refuses"
                elif deposit:
                    p.budget.record_request(now, pool)
                s.pay(ln, pool, d.retry)
            if isinstance(d, Sleep):
                now += d.seconds
                ln.waited = True
                continue
            name = ln.target.name
            n = calls.get(name, 0)
            calls[name] = n + 1
            fault = faults(name, n)
            took = latency.get(name, 0.01)
            cap = min(ln.target.attempt_cap(), d.until - now)
            f: Failure | None
            if fault == "ok":
                if took > cap:
                    now, f = now + cap, HANG
                else:
                    now += took
                    s.attempted(ln, None, now)
                    return Run(f"ok:{name}", now - s.t0, calls, log)
            elif fault == "hang":
                now, f = now + cap, HANG
            elif fault.startswith("429:"):
                now, f = now + min(0.01, cap), limited(float(fault[4:]))
            elif fault == "500":
                now, f = now + min(0.01, cap), Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message="500")
            elif fault == "reset":
                now, f = now + min(0.01, cap), Failure(kind=FailureKind.TRANSPORT_TRANSIENT, message="reset")
            else:
                now, f = now + min(0.01, cap), OVERLOADED
            s.attempted(ln, f, now)
    stop = conclude(s, [], [], now, s.envelope.budget)
    return Run(stop.kind.value, now - s.t0, calls, log)


FAULTS = st.sampled_from(["503", "500", "429:0.3", "429:2", "429:30", "hang", "reset", "ok"])


@settings(max_examples=300, deadline=None)
@given(
    schedule=st.lists(FAULTS, min_size=1, max_size=8),
    attempts=st.integers(1, 6),
    cap=st.floats(0.2, 3.0),
    budget=st.floats(1.0, 12.0),
    b_latency=st.floats(0.05, 1.5),
    known=st.booleans(),
    max_attempts=st.integers(2, 8),
)
def test_a_healthy_fallback_answers_whatever_the_primary_does(
    schedule: list[Fault],
    attempts: int,
    cap: float,
    budget: float,
    b_latency: float,
    known: bool,
    max_attempts: int,
) -> None:
    """A fails on a random schedule; B is healthy. If B fits in what is left once A's first
    attempt is over, the caller gets an answer (A's or B's) within the budget; no wait is
    ever followed by a refusal; replays never end later than B's share of the deadline allows;
    no Retry-After longer than B needs is waited out."""
    a, b = tgt("a", attempts=attempts, cap=cap), tgt("b", attempts=1, cap=max(cap, b_latency + 0.01))
    p = Policies(latency={"b": b_latency} if known else {})
    s = state(a, b, budget=budget, env=Envelope(budget=budget, max_attempts=max_attempts))
    need_b = b.timeouts.min_useful + (b_latency if known else UNKNOWN_LATENCY)
    run = drive(s, p, lambda name, n: schedule[min(n, len(schedule) - 1)] if name == "a" else "ok", {"b": b_latency})
    assert run.elapsed <= budget + 1e-9
    # no wait slept before a refusal: after a Sleep, the same lane's next decision is an attempt
    for (_, who, d), (_, nxt_who, nxt) in zip(run.decisions, run.decisions[1:], strict=False):
        if isinstance(d, Sleep):
            assert nxt_who == who and isinstance(nxt, Go), (d, nxt)
    # a replay on A ends by the time B's share of the budget begins, and A's Retry-After is
    # waited out only when it is shorter than what B is expected to need
    keep_b = b.timeouts.min_useful + (max(UNKNOWN_LATENCY, RESERVE_FACTOR * b_latency) if known else UNKNOWN_LATENCY)
    for _, who, d in run.decisions:
        if who == "a" and isinstance(d, Go) and d.retry:
            assert d.until <= budget - need_b + 1e-9
        if who == "a" and isinstance(d, Sleep) and d.source == "retry_after":
            assert d.seconds <= keep_b + 1e-9, (d, keep_b)
    first_a = min(cap, budget)  # the first attempt on A is never cut short for B
    if budget - first_a >= need_b and b_latency <= need_b - b.timeouts.min_useful + 1e-9:
        assert run.result in ("ok:a", "ok:b"), run
    assert sum(run.calls.values()) <= max_attempts


@settings(max_examples=100, deadline=None)
@given(
    fault=st.sampled_from(["503", "500", "429:0.1", "reset"]),
    callers=st.integers(1, 300),
    attempts=st.integers(2, 5),
)
def test_a_failing_upstream_receives_at_most_its_budget_and_the_fallback_serves_everyone(
    fault: Fault, callers: int, attempts: int
) -> None:
    """Callers one after the other (each gets a fresh RunState) against A failing and a healthy
    B: A receives at most callers x (1 + ratio) + floor requests, and every caller is answered."""
    budget = RetryBudget(ratio=0.1, floor=10)
    p = Policies(budget=budget, latency={"b": 0.2}, backoff_=Backoff(base=0.01, cap=0.05))
    a_calls = 0
    answered = 0
    for i in range(callers):
        s = RunState(
            envelope=Envelope(budget=10),
            t0=i * 0.001,
            deadline_at=i * 0.001 + 10,
            candidates=(
                Candidate(target=tgt("a", attempts=attempts), phase=Phase.PRIMARY),
                Candidate(target=tgt("b", attempts=1), phase=Phase.FALLBACK),
            ),
        )
        run = drive(s, p, lambda name, n: fault if name == "a" else "ok", {"b": 0.2})
        a_calls += run.calls.get("a", 0)
        answered += run.result == "ok:b"
    assert answered == callers
    assert a_calls <= callers * 1.1 + 10


# -- context windows after an overflow ----------------------------------------------------------


def overflow(limit: int | None = None, used: int | None = None, total: bool = False) -> Failure:
    return Failure(
        kind=FailureKind.CONTEXT_OVERFLOW,
        message="400",
        status=400,
        window_limit=limit,
        window_used=used,
        window_includes_output=total,
    )


def windowed(name: str, window: int | None) -> Target:
    t = tgt(name)
    return Target(**{**{f: getattr(t, f) for f in t.__dataclass_fields__}, "context_window": window})


@pytest.mark.parametrize(
    ("failure", "a_window", "need"),
    [
        (overflow(4_096, 9_000), None, 9_100),  # input alone: + max_tokens
        (overflow(4_096, 9_000, total=True), None, 9_000),  # the total requested
        (overflow(4_096), 4_096, 4_097),  # no count: larger than the window that overflowed
        (overflow(), None, 50 + 100),  # nothing known: the local estimate
    ],
)
def test_after_an_overflow_the_request_needs_the_providers_count(
    failure: Failure, a_window: int | None, need: int
) -> None:
    s = state(windowed("a", a_window), windowed("b", need - 1), windowed("c", need), windowed("d", None))
    s.max_tokens, s.input_tokens = 100, lambda t: 50
    ln = lane(s)
    failed(s, ln, failure, at=0.1)
    d = decide(s, ln, Policies(), 0.1)
    assert isinstance(d, Next) and d.min_window == need
    s.leave(ln, d)
    small = decide(s, lane(s, 1), Policies(), 0.1)
    assert isinstance(small, Next) and (small.reason or "").startswith(f"context window {need - 1} (declared) cannot")
    assert isinstance(decide(s, lane(s, 2), Policies(), 0.1), Go)  # just large enough
    assert isinstance(decide(s, lane(s, 3), Policies(), 0.1), Go)  # unknown: tried


def test_a_learned_window_counts_as_known_to_the_engine() -> None:
    s = state(windowed("a", None), windowed("b", None))
    s.max_tokens = 100
    ln = lane(s)
    failed(s, ln, overflow(8_192, 9_631), at=0.1)
    s.leave(ln, decide(s, ln, Policies(), 0.1))
    d = decide(s, lane(s, 1), Policies(windows={"b": 9_000}), 0.1)
    assert d == Next(
        ExclusionCode.CONTEXT_WINDOW,
        "context window 9000 (stated by its provider) cannot hold the 9731 tokens this request needs "
        "(a reported 9631 input tokens (its limit 8192), + max_tokens 100)",
    )


def test_another_key_of_an_upstream_that_hung_leaves_the_next_tier_its_time() -> None:
    """A, B (another key of A's upstream) and the fallback C; A hung until its cut at 5 - 1.05 s.
    B, tried at 3.96 s, would leave C less than its reserve, and its upstream just hung: it is
    left, and C goes (B once took the whole deadline, hung too, and C was left 0 s). Another
    upstream in B's place, not known to hang, may still take the whole time left."""
    s = state(tgt("a"), tgt("b", upstream="a"), tgt("c"), budget=5.0)
    a = lane(s)
    failed(s, a, HANG, at=3.95)
    s.leave(a, Next())
    d = decide(s, lane(s, 1), Policies(), 3.96)
    assert isinstance(d, Next) and d.code is ExclusionCode.RESERVE
    assert d.reason == "it would leave c less than the 1.050s kept back for it (1.040s left)"
    assert isinstance(decide(s, lane(s, 2), Policies(), 3.96), Go)
    other = state(tgt("a"), tgt("b"), tgt("c"), budget=5.0)
    a = lane(other)
    failed(other, a, HANG, at=3.95)
    other.leave(a, Next())
    assert decide(other, lane(other, 1), Policies(), 3.96) == Go(until=5.0, retry=False, pool=ANY)
