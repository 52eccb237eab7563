"""What the recovery engine reads and answers: one request's state (:class:`RunState`), one
candidate's attempts (:class:`Lane`), and the decisions (:class:`Go`, :class:`Sleep`,
:class:`Repair`, :class:`Next`, :class:`Stop`). The loop changes the state, only through the
methods here; :func:`~._engine.decide` only reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..model import EmbedRequest, Envelope, ExclusionCode, Failure, FailureKind, Phase, Request, Target
from ..policy import Candidate, Hold, key_model_scope

# Faults of one key, not of its upstream: a failover to another key of the same pool after one
# of them is that key's first attempt (see charged).
KEY_FAULTS = frozenset(
    {FailureKind.RATE_LIMITED, FailureKind.QUOTA_EXHAUSTED, FailureKind.AUTHENTICATION_OR_PERMISSION}
)


# -- what the engine may answer ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Go:
    """Start an attempt on the lane's target now.

    Until its output is committed to the caller, the attempt ends by loop time ``until`` (the
    deadline less what the next eligible candidate needs), and a stream may stay silent (before
    its first event, between events) at most ``quiet`` seconds. Once a stream is committed the
    next tier can no longer be used, so only the target's own timers and the deadline apply."""

    until: float
    retry: bool  # charged to the pool's retry budget (else it deposits: the pool's first attempt)
    pool: str = ""  # the retry-budget pool it draws on
    quiet: float = math.inf
    start_by: float = math.inf  # a client-side limiter's queue may hold it until then at most


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` (``source``: "backoff" or "retry_after"), then ask again.

    Everything that could refuse the attempt after the wait was asked already; the attempt
    slot and the retry-budget token are paid before the wait, so concurrent waiters cannot
    all wake up to a budget that was spent meanwhile."""

    seconds: float
    source: str
    retry: bool
    pool: str = ""


@dataclass(frozen=True, slots=True)
class Repair:
    """Build the one repair request of this request (raise max_tokens, send the error back)."""


@dataclass(frozen=True, slots=True)
class Next:
    """Leave this candidate. ``code`` and ``reason``: the exclusion to record (None: the attempts
    say why)."""

    code: ExclusionCode | None = None
    reason: str | None = None
    held: Hold | None = None  # turned away only for now (breaker, cool-down, limiter)
    temporary: bool = False  # the reason is a temporary one (held, or the retry budget)
    short_of_time: bool = False  # left because too little of the deadline remains
    budget_spent: bool = False
    limited: bool = False  # turned away by the client-side rate limiter
    # after a context overflow: the tokens a window must hold (a known smaller one cannot help),
    # and where that number comes from (see window_need)
    min_window: int = 0
    window_why: str = ""

    def __post_init__(self) -> None:
        if (self.code is None) != (self.reason is None):
            raise ValueError("an exclusion needs both its code and its reason")


@dataclass(frozen=True, slots=True)
class Stop:
    """End the request now: nothing else may be tried."""

    kind: FailureKind
    message: str
    stopped: bool = False  # a stop disposition (workflow 3), not just a spent envelope
    retryable: bool | None = None  # None: the kind's disposition says


Decision = Go | Sleep | Repair | Next | Stop


@dataclass(slots=True, kw_only=True)
class RunState:
    """What one request has done so far, across all its candidates. The loop updates it."""

    envelope: Envelope
    t0: float
    deadline_at: float
    candidates: tuple[Candidate, ...] = ()
    input_tokens: Callable[[Target], int] = field(default=lambda t: 0, repr=False)
    max_tokens: int | None = None  # the request's own limit, for cost estimates
    fallback_reserve: float | None = None  # the route's; None: automatic
    replay_timeouts: bool | None = None  # the route's; None: only with an explicit reserve
    launched: int = 0  # attempts started or paid for (a slept wait holds one), hedges included
    spent: float = 0.0  # USD, failed attempts included
    repaired: bool = False  # the one repair of this request was sent (built and refused: not used)
    min_window: int = 0  # after a context overflow: the tokens a known window must hold
    window_why: str = ""  # where min_window comes from (the provider's count, or a window)
    pools: set[str] = field(default_factory=set)  # pools this request has attempted
    keys: set[str] = field(default_factory=set)  # keys (key + model scopes) this request has attempted
    # per pool, this request's attempts on it that did not end in a key's own fault (in flight
    # ones included): while there is one, an attempt on another key of the pool is an extra one
    unexcused: dict[str, int] = field(default_factory=dict)
    # fallbacks that will refuse this request whatever happens (a canary draw), with why
    refused: dict[str, str] = field(default_factory=dict)
    # Why the request may come back later: the holds that kept candidates away (until, kind), and
    # per target the earliest moment it may answer again (its own Retry-After, its hold's end);
    # ``anytime``: targets whose retryable failure gave no hint (they may answer at any moment).
    holds: list[Hold] = field(default_factory=list)
    back: dict[str, float] = field(default_factory=dict)
    anytime: set[str] = field(default_factory=set)
    short_of_time: bool = False
    limited: bool = False  # a candidate was turned away by the client-side limiter
    budget_spent: bool = False
    last_failure: FailureKind | None = None  # of the request's latest failed attempt
    hung: set[str] = field(default_factory=set)  # pools an attempt of this request timed out on
    flying: list[Lane] = field(default_factory=list)  # lanes whose attempt is under way (not yet booked)
    running: list[Lane] = field(default_factory=list)  # lanes being tried (two while a hedge races its lead)

    # -- what the loop changes (state only; the I/O that goes with it is the loop's) ----------

    def pay(self, lane: Lane, pool: str, retry: bool) -> None:
        """The lane takes an attempt slot on ``pool`` (its key joins the request's keys)."""
        self.launched += 1
        lane.paid, lane.paid_retry, lane.fresh = True, retry, False
        if lane.repairing:  # the repair attempt is made: the request's one repair is used
            self.repaired = True
        lane.pool = pool
        self.pools.add(pool)
        self.keys.add(key_model_scope(lane.target))
        self.unexcused[pool] = self.unexcused.get(pool, 0) + 1

    def refund(self, lane: Lane) -> None:
        """The paid attempt was never made (a refusal after the wait)."""
        self.launched -= 1
        lane.paid = False
        if lane.repairing:  # the repair was not sent: it is still the request's to use
            self.repaired = False
        self.unexcused[lane.pool] -= 1

    def attempted(self, lane: Lane, failure: Failure | None, at: float) -> None:
        """The lane's paid attempt ended at ``at``, with ``failure`` (None: an answer)."""
        lane.tries += 1
        lane.paid = lane.sent = lane.waited = lane.repairing = False
        if failure is not None:
            lane.failure, lane.failed_at = failure, at
            self.last_failure = failure.kind
            if failure.kind in KEY_FAULTS:  # the key's own fault: another key of the pool is new
                self.unexcused[lane.pool] -= 1
            elif failure.kind is FailureKind.TIMEOUT:  # an upstream that hung: its other keys too
                self.hung.add(lane.pool)

    def charged(self, target: Target, pool: str) -> bool:
        """Whether an attempt on ``target`` now is an extra one on ``pool`` (it withdraws from the
        pool's retry budget) rather than a first one (it deposits).

        Every attempt of a client's own retry is extra. Otherwise an attempt is extra once this
        request tried the same key of the pool (a replay, the repair), or another key of it
        whose attempt did not end in that key's own fault (a 5xx, a timeout, a hedge still
        running): a 429, a quota or a refused key says nothing about the upstream, so the
        failover to another key after it is that key's first attempt."""
        if self.envelope.client_retry:
            return True
        if pool not in self.pools:
            return False
        return key_model_scope(target) in self.keys or self.unexcused.get(pool, 0) > 0

    def repair(self, lane: Lane, request: Request | None) -> None:
        """The repair request the loop built (None: none could be built for this failure)."""
        if request is None:
            lane.no_repair = True
        else:
            lane.repairing, lane.request, lane.phase = True, request, Phase.REPAIR

    def leave(self, lane: Lane, step: Next) -> None:
        """The engine left the lane's candidate: keep what that says about the request."""
        if lane.tries:
            self.note_end(lane.target.name, lane.failure, lane.failed_at)
        if step.min_window > self.min_window:
            self.min_window, self.window_why = step.min_window, step.window_why
        self.short_of_time |= step.short_of_time
        self.budget_spent |= step.budget_spent
        self.limited |= step.limited
        if step.held is not None:
            self.held(step.held)

    def held(self, hold: Hold) -> None:
        """A candidate is kept away until ``hold.until`` (an open breaker, a cool-down, the limiter)."""
        self.holds.append(hold)
        self.back[hold.target] = max(self.back.get(hold.target, hold.until), hold.until)
        self.anytime.discard(hold.target)

    def note_end(self, target: str, failure: Failure | None, at: float) -> None:
        """``target``'s lane ended after ``failure``: remember when it says to come back."""
        if failure is None:
            return
        if failure.retry_after is not None:
            until = at + max(0.0, failure.retry_after)
            self.back[target] = max(self.back.get(target, until), until)
            self.anytime.discard(target)
        elif failure.disposition.retryable and target not in self.back:
            self.anytime.add(target)

    def retry_after(self, now: float) -> float | None:
        """When the caller may come back with a chance (loop time), or None when that is unknown.

        Per target, the later of its own Retry-After and the end of what holds it (a breaker
        that stays open past the provider's hint wins); over the targets, the earliest. None
        when a target failed in a way that may pass at any moment (a 503 with no hint)."""
        if self.anytime or not self.back:
            return None
        return max(min(self.back.values()), now + 0.001)


@dataclass(slots=True, kw_only=True)
class Lane:
    """One candidate's attempts: the first, then its replays and the repair."""

    target: Target
    phase: Phase
    request: Request | EmbedRequest
    after: int  # index in RunState.candidates of the first candidate after this lane's group
    pool: str = ""  # the target's retry-budget pool (Policies.pool)
    hedge: bool = False
    # Its holds were just asked by the selection, with nothing awaited since (the first lane of
    # a request): the first decision need not ask them again.
    fresh: bool = False
    tries: int = 0  # attempts made on this target
    failure: Failure | None = None  # the last attempt's failure (None: none made yet)
    failed_at: float = 0.0
    took: float = 0.0  # how long the last attempt ran (its exchange, set by the loop)
    waited: bool = False  # the wait before the next attempt was slept
    paid: bool = False  # the next attempt's slot (and budget token, if a retry) is paid
    sent: bool = False  # the paid attempt is under way (cancelled, it is booked, not refunded)
    paid_retry: bool = False  # what was paid was a retry-budget token
    repairing: bool = False  # the repair request is built: the next attempt sends it
    no_repair: bool = False  # no repair could be built for this failure

    @property
    def max_tokens(self) -> int | None:
        return output_limit(self.request)


def output_limit(request: Request | EmbedRequest) -> int | None:
    """The output an attempt of ``request`` may generate: its max_tokens (None: up to the
    target's max output); an embedding generates none."""
    return request.max_tokens if isinstance(request, Request) else 0


__all__ = ["KEY_FAULTS", "Decision", "Go", "Lane", "Next", "Repair", "RunState", "Sleep", "Stop", "output_limit"]
