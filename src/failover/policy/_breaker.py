"""Circuit breakers per scope: stop calling what is failing, probe it carefully, let it back in.

Modelled on resilience4j's CircuitBreaker, adapted to LLM providers:

* **closed**: calls pass and their outcomes go into a sliding window, either the last
  ``window_size`` recorded calls (``window_kind="count"``) or the last ``window_seconds``
  one-second buckets (``"time"``). Once the window holds at least ``min_calls`` calls, a
  failure rate ``>= failure_rate``, or (when enabled) a slow-call rate ``>= slow_call_rate``,
  opens the breaker.
* **open**: every call is rejected until the open period has passed. The period grows by
  ``open_duration_growth`` each time the breaker re-opens without having closed in between,
  up to ``max_open_duration``; a close resets it.
* **half-open**: the first call at or after the end of the open period moves the breaker to
  half-open (there is no timer: the move happens on whichever call observes it). At most
  ``half_open_probes`` calls are in flight at once; the rest are rejected as if open. One
  failed (or, with the slow-call rule on, slow) probe re-opens with the grown period;
  ``probe_successes_to_close`` successful probes close it.

Every state starts with an empty window. A permit belongs to the state it was granted in: its
result is dropped if the breaker changed state before it was released (a call that started
before the breaker opened says nothing about the probes).

Outcomes come from the failure's disposition (``classify``): failures that are the provider's
fault count, the caller's fault and policy outcomes (invalid request, context overflow,
content filter, schema or tool-call repairs, deadline) are ignored. A 429 or an exhausted quota
is only the concern of the credential + model that got it: :class:`BreakerBoard` records those
on a separate key + model breaker, so a 429 on key A never opens key B's breaker nor the
target's.

**Async safety.** Nothing here awaits, so every method runs to completion without yielding to
the event loop: under asyncio each call is atomic, and 100 tasks arriving at once at the end of
an open period get exactly ``half_open_probes`` permits. The classes are not thread-safe; use
them from the one event loop that owns them. Hooks run synchronously inside the call that
changed the state: they must be quick and must not block.

A permit must be released exactly once (releasing twice raises ``RuntimeError``); a permit
that is never released holds its half-open probe slot forever, so release in ``finally``, with
``outcome="ignored"`` (``BreakerBoard.discard``) when the attempt was cancelled or never sent.

**Shared state.** ``BreakerBoard(store=...)`` keeps the breakers in a shared store
(``failover.state``: SQLite for the processes of one machine, Redis for a fleet), so a breaker
opened by one process is open for all of them on their next attempt, and half-open probes are
limited to ``half_open_probes`` across the fleet. The router then admits through the awaitable
:meth:`BreakerBoard.admit_shared` (one round trip for both breakers); outcomes are written in
the background (``await board.drain()`` waits for them). When the store does not answer, the
board falls back to its in-process breakers (fail open) until the store is back.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from ..model import Failure, FailureKind, HealthEffect, Target
from ..state import BreakerOutcome, BreakerParams, BreakerView, GuardedStore, StateUnavailable, Transition

logger = logging.getLogger("failover.breaker")

Outcome = Literal["success", "failure", "ignored"]
WindowKind = Literal["count", "time"]
Layer = Literal["target", "key_model"]

_OUTCOMES: frozenset[str] = frozenset({"success", "failure", "ignored"})


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerConfig:
    """How one breaker judges its scope. Rates are fractions (0.5 is 50 %), times seconds.

    ``slow_call_rate=1.0`` turns the slow-call rule off (long generations are normal for LLMs);
    below 1.0 it opens the breaker when that share of the window took longer than
    ``slow_call_duration``, and a slow probe counts as a failed probe.
    """

    window_kind: WindowKind = "count"
    window_size: int = 20  # count window: the last N recorded calls
    window_seconds: int = 60  # time window: the last N one-second buckets
    min_calls: int = 10  # no verdict on fewer calls in the window
    failure_rate: float = 0.5
    slow_call_rate: float = 1.0  # 1.0: off
    slow_call_duration: float = 30.0
    open_duration: float = 30.0
    open_duration_growth: float = 2.0  # factor per re-open without a close in between
    max_open_duration: float = 300.0
    half_open_probes: int = 2  # concurrent probes while half-open
    probe_successes_to_close: int | None = None  # None: half_open_probes

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.window_kind not in ("count", "time"):
            problems.append(f"window_kind must be 'count' or 'time', not {self.window_kind!r}")
        for name in ("window_size", "window_seconds", "min_calls", "half_open_probes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be an integer >= 1, not {value!r}")
        if self.probe_successes_to_close is not None and (
            isinstance(self.probe_successes_to_close, bool)
            or not isinstance(self.probe_successes_to_close, int)
            or self.probe_successes_to_close < 1
        ):
            problems.append(f"probe_successes_to_close must be an integer >= 1, not {self.probe_successes_to_close!r}")
        if (
            self.window_kind == "count"
            and isinstance(self.min_calls, int)
            and isinstance(self.window_size, int)
            and self.min_calls > self.window_size
        ):
            problems.append(
                f"min_calls {self.min_calls} > window_size {self.window_size}: a count window could never open"
            )
        for name in ("failure_rate", "slow_call_rate"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                problems.append(f"{name} must be in (0, 1], not {value!r}")
        for name in ("slow_call_duration", "open_duration", "max_open_duration"):
            value = getattr(self, name)
            if not (value > 0.0 and math.isfinite(value)):
                problems.append(f"{name} must be a finite number of seconds > 0, not {value!r}")
        if not (self.open_duration_growth >= 1.0 and math.isfinite(self.open_duration_growth)):
            problems.append(f"open_duration_growth must be >= 1, not {self.open_duration_growth!r}")
        if self.max_open_duration < self.open_duration:
            problems.append(f"max_open_duration {self.max_open_duration} < open_duration {self.open_duration}")
        if problems:
            raise ValueError("BreakerConfig: " + "; ".join(problems))

    @property
    def successes_to_close(self) -> int:
        return self.half_open_probes if self.probe_successes_to_close is None else self.probe_successes_to_close

    @property
    def slow_rule(self) -> bool:
        """Is the slow-call rule on?"""
        return self.slow_call_rate < 1.0

    def open_period(self, streak: int) -> float:
        """The open period of the ``streak``-th opening since the last close (1 for the first)."""
        grown = self.open_duration * self.open_duration_growth ** max(0, streak - 1)
        return min(self.max_open_duration, grown)


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


def _hold(wait: float, kind: str) -> BreakerHold:
    return BreakerHold(wait=max(0.0, wait), kind=_KINDS.get(kind))


def classify(failure: Failure | None) -> Outcome:
    """What an attempt's result means to a breaker, from the failure's disposition.

    ``None`` (an acceptable answer) is a success. ``HealthEffect.TARGET`` (transport errors,
    5xx, overload, timeouts, auth, unknown model) is a failure. ``HealthEffect.KEY_MODEL`` (429,
    exhausted quota) is a failure too, but only for a key + model breaker: :class:`BreakerBoard`
    records it there and as ``"ignored"`` on the target breaker. ``HealthEffect.NONE`` (invalid
    request, context overflow, content filter, truncation, schema and tool-call failures,
    deadline, partial output) is ignored: it says nothing about the provider.
    """
    if failure is None:
        return "success"
    effect = failure.disposition.health
    if effect is HealthEffect.NONE:
        return "ignored"
    return "failure"


def key_model_scope(target: Target) -> str:
    """The credential + model scope of 429s and quotas: ``base_url|credential|model``."""
    return f"{target.base_url}|{target.credential or '-'}|{target.model}"


class Permit:
    """The right to make one call through one breaker. Release it exactly once."""

    __slots__ = ("_breaker", "_epoch", "acquired_at", "probe", "released")

    def __init__(self, breaker: CircuitBreaker, epoch: int, acquired_at: float, probe: bool) -> None:
        self._breaker = breaker
        self._epoch = epoch
        self.acquired_at = acquired_at
        self.probe = probe  # granted while half-open
        self.released = False

    @property
    def scope(self) -> str:
        return self._breaker.scope

    @property
    def layer(self) -> Layer:
        return self._breaker.layer

    @property
    def breaker(self) -> CircuitBreaker:
        return self._breaker

    def __repr__(self) -> str:
        return (
            f"Permit(scope={self.scope!r}, layer={self.layer!r}, acquired_at={self.acquired_at!r}, "
            f"probe={self.probe!r}, released={self.released!r})"
        )


class SharedPermit(Permit):
    """A permit granted by the shared store: its epoch and probe slot live there."""

    __slots__ = ("permit_id",)

    def __init__(self, breaker: CircuitBreaker, epoch: int, acquired_at: float, probe: bool, permit_id: str) -> None:
        super().__init__(breaker, epoch, acquired_at, probe)
        self.permit_id = permit_id


def breaker_params(config: BreakerConfig, *, probe_lease: float = 120.0) -> BreakerParams:
    """``config`` as the shared store's parameters."""
    return BreakerParams(
        window_kind=config.window_kind,
        window_size=config.window_size,
        window_seconds=config.window_seconds,
        min_calls=config.min_calls,
        failure_rate=config.failure_rate,
        slow_call_rate=config.slow_call_rate,
        slow_call_duration=config.slow_call_duration,
        open_duration=config.open_duration,
        open_duration_growth=config.open_duration_growth,
        max_open_duration=config.max_open_duration,
        half_open_probes=config.half_open_probes,
        successes_to_close=config.successes_to_close,
        probe_lease=probe_lease,
    )


class _Totals:
    __slots__ = ("calls", "failures", "slow")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.slow = 0


class _CountWindow:
    """The last ``size`` recorded calls, with running totals (subtract on evict)."""

    __slots__ = ("_items", "_size", "_t")

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: deque[tuple[bool, bool]] = deque()
        self._t = _Totals()

    def record(self, now: float, failed: bool, slow: bool) -> None:
        if len(self._items) == self._size:
            old_failed, old_slow = self._items.popleft()
            self._t.calls -= 1
            self._t.failures -= old_failed
            self._t.slow -= old_slow
        self._items.append((failed, slow))
        self._t.calls += 1
        self._t.failures += failed
        self._t.slow += slow

    def totals(self, now: float) -> _Totals:
        return self._t

    def clear(self) -> None:
        self._items.clear()
        self._t = _Totals()


class _TimeWindow:
    """The last ``seconds`` one-second buckets (``floor(now)``), with running totals."""

    __slots__ = ("_buckets", "_seconds", "_t")

    def __init__(self, seconds: int) -> None:
        self._seconds = seconds
        self._buckets: deque[tuple[int, _Totals]] = deque()
        self._t = _Totals()

    def _expire(self, now: float) -> None:
        horizon = math.floor(now) - self._seconds  # buckets at or before this second are out
        while self._buckets and self._buckets[0][0] <= horizon:
            _, b = self._buckets.popleft()
            self._t.calls -= b.calls
            self._t.failures -= b.failures
            self._t.slow -= b.slow

    def record(self, now: float, failed: bool, slow: bool) -> None:
        self._expire(now)
        second = math.floor(now)
        if self._buckets and self._buckets[-1][0] >= second:
            b = self._buckets[-1][1]  # same second (or a clock that went back): the newest bucket
        else:
            b = _Totals()
            self._buckets.append((second, b))
        for t in (b, self._t):
            t.calls += 1
            t.failures += failed
            t.slow += slow

    def totals(self, now: float) -> _Totals:
        self._expire(now)
        return self._t

    def clear(self) -> None:
        self._buckets.clear()
        self._t = _Totals()


def _rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


class _Grace:
    """What the overload grace knows of one target: its recent successes and overloaded answers
    (1-second buckets over ``seconds``), how long it takes to refuse, and its attempts in flight."""

    __slots__ = ("_buckets", "_last", "ever", "first_seen", "flights", "overloaded", "refusal", "seconds", "served")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._buckets: deque[list[int]] = deque()  # [second, served, overloaded]
        self._last: list[int] | None = None
        self.served = 0
        self.overloaded = 0
        self.ever = False  # has it ever answered successfully?
        self.first_seen: float | None = None
        self.refusal = 0.0  # EWMA of how long an overloaded answer takes
        self.flights: dict[int, float] = {}  # id(permit) -> start: insertion order is start order

    def _bucket(self, now: float) -> list[int]:
        second = int(now)  # loop time is never negative
        b = self._last
        if b is not None and b[0] == second:
            return b
        horizon = second - self.seconds
        buckets = self._buckets
        while buckets and buckets[0][0] <= horizon:
            _, ok, over = buckets.popleft()
            self.served -= ok
            self.overloaded -= over
        b = self._last = [second, 0, 0]
        buckets.append(b)
        return b

    def overload(self, now: float, took: float) -> tuple[int, int]:
        """Note an overloaded answer that took ``took`` seconds; the window's (served, overloaded)."""
        self._bucket(now)[2] += 1  # a new second's bucket first expires what left the window
        self.overloaded += 1
        self.refusal += 0.2 * (max(0.0, took) - self.refusal)
        return self.served, self.overloaded


class CircuitBreaker:
    """One breaker for one scope. All times are loop seconds passed in as ``now``.

    >>> b = CircuitBreaker(BreakerConfig(min_calls=2, window_size=2), "s")
    >>> for t in (1.0, 2.0):
    ...     b.release(b.try_acquire(t), t, outcome="failure", duration=0.1)
    >>> b.state(3.0), b.retry_at, b.try_acquire(3.0)
    (<BreakerState.OPEN: 'open'>, 32.0, None)
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
        self._window: _CountWindow | _TimeWindow = (
            _CountWindow(config.window_size) if config.window_kind == "count" else _TimeWindow(config.window_seconds)
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
        self.grace: _Grace | None = None  # the board's overload grace for this target (target layer)

    # -- reading ---------------------------------------------------------------------------

    def state(self, now: float) -> BreakerState:
        """The state at ``now``; an open breaker whose period has elapsed becomes half-open here."""
        self._advance(now)
        return self._state

    @property
    def retry_at(self) -> float | None:
        """When an open breaker admits its first probe; None unless open."""
        if self._state is not BreakerState.OPEN:
            return None
        return self._opened_at + self._open_for

    def rejection(self, now: float) -> str | None:
        """Why :meth:`try_acquire` would return None at ``now``, or None if it would grant a permit."""
        self._advance(now)
        if self._state is BreakerState.OPEN:
            left = self._opened_at + self._open_for - now
            return f"{self._label()} open for {left:.1f}s more ({self._open_why})"
        if self._state is BreakerState.HALF_OPEN and self._probes >= self.config.half_open_probes:
            prefix = "half-open" if self.layer == "target" else "key+model half-open"
            return f"{prefix}: {self._probes} probes already in flight"
        return None

    def hold(self, now: float) -> BreakerHold | None:
        """How long this breaker keeps turning calls away, and why; None if it admits one now."""
        self._advance(now)
        if self._state is BreakerState.OPEN:
            return _hold(self._opened_at + self._open_for - now, self._open_kind)
        if self._state is BreakerState.HALF_OPEN and self._probes >= self.config.half_open_probes:
            return _hold(min(HALF_OPEN_RETRY, self.config.open_duration), self._open_kind)
        return None

    def snapshot(self, now: float) -> BreakerSnapshot:
        self._advance(now)
        t = self._window.totals(now)
        is_open = self._state is BreakerState.OPEN
        return BreakerSnapshot(
            scope=self.scope,
            layer=self.layer,
            state=self._state,
            calls=t.calls,
            failures=t.failures,
            slow_calls=t.slow,
            failure_rate=_rate(t.failures, t.calls),
            slow_rate=_rate(t.slow, t.calls),
            open_count=self._open_count,
            probes_in_flight=self._probes,
            retry_at=self.retry_at,
            open_for=self._open_for if is_open else None,
        )

    # -- calls ------------------------------------------------------------------------------

    def try_acquire(self, now: float) -> Permit | None:
        """A permit for one call, or None: open, or half-open with every probe slot taken."""
        self._advance(now)
        if self._state is BreakerState.CLOSED:
            return Permit(self, self._epoch, now, probe=False)
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
        if permit._breaker is not self:
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
                self._open(now, "probe failed", kind)
            elif slow and cfg.slow_rule:
                self._open(now, f"probe slower than {cfg.slow_call_duration:g}s")
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
        if _rate(t.failures, t.calls) >= cfg.failure_rate:
            self._open(now, f"{t.failures}/{t.calls} failed", kind)
        elif cfg.slow_rule and _rate(t.slow, t.calls) >= cfg.slow_call_rate:
            self._open(now, f"{t.slow}/{t.calls} slower than {cfg.slow_call_duration:g}s")

    # -- transitions ------------------------------------------------------------------------

    def _label(self) -> str:
        return "circuit" if self.layer == "target" else "key+model circuit"

    def _advance(self, now: float) -> None:
        if self._state is BreakerState.OPEN and now >= self._opened_at + self._open_for:
            self._move(BreakerState.HALF_OPEN, now, f"open period of {self._open_for:g}s elapsed")

    def _open(self, now: float, why: str, kind: str = "") -> None:
        self._open_kind = kind
        self._streak += 1
        self._open_count += 1
        self._opened_at = now
        self._open_for = self.config.open_period(self._streak)
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
            failure_rate=_rate(t.failures, t.calls),
            slow_rate=_rate(t.slow, t.calls),
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
            _emit(self.on_change, event)


def _emit(hook: Hook, event: BreakerEvent) -> None:
    try:
        hook(event)
    except Exception:
        logger.exception("breaker hook %r failed on %s -> %s for %s", hook, event.old, event.new, event.scope)


def _outcome_for(layer: Layer, failure: Failure | None) -> Outcome:
    """The target breaker counts TARGET failures; the key + model breaker counts KEY_MODEL ones."""
    if failure is None:
        return "success"
    effect = failure.disposition.health
    if layer == "target":
        return "failure" if effect is HealthEffect.TARGET else "ignored"
    return "failure" if effect is HealthEffect.KEY_MODEL else "ignored"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerSettings:
    """Everything a :class:`BreakerBoard` can be tuned with (the YAML ``breakers:`` section)."""

    config: BreakerConfig = BreakerConfig()
    key_config: BreakerConfig | None = None  # None: ``config``
    overload_grace: float = 10.0
    overload_min_success: float = 0.05

    def board(self, *, store: GuardedStore | None = None, hooks: Iterable[Hook] = ()) -> BreakerBoard:
        return BreakerBoard(
            self.config,
            key_config=self.key_config,
            overload_grace=self.overload_grace,
            overload_min_success=self.overload_min_success,
            store=store,
            hooks=hooks,
        )


class BreakerBoard:
    """The breakers of every scope, and which of them each attempt's result concerns.

    Each target passes two breakers: its target breaker (scope ``scope(target)``, default
    ``target.scope`` = base URL + credential + model + region), which counts the provider's
    failures (``HealthEffect.TARGET``), and its key + model breaker (``key_model_scope``), which
    counts only 429s and exhausted quotas (``HealthEffect.KEY_MODEL``). Each ignores what the
    other counts; both count successes; neither counts ``HealthEffect.NONE``.

    Hooks receive every :class:`BreakerEvent` of every breaker, in order; a hook that raises is
    logged on ``failover.breaker`` and the others still run.
    """

    def __init__(
        self,
        config: BreakerConfig | None = None,
        *,
        key_config: BreakerConfig | None = None,
        scope: Callable[[Target], str] | None = None,
        hooks: Iterable[Hook] = (),
        overload_grace: float = 10.0,
        overload_min_success: float = 0.05,
        store: GuardedStore | None = None,
        probe_lease: float = 120.0,
    ) -> None:
        if not (overload_grace >= 0 and math.isfinite(overload_grace)):
            raise ValueError(f"overload_grace must be a finite number of seconds >= 0, not {overload_grace!r}")
        if not 0.0 < overload_min_success <= 1.0:
            raise ValueError(f"overload_min_success must be in (0, 1], not {overload_min_success!r}")
        self.config = config or BreakerConfig()
        self.key_config = key_config or self.config
        self._scope = scope or _target_scope
        self.hooks: list[Hook] = list(hooks)
        self._target: dict[str, CircuitBreaker] = {}
        self._key: dict[str, CircuitBreaker] = {}
        # An overloaded answer (529 / 503 overloaded) from a target that still SERVES says "over
        # capacity", not "down": it is left to the retry budget and the rate limiter. Counting it
        # let the fast 529s of a provider at 3x its capacity open the breaker within 0.2 s and
        # shed ALL traffic, although the provider could still serve its capacity (bench/goodput.py:
        # 1.7% of capacity instead of 93%). "Still serves" is measured, not assumed: at least
        # `overload_min_success` of its answers in the last `overload_grace` seconds were
        # successes. A target that answers nothing but 503/529 is down, and counts at once.
        self.overload_grace = overload_grace
        self.overload_min_success = overload_min_success

        # Shared state (failover.state): None keeps every breaker in this process, as before.
        # With a store the router calls `await admit_shared(...)` (`local` tells it which), and
        # record/discard/rejection/snapshots are swapped for their shared versions here, so the
        # in-process path has no extra check at all.
        self.store = store
        self.local = store is None
        if store is not None:
            self._params = breaker_params(self.config, probe_lease=probe_lease)
            self._key_params = breaker_params(self.key_config, probe_lease=probe_lease)
            self._views: dict[str, tuple[BreakerView, float]] = {}  # scope -> (last view, loop time)
            self._layers: dict[str, Layer] = {}
            self._tasks: set[asyncio.Task[None]] = set()
            self.record = self._record_shared  # type: ignore[method-assign]
            self.discard = self._discard_shared  # type: ignore[method-assign]
            self.rejection = self._rejection_shared  # type: ignore[method-assign]
            self.snapshots = self._snapshots_shared  # type: ignore[method-assign]
            self.hold = self._hold_shared  # type: ignore[method-assign]

    def _fan_out(self, event: BreakerEvent) -> None:
        for hook in tuple(self.hooks):
            _emit(hook, event)

    def breaker(self, target: Target) -> CircuitBreaker:
        """The target breaker of ``target`` (created on first use)."""
        s = self._scope(target)
        b = self._target.get(s)
        if b is None:
            b = self._target[s] = CircuitBreaker(self.config, s, self._fan_out, layer="target")
            b.grace = _Grace(self.overload_grace)
        return b

    def key_breaker(self, target: Target) -> CircuitBreaker:
        """The key + model breaker of ``target`` (created on first use)."""
        s = key_model_scope(target)
        b = self._key.get(s)
        if b is None:
            b = self._key[s] = CircuitBreaker(self.key_config, s, self._fan_out, layer="key_model")
        return b

    def rejection(self, target: Target, now: float) -> str | None:
        """Why ``admit`` would reject ``target`` at ``now``, without taking a permit (for selection)."""
        for b in (self._target.get(self._scope(target)), self._key.get(key_model_scope(target))):
            if b is not None:
                why = b.rejection(now)
                if why is not None:
                    return why
        return None

    def admit(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        """Permits for one attempt on ``target`` (target breaker first, then key + model).

        Returns ``(permits, None)`` when both admit, or ``([], reason)`` when either rejects,
        e.g. ``"circuit open for 12.3s more (5/10 failed)"`` or ``"half-open: 2 probes already
        in flight"``; a permit taken from the first breaker is then given back unused.
        """
        permits: list[Permit] = []
        for b in (self.breaker(target), self.key_breaker(target)):
            p = b.try_acquire(now)
            if p is None:
                self.discard(permits, now)
                return [], b.rejection(now) or f"{b.scope}: rejected"
            permits.append(p)
        self._started(permits[0], now)
        return permits, None

    def _started(self, permit: Permit, now: float) -> None:
        """An attempt is sent under ``permit`` (its target breaker's): the grace keeps its flight."""
        g = permit._breaker.grace
        if g is not None:
            g.flights[id(permit)] = now

    def _ended(self, permits: Sequence[Permit]) -> None:
        if permits and (g := permits[0]._breaker.grace) is not None:
            g.flights.pop(id(permits[0]), None)

    def record(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        """Release ``permits`` (from ``admit(target, ...)``) with the attempt's result."""
        for p in permits:
            expected = self._scope(target) if p.layer == "target" else key_model_scope(target)
            if p.scope != expected:
                raise ValueError(f"permit for {p.scope!r} recorded against target {target.name!r}")
        graced = self._graced(target, permits, failure, now - duration, now)
        kind = "" if failure is None else failure.kind.value
        for p in permits:
            outcome: Outcome = "ignored" if graced else _outcome_for(p.layer, failure)
            p.breaker.release(p, now, outcome=outcome, duration=duration, kind=kind)

    def _graced(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, started: float, now: float
    ) -> bool:
        """Whether this outcome is an overload of a target that still serves (the breaker ignores it).

        A target that served before: graced while successes are at least ``overload_min_success``
        of its successes and overloads in the last ``overload_grace`` seconds. A target that has
        never served yet (a process that starts during an overload): graced only while, within
        ``overload_grace`` of its first outcome, it holds an earlier attempt for much longer than
        it takes to refuse one (more than 3x its typical overloaded answer, plus 10 ms): it is
        working on requests that may yet succeed, as a provider at capacity is, while its fast
        529s arrive before the slower successes do. A target that refuses every request as fast
        as it gets them serves nothing and is not graced, however many are in flight. Shared by
        the in-process and the shared-store record paths.
        """
        g = permits[0]._breaker.grace if permits else None
        if g is None:
            return False
        flights = g.flights
        flights.pop(id(permits[0]), None)
        if failure is None:  # the hot path: note the success in this second's bucket
            g.ever = True
            last = g._last
            if last is None or last[0] != int(now):
                last = g._bucket(now)
            last[1] += 1
            g.served += 1
            return False
        if failure.kind is not FailureKind.PROVIDER_OVERLOADED or self.overload_grace <= 0:
            return False
        oldest = next(iter(flights.values()), None) if flights else None  # insertion order: oldest first
        served, overloaded = g.overload(now, now - started)
        if served:
            return served / (served + overloaded) >= self.overload_min_success
        if g.ever:
            return False  # it served before, and nothing for overload_grace seconds: down
        if g.first_seen is None:
            g.first_seen = now
        if oldest is None or now - g.first_seen > self.overload_grace:
            return False
        return now - oldest > 3.0 * g.refusal + 0.01

    def hold(self, target: Target, now: float) -> BreakerHold | None:
        """Why the breakers of ``target`` turn it away now (the longer of the two), or None."""
        held: BreakerHold | None = None
        for b in (self._target.get(self._scope(target)), self._key.get(key_model_scope(target))):
            h = b.hold(now) if b is not None else None
            if h is not None and (held is None or h.wait > held.wait):
                held = h
        return held

    def discard(self, permits: Sequence[Permit], now: float) -> None:
        """Give ``permits`` back without a verdict (cancelled, or never sent)."""
        self._ended(permits)
        for p in permits:
            p.breaker.release(p, now, outcome="ignored", duration=0.0)

    def snapshots(self, now: float) -> list[BreakerSnapshot]:
        """Every breaker's numbers, target breakers first, each group in creation order."""
        return [b.snapshot(now) for b in (*self._target.values(), *self._key.values())]

    # -- shared state ----------------------------------------------------------------------

    async def admit_shared(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        """:meth:`admit` on the shared store: both breakers in one atomic step (one round trip).

        Falls back to the in-process breakers when the store is unavailable.
        """
        guard = self.store
        assert guard is not None, "admit_shared needs BreakerBoard(store=...)"
        tb, kb = self.breaker(target), self.key_breaker(target)
        pid = os.urandom(8).hex()
        scopes = [(tb.scope, self._params), (kb.scope, self._key_params)]
        try:
            a = await guard.call(guard.store.breaker_admit, scopes, pid)
            if not a.granted and self._tasks:
                # Outcomes of this process (a probe that just ended) may still be on their way:
                # let them land and ask once more.
                await asyncio.gather(*tuple(self._tasks), return_exceptions=True)
                a = await guard.call(guard.store.breaker_admit, scopes, pid)
        except StateUnavailable:
            return BreakerBoard.admit(self, target, now)
        at = asyncio.get_running_loop().time()
        self._layers[tb.scope], self._layers[kb.scope] = "target", "key_model"
        self._seen(a.views, a.transitions, at)
        if not a.granted:
            i = a.rejected or 0
            return [], _shared_reason((tb, kb)[i], a.views[i], self._params.half_open_probes)
        permits: list[Permit] = [
            SharedPermit(b, epoch, now, probe, pid)
            for b, epoch, probe in zip((tb, kb), a.epochs, a.probes, strict=True)
        ]
        self._started(permits[0], now)
        return permits, None

    async def drain(self) -> None:
        """Wait until every outcome written in the background has reached the store."""
        while self.store is not None and self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    def _seen(self, views: Sequence[BreakerView], transitions: Sequence[Transition], at: float) -> None:
        for v in views:
            self._views[v.scope] = (v, at)
        for t in transitions:
            rate = _rate(t.failures, t.calls)
            event = BreakerEvent(
                scope=t.scope,
                layer=self._layers.get(t.scope, "target"),
                old=BreakerState(t.old),
                new=BreakerState(t.new),
                at=at,
                reason=t.reason,
                failure_rate=rate,
                slow_rate=_rate(t.slow, t.calls),
                calls=t.calls,
                open_for=t.open_for,
            )
            self._fan_out(event)

    def _send(self, permits: Sequence[Permit], outcomes: Sequence[Outcome], duration: float, kind: str = "") -> None:
        """Write the outcomes of shared permits in the background (merged with other writes)."""
        items = []
        for p, outcome in zip(permits, outcomes, strict=True):
            if p.released:
                raise RuntimeError(f"permit for {p.scope!r} released twice")
            p.released = True
            params = self._params if p.layer == "target" else self._key_params
            items.append(
                BreakerOutcome(scope=p.scope, params=params, epoch=p._epoch, probe=p.probe, outcome=outcome, kind=kind)
            )
        pid = permits[0].permit_id if isinstance(permits[0], SharedPermit) else ""
        task = asyncio.get_running_loop().create_task(self._write(items, pid, duration))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, items: list[BreakerOutcome], pid: str, duration: float) -> None:
        guard = self.store
        assert guard is not None
        try:
            r = await guard.call(guard.store.breaker_record, items, pid, duration)
        except StateUnavailable:
            return  # the shared breaker misses this outcome; a held probe slot frees at its lease
        self._seen(r.views, r.transitions, asyncio.get_running_loop().time())

    def _record_shared(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        if not permits or not isinstance(permits[0], SharedPermit):
            BreakerBoard.record(self, target, permits, failure, duration, now)  # granted locally (store down)
            return
        graced = self._graced(target, permits, failure, now - duration, now)
        outcomes: list[Outcome] = ["ignored" if graced else _outcome_for(p.layer, failure) for p in permits]
        self._send(permits, outcomes, duration, "" if failure is None else failure.kind.value)

    def _discard_shared(self, permits: Sequence[Permit], now: float) -> None:
        if not permits or not isinstance(permits[0], SharedPermit):
            BreakerBoard.discard(self, permits, now)
            return
        self._ended(permits)
        if any(p.probe for p in permits):  # only a probe slot needs giving back
            self._send(permits, ["ignored"] * len(permits), 0.0)
        else:
            for p in permits:
                p.released = True

    def _rejection_shared(self, target: Target, now: float) -> str | None:
        """From the last views this process saw (the store decides at admission)."""
        guard = self.store
        if guard is not None and not guard.up:
            return BreakerBoard.rejection(self, target, now)
        loop_now = asyncio.get_running_loop().time()
        for b in (self.breaker(target), self.key_breaker(target)):
            seen = self._views.get(b.scope)
            if seen is None:
                continue
            view, at = seen
            if view.state == "open" and view.retry_in is not None and view.retry_in - (loop_now - at) > 0:
                left = view.retry_in - (loop_now - at)
                return f"{b._label()} open for {left:.1f}s more ({view.why})"
        return None

    def _hold_shared(self, target: Target, now: float) -> BreakerHold | None:
        """:meth:`hold` from the last views this process saw (its own breakers when the store is down)."""
        guard = self.store
        if guard is not None and not guard.up:
            return BreakerBoard.hold(self, target, now)
        loop_now = asyncio.get_running_loop().time()
        held: BreakerHold | None = None
        for b in (self.breaker(target), self.key_breaker(target)):
            seen = self._views.get(b.scope)
            if seen is None:
                continue
            view, at = seen
            h: BreakerHold | None = None
            if view.state == "open" and view.retry_in is not None and view.retry_in - (loop_now - at) > 0:
                h = _hold(view.retry_in - (loop_now - at), view.kind)
            elif view.state == "half_open" and view.probes >= b.config.half_open_probes:
                h = _hold(min(HALF_OPEN_RETRY, b.config.open_duration), view.kind)
            if h is not None and (held is None or h.wait > held.wait):
                held = h
        return held

    def _snapshots_shared(self, now: float) -> list[BreakerSnapshot]:
        """The last view of each shared breaker (counts of the window are not fetched)."""
        out = []
        for scope, (v, at) in self._views.items():
            out.append(
                BreakerSnapshot(
                    scope=scope,
                    layer=self._layers.get(scope, "target"),
                    state=BreakerState(v.state),
                    calls=0,
                    failures=0,
                    slow_calls=0,
                    failure_rate=0.0,
                    slow_rate=0.0,
                    open_count=v.open_count,
                    probes_in_flight=v.probes,
                    retry_at=at + v.retry_in if v.retry_in is not None else None,
                    open_for=v.open_for,
                )
            )
        return out


def _shared_reason(b: CircuitBreaker, view: BreakerView, probes: int) -> str:
    if view.state == "open":
        return f"{b._label()} open for {view.retry_in or 0.0:.1f}s more ({view.why})"
    prefix = "half-open" if b.layer == "target" else "key+model half-open"
    return f"{prefix}: {view.probes} probes already in flight"


def _target_scope(target: Target) -> str:
    return target.scope


class NoBreakers:
    """A board that never rejects: circuit breaking switched off (for comparisons)."""

    hooks: list[Hook]
    local = True  # admitted in-process (see BreakerBoard.local)

    def __init__(self) -> None:
        self.hooks = []

    async def admit_shared(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        return [], None

    def rejection(self, target: Target, now: float) -> str | None:
        return None

    def hold(self, target: Target, now: float) -> BreakerHold | None:
        return None

    def admit(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        return [], None

    def record(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        return None

    def discard(self, permits: Sequence[Permit], now: float) -> None:
        return None

    def snapshots(self, now: float) -> list[BreakerSnapshot]:
        return []
