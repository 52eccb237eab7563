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
can skip the candidate and record why.

The limiter is assembled from four parts, one module each:

* ``_buckets``: bucket arithmetic (:class:`WindowBucket`, the default, and :class:`TokenBucket`);
* ``_waiters``: the waiting queue, fair across tenants, that refuses what cannot make its deadline;
* ``_calibration``: following the provider's rate-limit headers;
* ``_shared``: the buckets and slots of a quota kept in a shared store for the fleet,
  with this process's buckets at ``local_share`` as the fallback while the store is away.

All times are seconds on the event loop's clock (``loop.time()``), so the limiter runs on
real time in production and on virtual time (looptime) in tests and in the lab.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...model import Dialect, Limits, RateLimitInfo, Target
from ...state import GuardedStore
from ._buckets import (
    _DIMS,
    WINDOW,
    Algorithm,
    Bucket,
    BucketSet,
    BucketSnapshot,
    Dimension,
    LimiterSnapshot,
    TokenBucket,
    WindowBucket,
    _tol,
    new_bucket,
)
from ._calibration import HeaderCalibration
from ._shared import SharedBuckets, settle_amounts
from ._waiters import DEFAULT_TENANT, FairQueue, LimitWaitTooLong, Waiter, too_large

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

DEFAULT_PENALTY = 1.0  # seconds the buckets stay shut after a 429 that named no wait


# What :meth:`TargetLimiter.wait_for` says when requests are queued ahead or no slot is free:
# a wait of unknown length, but a wait (a balancer sends the request elsewhere if it can).
QUEUED_WAIT = 1e-3


def _now() -> float:
    return asyncio.get_running_loop().time()


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
        _check_settings(limits, safety, algorithm)
        self.name = name
        self.limits = limits
        self.safety = safety
        self.algorithm: Algorithm = algorithm
        self.combined_tpm = combined_tpm
        self._configured: dict[str, int] = {}
        buckets: dict[str, Bucket] = {}
        shared_caps: dict[str, float] = {}
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
                shared_caps[dim] = capacity
                capacity = max(1.0, capacity * store.local_share) if dim == "rpm" else capacity * store.local_share
            self._configured[dim] = quota
            buckets[dim] = new_bucket(algorithm, capacity, window)
        self._quota = BucketSet(buckets, combined_tpm=combined_tpm)
        self._capacities = {dim: b.capacity for dim, b in buckets.items()}  # the local ones
        self._window = window
        self._concurrency = limits.concurrency
        self._shared: SharedBuckets | None = None
        if store is not None:
            # Shared: acquire/observe/penalize go through the store; the in-process buckets
            # (at local_share of the quota) answer while it is unavailable. Swapped here so the
            # in-process path has no extra check.
            self._shared = SharedBuckets(
                store, scope=scope or name, capacities=shared_caps, slots=limits.concurrency, window=window, lease=lease
            )
            if limits.concurrency is not None:
                self._concurrency = max(1, math.floor(limits.concurrency * store.local_share))
            self.acquire = self._acquire_shared  # type: ignore[method-assign]
            self.observe = self._observe_shared  # type: ignore[method-assign]
            self.penalize = self._penalize_shared  # type: ignore[method-assign]
        self._in_flight = 0
        self._queue: FairQueue[Reservation] = FairQueue(
            self._quota, slot_free=self._slot_free, grant=self._grant, slotted=self._concurrency is not None
        )
        self._calibration = HeaderCalibration(self._configured, safety=safety, window=window)
        self._granted = 0
        self._rejected = 0  # refused before joining the queue (the queue counts its own)

    # -- public API ---------------------------------------------------------------------------

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The bucket dimensions this limiter enforces (concurrency is separate)."""
        return tuple(self._quota.buckets)

    def bucket(self, dimension: str) -> Bucket | None:
        return self._quota.buckets.get(dimension)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def queued(self) -> int:
        return self._queue.queued

    def blocked_for(self, now: float) -> float:
        """Seconds this limiter still refuses everything after a 429 (:meth:`penalize`); 0 if none."""
        return max(0.0, self._quota.blocked_until - now)

    def room_in(self, input_tokens: int, max_output_tokens: int, now: float) -> float:
        """A lower bound on the seconds until this request could be granted (a read: nothing
        is taken or queued): a 429 block, and the local buckets' room for its amounts, not
        counting the requests queued ahead; with a shared store, the fleet's levels as last
        read (the local buckets are only the fallback share). Infinite: it never fits."""
        if not self._quota.buckets:
            return self.blocked_for(now)
        amounts = self._quota.amounts(*self._quota.parts(max(0, input_tokens), max(0, max_output_tokens)))
        if self._shared is not None:
            return max(self.blocked_for(now), self._shared.room(amounts, now))
        return self._quota.wait(amounts, now)[0]

    def wait_for(self, input_tokens: int, max_output_tokens: int, now: float) -> float:
        """:meth:`room_in`, or :data:`QUEUED_WAIT` with requests queued ahead or no slot free."""
        room = self.room_in(input_tokens, max_output_tokens, now)
        full = not self._slot_free() or (self._shared is not None and not self._shared.slot_free(now))
        return QUEUED_WAIT if room <= 0 and (self._queue.queued or full) else room

    def share_left(self, now: float) -> float | None:
        """The tightest bucket's level over its capacity, None without buckets; with a shared
        store, the fleet's as last read (None when too old: the local ones are not the fleet's)."""
        if self._shared is not None:
            return self._shared.share_left(now)
        levels = [max(0.0, b.level(now)) / b.capacity for b in self._quota.buckets.values() if b.capacity > 0]
        return min(levels) if levels else None

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
        queue = self._queue
        w = queue.waiter(input_tokens, max_output_tokens, deadline_at, tenant or DEFAULT_TENANT, now)
        self._refuse_oversize(w.amounts, self._capacities, left=deadline_at - now)
        queue.tag(w)

        # Fast path: nobody queued, everything available now.
        if queue.queued == 0 and self._slot_free() and self._quota.wait(w.amounts, now)[0] <= 0:
            queue.admit(w)
            return self._grant(w, now)

        at, dim, ahead = queue.estimate(w, now)
        if at >= deadline_at or math.isinf(at):
            self._rejected += 1
            raise LimitWaitTooLong(at - now, dim, left=deadline_at - now, queued_ahead=ahead)
        fut = queue.enqueue(w, dim, now)
        try:
            async with asyncio.timeout_at(None if math.isinf(deadline_at) else deadline_at):
                return await fut
        except TimeoutError:
            queue.abandon(w)
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
            queue.abandon(w)
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
        self._calibration.forget(now)
        buckets = self._quota.buckets
        lowered = False
        for dim, ours, reset in self._calibration.levels(info, buckets, reservation):
            lowered |= buckets[dim].sync(ours, reset, now)
        if lowered:
            self._queue.worse(now)

    def penalize(self, retry_after: float | None, now: float | None = None) -> None:
        """After a 429: give nothing until ``retry_after`` seconds from now (default 1 s)."""
        now = _now() if now is None else now
        wait = DEFAULT_PENALTY if retry_after is None else retry_after
        if wait <= 0:
            return
        self._quota.block(now + wait, now)
        self._queue.worse(now)

    _observe_local = observe
    _penalize_local = penalize

    def snapshot(self, now: float | None = None) -> LimiterSnapshot:
        """Levels, in-flight and waiting per tenant, for metrics."""
        now = _now() if now is None else now
        buckets = tuple(
            BucketSnapshot(
                dimension=dim,
                capacity=b.capacity,
                level=b.level(now),
                blocked_for=max(0.0, b.blocked_until() - now),
                provider_limit=self._calibration.provider_limits.get(dim),
            )
            for dim, b in self._quota.buckets.items()
        )
        return LimiterSnapshot(
            name=self.name,
            at=now,
            buckets=buckets,
            concurrency=self._concurrency,
            in_flight=self._in_flight,
            waiting=self._queue.waiting(),
            granted=self._granted,
            rejected=self._rejected + self._queue.rejected,
            view="local" if self._shared is None else "fallback",
        )

    def __repr__(self) -> str:
        return f"TargetLimiter({self.name!r}, {self.limits}, safety={self.safety}, algorithm={self.algorithm!r})"

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
        shared = self._shared
        assert shared is not None
        now = _now()
        w = self._queue.waiter(input_tokens, max_output_tokens, deadline_at, tenant or DEFAULT_TENANT, now)
        self._refuse_oversize(w.amounts, shared.capacities, left=deadline_at - now)
        try:
            grant = await shared.acquire(w.amounts, deadline_at)
        except LimitWaitTooLong:
            self._rejected += 1
            raise
        if grant is None:
            # The store is unavailable: fail open, at this process's local share of the quota.
            return await self._acquire_local(
                input_tokens=input_tokens,
                max_output_tokens=max_output_tokens,
                deadline_at=deadline_at,
                tenant=tenant,
            )
        self._in_flight += 1
        self._granted += 1
        return SharedReservation(
            self,
            reservation_id=grant.reservation_id,
            store_at=grant.store_at,
            tenant=w.tenant,
            input_tokens=input_tokens,
            max_output_tokens=max_output_tokens,
            in_part=w.in_part,
            out_part=w.out_part,
            granted_at=grant.granted_at,
            waited=grant.waited,
        )

    async def drain(self) -> None:
        """Wait until every write made in the background has reached the store."""
        if self._shared is not None:
            await self._shared.drain()

    def _settle_shared(self, res: SharedReservation, usage_input: int, usage_output: int) -> None:
        refund, charge = settle_amounts(
            self._quota.buckets, res._in, res._out, usage_input, usage_output, combined_tpm=self.combined_tpm
        )
        self._finish_shared(res, refund, charge)

    def _release_shared(self, res: SharedReservation, *, sent: bool) -> None:
        refund = {d: a for d, a in res.amounts.items() if a and not (d == "rpm" and sent)}
        self._finish_shared(res, refund, {})

    def _finish_shared(self, res: SharedReservation, refund: dict[str, float], charge: dict[str, float]) -> None:
        assert self._shared is not None
        self._shared.settle(res.reservation_id, res.store_at, refund, charge)
        self._in_flight -= 1
        if self._queue.queued:
            self._queue.pump()

    def _observe_shared(
        self, info: RateLimitInfo | None, now: float | None = None, *, reservation: Reservation | None = None
    ) -> None:
        """Headers lower the shared bucket (and the local fallback share, which they also bound)."""
        if info is None:
            return
        shared = self._shared
        assert shared is not None
        since = reservation.store_at if isinstance(reservation, SharedReservation) else None
        for dim, ours, reset in self._calibration.levels(info, shared.capacities):
            shared.sync(dim, ours, reset, since)
        self._observe_local(info, now, reservation=None if since is not None else reservation)

    def _penalize_shared(self, retry_after: float | None, now: float | None = None) -> None:
        """A 429 blocks the shared bucket for every process, and this process's fallback too."""
        wait = DEFAULT_PENALTY if retry_after is None else retry_after
        if wait > 0:
            assert self._shared is not None
            self._shared.block(wait)
        self._penalize_local(retry_after, now)

    async def shared_snapshot(self, now: float | None = None) -> LimiterSnapshot:
        """:meth:`snapshot` with the fleet's buckets read from the store (``view="shared"``).

        Without a store, or while it is unreachable, the snapshot of this process's buckets
        (``view`` says which). One read-only script on the store; nothing is taken.
        """
        snap = self.snapshot(now)
        shared = self._shared
        if shared is None:
            return snap
        v = await shared.view()
        if v is None:
            return snap
        caps = shared.capacities
        buckets = tuple(
            replace(b, capacity=caps[b.dimension], level=v.levels[b.dimension], blocked_for=v.blocked_for)
            for b in snap.buckets
        )
        slots = shared.slots
        return replace(
            snap,
            buckets=buckets,
            concurrency=slots,
            in_flight=v.slots if slots is not None else snap.in_flight,
            view="shared",
        )

    # -- grants and reconciliation ------------------------------------------------------------

    def _refuse_oversize(self, amounts: Mapping[str, float], capacities: Mapping[str, float], *, left: float) -> None:
        """Raise for a request larger than a whole bucket (local or shared): no wait helps."""
        for dim, amount in amounts.items():
            cap = capacities[dim]
            if amount > cap + _tol(cap):
                self._rejected += 1
                raise too_large(dim, amount, cap, quota=self._configured[dim], safety=self.safety, left=left)

    def _slot_free(self) -> bool:
        return self._concurrency is None or self._in_flight < self._concurrency

    def _grant(self, waiter: Waiter[Reservation], now: float) -> Reservation:
        self._quota.charge(waiter.amounts, now)
        self._in_flight += 1
        self._granted += 1
        res = Reservation(
            self,
            tenant=waiter.tenant,
            input_tokens=waiter.input_tokens,
            max_output_tokens=waiter.max_output_tokens,
            in_part=waiter.in_part,
            out_part=waiter.out_part,
            granted_at=now,
            waited=now - waiter.enqueued_at,
        )
        self._calibration.granted(res, now)
        return res

    def _settle(self, res: Reservation, usage_input: int, usage_output: int) -> None:
        now = _now()
        worse = self._quota.settle(res._in, res._out, usage_input, usage_output, granted_at=res.granted_at, now=now)
        self._in_flight -= 1
        if worse:
            self._queue.worse(now)
        else:
            self._queue.changed()

    def _release(self, res: Reservation, *, sent: bool) -> None:
        now = _now()
        self._quota.release(res._in, res._out, sent=sent, granted_at=res.granted_at, now=now)
        self._in_flight -= 1
        self._queue.changed()


# -- one limiter per provider quota ----------------------------------------------------------


def _check_settings(limits: Limits, safety: float, algorithm: str) -> None:
    if not 0 < safety <= 1:
        raise ValueError("safety must be in (0, 1]")
    if algorithm not in ("window", "bucket"):
        raise ValueError(f"unknown algorithm {algorithm!r}: 'window' or 'bucket'")
    if limits.concurrency is not None and limits.concurrency < 1:
        raise ValueError("concurrency must be at least 1")


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
        """The target's limiter if one was made already (a read: creates nothing). Without a
        limiter at all, or for a target that configures no limit, no scope string is built
        (the balancer asks for every deployment of every request)."""
        if not self._limiters:
            return None
        limits = target.limits
        if limits.rpm is None and limits.input_tpm is None and limits.output_tpm is None and limits.concurrency is None:
            return None
        return self._limiters.get(target.scope)

    def shared_buckets(self) -> list[SharedBuckets]:
        """The limiters' shared buckets (on a store), for the load board to read the fleet's levels."""
        return [lim._shared for lim in self._limiters.values() if lim._shared is not None]

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
