"""Shared buckets: one quota's buckets and concurrency slots kept in a store, for the fleet.

With a store (``failover.state``; ``LimiterBoard(store=...)``) the buckets and concurrency
slots of a quota live in the store, keyed by ``Target.scope``, on the store's clock, and every
process reserves from the same window: one atomic reserve per try, then the settle, header
sync and 429 block written in the background. A request that does not fit polls again after
the wait the store names (never past its deadline); fair queueing across tenants then holds
within each process, not across the fleet. Slots are leases, so a crashed process's slots come
back. Every call here answers None (or writes nothing) while the store is unavailable: the
limiter then falls back to its in-process buckets, sized at ``local_share`` of the quota.

The balancer reads a cached copy of the fleet's levels (:meth:`SharedBuckets.room`,
:meth:`SharedBuckets.share_left`): :meth:`SharedBuckets.refresh` reads them in the background
(the shared load board's refresher does, every tenth of a second while it is in use), and this
process's own reservations come off the copy at once, so the requests of one burst do not all
pick the deployment the last read said was fullest.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from ...state import BucketView, GuardedStore, Reserved, StateUnavailable
from ._buckets import Dimension
from ._waiters import LimitWaitTooLong

_SLOT_POLL = 0.05  # seconds between tries for a shared concurrency slot
VIEW_STALE = 1.0  # seconds after which the cached fleet levels say nothing (the store is away)


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedGrant:
    """A reservation the store granted."""

    reservation_id: str
    store_at: float  # the grant's time on the store's clock
    granted_at: float  # and on the loop's
    waited: float  # time spent waiting for room; the store's round trips are not


def settle_amounts(
    dims: Iterable[str],
    in_part: Mapping[str, float],
    out_part: Mapping[str, float],
    usage_input: int,
    usage_output: int,
    *,
    combined_tpm: bool,
) -> tuple[dict[str, float], dict[str, float]]:
    """(refund, charge) per dimension that reconcile a shared grant with the reported usage.

    As for the local buckets: unused input comes back, the output reservation is replaced by
    the actual output, and usage above the reservation is charged.
    """
    refund: dict[str, float] = {}
    charge: dict[str, float] = {}
    for d in dims:
        if d == "rpm":
            continue
        actual_in = float(usage_input) if d == "input_tpm" else 0.0
        actual_out = float(usage_output) if (d == "output_tpm" or combined_tpm) else 0.0
        extra_in = actual_in - in_part.get(d, 0.0)
        back = max(0.0, -extra_in) + out_part.get(d, 0.0)
        more = max(0.0, extra_in) + actual_out
        if back:
            refund[d] = back
        if more:
            charge[d] = more
    return refund, charge


class SharedBuckets:
    """One quota's shared buckets and slots: ``capacities`` per dimension, ``slots`` leased.

    Reads and reservations are awaited; settles, header syncs and 429 blocks are written in
    the background (:meth:`drain` waits for them).
    """

    def __init__(
        self,
        guard: GuardedStore,
        *,
        scope: str,
        capacities: dict[str, float],
        slots: int | None,
        window: float,
        lease: float,
    ) -> None:
        self.guard = guard
        self.scope = scope
        self.capacities = capacities
        self.slots = slots
        self.window = window
        self.lease = lease
        self._tasks: set[asyncio.Task[object]] = set()
        # The balancer's copy of the fleet's levels: the last view, less what this process
        # reserved since (and was reserving when it was read); None before the first read.
        self._levels: dict[str, float] | None = None
        self._blocked_until = 0.0  # on the loop's clock
        self._slots_used = 0
        self._view_at = -math.inf
        self._reserving: dict[str, float] = {}  # amounts sent to the store, not answered yet
        self._reserving_slots = 0

    async def acquire(self, amounts: dict[str, float], deadline_at: float) -> SharedGrant | None:
        """Reserve ``amounts``, or sleep the wait the store names and retry; None when the store
        is unavailable (the caller falls back). Raises :class:`LimitWaitTooLong` when the next
        try would come at or after ``deadline_at``."""
        loop = asyncio.get_running_loop()
        t0 = now = loop.time()
        slept = 0.0
        rid = os.urandom(8).hex()
        while True:
            r = await self._reserve_counted(amounts, rid)
            if r is None:
                return None
            now = loop.time()
            if not r.granted and self._tasks and now < deadline_at:
                # This process's own settles may still be on their way to the store (a slot, unused
                # tokens): let them land and ask again, rather than poll or report a wait that is not.
                await asyncio.gather(*tuple(self._tasks), return_exceptions=True)
                r = await self._reserve_counted(amounts, rid)
                if r is None:
                    return None
                now = loop.time()
            if r.granted:
                return SharedGrant(reservation_id=rid, store_at=r.at, granted_at=now, waited=slept)
            # A slot frees when someone settles, which the store cannot announce: poll.
            wait = r.wait if math.isfinite(r.wait) else _SLOT_POLL
            if now + wait >= deadline_at:
                dim = cast(Dimension, r.dimension or "concurrency")
                if math.isfinite(r.wait):
                    raise LimitWaitTooLong(r.wait, dim, left=deadline_at - now)
                reason = f"rate limit concurrency: no shared slot free before the deadline (waited {now - t0:.1f}s)"
                raise LimitWaitTooLong(math.inf, dim, left=deadline_at - now, reason=reason)
            # A little jitter, so the processes that were refused together do not retry together.
            await asyncio.sleep(wait + random.uniform(0.0, min(0.05, wait * 0.1 + 0.005)))
            slept += loop.time() - now

    async def _reserve_counted(self, amounts: dict[str, float], rid: str) -> Reserved | None:
        """:meth:`_reserve`, its amounts off the cached levels while it is on its way (and after,
        if granted): the balancer sees this process's reservations before the store says."""
        self._take(amounts)
        try:
            r = await self._reserve(amounts, rid)
        except BaseException:
            self._untake(amounts, granted=False)
            raise
        self._untake(amounts, granted=r is not None and r.granted)
        return r

    def _take(self, amounts: Mapping[str, float]) -> None:
        for d, a in amounts.items():
            self._reserving[d] = self._reserving.get(d, 0.0) + a
            if self._levels is not None and d in self._levels:
                self._levels[d] -= a
        if self.slots is not None:
            self._reserving_slots += 1
            self._slots_used += 1

    def _untake(self, amounts: Mapping[str, float], *, granted: bool) -> None:
        for d, a in amounts.items():
            self._reserving[d] = self._reserving.get(d, 0.0) - a
            if not granted and self._levels is not None and d in self._levels:
                self._levels[d] += a
        if self.slots is not None:
            self._reserving_slots -= 1
            if not granted:
                self._slots_used -= 1

    async def refresh(self) -> None:
        """Read the fleet's levels into the balancer's copy (nothing while the store is away)."""
        v = await self.view()
        if v is None:
            return
        now = asyncio.get_running_loop().time()
        self._levels = {d: v.levels.get(d, cap) - self._reserving.get(d, 0.0) for d, cap in self.capacities.items()}
        self._blocked_until = now + v.blocked_for
        self._slots_used = v.slots + self._reserving_slots
        self._view_at = now

    def _fresh(self, now: float) -> bool:
        return self._levels is not None and now - self._view_at <= VIEW_STALE and self.guard.up

    def room(self, amounts: Mapping[str, float], now: float) -> float:
        """A lower bound on the seconds until the fleet's buckets hold ``amounts`` (0: they do,
        or the copy is too old to say), from the cached levels: the missing part refills at
        capacity per window, but an entry may leave the window within the second, so at most
        one second of that counts (the reservation itself learns the exact wait)."""
        if not self._fresh(now):
            return 0.0
        assert self._levels is not None
        wait = max(0.0, self._blocked_until - now)
        for d, a in amounts.items():
            cap = self.capacities.get(d)
            level = self._levels.get(d)
            if cap and level is not None and a > level + 1e-9 * max(1.0, cap):
                wait = max(wait, min(1.0, (a - max(0.0, level)) * self.window / cap))
        return wait

    def slot_free(self, now: float) -> bool:
        """A concurrency slot is free fleet-wide, as far as the cached copy says."""
        return self.slots is None or not self._fresh(now) or self._slots_used < self.slots

    def share_left(self, now: float) -> float | None:
        """The tightest of the fleet's buckets, level over capacity (None: the copy is too old)."""
        if not self._fresh(now):
            return None
        assert self._levels is not None
        shares = [max(0.0, min(1.0, self._levels[d] / cap)) for d, cap in self.capacities.items() if cap > 0]
        return min(shares) if shares else None

    async def _reserve(self, amounts: dict[str, float], rid: str) -> Reserved | None:
        """One reservation on the store; None when it is unavailable (the caller falls back)."""
        guard = self.guard
        try:
            return await guard.call(
                guard.store.reserve,
                self.scope,
                amounts,
                self.capacities,
                window=self.window,
                reservation_id=rid,
                slots=self.slots,
                lease=self.lease,
            )
        except StateUnavailable:
            return None

    def settle(self, reservation_id: str, store_at: float, refund: dict[str, float], charge: dict[str, float]) -> None:
        """Write back what a grant used (and free its slot), in the background."""
        guard = self.guard
        if self.slots is not None:
            self._slots_used = max(0, self._slots_used - 1)
        self._spawn(
            self._write(
                guard.store.settle,
                self.scope,
                reservation_id,
                granted_at=store_at,
                window=self.window,
                refund=refund,
                charge=charge,
                free_slot=self.slots is not None,
            )
        )

    def sync(self, dim: str, remaining: float, reset_in: float | None, since: float | None) -> None:
        """Lower the shared bucket to ``remaining`` (already on our scale), in the background."""
        guard = self.guard
        self._spawn(
            self._write(
                guard.store.sync,
                self.scope,
                dim,
                remaining=remaining,
                reset_in=reset_in,
                capacity=self.capacities[dim],
                window=self.window,
                since=since,
            )
        )

    def block(self, seconds: float) -> None:
        """A 429: block the shared bucket for every process, in the background."""
        guard = self.guard
        self._spawn(self._write(guard.store.block, self.scope, seconds, window=self.window))

    async def view(self) -> BucketView | None:
        """The fleet's levels and leased slots (read-only); None while the store is away."""
        guard = self.guard
        if not guard.up:
            return None
        try:
            return await guard.call(guard.store.bucket_view, self.scope, dict(self.capacities))
        except StateUnavailable:
            return None

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait until every write made in the background has reached the store."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    async def _write(self, fn: Callable[..., Awaitable[object]], *args: Any, **kw: Any) -> None:
        guard = self.guard
        try:
            await guard.call(fn, *args, **kw)
        except StateUnavailable:
            return  # the shared bucket keeps the reservation until its window (or lease) ends
