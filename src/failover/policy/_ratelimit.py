"""Client-side rate limiting per target: wait locally instead of provoking a 429.

One :class:`TargetLimiter` per provider quota (``Target.scope``) holds a bucket for each
configured dimension of ``Target.limits`` -- requests per minute, input tokens per minute,
output tokens per minute -- and a concurrency slot counter. A request reserves, before it is
sent, one request plus its counted input tokens plus its ``max_tokens``; afterwards the
reservation is settled against the usage the provider reported, so unused ``max_tokens`` come
back and an under-count becomes debt that delays later requests.

Capacity is the configured quota times a safety factor (0.9 by default): the margin covers
clock skew, other clients of the same key and counting differences between our tokenizer and
the provider's.

Waiting is bounded by the request's deadline. ``acquire`` computes, from the buckets and the
requests queued ahead, when the request could be granted; when that is not before its
``deadline_at`` it raises :class:`LimitWaitTooLong` at once, without waiting, so the router
can skip the candidate and record why. A request that was admitted but later cannot fit any
more (a 429 blocked the buckets, headers said less remains, other tenants' requests were
queued ahead of it) is rejected as soon as that is known, and at its deadline at the latest.

Queued requests are served in fair order across tenants (start-time fair queuing, one FIFO
per tenant), strictly head first, so a tenant sending ten times more than another cannot
take the other's share, and large requests are not starved by small ones.

Two bucket algorithms are available. ``"window"`` (the default, :class:`WindowBucket`) gives
tokens back exactly one window (60 s) after they were taken, so no rolling minute ever
carries more than the capacity: that satisfies providers that count in fixed windows,
sliding windows and token buckets alike. ``"bucket"`` (:class:`TokenBucket`) refills
continuously; it matches a provider that documents a token bucket (Anthropic does), sends
more smoothly after a burst, but can send up to twice its capacity in the first minute after
an idle period, which a window-counting provider answers with 429s.

All times are seconds on the event loop's clock (``loop.time()``), so the limiter runs on
real time in production and on virtual time (looptime) in tests and in the lab.

**Shared buckets.** With a ``store`` (``failover.state``; ``LimiterBoard(store=...)``) the
buckets and concurrency slots of a quota live in the store, keyed by ``Target.scope``, on
the store's clock, and every process reserves from the same window: one atomic reserve per
try, then the settle, header sync and 429 block written in the background. A request that
does not fit polls again after the wait the store names (never past its deadline); fair
queueing across tenants then holds within each process, not across the fleet. Slots are
leases, so a crashed process's slots come back. While the store is unavailable, the limiter
falls back to its in-process buckets sized at ``local_share`` of the quota.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
import random
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, Self, cast

from ..model import Dialect, FailoverError, Limits, RateLimitInfo, Target
from ..state import GuardedStore, Reserved, StateUnavailable

__all__ = [
    "DEFAULT_TENANT",
    "Algorithm",
    "Bucket",
    "BucketSnapshot",
    "Dimension",
    "LimitWaitTooLong",
    "LimiterBoard",
    "LimiterSnapshot",
    "Reservation",
    "SharedReservation",
    "TargetLimiter",
    "TokenBucket",
    "WindowBucket",
    "combined_tpm",
]

Dimension = Literal["rpm", "input_tpm", "output_tpm", "concurrency", "retry_after"]
Algorithm = Literal["window", "bucket"]

DEFAULT_TENANT = ""  # the tenant of requests that name none
WINDOW = 60.0  # provider quotas are per minute
DEFAULT_PENALTY = 1.0  # seconds the buckets stay shut after a 429 that named no wait

_EPS = 1e-9  # relative tolerance on bucket levels, so float dust never turns into a wait


def _tol(capacity: float) -> float:
    return _EPS * max(1.0, capacity)


def _now() -> float:
    return asyncio.get_running_loop().time()


def _fmt(n: float) -> str:
    return f"{n:,.0f}" if n == int(n) else f"{n:,.1f}"


class LimitWaitTooLong(FailoverError):
    """The limiter cannot grant this request before its deadline: skip the candidate.

    ``wait_seconds`` is the wait that would still be needed (``math.inf`` when the request is
    larger than a whole bucket or the wait is unknown, as for a concurrency slot);
    ``left`` is the time that was left before ``deadline_at``; ``dimension`` names what
    binds; ``too_large`` says the request can never fit this target's bucket. ``reason``
    (also ``str(exc)``) is written for ``Exclusion.reason``.
    """

    def __init__(
        self,
        wait_seconds: float,
        dimension: Dimension,
        *,
        left: float,
        queued_ahead: int = 0,
        reason: str | None = None,
        too_large: bool = False,
    ) -> None:
        self.wait_seconds = wait_seconds
        self.too_large = too_large  # the request can never fit this target's bucket
        self.dimension: Dimension = dimension
        self.left = max(0.0, left)
        self.queued_ahead = queued_ahead
        if reason is None:
            ahead = f", {queued_ahead} queued ahead" if queued_ahead else ""
            reason = f"rate limit {dimension}: wait {wait_seconds:.1f}s exceeds {self.left:.1f}s left{ahead}"
        self.reason = reason
        super().__init__(reason)


# -- buckets ---------------------------------------------------------------------------------


class Bucket(Protocol):
    """What a limiter needs from one rate dimension. ``now`` never moves backwards."""

    @property
    def capacity(self) -> float: ...

    def level(self, now: float) -> float:
        """What could be taken now (negative while in debt), ignoring a block."""
        ...

    def blocked_until(self) -> float: ...

    def time_until(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` can be taken if nothing else is; ``inf`` if never."""
        ...

    def reserve(self, amount: float, now: float) -> bool:
        """Take ``amount`` if it is available now; False (and nothing taken) otherwise."""
        ...

    def charge(self, amount: float, now: float) -> None:
        """Take ``amount`` unconditionally (reconciliation of an under-estimate: debt)."""
        ...

    def refund(self, amount: float, now: float, *, taken_at: float | None = None) -> None:
        """Give back ``amount`` of what was taken at ``taken_at``."""
        ...

    def sync(self, remaining: float, reset_in: float | None, now: float) -> bool:
        """Follow the provider: at most ``remaining`` left; True if that lowered the level."""
        ...

    def drain_until(self, until: float, now: float) -> None:
        """Give nothing before ``until`` (a 429 with Retry-After)."""
        ...

    def clone(self) -> Self: ...


class TokenBucket:
    """A token bucket that refills continuously at ``refill_per_second`` up to ``capacity``.

    It starts full. The level may go negative (debt): a request that used more than it
    reserved delays the ones after it.

    >>> b = TokenBucket(10, 1.0)
    >>> b.reserve(10, now=0.0), b.time_until(3, now=0.0)
    (True, 3.0)
    """

    __slots__ = ("_blocked", "_capacity", "_level", "_rate", "_updated")

    def __init__(self, capacity: float, refill_per_second: float) -> None:
        if not capacity > 0 or not refill_per_second > 0:
            raise ValueError("TokenBucket needs capacity > 0 and refill_per_second > 0")
        self._capacity = float(capacity)
        self._rate = float(refill_per_second)
        self._level = self._capacity
        self._updated = -math.inf
        self._blocked = -math.inf

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def refill_per_second(self) -> float:
        return self._rate

    def _advance(self, now: float) -> None:
        start = max(self._updated, self._blocked)
        if now > start:
            self._level = min(self._capacity, self._level + (now - start) * self._rate)
        self._updated = max(self._updated, now)

    def level(self, now: float) -> float:
        self._advance(now)
        return self._level

    def blocked_until(self) -> float:
        return self._blocked

    def time_until(self, amount: float, now: float) -> float:
        if amount > self._capacity + _tol(self._capacity):
            return math.inf
        self._advance(now)
        start = max(now, self._blocked)  # nothing accrues while blocked
        if self._level >= amount - _tol(self._capacity):
            return start - now
        return start - now + (amount - self._level) / self._rate

    def reserve(self, amount: float, now: float) -> bool:
        if self.time_until(amount, now) > 0:
            return False
        self._level -= amount
        return True

    def charge(self, amount: float, now: float) -> None:
        self._advance(now)
        self._level -= amount

    def refund(self, amount: float, now: float, *, taken_at: float | None = None) -> None:
        del taken_at  # a token bucket does not remember when tokens were taken
        self._advance(now)
        self._level = min(self._capacity, self._level + amount)

    def sync(self, remaining: float, reset_in: float | None, now: float) -> bool:
        if reset_in is not None and reset_in <= 0:
            return False  # already reset: the count is stale
        self._advance(now)
        target = remaining
        if reset_in is not None:
            # "full again in reset_in seconds": we must not refill to capacity any sooner
            target = min(target, self._capacity - self._rate * reset_in)
        if target < self._level - _tol(self._capacity):
            self._level = target
            return True
        return False

    def drain_until(self, until: float, now: float) -> None:
        self._advance(now)
        self._level = min(self._level, 0.0)
        self._blocked = max(self._blocked, until)

    def clone(self) -> Self:
        other = object.__new__(type(self))
        other._capacity, other._rate, other._level = self._capacity, self._rate, self._level
        other._updated, other._blocked = self._updated, self._blocked
        return other


class WindowBucket:
    """Tokens taken at ``t`` come back at ``t + window``: no rolling window exceeds ``capacity``.

    A sliding-window log, with the entries of one instant merged. A request that used more
    than it reserved is charged at the moment that is learned (debt, given back one window
    later); a refund shrinks the entry of the moment the tokens were taken. When the
    provider's headers say less remains than we think, a phantom entry holds the difference
    until the provider's reset.

    >>> b = WindowBucket(10)
    >>> b.reserve(10, now=0.0), b.time_until(3, now=5.0)
    (True, 55.0)
    """

    __slots__ = ("_blocked", "_capacity", "_entries", "_used", "_window")

    def __init__(self, capacity: float, window: float = WINDOW) -> None:
        if not capacity > 0 or not window > 0:
            raise ValueError("WindowBucket needs capacity > 0 and window > 0")
        self._capacity = float(capacity)
        self._window = float(window)
        self._entries: deque[list[float]] = deque()  # [expires_at, amount], by expiry
        self._used = 0.0
        self._blocked = -math.inf

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def window(self) -> float:
        return self._window

    def _prune(self, now: float) -> None:
        entries = self._entries
        while entries and entries[0][0] <= now:
            self._used -= entries.popleft()[1]
        if not entries:
            self._used = 0.0  # no float dust left behind

    def _insert(self, expires: float, amount: float) -> None:
        if amount <= 0:
            return
        entries = self._entries
        i = len(entries)
        while i > 0 and entries[i - 1][0] > expires:
            i -= 1
        if i > 0 and entries[i - 1][0] == expires:
            entries[i - 1][1] += amount
        else:
            entries.insert(i, [expires, amount])
        self._used += amount

    def level(self, now: float) -> float:
        self._prune(now)
        return self._capacity - self._used

    def blocked_until(self) -> float:
        return self._blocked

    def time_until(self, amount: float, now: float) -> float:
        if amount > self._capacity + _tol(self._capacity):
            return math.inf
        self._prune(now)
        start = max(now, self._blocked)
        allowed = self._capacity - amount + _tol(self._capacity)  # what may stay in use
        used = self._used
        if used <= allowed:
            return start - now
        when = now
        for expires, taken in self._entries:
            used -= taken
            when = expires
            if used <= allowed:
                break
        return max(start, when) - now

    def reserve(self, amount: float, now: float) -> bool:
        if self.time_until(amount, now) > 0:
            return False
        self._insert(now + self._window, amount)
        return True

    def charge(self, amount: float, now: float) -> None:
        self._prune(now)
        self._insert(now + self._window, amount)

    def refund(self, amount: float, now: float, *, taken_at: float | None = None) -> None:
        self._prune(now)
        if amount <= 0:
            return
        entries = self._entries
        if taken_at is not None:
            expires = taken_at + self._window
            for entry in reversed(entries):
                if entry[0] == expires:
                    back = min(amount, entry[1])
                    entry[1] -= back
                    self._used -= back
                    return
                if entry[0] < expires:
                    break
            return  # those tokens have already come back
        for entry in reversed(entries):  # no time given: the newest tokens
            back = min(amount, entry[1])
            entry[1] -= back
            self._used -= back
            amount -= back
            if amount <= 0:
                return

    def sync(self, remaining: float, reset_in: float | None, now: float) -> bool:
        if reset_in is not None and reset_in <= 0:
            return False  # already reset: the count is stale
        self._prune(now)
        excess = (self._capacity - self._used) - remaining
        if excess <= _tol(self._capacity):
            return False
        self._insert(now + (reset_in if reset_in is not None else self._window), excess)
        return True

    def drain_until(self, until: float, now: float) -> None:
        self._prune(now)
        self._blocked = max(self._blocked, until)

    def clone(self) -> Self:
        other = object.__new__(type(self))
        other._capacity, other._window, other._used, other._blocked = (
            self._capacity,
            self._window,
            self._used,
            self._blocked,
        )
        other._entries = deque([e[0], e[1]] for e in self._entries)
        return other


# -- reservations ----------------------------------------------------------------------------


class Reservation:
    """What one granted request holds: a request, tokens, and a concurrency slot.

    Exactly one of :meth:`settle` (a response with usage came back) or :meth:`release`
    (no usage: cancelled, failed, or never sent) must be called, once; a second call raises
    ``RuntimeError``. ``waited`` is the time spent queued, for the RouteRecord.
    """

    __slots__ = (
        "_done",
        "_in",
        "_limiter",
        "_out",
        "granted_at",
        "input_tokens",
        "max_output_tokens",
        "tenant",
        "waited",
    )

    def __init__(
        self,
        limiter: TargetLimiter,
        *,
        tenant: str,
        input_tokens: int,
        max_output_tokens: int,
        in_part: Mapping[str, float],
        out_part: Mapping[str, float],
        granted_at: float,
        waited: float,
    ) -> None:
        self._limiter = limiter
        self.tenant = tenant
        self.input_tokens = input_tokens
        self.max_output_tokens = max_output_tokens
        self._in = dict(in_part)  # per bucket: what was reserved for the request and its input
        self._out = dict(out_part)  # per bucket: what was reserved for its output (max_tokens)
        self.granted_at = granted_at
        self.waited = waited
        self._done = False

    @property
    def limiter(self) -> TargetLimiter:
        return self._limiter

    @property
    def done(self) -> bool:
        return self._done

    @property
    def amounts(self) -> dict[str, float]:
        """Reserved per bucket dimension ("rpm", "input_tpm", "output_tpm")."""
        return {d: self._in.get(d, 0.0) + self._out.get(d, 0.0) for d in _DIMS if d in self._in or d in self._out}

    def _finish(self, what: str) -> None:
        if self._done:
            raise RuntimeError(f"reservation already settled or released (second {what})")
        self._done = True

    def settle(self, usage_input: int, usage_output: int) -> None:
        """Reconcile with the usage the provider reported and free the concurrency slot.

        Unused input tokens come back at once; the output reservation is replaced by the
        actual output, counted from now (providers count output as it is generated). A
        usage above the reservation becomes debt.
        """
        self._finish("settle")
        self._limiter._settle(self, max(0, usage_input), max(0, usage_output))

    def release(self, *, sent: bool) -> None:
        """No usage came back: give the tokens back and free the concurrency slot.

        ``sent=True`` keeps the request counted in RPM (the provider saw it); ``sent=False``
        (cancelled or failed before sending) gives everything back. When a sent request's
        input was probably processed (a timeout mid-generation), prefer
        ``settle(input_tokens, 0)``.
        """
        self._finish("release")
        self._limiter._release(self, sent=sent)

    def __repr__(self) -> str:
        state = "done" if self._done else "held"
        return f"Reservation({self._limiter.name!r}, tenant={self.tenant!r}, {self.amounts}, {state})"


class SharedReservation(Reservation):
    """A grant from the shared store: settling or releasing it writes back to the store."""

    __slots__ = ("reservation_id", "store_at")

    def __init__(self, limiter: TargetLimiter, *, reservation_id: str, store_at: float, **kw: Any) -> None:
        super().__init__(limiter, **kw)
        self.reservation_id = reservation_id
        self.store_at = store_at  # the grant's time on the store's clock

    def settle(self, usage_input: int, usage_output: int) -> None:
        self._finish("settle")
        self._limiter._settle_shared(self, max(0, usage_input), max(0, usage_output))

    def release(self, *, sent: bool) -> None:
        self._finish("release")
        self._limiter._release_shared(self, sent=sent)


_SLOT_POLL = 0.05  # seconds between tries for a shared concurrency slot


# -- the limiter -----------------------------------------------------------------------------


@dataclass(eq=False, slots=True, kw_only=True)
class _Waiter:
    tenant: str
    input_tokens: int
    max_output_tokens: int
    in_part: dict[str, float]
    out_part: dict[str, float]
    amounts: dict[str, float]
    deadline_at: float
    enqueued_at: float
    seq: int
    cost: float
    start: float = 0.0  # fair-queuing tags
    finish: float = 0.0
    blocking: Dimension = "concurrency"
    queued: bool = False
    future: asyncio.Future[Reservation] | None = None


def _key(w: _Waiter) -> tuple[float, int]:
    return (w.start, w.seq)


@dataclass(slots=True)
class _Tenant:
    queue: deque[_Waiter] = field(default_factory=deque)
    last_finish: float = 0.0


@dataclass(slots=True)
class _Projection:
    """The buckets as they would be once every queued request (in order) is granted."""

    buckets: dict[str, Bucket]
    t: float  # when the last one is granted
    dim: Dimension  # what made it wait
    last: tuple[float, int] | None  # its fair-queuing key
    count: int  # how many are projected


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketSnapshot:
    dimension: str
    capacity: float
    level: float  # available now; negative while in debt
    blocked_for: float  # seconds until a 429 block ends (0: not blocked)
    provider_limit: int | None = None  # the last limit the provider's headers reported


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterSnapshot:
    name: str
    at: float
    buckets: tuple[BucketSnapshot, ...]
    concurrency: int | None
    in_flight: int
    waiting: Mapping[str, int]  # queued requests per tenant ("" for requests naming none)
    granted: int  # totals since the limiter was created
    rejected: int
    # Whose buckets these are: "local" (no shared store: this process's, the only ones),
    # "shared" (the fleet's, read from the store; capacity is the fleet's, in_flight the slots
    # leased fleet-wide; waiting and the totals stay this process's), "fallback" (a shared
    # limiter's local buckets at local_share: what it enforces while the store is away).
    view: Literal["local", "shared", "fallback"] = "local"

    @property
    def queued(self) -> int:
        return sum(self.waiting.values())


_DIMS: tuple[Literal["rpm", "input_tpm", "output_tpm"], ...] = ("rpm", "input_tpm", "output_tpm")


class TargetLimiter:
    """Rate limits and concurrency for one provider quota, with a fair queue in front.

    ``limits`` fields that are None are not limited. ``combined_tpm`` makes the input-TPM
    bucket count output tokens too (OpenAI's TPM counts prompt plus completion); see
    :func:`combined_tpm`.

    Typical use by the router::

        res = await limiter.acquire(input_tokens=n, max_output_tokens=req.max_tokens,
                                    deadline_at=deadline.at - target.timeouts.min_useful,
                                    tenant=envelope.tenant)          # or LimitWaitTooLong
        ... send ...
        res.settle(usage.input_tokens, usage.output_tokens)          # or res.release(sent=...)
        limiter.observe(attempt_rate_limits, reservation=res)
        if a 429: limiter.penalize(failure.retry_after)
    """

    def __init__(
        self,
        limits: Limits,
        *,
        safety: float = 0.9,
        algorithm: Algorithm = "window",
        window: float = WINDOW,
        combined_tpm: bool = False,
        name: str = "",
        store: GuardedStore | None = None,
        scope: str = "",
        lease: float = 300.0,
    ) -> None:
        if not 0 < safety <= 1:
            raise ValueError("safety must be in (0, 1]")
        if algorithm not in ("window", "bucket"):
            raise ValueError(f"unknown algorithm {algorithm!r}: 'window' or 'bucket'")
        if limits.concurrency is not None and limits.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.name = name
        self.limits = limits
        self.safety = safety
        self.algorithm: Algorithm = algorithm
        self.combined_tpm = combined_tpm
        self._configured: dict[str, int] = {}
        self._buckets: dict[str, Bucket] = {}
        self._shared_caps: dict[str, float] = {}
        for dim in _DIMS:
            quota = getattr(limits, dim)
            if quota is None:
                continue
            if quota <= 0:
                raise ValueError(f"{dim} must be positive")
            capacity = quota * safety
            if dim == "rpm":
                capacity = max(1.0, capacity)  # one request must always fit
            if store is not None:  # the fleet's bucket is shared; the local one is the fallback share
                self._shared_caps[dim] = capacity
                capacity = max(1.0, capacity * store.local_share) if dim == "rpm" else capacity * store.local_share
            self._configured[dim] = quota
            self._buckets[dim] = (
                WindowBucket(capacity, window) if algorithm == "window" else TokenBucket(capacity, capacity / window)
            )
        self._window = window
        self._concurrency = limits.concurrency
        self._store = store
        if store is not None:
            # Shared: acquire/observe/penalize go through the store; the in-process buckets
            # (at local_share of the quota) answer while it is unavailable. Swapped here so the
            # in-process path has no extra check.
            self._scope = scope or name
            self._lease = lease
            self._shared_slots = limits.concurrency
            if limits.concurrency is not None:
                self._concurrency = max(1, math.floor(limits.concurrency * store.local_share))
            self._tasks: set[asyncio.Task[object]] = set()
            self.acquire = self._acquire_shared  # type: ignore[method-assign]
            self.observe = self._observe_shared  # type: ignore[method-assign]
            self.penalize = self._penalize_shared  # type: ignore[method-assign]
        self._in_flight = 0
        self._tenants: dict[str, _Tenant] = {}
        self._queued = 0
        self._vtime = 0.0
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._blocked_until = -math.inf  # a 429 block, for limiters without buckets too
        self._projection: _Projection | None = None
        self._log: deque[tuple[float, Reservation]] = deque()  # recent grants, for header sync
        self._provider_limits: dict[str, int] = {}
        self._granted = 0
        self._rejected = 0

    # -- public API ---------------------------------------------------------------------------

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The bucket dimensions this limiter enforces (concurrency is separate)."""
        return tuple(self._buckets)

    def bucket(self, dimension: str) -> Bucket | None:
        return self._buckets.get(dimension)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def queued(self) -> int:
        return self._queued

    def blocked_for(self, now: float) -> float:
        """Seconds this limiter still refuses everything after a 429 (:meth:`penalize`); 0 if none."""
        return max(0.0, self._blocked_until - now)

    def room_in(self, input_tokens: int, max_output_tokens: int, now: float) -> float:
        """A lower bound on the seconds until this request could be granted (a read: nothing
        is taken or queued): a 429 block, and the local buckets' room for its amounts, not
        counting the requests queued ahead. With a shared store only the block counts (the
        local buckets are the fallback share, not the fleet's view). Infinite: it never fits."""
        if self._store is not None or not self._buckets:
            return self.blocked_for(now)
        in_part, out_part = self._parts(max(0, input_tokens), max(0, max_output_tokens))
        amounts = {d: in_part.get(d, 0.0) + out_part.get(d, 0.0) for d in self._buckets}
        return self._wait(amounts, now)[0]

    async def acquire(
        self,
        *,
        input_tokens: int,
        max_output_tokens: int,
        deadline_at: float,
        tenant: str | None = None,
    ) -> Reservation:
        """Wait until this request may be sent, in fair order, and reserve for it.

        ``deadline_at`` (loop time; ``math.inf`` for none) is the latest moment at which
        sending is still useful. Raises :class:`LimitWaitTooLong` at once when the wait does
        not fit before it (or the request is larger than a whole bucket), later if that
        becomes clear while queued, and at ``deadline_at`` at the latest. Cancelling the
        caller removes the request from the queue.
        """
        loop = asyncio.get_running_loop()
        now = loop.time()
        w = self._waiter(input_tokens, max_output_tokens, deadline_at, tenant or DEFAULT_TENANT, now)
        for dim, amount in w.amounts.items():
            cap = self._buckets[dim].capacity
            if amount > cap + _tol(cap):
                raise self._too_large(dim, amount, cap, left=deadline_at - now)
        ten = self._tenants.get(w.tenant)
        if ten is None:
            ten = self._tenants[w.tenant] = _Tenant()
        w.start = max(self._vtime, ten.last_finish)
        w.finish = w.start + w.cost

        # Fast path: nobody queued, everything available now.
        if self._queued == 0 and self._slot_free() and self._wait(w.amounts, now)[0] <= 0:
            ten.last_finish = w.finish
            self._projection = None
            return self._grant(w, now)

        at, dim, ahead = self._estimate(w, now)
        if at >= deadline_at or math.isinf(at):
            self._rejected += 1
            raise LimitWaitTooLong(at - now, dim, left=deadline_at - now, queued_ahead=ahead)
        w.blocking = dim
        ten.last_finish = w.finish
        ten.queue.append(w)  # tags only grow within a tenant: its FIFO stays sorted
        w.queued = True
        self._queued += 1
        fut: asyncio.Future[Reservation] = loop.create_future()
        w.future = fut
        if self._buckets and self._projection is None:  # it joined ahead of others: they may not fit now
            self._recheck(now)
        self._pump()
        try:
            async with asyncio.timeout_at(None if math.isinf(deadline_at) else deadline_at):
                return await fut
        except TimeoutError:
            self._abandon(w)
            self._rejected += 1
            waited = loop.time() - w.enqueued_at
            if w.blocking == "concurrency":
                reason = (
                    f"rate limit concurrency: no slot free before the deadline "
                    f"({self._in_flight} in flight, waited {waited:.1f}s)"
                )
            else:
                reason = f"rate limit {w.blocking}: not granted before the deadline (waited {waited:.1f}s)"
            raise LimitWaitTooLong(math.inf, w.blocking, left=0.0, reason=reason) from None
        except BaseException:
            self._abandon(w)
            raise

    _acquire_local = acquire  # the in-process path, which the shared one falls back to

    def observe(
        self, info: RateLimitInfo | None, now: float | None = None, *, reservation: Reservation | None = None
    ) -> None:
        """Follow a response's rate-limit headers: never assume more remains than they say.

        Each dimension's ``remaining`` is put on our scale (minus the safety headroom of the
        provider's limit) and, when ``reservation`` (the request the response belongs to) is
        given, minus what this limiter granted since that request was sent (the provider had
        not seen those yet). Buckets only ever go down; ``reset`` says until when.
        """
        if info is None:
            return
        now = _now() if now is None else now
        horizon = now - self._window
        while self._log and self._log[0][0] < horizon:
            self._log.popleft()
        lowered = False
        for dim, (limit, remaining, reset) in self._header_triples(info).items():
            bucket = self._buckets.get(dim)
            if bucket is None or remaining is None:
                continue
            if limit is not None:
                self._provider_limits[dim] = limit
            reference = limit if limit is not None else self._configured[dim]
            ours = remaining - reference * (1.0 - self.safety) - self._unseen(dim, reservation)
            lowered |= bucket.sync(ours, reset, now)
        if lowered:
            self._worse(now)

    def penalize(self, retry_after: float | None, now: float | None = None) -> None:
        """After a 429: give nothing until ``retry_after`` seconds from now (default 1 s)."""
        now = _now() if now is None else now
        wait = DEFAULT_PENALTY if retry_after is None else retry_after
        if wait <= 0:
            return
        until = now + wait
        self._blocked_until = max(self._blocked_until, until)
        for bucket in self._buckets.values():
            bucket.drain_until(until, now)
        self._worse(now)

    _observe_local = observe
    _penalize_local = penalize

    # -- shared buckets (failover.state) ------------------------------------------------------

    async def _acquire_shared(
        self,
        *,
        input_tokens: int,
        max_output_tokens: int,
        deadline_at: float,
        tenant: str | None = None,
    ) -> Reservation:
        """:meth:`acquire` against the store's buckets: reserve, or sleep the wait it names and retry."""
        assert self._store is not None
        loop = asyncio.get_running_loop()
        t0 = now = loop.time()
        slept = 0.0
        w = self._waiter(input_tokens, max_output_tokens, deadline_at, tenant or DEFAULT_TENANT, now)
        caps = self._shared_caps
        for dim, amount in w.amounts.items():
            cap = caps[dim]
            if amount > cap + _tol(cap):
                raise self._too_large(dim, amount, cap, left=deadline_at - now)
        rid = os.urandom(8).hex()
        while True:
            r = await self._reserve_shared(w.amounts, rid)
            if r is None:
                break
            now = loop.time()
            if not r.granted and self._tasks and now < deadline_at:
                # This process's own settles may still be on their way to the store (a slot, unused
                # tokens): let them land and ask again, rather than poll or report a wait that is not.
                await asyncio.gather(*tuple(self._tasks), return_exceptions=True)
                r = await self._reserve_shared(w.amounts, rid)
                if r is None:
                    break
                now = loop.time()
            if r.granted:
                self._in_flight += 1
                self._granted += 1
                return SharedReservation(
                    self,
                    reservation_id=rid,
                    store_at=r.at,
                    tenant=w.tenant,
                    input_tokens=input_tokens,
                    max_output_tokens=max_output_tokens,
                    in_part=w.in_part,
                    out_part=w.out_part,
                    granted_at=now,
                    waited=slept,  # time spent waiting for room; the store's round trips are not
                )
            # A slot frees when someone settles, which the store cannot announce: poll.
            wait = r.wait if math.isfinite(r.wait) else _SLOT_POLL
            if now + wait >= deadline_at:
                self._rejected += 1
                dim = cast(Dimension, r.dimension or "concurrency")
                if math.isfinite(r.wait):
                    raise LimitWaitTooLong(r.wait, dim, left=deadline_at - now)
                reason = f"rate limit concurrency: no shared slot free before the deadline (waited {now - t0:.1f}s)"
                raise LimitWaitTooLong(math.inf, dim, left=deadline_at - now, reason=reason)
            # A little jitter, so the processes that were refused together do not retry together.
            await asyncio.sleep(wait + random.uniform(0.0, min(0.05, wait * 0.1 + 0.005)))
            slept += loop.time() - now
        # The store is unavailable: fail open, at this process's local share of the quota.
        return await self._acquire_local(
            input_tokens=input_tokens,
            max_output_tokens=max_output_tokens,
            deadline_at=deadline_at,
            tenant=tenant,
        )

    async def _reserve_shared(self, amounts: dict[str, float], rid: str) -> Reserved | None:
        """One reservation on the store; None when it is unavailable (the caller falls back)."""
        guard = self._store
        assert guard is not None
        try:
            return await guard.call(
                guard.store.reserve,
                self._scope,
                amounts,
                self._shared_caps,
                window=self._window,
                reservation_id=rid,
                slots=self._shared_slots,
                lease=self._lease,
            )
        except StateUnavailable:
            return None

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait until every write made in the background has reached the store."""
        while self._store is not None and self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    async def _write(self, fn: Callable[..., Awaitable[object]], *args: Any, **kw: Any) -> None:
        guard = self._store
        assert guard is not None
        try:
            await guard.call(fn, *args, **kw)
        except StateUnavailable:
            return  # the shared bucket keeps the reservation until its window (or lease) ends

    def _settle_shared(self, res: SharedReservation, usage_input: int, usage_output: int) -> None:
        refund: dict[str, float] = {}
        charge: dict[str, float] = {}
        for d in self._buckets:
            if d == "rpm":
                continue
            actual_in = float(usage_input) if d == "input_tpm" else 0.0
            actual_out = float(usage_output) if (d == "output_tpm" or self.combined_tpm) else 0.0
            extra_in = actual_in - res._in.get(d, 0.0)
            back = max(0.0, -extra_in) + res._out.get(d, 0.0)
            more = max(0.0, extra_in) + actual_out
            if back:
                refund[d] = back
            if more:
                charge[d] = more
        self._finish_shared(res, refund, charge)

    def _release_shared(self, res: SharedReservation, *, sent: bool) -> None:
        refund = {d: a for d, a in res.amounts.items() if a and not (d == "rpm" and sent)}
        self._finish_shared(res, refund, {})

    def _finish_shared(self, res: SharedReservation, refund: dict[str, float], charge: dict[str, float]) -> None:
        guard = self._store
        assert guard is not None
        self._spawn(
            self._write(
                guard.store.settle,
                self._scope,
                res.reservation_id,
                granted_at=res.store_at,
                window=self._window,
                refund=refund,
                charge=charge,
                free_slot=self._shared_slots is not None,
            )
        )
        self._in_flight -= 1
        if self._queued:
            self._pump()

    def _observe_shared(
        self, info: RateLimitInfo | None, now: float | None = None, *, reservation: Reservation | None = None
    ) -> None:
        """Headers lower the shared bucket (and the local fallback share, which they also bound)."""
        if info is None:
            return
        guard = self._store
        assert guard is not None
        since = reservation.store_at if isinstance(reservation, SharedReservation) else None
        for dim, (limit, remaining, reset) in self._header_triples(info).items():
            if dim not in self._shared_caps or remaining is None:
                continue
            if limit is not None:
                self._provider_limits[dim] = limit
            reference = limit if limit is not None else self._configured[dim]
            ours = remaining - reference * (1.0 - self.safety)
            self._spawn(
                self._write(
                    guard.store.sync,
                    self._scope,
                    dim,
                    remaining=ours,
                    reset_in=reset,
                    capacity=self._shared_caps[dim],
                    window=self._window,
                    since=since,
                )
            )
        self._observe_local(info, now, reservation=None if since is not None else reservation)

    def _penalize_shared(self, retry_after: float | None, now: float | None = None) -> None:
        """A 429 blocks the shared bucket for every process, and this process's fallback too."""
        wait = DEFAULT_PENALTY if retry_after is None else retry_after
        if wait > 0:
            guard = self._store
            assert guard is not None
            self._spawn(self._write(guard.store.block, self._scope, wait, window=self._window))
        self._penalize_local(retry_after, now)

    def snapshot(self, now: float | None = None) -> LimiterSnapshot:
        """Levels, in-flight and waiting per tenant, for metrics."""
        now = _now() if now is None else now
        buckets = tuple(
            BucketSnapshot(
                dimension=dim,
                capacity=b.capacity,
                level=b.level(now),
                blocked_for=max(0.0, b.blocked_until() - now),
                provider_limit=self._provider_limits.get(dim),
            )
            for dim, b in self._buckets.items()
        )
        waiting = {name: len(t.queue) for name, t in self._tenants.items() if t.queue}
        return LimiterSnapshot(
            name=self.name,
            at=now,
            buckets=buckets,
            concurrency=self._concurrency,
            in_flight=self._in_flight,
            waiting=waiting,
            granted=self._granted,
            rejected=self._rejected,
            view="local" if self._store is None else "fallback",
        )

    async def shared_snapshot(self, now: float | None = None) -> LimiterSnapshot:
        """:meth:`snapshot` with the fleet's buckets read from the store (``view="shared"``).

        Without a store, or while it is unreachable, the snapshot of this process's buckets
        (``view`` says which). One read-only script on the store; nothing is taken.
        """
        snap = self.snapshot(now)
        guard = self._store
        if guard is None or not guard.up:
            return snap
        try:
            v = await guard.call(guard.store.bucket_view, self._scope, dict(self._shared_caps))
        except StateUnavailable:
            return snap
        buckets = tuple(
            replace(b, capacity=self._shared_caps[b.dimension], level=v.levels[b.dimension], blocked_for=v.blocked_for)
            for b in snap.buckets
        )
        slots = self._shared_slots
        return replace(
            snap,
            buckets=buckets,
            concurrency=slots,
            in_flight=v.slots if slots is not None else snap.in_flight,
            view="shared",
        )

    def __repr__(self) -> str:
        return f"TargetLimiter({self.name!r}, {self.limits}, safety={self.safety}, algorithm={self.algorithm!r})"

    # -- amounts and waits --------------------------------------------------------------------

    def _too_large(self, dim: str, amount: float, cap: float, *, left: float) -> LimitWaitTooLong:
        """The error for a request larger than a whole bucket (local or shared): no wait helps."""
        self._rejected += 1
        unit = "request" if dim == "rpm" else "tokens"
        return LimitWaitTooLong(
            math.inf,
            cast(Dimension, dim),
            left=left,
            reason=(
                f"rate limit {dim}: needs {_fmt(amount)} {unit}, more than the whole bucket "
                f"({_fmt(cap)} = {self._configured[dim]:,} x {self.safety:g})"
            ),
            too_large=True,
        )

    def _waiter(self, input_tokens: int, max_output: int, deadline_at: float, tenant: str, now: float) -> _Waiter:
        """One request's amounts and fair-queue cost; checked here for both the local and the shared path."""
        if input_tokens < 0 or max_output < 0:
            raise ValueError("token counts must be >= 0")
        in_part, out_part = self._parts(input_tokens, max_output)
        amounts = {d: in_part.get(d, 0.0) + out_part.get(d, 0.0) for d in self._buckets}
        # The fair-queuing cost is the request's dominant share of the capacity.
        cost = max((a / self._buckets[d].capacity for d, a in amounts.items()), default=1.0)
        self._seq += 1
        return _Waiter(
            tenant=tenant,
            input_tokens=input_tokens,
            max_output_tokens=max_output,
            in_part=in_part,
            out_part=out_part,
            amounts=amounts,
            deadline_at=deadline_at,
            enqueued_at=now,
            seq=self._seq,
            cost=max(cost, 1e-9),
        )

    def _parts(self, input_tokens: int, max_output: int) -> tuple[dict[str, float], dict[str, float]]:
        """A request's amounts per bucket: what it sends (settled as sent) and what it may get."""
        in_part: dict[str, float] = {}
        out_part: dict[str, float] = {}
        if "rpm" in self._buckets:
            in_part["rpm"] = 1.0
        if "input_tpm" in self._buckets:
            in_part["input_tpm"] = float(input_tokens)
            if self.combined_tpm:
                out_part["input_tpm"] = float(max_output)
        if "output_tpm" in self._buckets:
            out_part["output_tpm"] = float(max_output)
        return in_part, out_part

    def _slot_free(self) -> bool:
        return self._concurrency is None or self._in_flight < self._concurrency

    def _wait(self, amounts: Mapping[str, float], now: float) -> tuple[float, Dimension]:
        worst, dim = max(0.0, self._blocked_until - now), "retry_after"
        for d, amount in amounts.items():
            w = self._buckets[d].time_until(amount, now)
            if w > worst:
                worst, dim = w, d
        return worst, cast(Dimension, dim)

    def _fit(
        self, buckets: Mapping[str, Bucket], amounts: Mapping[str, float], t: float, binding: Dimension
    ) -> tuple[float, Dimension]:
        """The earliest time from ``t`` at which every bucket allows ``amounts``.

        ``binding`` is what held the queue up until ``t``; it stays the answer unless this
        request must wait longer for one of its own dimensions.
        """
        if self._blocked_until > t:
            t, binding = self._blocked_until, "retry_after"
        for _ in range(8):  # availability only grows with time: one step, a few for float dust
            worst = 0.0
            for d, amount in amounts.items():
                w = buckets[d].time_until(amount, t)
                if w > worst:
                    worst, binding = w, cast(Dimension, d)
            if worst <= 0 or math.isinf(worst):
                return t + worst, binding
            t += worst
        return t, binding

    def _idle_dim(self) -> Dimension:
        """What a request that waits for none of its buckets waits for: a slot."""
        if self._concurrency is not None or not self._buckets:
            return "concurrency"
        return cast(Dimension, next(iter(self._buckets)))

    def _order(self) -> Iterator[_Waiter]:
        """Every queued request, in the order it will be served."""
        return heapq.merge(*(t.queue for t in self._tenants.values()), key=_key)

    def _estimate(self, w: _Waiter, now: float) -> tuple[float, Dimension, int]:
        """When ``w`` would be granted behind the requests queued ahead of it (a lower bound)."""
        if not self._buckets:
            return max(now, self._blocked_until), "retry_after" if self._blocked_until > now else "concurrency", 0
        if self._projection is None:
            self._recheck(now)
        p = self._projection
        assert p is not None
        if p.last is None or p.last < _key(w):  # joins at the tail: extend the projection
            at, dim = self._fit(p.buckets, w.amounts, max(p.t, now), p.dim)
            if at < w.deadline_at and not math.isinf(at):
                for d, amount in w.amounts.items():
                    p.buckets[d].charge(amount, at)
                p.t, p.dim, p.last = at, dim, _key(w)
                p.count += 1
            return at, dim, p.count - (1 if p.last == _key(w) else 0)
        # Joins ahead of others (another tenant's turn): simulate the requests ahead of it.
        buckets = {d: b.clone() for d, b in self._buckets.items()}
        t, dim, ahead = now, self._idle_dim(), 0
        for other in self._order():
            if _key(other) > _key(w):
                break
            at, other_dim = self._fit(buckets, other.amounts, t, dim)
            if at >= other.deadline_at:
                continue  # it will be rejected; it does not hold anyone up
            for d, amount in other.amounts.items():
                buckets[d].charge(amount, at)
            t, dim, ahead = at, other_dim, ahead + 1
        at, dim = self._fit(buckets, w.amounts, t, dim)
        self._projection = None  # those behind it now wait longer: recheck once it is queued
        return at, dim, ahead

    def _recheck(self, now: float) -> None:
        """Project the whole queue; reject every request that can no longer be granted in time."""
        buckets = {d: b.clone() for d, b in self._buckets.items()}
        t, t_dim, last, count = now, self._idle_dim(), None, 0
        late: list[tuple[_Waiter, float, Dimension, int]] = []
        for w in list(self._order()):
            at, dim = self._fit(buckets, w.amounts, t, t_dim)
            if at >= w.deadline_at:
                late.append((w, at, dim, count))
                continue
            for d, amount in w.amounts.items():
                buckets[d].charge(amount, at)
            t, t_dim, last, count = at, dim, _key(w), count + 1
        self._projection = _Projection(buckets, t, t_dim, last, count)
        for w, at, dim, ahead in late:
            self._reject(w, LimitWaitTooLong(at - now, dim, left=w.deadline_at - now, queued_ahead=ahead), keep=True)

    def _worse(self, now: float) -> None:
        """The buckets just got worse than projected: recheck the queue and the head's timer."""
        self._projection = None
        if self._queued:
            self._recheck(now)
        self._pump()

    def _unseen(self, dim: str, reservation: Reservation | None) -> float:
        if reservation is None:
            return 0.0
        since = reservation.granted_at
        total = 0.0
        for at, res in reversed(self._log):
            if at < since:
                break
            if res is not reservation:
                total += res.amounts.get(dim, 0.0)
        return total

    def _header_triples(self, info: RateLimitInfo) -> dict[str, tuple[int | None, int | None, float | None]]:
        tokens = (info.limit_tokens, info.remaining_tokens, info.reset_tokens)
        inp = (info.limit_input_tokens, info.remaining_input_tokens, info.reset_input_tokens)
        out = (info.limit_output_tokens, info.remaining_output_tokens, info.reset_output_tokens)
        return {
            "rpm": (info.limit_requests, info.remaining_requests, info.reset_requests),
            # A combined token limit (OpenAI) bounds each token bucket when no specific one is sent.
            "input_tpm": inp if inp[1] is not None else tokens,
            "output_tpm": out if out[1] is not None else tokens,
        }

    # -- queue and grants ---------------------------------------------------------------------

    def _head(self) -> _Waiter | None:
        head: _Waiter | None = None
        idle: list[str] = []
        for name, t in self._tenants.items():
            if t.queue:
                if head is None or _key(t.queue[0]) < _key(head):
                    head = t.queue[0]
            elif t.last_finish <= self._vtime:
                idle.append(name)  # no credit or debt left to remember
        for name in idle:
            del self._tenants[name]
        return head

    def _grant(self, w: _Waiter, now: float) -> Reservation:
        for d, amount in w.amounts.items():
            self._buckets[d].charge(amount, now)
        self._in_flight += 1
        self._granted += 1
        self._vtime = max(self._vtime, w.start)
        res = Reservation(
            self,
            tenant=w.tenant,
            input_tokens=w.input_tokens,
            max_output_tokens=w.max_output_tokens,
            in_part=w.in_part,
            out_part=w.out_part,
            granted_at=now,
            waited=now - w.enqueued_at,
        )
        log, horizon = self._log, now - self._window
        while log and log[0][0] < horizon:
            log.popleft()
        log.append((now, res))
        return res

    def _dequeue(self, w: _Waiter, *, granted: bool = False) -> bool:
        if not w.queued:
            return False
        ten = self._tenants[w.tenant]
        ten.queue.remove(w)
        w.queued = False
        self._queued -= 1
        if not granted and not ten.queue:  # its last request left unserved: no share consumed
            ten.last_finish = min(ten.last_finish, max(self._vtime, w.start))
        return True

    def _reject(self, w: _Waiter, error: LimitWaitTooLong, *, keep: bool = False) -> None:
        self._dequeue(w)
        if not keep:
            self._projection = None
        self._rejected += 1
        if w.future is not None and not w.future.done():
            w.future.set_exception(error)

    def _abandon(self, w: _Waiter) -> None:
        """The caller stopped waiting: leave the queue, or give back a grant nobody will use."""
        fut = w.future
        if fut is not None and fut.done() and not fut.cancelled() and fut.exception() is None:
            fut.result().release(sent=False)  # granted in the same instant as the cancellation
            return
        if self._dequeue(w):
            self._projection = None
            self._pump()

    def _pump(self) -> None:
        """Grant queued requests, head first, while buckets and slots allow; then set a timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._queued:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        while (w := self._head()) is not None:
            assert w.future is not None
            if w.future.done():  # cancelled by its caller, not yet cleaned up
                self._dequeue(w)
                continue
            wait, dim = self._wait(w.amounts, now)
            if wait > 0:
                if now + wait >= w.deadline_at:
                    error = LimitWaitTooLong(wait, dim, left=w.deadline_at - now)
                    self._reject(w, error)
                    continue
                w.blocking = dim
                self._timer = loop.call_at(now + wait, self._pump)
                return
            if not self._slot_free():
                w.blocking = "concurrency"
                return  # a settle or release pumps again
            self._dequeue(w, granted=True)
            w.future.set_result(self._grant(w, now))

    # -- reconciliation (called by Reservation) -----------------------------------------------

    def _settle(self, res: Reservation, usage_input: int, usage_output: int) -> None:
        now = _now()
        worse = False
        for d, bucket in self._buckets.items():
            if d == "rpm":
                continue
            actual_in = float(usage_input) if d == "input_tpm" else 0.0
            actual_out = float(usage_output) if (d == "output_tpm" or self.combined_tpm) else 0.0
            extra_in = actual_in - res._in.get(d, 0.0)
            if extra_in < 0:
                bucket.refund(-extra_in, now, taken_at=res.granted_at)
            elif extra_in > 0:
                bucket.charge(extra_in, now)
                worse = True
            out = res._out.get(d, 0.0)
            if out or actual_out:
                # The output reservation is replaced by the actual output, counted from now.
                bucket.refund(out, now, taken_at=res.granted_at)
                bucket.charge(actual_out, now)
                worse = worse or actual_out > out
        self._in_flight -= 1
        if worse:
            self._worse(now)
        else:
            self._projection = None
            self._pump()

    def _release(self, res: Reservation, *, sent: bool) -> None:
        now = _now()
        for d, bucket in self._buckets.items():
            amount = res._in.get(d, 0.0) + res._out.get(d, 0.0)
            if d == "rpm" and sent:
                continue
            bucket.refund(amount, now, taken_at=res.granted_at)
        self._in_flight -= 1
        self._projection = None
        self._pump()


# -- one limiter per provider quota ----------------------------------------------------------


def combined_tpm(target: Target) -> bool:
    """Does this target's input-TPM quota count output tokens too?

    OpenAI's TPM is one limit on prompt plus completion tokens, configured as ``input_tpm``;
    so for the ``openai`` and ``openai-responses`` dialects without a separate ``output_tpm``
    the input bucket reserves input + ``max_tokens`` and is reconciled with input + output.
    """
    return target.dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES) and target.limits.output_tpm is None


class LimiterBoard:
    """One :class:`TargetLimiter` per provider quota (``Target.scope``), created on first use.

    A limiter is built from the first target seen for a scope and kept for the life of the
    board: its buckets are the state of that quota.
    """

    def __init__(
        self,
        *,
        safety: float = 0.9,
        algorithm: Algorithm = "window",
        window: float = WINDOW,
        store: GuardedStore | None = None,
        lease: float = 300.0,
    ) -> None:
        if not 0 < safety <= 1:
            raise ValueError("safety must be in (0, 1]")
        self.safety = safety
        self.algorithm: Algorithm = algorithm
        self.window = window
        self.store = store  # shared buckets and slots (failover.state); None: in this process
        self.lease = lease  # a shared concurrency slot not released within this comes back
        self._limiters: dict[str, TargetLimiter] = {}

    def limiter_for(self, target: Target) -> TargetLimiter | None:
        """The target's limiter; None when its limits configure nothing."""
        limits = target.limits
        if limits.rpm is None and limits.input_tpm is None and limits.output_tpm is None and limits.concurrency is None:
            return None
        limiter = self._limiters.get(target.scope)
        if limiter is None:
            limiter = self._limiters[target.scope] = TargetLimiter(
                limits,
                safety=self.safety,
                algorithm=self.algorithm,
                window=self.window,
                combined_tpm=combined_tpm(target),
                name=target.name,
                store=self.store,
                scope=target.scope,
                lease=self.lease,
            )
        return limiter

    def existing(self, target: Target) -> TargetLimiter | None:
        """The target's limiter if one was made already (a read: creates nothing)."""
        return self._limiters.get(target.scope)

    async def drain(self) -> None:
        """Wait until every limiter's background writes have reached the store."""
        for limiter in list(self._limiters.values()):
            await limiter.drain()

    def snapshot(self, now: float | None = None) -> dict[str, LimiterSnapshot]:
        """Every limiter's snapshot, keyed by scope."""
        now = _now() if now is None else now
        return {scope: limiter.snapshot(now) for scope, limiter in self._limiters.items()}

    async def shared_snapshot(self, now: float | None = None) -> dict[str, LimiterSnapshot]:
        """:meth:`snapshot` with the fleet's buckets where they are shared (one pipelined read)."""
        now = _now() if now is None else now
        scopes = list(self._limiters)
        snaps = await asyncio.gather(*(self._limiters[s].shared_snapshot(now) for s in scopes))
        return dict(zip(scopes, snaps, strict=True))
