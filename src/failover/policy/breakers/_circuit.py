"""One circuit breaker for one scope: its states, its permits, and what it reports.

Modelled on resilience4j's CircuitBreaker, adapted to LLM providers:

* **closed**: calls pass and their outcomes go into a sliding window, either the last
  ``window_size`` recorded calls (``window_kind="count"``) or the last ``window_seconds``
  one-second buckets (``"time"``). Once the window holds at least ``min_calls`` calls, a
  failure rate ``>= failure_rate``, or (when enabled) a slow-call rate ``>= slow_call_rate``,
  opens the breaker.
* **open**: every call is rejected until the open period has passed. The period grows by
  ``open_duration_growth`` each time the breaker re-opens without having closed in between,
  up to ``max_open_duration``; a close resets it. After a failed probe the period counts
  from the probe's start (but lasts at least ``open_duration``), so a probe that hangs until
  its timeout does not delay the next one by its hang.
* **half-open**: the first permit asked for at or after the end of the open period moves the
  breaker to half-open (there is no timer: :meth:`CircuitBreaker.try_acquire` makes the move
  and fires its event). Reads (``state``, ``rejection``, ``hold``, ``snapshot``) report an open
  breaker whose period has elapsed as half-open, but change nothing and fire no hook. At most
  ``half_open_probes`` calls are in flight at once; the rest are rejected as if open. One
  failed (or, with the slow-call rule on, slow) probe re-opens with the grown period;
  ``probe_successes_to_close`` successful probes close it.

Every state starts with an empty window. A permit belongs to the state it was granted in: its
result is dropped if the breaker changed state before it was released (a call that started
before the breaker opened says nothing about the probes).

A permit must be released exactly once (releasing twice raises ``RuntimeError``); a permit
that is never released holds its half-open probe slot forever, so release it in ``finally``.

Nothing here awaits, so every method runs to completion without yielding to the event loop.
Hooks run synchronously inside the call that changed the state (only ``try_acquire`` and
``release`` change it): they must be quick and must not block; a hook that raises is logged on
``failover.breaker``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from ...model import FailureKind
from ._config import BreakerConfig
from ._grace import OverloadGrace
from ._window import CountWindow, TimeWindow, Totals

logger = logging.getLogger("failover.breaker")

Outcome = Literal["success", "failure", "ignored"]
Layer = Literal["target", "key_model"]

_OUTCOMES: frozenset[str] = frozenset({"success", "failure", "ignored"})


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerEvent:
    """One state change. Rates and ``calls`` describe the window of the state being left."""

    scope: str
    layer: Layer
    old: BreakerState
    new: BreakerState
    at: float  # loop time of the call that made the change
    reason: str  # "5/10 failed", "probe failed", "open period of 30.0s elapsed", "2/2 probes succeeded"
    failure_rate: float
    slow_rate: float
    calls: int
    open_for: float | None = None  # new == OPEN: the length of this open period


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerSnapshot:
    """A breaker's numbers at one moment, for metrics and admin pages."""

    scope: str
    layer: Layer
    state: BreakerState
    calls: int  # recorded (not ignored) calls in the current window
    failures: int
    slow_calls: int
    failure_rate: float  # failures / calls; 0.0 with no calls
    slow_rate: float  # slow_calls / calls; 0.0 with no calls
    open_count: int  # times this breaker has opened since it was created
    probes_in_flight: int
    retry_at: float | None  # open: when the first probe will be admitted
    open_for: float | None  # open: the length of the current open period


Hook = Callable[[BreakerEvent], None]

# A half-open breaker whose probe slots are all taken frees one when a probe ends, which no
# one can predict: a request it turned away is told to come back after this many seconds.
HALF_OPEN_RETRY = 1.0
_KINDS = {k.value: k for k in FailureKind}


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerHold:
    """Why breakers turn a target away for now, for the caller's Unavailable.

    ``wait``: seconds until a probe would be let through (open: the rest of the open period;
    half-open with every probe slot taken: :data:`HALF_OPEN_RETRY`). ``kind``: the failure kind
    that opened the breaker, None when unknown (opened by slow calls, or by another version).
    """

    wait: float
    kind: FailureKind | None


def breaker_hold(wait: float, kind: str) -> BreakerHold:
    return BreakerHold(wait=max(0.0, wait), kind=_KINDS.get(kind))


def rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def emit(hook: Hook, event: BreakerEvent) -> None:
    try:
        hook(event)
    except Exception:
        logger.exception("breaker hook %r failed on %s -> %s for %s", hook, event.old, event.new, event.scope)


class Permit:
    """The right to make one call through one breaker. Release it exactly once."""

    __slots__ = ("_epoch", "acquired_at", "breaker", "probe", "released")

    def __init__(self, breaker: CircuitBreaker, epoch: int, acquired_at: float, probe: bool) -> None:
        self.breaker = breaker  # the breaker that granted it (read on every release: a plain slot)
        self._epoch = epoch
        self.acquired_at = acquired_at
        self.probe = probe  # granted while half-open
        self.released = False

    @property
    def scope(self) -> str:
        return self.breaker.scope

    @property
    def layer(self) -> Layer:
        return self.breaker.layer

    def __repr__(self) -> str:
        return (
            f"Permit(scope={self.scope!r}, layer={self.layer!r}, acquired_at={self.acquired_at!r}, "
            f"probe={self.probe!r}, released={self.released!r})"
        )

    @property
    def epoch(self) -> int:
        """The breaker's state (its epoch) the permit was granted in."""
        return self._epoch


class SharedPermit(Permit):
    """A permit granted by the shared store: its epoch and probe slot live there."""

    __slots__ = ("permit_id",)

    def __init__(self, breaker: CircuitBreaker, epoch: int, acquired_at: float, probe: bool, permit_id: str) -> None:
        super().__init__(breaker, epoch, acquired_at, probe)
        self.permit_id = permit_id


class CircuitBreaker:
    """One breaker for one scope. All times are loop seconds passed in as ``now``.

    >>> b = CircuitBreaker(BreakerConfig(min_calls=2, window_size=2), "s")
    >>> for t in (1.0, 2.0):
    ...     b.release(b.try_acquire(t), t, outcome="failure", duration=0.1)
    >>> b.state(3.0), b.retry_at, b.try_acquire(3.0)
    (<BreakerState.OPEN: 'open'>, 4.0, None)
    """

    def __init__(
        self,
        config: BreakerConfig,
        scope: str,
        on_change: Hook | None = None,
        *,
        layer: Layer = "target",
    ) -> None:
        self.config = config
        self.scope = scope
        self.layer: Layer = layer
        self.on_change = on_change
        self._window: CountWindow | TimeWindow = (
            CountWindow(config.window_size) if config.window_kind == "count" else TimeWindow(config.window_seconds)
        )
        self._state = BreakerState.CLOSED
        self._epoch = 0  # bumped on every state change; permits of older epochs are stale
        self._opened_at = 0.0
        self._open_for = 0.0
        self._open_why = ""
        self._open_kind = ""  # the kind of the failure that opened it (kept while half-open)
        self._streak = 0  # openings since the last close, for the growing open period
        self._open_count = 0
        self._probes = 0  # probes in flight (half-open)
        self._probe_successes = 0
        self.grace: OverloadGrace | None = None  # the board's overload grace for this target (target layer)

    # -- reading ---------------------------------------------------------------------------

    def state(self, now: float) -> BreakerState:
        """The state at ``now``: an open breaker whose period has elapsed reads as half-open (a
        read: it moves there, and fires its event, when the next permit is taken)."""
        return BreakerState.HALF_OPEN if self._elapsed(now) else self._state

    def _elapsed(self, now: float) -> bool:
        """Open, with its open period over at ``now``: half-open as soon as a permit is asked."""
        return self._state is BreakerState.OPEN and now >= self._opened_at + self._open_for

    @property
    def retry_at(self) -> float | None:
        """When an open breaker admits its first probe; None unless open."""
        if self._state is not BreakerState.OPEN:
            return None
        return self._opened_at + self._open_for

    def rejection(self, now: float) -> str | None:
        """Why :meth:`try_acquire` would return None at ``now``, or None if it would grant a permit."""
        if self._elapsed(now):
            return None  # the permit would be the first probe of a new half-open state
        if self._state is BreakerState.OPEN:
            left = self._opened_at + self._open_for - now
            return f"{self.label()} open for {left:.1f}s more ({self._open_why})"
        if self._state is BreakerState.HALF_OPEN and self._probes >= self.config.half_open_probes:
            prefix = "half-open" if self.layer == "target" else "key+model half-open"
            return f"{prefix}: {self._probes} probes already in flight"
        return None

    def hold(self, now: float) -> BreakerHold | None:
        """How long this breaker keeps turning calls away, and why; None if it admits one now."""
        if self._elapsed(now):
            return None  # the permit would be the first probe of a new half-open state
        if self._state is BreakerState.OPEN:
            return breaker_hold(self._opened_at + self._open_for - now, self._open_kind)
        if self._state is BreakerState.HALF_OPEN and self._probes >= self.config.half_open_probes:
            return breaker_hold(min(HALF_OPEN_RETRY, self.config.open_duration), self._open_kind)
        return None

    def snapshot(self, now: float) -> BreakerSnapshot:
        """The numbers at ``now`` (a read): an open breaker whose period has elapsed shows as the
        half-open state it moves to on the next permit, with that state's empty window."""
        if self._elapsed(now):
            state, t, probes = BreakerState.HALF_OPEN, Totals(), 0
        else:
            state, t, probes = self._state, self._window.totals(now), self._probes
        is_open = state is BreakerState.OPEN
        return BreakerSnapshot(
            scope=self.scope,
            layer=self.layer,
            state=state,
            calls=t.calls,
            failures=t.failures,
            slow_calls=t.slow,
            failure_rate=rate(t.failures, t.calls),
            slow_rate=rate(t.slow, t.calls),
            open_count=self._open_count,
            probes_in_flight=probes,
            retry_at=self.retry_at if is_open else None,
            open_for=self._open_for if is_open else None,
        )

    # -- calls ------------------------------------------------------------------------------

    def try_acquire(self, now: float) -> Permit | None:
        """A permit for one call, or None: open, or half-open with every probe slot taken. The
        first one asked after the open period moves the breaker to half-open (its event fires)."""
        if self._state is BreakerState.CLOSED:
            return Permit(self, self._epoch, now, probe=False)
        self._advance(now)  # open with its period over: half-open from now on
        if self._state is BreakerState.HALF_OPEN and self._probes < self.config.half_open_probes:
            self._probes += 1
            return Permit(self, self._epoch, now, probe=True)
        return None

    def release(
        self, permit: Permit, now: float, *, outcome: Outcome, duration: float | None = None, kind: str = ""
    ) -> None:
        """Record the call made under ``permit``; ``duration`` defaults to ``now - permit.acquired_at``.

        ``kind`` (a failure's FailureKind value) is remembered if this failure opens the breaker.

        ``"ignored"`` records nothing (a half-open probe only frees its slot). Raises
        ``RuntimeError`` on a second release and ``ValueError`` for a permit of another breaker
        or an unknown outcome.
        """
        if permit.breaker is not self:
            raise ValueError(f"permit of breaker {permit.scope!r} released on breaker {self.scope!r}")
        if outcome not in _OUTCOMES:
            raise ValueError(f"outcome must be 'success', 'failure' or 'ignored', not {outcome!r}")
        if permit.released:
            raise RuntimeError(f"permit for {self.scope!r} released twice")
        permit.released = True
        if permit._epoch != self._epoch:
            return  # granted in an earlier state: its result says nothing about this one
        if duration is None:
            duration = max(0.0, now - permit.acquired_at)
        cfg = self.config
        if self._state is BreakerState.HALF_OPEN:
            self._probes -= 1
            if outcome == "ignored":
                return
            failed = outcome == "failure"
            slow = duration > cfg.slow_call_duration
            self._window.record(now, failed, slow)
            if failed:
                self._open(now, "probe failed", kind, probe_duration=duration)
            elif slow and cfg.slow_rule:
                self._open(now, f"probe slower than {cfg.slow_call_duration:g}s", probe_duration=duration)
            else:
                self._probe_successes += 1
                if self._probe_successes >= cfg.successes_to_close:
                    n = self._probe_successes
                    self._move(BreakerState.CLOSED, now, f"{n}/{n} probes succeeded")
            return
        # closed (permits are never granted while open, and any state change bumps the epoch)
        if outcome == "ignored":
            return
        failed = outcome == "failure"
        slow = duration > cfg.slow_call_duration
        self._window.record(now, failed, slow)
        t = self._window.totals(now)
        if t.calls < cfg.min_calls:
            return
        # calls >= min_calls >= 1: no rate() needed; a window with no slow call has no slow rate
        if t.failures / t.calls >= cfg.failure_rate:
            self._open(now, f"{t.failures}/{t.calls} failed", kind)
        elif t.slow and cfg.slow_rule and t.slow / t.calls >= cfg.slow_call_rate:
            self._open(now, f"{t.slow}/{t.calls} slower than {cfg.slow_call_duration:g}s")

    # -- transitions ------------------------------------------------------------------------

    def label(self) -> str:
        return "circuit" if self.layer == "target" else "key+model circuit"

    def _advance(self, now: float) -> None:
        if self._state is BreakerState.OPEN and now >= self._opened_at + self._open_for:
            self._move(BreakerState.HALF_OPEN, now, f"open period of {self._open_for:g}s elapsed")

    def _open(self, now: float, why: str, kind: str = "", *, probe_duration: float = 0.0) -> None:
        self._open_kind = kind
        self._streak += 1
        self._open_count += 1
        self._opened_at = now
        self._open_for = self.config.open_period(self._streak, probe_duration)
        self._open_why = why
        self._move(BreakerState.OPEN, now, why)

    def _move(self, new: BreakerState, now: float, reason: str) -> None:
        t = self._window.totals(now)
        event = BreakerEvent(
            scope=self.scope,
            layer=self.layer,
            old=self._state,
            new=new,
            at=now,
            reason=reason,
            failure_rate=rate(t.failures, t.calls),
            slow_rate=rate(t.slow, t.calls),
            calls=t.calls,
            open_for=self._open_for if new is BreakerState.OPEN else None,
        )
        self._state = new
        self._epoch += 1
        self._window.clear()
        self._probes = 0
        self._probe_successes = 0
        if new is BreakerState.CLOSED:
            self._streak = 0
            self._open_kind = ""
        if self.on_change is not None:
            emit(self.on_change, event)
