"""The balancer's load board for a fleet: requests in flight and quota shares from the store.

:class:`SharedLoadBoard` is a :class:`~failover.policy.LoadBoard` whose requests in flight per
deployment are the fleet's and whose quota shares are the last any member's rate-limit headers
said. It never puts a round trip on a request's path: each process keeps its own counts and
latency in memory (the board's usual bookkeeping), and a background refresher, every
``interval`` seconds while the board is in use, sends them to the store and reads back the
rest of the fleet's, in one script (``load_sync``) pipelined with a read of each shared
limiter's levels (:meth:`~failover.policy.limits._shared.SharedBuckets.refresh`), so the
balancer also sees how much of each quota the fleet has left.

What a process says is a lease: it holds ``lease`` seconds unless renewed, so a process that
dies takes its requests in flight out of the fleet's count within that time. A process that
leaves cleanly (:meth:`aclose`) says so at once. While the store is unavailable, or the last
read is older than ``stale`` seconds, the board reads as the process-local one (this
process's requests in flight, its own headers). Latency stays per process: each one measures
the deployments it calls.

Staleness: another process's request is seen at most ``interval`` (its refresher) plus
``interval`` (ours) plus a round trip after it started; this process's own at once. The
refresher stops after ``IDLE_S`` with nothing in flight and nothing read (a Router that is
never closed does not keep a task going) and starts again on the next read: the first requests
after such a pause are balanced on this process's numbers, for one refresh.

Why not a round trip per request: the balancer runs on every request, and a read on the store
would add a round trip (about a millisecond on loopback) before the first byte is sent; a write
per start and per end would double the scripts per attempt. The refresher costs each process
``1 / interval`` round trips a second whatever its traffic (pipelined with whatever else is on
its way), and the reads are from memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from dataclasses import dataclass

from ..model import RateLimitInfo, Target
from ..state import FleetLoad, GuardedStore, StateUnavailable
from ._balance import PEAK_DECAY_S, LoadBoard
from .limits import LimiterBoard, SharedBuckets

log = logging.getLogger("failover.state")

REFRESH_S = 0.1  # seconds between syncs while the board is in use
LEASE_S = 3.0  # what a process said of its requests in flight holds this long unless renewed
IDLE_S = 60.0  # the refresher stops after this long with nothing in flight and nothing read
SHARE_TTL_S = 60.0  # a header's share with no reset time holds this long
BOARD = "balance"  # the store key's name: one board per store prefix


@dataclass(slots=True)
class _Share:
    share: float
    until: float  # on the loop's clock
    said: float  # when it was said, on the loop's clock


class SharedLoadBoard(LoadBoard):
    """A :class:`LoadBoard` that adds the rest of the fleet (see the module docstring)."""

    __slots__ = (
        "_fleet",
        "_fleet_at",
        "_fleet_shares",
        "_observed",
        "_sent_shares",
        "_task",
        "_touched",
        "interval",
        "lease",
        "limiters",
        "member",
        "name",
        "stale",
        "store",
    )

    def __init__(
        self,
        store: GuardedStore,
        *,
        limiters: LimiterBoard | None = None,
        interval: float = REFRESH_S,
        lease: float = LEASE_S,
        name: str = BOARD,
        decay: float = PEAK_DECAY_S,
    ) -> None:
        if not 0 < interval < lease:
            raise ValueError(f"interval must be > 0 and under the lease ({lease}), not {interval!r}")
        super().__init__(decay)
        self.store = store
        self.limiters = limiters
        self.interval = interval
        self.lease = lease
        self.stale = max(1.0, 5 * interval)
        self.name = name
        self.member = f"{os.getpid()}-{os.urandom(6).hex()}"
        self._fleet: dict[str, int] = {}  # the other members' requests in flight
        self._fleet_at = -math.inf  # when that was read, on the loop's clock
        self._fleet_shares: dict[str, _Share] = {}
        self._observed: dict[str, _Share] = {}  # this process's header shares, to send
        self._sent_shares: dict[str, float] = {}  # deployment -> `said` of the share last sent
        self._task: asyncio.Task[None] | None = None
        self._touched = -math.inf

    # -- the LoadBoard API: the local bookkeeping, then the fleet's on top --------------------

    def started(self, target: Target, now: float) -> None:
        super().started(target, now)
        self._used(now)

    def ended(self, target: Target, started: float, latency: float | None, now: float) -> None:
        super().ended(target, started, latency, now)
        self._used(now)

    def observe(self, target: Target, info: RateLimitInfo | None, now: float) -> None:
        super().observe(target, info, now)
        share = super().share_left(target, now)
        if share is not None:
            load = self._loads[target.name]
            self._observed[target.name] = _Share(share, load.share_until, now)
        self._used(now)

    def outstanding(self, target: Target) -> int:
        ours = super().outstanding(target)
        now = self._touch()
        return ours + (self._fleet.get(target.name, 0) if self._live(now) else 0)

    def latency(self, target: Target, now: float) -> float | None:
        self._touch()
        return super().latency(target, now)

    def share_left(self, target: Target, now: float) -> float | None:
        """The latest share said of ``target``'s quota, by this process or another."""
        self._touch()
        ours = self._observed.get(target.name)
        theirs = self._fleet_shares.get(target.name) if self._live(now) else None
        best = max((s for s in (ours, theirs) if s is not None and now < s.until), key=lambda s: s.said, default=None)
        return None if best is None else best.share

    def snapshot(self, now: float) -> dict[str, dict[str, float | int | None]]:
        out = super().snapshot(now)
        live = self._live(now)
        for name, row in out.items():
            row["fleet_in_flight"] = int(row["in_flight"] or 0) + self._fleet.get(name, 0) if live else None
        return out

    # -- the refresher ---------------------------------------------------------------------------

    def _live(self, now: float) -> bool:
        return now - self._fleet_at <= self.stale and self.store.up

    def _touch(self) -> float:
        """Mark the board in use (the refresher keeps going); the loop's time, or -inf."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # read outside a loop (a test, a script): no fleet to ask
            return -math.inf
        self._used(now)
        return now

    def _used(self, now: float) -> None:
        self._touched = now
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = self._task
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self._task = loop.create_task(self._run(), name="failover-load-board")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self.sync()
            except Exception:  # a bug must not stop the refresher: the board reads local meanwhile
                log.exception("the load board's sync failed")
            now = loop.time()
            if now - self._touched > IDLE_S and not any(load.outstanding for load in self._loads.values()):
                await self.sync()  # nothing in flight: the store forgets this member at once
                return
            await asyncio.sleep(self.interval)

    async def sync(self) -> FleetLoad | None:
        """One exchange with the store: this process's counts and new shares out, the fleet's
        in, and the shared limiters' levels read in the same round trip. None (and the board
        reads as local) while the store is unavailable."""
        if not self.store.up:  # the requests' own calls probe it; the refresher does not add to the fallbacks
            return None
        loop = asyncio.get_running_loop()
        counts = {name: load.outstanding for name, load in self._loads.items() if load.outstanding > 0}
        shares: dict[str, tuple[float, float]] = {}
        now = loop.time()
        for name, s in self._observed.items():
            if self._sent_shares.get(name) != s.said and s.until > now:
                ttl = SHARE_TTL_S if math.isinf(s.until) else s.until - now
                shares[name] = (s.share, ttl)
        guard = self.store
        ask = guard.call(guard.store.load_sync, self.name, self.member, counts, shares, lease=self.lease)
        buckets = self._buckets()
        got = await asyncio.gather(ask, *(b.refresh() for b in buckets), return_exceptions=True)
        answer = got[0]
        if isinstance(answer, StateUnavailable):
            return None
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, FleetLoad)
        now = loop.time()
        for name in shares:
            self._sent_shares[name] = self._observed[name].said
        self._fleet = dict(answer.in_flight)
        self._fleet_shares = {
            d: _Share(share, now + left, now - age) for d, (share, left, age) in answer.shares.items()
        }
        self._fleet_at = now
        return answer

    def _buckets(self) -> list[SharedBuckets]:
        return [] if self.limiters is None else self.limiters.shared_buckets()

    async def aclose(self) -> None:
        """Stop the refresher and leave the fleet's count (best effort: a lease ends anyway)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        guard = self.store
        with contextlib.suppress(StateUnavailable):
            await guard.call(guard.store.load_sync, self.name, self.member, {}, {}, lease=self.lease)


__all__ = ["LEASE_S", "REFRESH_S", "SharedLoadBoard"]
