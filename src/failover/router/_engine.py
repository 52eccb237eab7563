"""The recovery engine: what one request does next, as a pure function of its state.

The router's loop is thin: it asks :func:`decide` what to do, carries the answer out, and
asks again. Nothing here awaits, sleeps, draws a random number of its own or touches the
network; every policy object is asked through :class:`Policies`, whose answers are reads (a
breaker reports the state it has at ``now`` without moving to it or firing a hook), and a
backoff's jitter comes from the ``rng`` passed in: asked twice about the same state with
equally seeded sources, :func:`decide` answers the same and changes nothing. The loop makes
the changes (a breaker leaves open when the attempt takes its permit), and a test can drive
the engine over any fault schedule on a clock of its own (tests/router/test_engine.py)::

    while True:
        d = decide(state, lane, policies, now, rng)
        Go(until)           -> pay, attempt lane.target (its timeout ends by ``until``)
        Sleep(s, source)    -> pay, sleep s, then ask again (the wait is not drawn twice)
        Repair()            -> build the one repair request, then ask again
        Next(code, reason)  -> leave this candidate (record why), go to the next one
        Stop(kind, reason)  -> end the request now with an Unavailable

Every admission check (the envelope's attempts, added latency and cost, the time left, the
time kept back for the next tier, the breakers and cool-downs, the limiter's 429 block and
the upstream's retry budget) is answered for the moment the attempt would START, i.e. after
the wait: a wait that cannot end in an admitted attempt is never slept, and the provider's
Retry-After is kept for the caller instead.

**Retry budgets are per upstream.** A request's first attempt on a pool (by default one
provider endpoint and model, :meth:`RetryBudget.pool_of`) deposits into that pool's budget;
every further attempt on the same pool (a replay, a failover to another key of it, a repair)
withdraws, except that a failover to another key after a fault of the key itself (a 429, a
quota, a refused key: :data:`~._state.KEY_FAULTS`) is that key's first attempt (:meth:`RunState.charged`).
A failover to another region or a cross-model fallback is another pool's first
attempt, so an outage of one upstream throttles its own replays and never a fallback
elsewhere. A request that is a client's own retry (``Envelope.client_retry``) deposits
nowhere: each of its attempts withdraws, and no target is replayed (the client is the one
replaying): each candidate gets one attempt, failover and fallback go on as usual.

**Time for the next tier.** While an eligible next candidate exists, every attempt (a first one
too) keeps back what that candidate needs: the route's ``fallback_reserve``, or by default its
``min_useful`` plus :data:`RESERVE_FACTOR` times its expected latency from the health board
(never less than :data:`UNKNOWN_LATENCY`). ``Go.until`` is the deadline less that reserve, and
``Go.quiet`` lets an uncommitted stream stay silent at most :data:`QUIET_SHARE` of the time it
has (the loop lifts both once a stream's output is committed: the next tier is then out of
reach). A replay (or a repair) that would leave less, or take the envelope's last attempt,
goes to the next candidate instead, while that candidate could go (:func:`next_eligible`: not
left out by its canary draw, within max_cost, not held, with budget).
After a timeout, or a failure that came only after the
target was silent longer than the reserve, the engine moves to the next eligible candidate at
once: a target that just hung is expected to hang again (``Route.replay_timeouts`` overrides
either way). So does a Retry-After longer than that candidate's reserve: the provider says this
target cannot answer before the next one is expected to have answered (the key's cool-down
keeps the next requests away, and the hint still reaches the caller if everything fails).
``fallback_reserve=0`` keeps nothing back: attempts may spend the whole deadline,
and the next tier may never be called.
"""

from __future__ import annotations

import math
import random
from typing import Protocol

from ..model import Action, ExclusionCode, Failure, FailureKind, Target, usd
from ..policy import BackoffDecision, Hold
from ._state import Decision, Go, Lane, Next, Repair, RunState, Sleep, Stop

# A candidate the health board has not yet seen answer is assumed to need this long (seconds);
# it is also the least time kept back for a next tier.
UNKNOWN_LATENCY = 1.0
# The reserve for a next tier is this many times its expected latency (seed 003: a total timeout
# is the expected time times 2-3).
RESERVE_FACTOR = 2.0
# While a next tier waits and nothing was shown to the caller, a stream may stay silent (before
# its first event, between two events) for at most this share of the time its attempt has: a
# silent or stalled target leaves the rest to the next candidate, well inside the deadline.
QUIET_SHARE = 0.5
# A hold that ends within this long after an attempt would start is over: a wait of exactly the
# Retry-After ends at the cool-down's end, give or take the clock's rounding.
_EPS = 1e-3

# -- what the engine reads -----------------------------------------------------------------------


class Policies(Protocol):
    """The policy objects' answers, asked at the moment of a decision: reads only (nothing is
    created, trimmed or moved, no hook fires), so a decision can be asked again and again."""

    def pool(self, target: Target) -> str:
        """The retry-budget pool of ``target``."""
        ...

    def budget_left(self, pool: str, now: float) -> int:
        """Extra attempts the pool's retry budget still allows."""
        ...

    def hold(self, target: Target, now: float) -> Hold | None:
        """An open breaker or a cool-down keeping ``target`` away at ``now``, with the loop time
        it ends (an open breaker whose period has elapsed reads as half-open; it moves there
        only when an attempt takes its permit)."""
        ...

    def limiter_wait(self, target: Target, input_tokens: int, max_output_tokens: int, now: float) -> float:
        """At least how long the target's client-side limiter would make this request wait (a
        429 block, its buckets' room); 0 if nothing holds it."""
        ...

    def expected_latency(self, target: Target) -> float | None:
        """The health board's latency of a successful attempt on ``target``; None if unknown."""
        ...

    def backoff(self, failure: Failure, replay: int, rng: random.Random) -> BackoffDecision:
        """The wait before replay number ``replay`` (0 for the first) after ``failure``; its
        jitter is drawn from ``rng`` (the caller's, so equal sources give equal waits)."""
        ...

    def window(self, target: Target) -> int | None:
        """``target``'s known context window: declared, else the one its provider stated in an
        overflow error (policy.WindowBoard); None when unknown (then it is never skipped for it)."""
        ...


# -- the decision ---------------------------------------------------------------------------------


def action_of(failure: Failure) -> Action:
    """The failure's disposition, except that a failed quality gate moves on to another model."""
    if failure.quality_gate:
        return Action.NEXT
    return failure.disposition.action


def decide(state: RunState, lane: Lane, policies: Policies, now: float, rng: random.Random) -> Decision:
    """What ``lane`` does next. Pure: reads ``state``, ``lane`` and ``policies``, changes nothing of them;
    a backoff's jitter is the one draw, from ``rng`` (equally seeded sources, equal decisions)."""
    t = lane.target
    f = lane.failure
    env = state.envelope
    if (
        lane.fresh
        and f is None
        and state.launched == 0
        and env.max_cost is None
        and not env.client_retry
        and env.max_attempts > 0
        and env.max_added_latency is None
        and state.deadline_at - now >= t.timeouts.min_useful
        and not state.min_window
    ):
        # The request's first attempt, its holds just asked by the selection: the checks below
        # would all pass (nothing is spent, nothing waits, the pool is new to this request).
        # Only the time kept for the next tier is left to work out.
        until, quiet = state.deadline_at, math.inf
        if lane.after < len(state.candidates):
            until, quiet = _first_share(state, lane, policies, now)
        return Go(until, False, lane.pool or policies.pool(t), quiet)
    wait, source = 0.0, ""
    again = f is not None  # another attempt on the same target (a replay or the repair)
    if f is not None:
        action = action_of(f)
        if action is Action.STOP:
            return Stop(f.kind, f"{t.name}: {f.message}", stopped=True)
        if action is Action.NEXT:
            if f.kind is FailureKind.CONTEXT_OVERFLOW:
                tokens, why = window_need(state, t, f, policies)
                return Next(min_window=tokens, window_why=why)
            return Next()
        if action is Action.REPAIR:
            if not lane.repairing:
                if state.repaired or lane.no_repair:
                    return Next(ExclusionCode.NO_REPAIR, f"{f.kind} and no repair left")
                return Repair()
        else:  # Action.REPLAY
            if f.should_retry is False:
                return Next(
                    ExclusionCode.NO_REPLAY, f"no replay: the provider said x-should-retry: false after {f.label}"
                )
            if env.client_retry:
                return Next(
                    ExclusionCode.NO_REPLAY, f"no replay after {f.label}: the client is retrying this request itself"
                )
            if lane.tries >= t.max_attempts:
                return Next()
            if f.kind is FailureKind.TIMEOUT and not _replays_timeouts(state):
                nxt = next_eligible(state, lane, policies, now, now)
                if nxt is not None:
                    return Next(ExclusionCode.NO_REPLAY, f"no replay after {f.label}: {nxt.name} is tried at once")
            elif f.kind is not FailureKind.RATE_LIMITED and lane.took > 0 and not _replays_timeouts(state):
                # A target that kept the caller waiting longer than the next tier needs, then
                # failed without an answer (a silent connection closed, a slow 5xx), is expected
                # to do it again: the next candidate goes at once, as after a timeout.
                nxt = next_eligible(state, lane, policies, now, now)
                if nxt is not None and lane.took >= reserve_for(state, nxt, policies):
                    return Next(
                        ExclusionCode.NO_REPLAY,
                        f"no replay after {f.label} that took {lane.took:.3f}s: {nxt.name} is tried at once",
                    )
            if not lane.waited:
                d = policies.backoff(f, lane.tries - 1, rng)
                if not d.acceptable:
                    return Next(
                        ExclusionCode.NO_REPLAY,
                        f"no replay: {d.source} {d.seconds:.3f}s is longer than the {d.limit:.0f}s"
                        " waited on one target",
                    )
                if d.source == "retry_after" and state.fallback_reserve != 0:
                    # The provider says this target cannot answer before the wait ends: when the
                    # next candidate is expected to have answered by then, it goes at once.
                    nxt = next_eligible(state, lane, policies, now, now)
                    if nxt is not None and d.seconds > (keep := reserve_for(state, nxt, policies)):
                        return Next(
                            ExclusionCode.NO_REPLAY,
                            f"no replay: retry_after {d.seconds:.3f}s is longer than the {keep:.3f}s "
                            f"{nxt.name} needs: it is tried at once",
                        )
                wait, source = d.seconds, d.source
    at = now + wait
    prefix = "no replay: " if again else ""

    # The envelope: nothing at all may start once it is spent.
    made = state.launched - (1 if lane.paid else 0)  # a paid slot is this very attempt's
    if made >= env.max_attempts:
        return _spent(state, lane, now, ExclusionCode.MAX_ATTEMPTS, f"max_attempts {env.max_attempts} spent")
    if made and env.max_added_latency is not None:
        if now - state.t0 > env.max_added_latency:
            why = f"max_added_latency {env.max_added_latency:.3f}s spent"
            return _spent(state, lane, now, ExclusionCode.MAX_ADDED_LATENCY, why)
        if at - state.t0 > env.max_added_latency:
            return Next(
                ExclusionCode.MAX_ADDED_LATENCY,
                f"{prefix}{_waited(source, wait)} would exceed max_added_latency {env.max_added_latency:.3f}s",
            )

    # Time: the attempt's least useful time, and on the same target again, the next tier's share.
    need = t.timeouts.min_useful
    left = state.deadline_at - at
    if left < need:
        if again:
            return Next(
                ExclusionCode.SHORT_OF_TIME,
                f"no replay: {_waited(source, wait)} + {need:.3f}s for an attempt exceeds the "
                f"{max(0.0, state.deadline_at - now):.3f}s left",
                short_of_time=wait == 0,
            )
        return Next(
            ExclusionCode.SHORT_OF_TIME,
            f"only {max(0.0, left):.3f}s left, less than the {need:.3f}s an attempt needs",
            short_of_time=True,
        )
    # Until its output is committed, an attempt (a first one too) leaves the next eligible
    # candidate its reserve, and may stay silent for at most a share of the time it has.
    until, quiet = state.deadline_at, math.inf
    nxt = next_eligible(state, lane, policies, now, at) if lane.after < len(state.candidates) else None
    if nxt is not None:
        keep = reserve_for(state, nxt, policies)
        if again and made + 1 >= env.max_attempts and state.fallback_reserve != 0:
            return Next(
                ExclusionCode.MAX_ATTEMPTS,
                f"no replay: the last of max_attempts {env.max_attempts} is kept for {nxt.name}",
            )
        if (again or (lane.pool or policies.pool(t)) in state.hung) and left - keep < need:
            # Only a first attempt on an upstream may take the whole deadline when the reserve
            # leaves it too little: a replay, or another key of an upstream that just hung
            # (expected to hang again), leaves the next tier its time.
            return Next(
                ExclusionCode.RESERVE,
                f"{prefix}it would leave {nxt.name} less than the {keep:.3f}s kept back for it "
                f"({max(0.0, left):.3f}s left)",
            )
        until, quiet = _time_for(state, keep, at, need)

    if not again and state.min_window:
        known = policies.window(t)
        if known is not None and known < state.min_window:
            how = "declared" if t.context_window is not None else "stated by its provider"
            return Next(
                ExclusionCode.CONTEXT_WINDOW,
                f"context window {known} ({how}) cannot hold the {state.min_window} tokens {state.window_why}",
            )
    if env.max_cost is not None:
        est = attempt_cost(state, lane)
        # lanes still in flight (a hedge's lead, a lead's hedge) may cost their estimate too
        flying = sum(attempt_cost(state, other) for other in state.flying if other is not lane)
        if state.spent + flying + est > env.max_cost:
            also = f" and {usd(flying)} in flight" if flying else ""
            return Next(
                ExclusionCode.MAX_COST,
                f"{prefix}estimated cost {usd(est)} on top of {usd(state.spent)} spent{also} "
                f"exceeds max_cost {usd(env.max_cost)}",
            )

    # Health: a breaker or cool-down that still holds the target when the wait ends.
    if again or not lane.fresh:
        held = policies.hold(t, now)
        if held is not None and held.until > at + _EPS:
            return Next(ExclusionCode.HELD, f"{prefix}{held.reason}", held=held, temporary=True)
    # The client-side limiter's queue: the time it would hold the attempt is added latency.
    start_by = math.inf if env.max_added_latency is None else state.t0 + env.max_added_latency
    if wait > 0 or start_by < math.inf:  # else its own acquire refuses at once what cannot fit
        out = t.max_output_tokens if lane.max_tokens is None else lane.max_tokens
        room = policies.limiter_wait(t, state.input_tokens(t), out, now)
        if room > 0:
            past = None
            if now + room + need > until:
                past = "past the time this attempt has"
            elif max(at, now + room) > start_by:
                past = f"past max_added_latency {env.max_added_latency:.3f}s"
            if past is not None:
                return Next(
                    ExclusionCode.RATE_LIMITED,
                    f"{prefix}client-side rate limit: no room for {room:.3f}s, {past}",
                    held=Hold(t.name, now + room, FailureKind.RATE_LIMITED) if math.isfinite(room) else None,
                    temporary=True,
                    limited=True,
                )

    # The upstream's retry budget.
    pool = lane.pool or policies.pool(t)
    retry = state.charged(t, pool)
    if retry and not (lane.paid and lane.paid_retry) and policies.budget_left(pool, now) <= 0:
        return budget_spent(t, pool, prefix)
    if wait > 0:
        return Sleep(wait, source, retry, pool)
    return Go(until, retry, pool, quiet, start_by)


def budget_spent(target: Target, pool: str, prefix: str = "") -> Next:
    why = f"{prefix}the retry budget of {target.name}'s upstream ({pool}) is spent: it is failing for many requests"
    return Next(ExclusionCode.RETRY_BUDGET, why, temporary=True, budget_spent=True)


def _spent(state: RunState, lane: Lane, now: float, code: ExclusionCode, why: str) -> Next | Stop:
    """The envelope is spent: the request ends, unless another lane (a hedge, or the lead it
    races) is still under way; then only this lane ends and the other may still answer."""
    if any(other is not lane for other in state.running):
        if lane.hedge and not lane.tries:
            return Next(ExclusionCode.NO_HEDGE, f"no hedge: {why}")
        return Next(code, f"no replay: {why}")
    return Stop(_spent_kind(state, now), why)


def attempt_cost(state: RunState, lane: Lane) -> float:
    """The most ``lane``'s next attempt may cost: its input at the target's price, and as
    output the max_tokens that attempt sends (a repair's raised one, a max_tokens capped to
    the target's max output); with none, the most the target may write: its max output, within
    its window's room when the window is declared."""
    return cost_on(state, lane.target, lane.max_tokens)


def cost_on(state: RunState, target: Target, max_tokens: int | None) -> float:
    """The most an attempt on ``target`` that sends ``max_tokens`` may cost (see :func:`attempt_cost`)."""
    inp = state.input_tokens(target)
    out = max_tokens
    if out is None:
        out = target.max_output_tokens
        if target.context_window is not None:
            out = max(0, min(out, target.context_window - inp))
    return target.price.cost(inp, out)


def next_eligible(state: RunState, lane: Lane, policies: Policies, now: float, at: float) -> Target | None:
    """The first candidate after ``lane``'s group that could start at ``at`` (asked at ``now``):
    not refused already (a canary draw), with time and a window for the request, within
    max_cost on top of what is spent, not held, and with room in its pool's retry budget."""
    for cand in state.candidates[lane.after :]:
        t = cand.target
        if t.name in state.refused or state.deadline_at - at < t.timeouts.min_useful:
            continue
        cap = state.envelope.max_cost
        out = None if state.max_tokens is None else min(state.max_tokens, t.max_output_tokens)
        if cap is not None and state.spent + cost_on(state, t, out) > cap:
            continue
        if state.min_window and (known := policies.window(t)) is not None and known < state.min_window:
            continue
        h = policies.hold(t, now)
        if h is not None and h.until > at + _EPS:
            continue
        pool = policies.pool(t)
        if state.charged(t, pool) and policies.budget_left(pool, at) <= 0:
            continue
        return t
    return None


def window_need(state: RunState, target: Target, failure: Failure, policies: Policies) -> tuple[int, str]:
    """After ``failure``, a context overflow on ``target``: the tokens another candidate's window must hold,
    and where that number comes from. The provider's own count when it said one (plus the
    request's max_tokens when it counted the input alone); else a window larger than ``target``'s
    known one; else the local estimate of input + max_tokens."""
    out = state.max_tokens or 0
    stated = f" (its limit {failure.window_limit})" if failure.window_limit is not None else ""
    if failure.window_used is not None:
        if failure.window_includes_output or not out:
            return failure.window_used, f"{target.name} reported for this request{stated}"
        return (
            failure.window_used + out,
            f"this request needs ({target.name} reported {failure.window_used} input tokens{stated}, "
            f"+ max_tokens {out})",
        )
    known = policies.window(target)
    if known is not None:
        return known + 1, f"needed after {target.name}'s window of {known} overflowed"
    return state.input_tokens(target) + out, f"this request needs by the local estimate ({target.name} gave no numbers)"


def reserve_for(state: RunState, nxt: Target, policies: Policies) -> float:
    """The time kept back for ``nxt``: the route's fixed reserve, or its least useful time plus
    :data:`RESERVE_FACTOR` times its expected latency, and never less than
    :data:`UNKNOWN_LATENCY` (an answer's latency varies, and a streamed one takes longer than
    the plain calls that may have taught the health board)."""
    if state.fallback_reserve is not None:
        return state.fallback_reserve
    latency = policies.expected_latency(nxt)
    expected = UNKNOWN_LATENCY if latency is None else max(UNKNOWN_LATENCY, RESERVE_FACTOR * latency)
    return nxt.timeouts.min_useful + expected


def _first_share(state: RunState, lane: Lane, policies: Policies, now: float) -> tuple[float, float]:
    """A request's first attempt: ``(until, quiet)`` that leave the next eligible candidate its
    reserve; the whole deadline when there is none, or when the reserve leaves this attempt
    less than it needs."""
    nxt = next_eligible(state, lane, policies, now, now)
    if nxt is None:
        return state.deadline_at, math.inf
    return _time_for(state, reserve_for(state, nxt, policies), now, lane.target.timeouts.min_useful)


def _time_for(state: RunState, keep: float, at: float, need: float) -> tuple[float, float]:
    """``(until, quiet)`` of an uncommitted attempt starting at ``at`` that keeps ``keep`` seconds
    for the next tier; the whole deadline (a first attempt) when that would leave it less than
    the ``need`` it has to be worth starting."""
    until = state.deadline_at - keep
    if until - at < need:
        return state.deadline_at, math.inf
    return until, _quiet(state, until - at)


def _quiet(state: RunState, has: float) -> float:
    """How long an uncommitted stream may stay silent when a next tier waits: a share of the
    time the attempt has (none with ``fallback_reserve: 0``, which keeps nothing back)."""
    if state.fallback_reserve == 0:
        return math.inf
    return QUIET_SHARE * has


def _replays_timeouts(state: RunState) -> bool:
    if state.replay_timeouts is not None:
        return state.replay_timeouts
    return state.fallback_reserve is not None


def _waited(source: str, wait: float) -> str:
    return f"{source} {wait:.3f}s" if wait > 0 else "no wait"


def _spent_kind(state: RunState, now: float) -> FailureKind:
    """The kind of a request ended by its envelope: the latest failure's, or the deadline's."""
    if now >= state.deadline_at or state.last_failure is None:
        return FailureKind.DEADLINE_EXHAUSTED
    return state.last_failure


__all__ = [
    "QUIET_SHARE",
    "RESERVE_FACTOR",
    "UNKNOWN_LATENCY",
    "Decision",
    "Go",
    "Lane",
    "Next",
    "Policies",
    "Repair",
    "RunState",
    "Sleep",
    "Stop",
    "action_of",
    "attempt_cost",
    "budget_spent",
    "decide",
    "next_eligible",
    "reserve_for",
    "window_need",
]
