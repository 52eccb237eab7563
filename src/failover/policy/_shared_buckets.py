"""Shared buckets: one quota's buckets and concurrency slots kept in a store, for the fleet.

With a store (``failover.state``; ``LimiterBoard(store=...)``) the buckets and concurrency
slots of a quota live in the store, keyed by ``Target.scope``, on the store's clock, and every
process reserves from the same window: one atomic reserve per try, then the settle, header
sync and 429 block written in the background. A request that does not fit polls again after
the wait the store names (never past its deadline); fair queueing across tenants then holds
within each process, not across the fleet. Slots are leases, so a crashed process's slots come
back. Every call here answers None (or writes nothing) while the store is unavailable: the
limiter then falls back to its in-process buckets, sized at ``local_share`` of the quota.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..state import BucketView, GuardedStore, Reserved, StateUnavailable
from ._buckets import Dimension
from ._waiters import LimitWaitTooLong

_SLOT_POLL = 0.05  # seconds between tries for a shared concurrency slot


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

    async def acquire(self, amounts: dict[str, float], deadline_at: float) -> SharedGrant | None:
        """Reserve ``amounts``, or sleep the wait the store names and retry; None when the store
        is unavailable (the caller falls back). Raises :class:`LimitWaitTooLong` when the next
        try would come at or after ``deadline_at``."""
        loop = asyncio.get_running_loop()
        t0 = now = loop.time()
        slept = 0.0
        rid = os.urandom(8).hex()
        while True:
            r = await self._reserve(amounts, rid)
            if r is None:
                return None
            now = loop.time()
            if not r.granted and self._tasks and now < deadline_at:
                # This process's own settles may still be on their way to the store (a slot, unused
                # tokens): let them land and ask again, rather than poll or report a wait that is not.
                await asyncio.gather(*tuple(self._tasks), return_exceptions=True)
                r = await self._reserve(amounts, rid)
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
