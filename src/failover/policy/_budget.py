"""Retry budgets per upstream pool, so an outage does not multiply traffic.

Like gRPC retry throttling and Finagle's RetryBudget, scoped the way Envoy scopes its retry
budget (per cluster): every first attempt a request makes on a pool deposits, every further
attempt on that pool (a replay, a failover to another key of the same upstream, a repair, a
hedge into the same pool) withdraws; the router counts a failover to another key after a fault
of the key itself (a 429, a quota, a refused key) as that key's first attempt.
Over a sliding window, extra attempts may be at most ``ratio`` of first
attempts, plus a small ``floor`` so that a quiet service can still retry. With ratio 0.1,
1,000 requests against a provider that answers 503 send it at most 1,000 + 100 + floor
requests, not 1,000 x max_attempts.

A pool is, by default (``scope="upstream"``), one upstream: a provider endpoint and model
(``base_url`` and ``model``: the same model behind another key draws on the same pool, the
same model in another region or on another cloud is another upstream, as another model on the
same endpoint is). An outage of one upstream therefore spends only its own budget: a failover
or fallback elsewhere is that pool's first attempt, never refused because a different
upstream failed. ``scope="global"`` keeps one budget for everything (the money view: every
extra attempt of the process counts against one ratio), at the price of exactly that
starvation.

With ``store`` (``failover.state``) each pool's budget is shared by every process using the
store: each request and each extra attempt is written there in the background, and every
answer brings back how many extra attempts the fleet has left; :meth:`try_withdraw` decides
on that number minus ALL of this process's withdrawals still unanswered (the store runs
writes sent on different connections in any order), so it stays a synchronous call. Every
withdrawal is counted in the store, forced: also one the local window granted before the
store's first answer, and one the store would have refused (the attempt is already made), so
an overdraft is paid back by later refusals instead of being spent again by the others. The
fleet may overspend only by what the other processes withdraw within one round trip (the
bound is in docs/health.md). While the store is unavailable the local window decides, as
without a store, and those withdrawals stay local.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from ..model import Target
from ..state import GuardedStore, StateUnavailable

Scope = Literal["upstream", "global"]
GLOBAL = "default"  # the one pool of scope "global" (and of callers that name none)


class _Pool:
    """One pool's window, and what this process knows of its shared budget."""

    __slots__ = ("applied", "requests", "retries", "sent", "shared_left", "spends")

    def __init__(self) -> None:
        self.requests: deque[float] = deque()
        self.retries: deque[float] = deque()
        self.shared_left: int | None = None  # fleet-wide, from the newest answer, minus spends since
        self.sent = 0  # writes sent to the store
        self.applied = 0  # the newest write whose answer is applied
        self.spends: deque[int] = deque()  # spends sent and not yet answered, by write number

    def trim(self, now: float, window: float) -> None:
        horizon = now - window
        for q in (self.requests, self.retries):
            while q and q[0] <= horizon:
                q.popleft()

    def left(self, now: float, window: float, ratio: float, floor: int) -> int:
        """Extra attempts the local window allows at ``now`` (a read: the times that left the
        window stay until the next write trims them)."""
        horizon = now - window
        allowed = floor + math.floor(ratio * _within(self.requests, horizon))
        return max(0, allowed - _within(self.retries, horizon))


def _within(times: deque[float], horizon: float) -> int:
    """How many of ``times`` (oldest first) are after ``horizon``."""
    out = 0
    while out < len(times) and times[out] <= horizon:
        out += 1
    return len(times) - out


@dataclass(slots=True, kw_only=True)
class RetryBudget:
    ratio: float = 0.1
    floor: int = 10  # extra attempts always allowed per window, per pool
    window: float = 10.0  # seconds of loop time
    scope: Scope = "upstream"
    store: GuardedStore | None = field(default=None, repr=False)
    name: str = "default"  # the shared budget's key: routers that share one use the same name
    _pools: dict[str, _Pool] = field(default_factory=dict, repr=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if self.ratio < 0 or self.floor < 0 or self.window <= 0:
            raise ValueError("RetryBudget needs ratio >= 0, floor >= 0 and window > 0")
        if self.scope not in ("upstream", "global"):
            raise ValueError(f"RetryBudget scope must be 'upstream' or 'global', not {self.scope!r}")

    def pool_of(self, target: Target) -> str:
        """The pool whose budget attempts on ``target`` draw on: its endpoint and model."""
        return f"{target.base_url}|{target.model}" if self.scope == "upstream" else GLOBAL

    def _pool(self, pool: str) -> _Pool:
        p = self._pools.get(pool)
        if p is None:
            p = self._pools[pool] = _Pool()
        return p

    def record_request(self, now: float, pool: str = GLOBAL) -> None:
        """A request's first attempt on ``pool``: it deposits ``ratio`` of an extra attempt."""
        p = self._pool(pool)
        if self.store is not None:
            self._spawn(pool, p, "request")
        p.requests.append(now)
        # Writes trim (reads never do): a service that never retries would otherwise keep
        # the time of every request it ever made.
        p.trim(now, self.window)

    def available(self, now: float, pool: str = GLOBAL) -> int:
        """Extra attempts ``pool`` still allows (fleet-wide while the shared store answers).

        A read: no pool is made and nothing is trimmed (a pool never written allows ``floor``)."""
        p = self._pools.get(pool)
        if p is None:
            return self.floor
        if self.store is not None and self.store.up and p.shared_left is not None:
            return max(0, p.shared_left)
        return p.left(now, self.window, self.ratio, self.floor)

    def try_withdraw(self, now: float, pool: str = GLOBAL) -> bool:
        """Take one extra attempt from ``pool``'s budget; False when it is spent."""
        p = self._pool(pool)
        shared = self.store is not None and self.store.up
        if shared and p.shared_left is not None:
            if p.shared_left <= 0:
                return False
            p.shared_left -= 1
        else:
            p.trim(now, self.window)
            if p.left(now, self.window, self.ratio, self.floor) <= 0:
                return False
        p.retries.append(now)
        if shared:
            # Also before the store's first answer (the local window decided): the fleet's
            # count must hold every extra attempt made, or the others spend it a second time.
            self._spawn(pool, p, "spend")
        return True

    def refund(self, now: float, pool: str = GLOBAL) -> None:
        """Give back the extra attempt just withdrawn from ``pool``: it was never made."""
        p = self._pool(pool)
        if p.retries:
            p.retries.pop()
        if self.store is not None and p.shared_left is not None:
            p.shared_left += 1  # the fleet's count keeps the spend; it leaves with the window

    def _key(self, pool: str) -> str:
        return self.name if pool == GLOBAL else f"{self.name}|{pool}"

    def _spawn(self, pool: str, pool_state: _Pool, op: str) -> None:
        pool_state.sent += 1
        seq = pool_state.sent
        if op == "spend":
            pool_state.spends.append(seq)
        task = asyncio.get_running_loop().create_task(self._write(pool, pool_state, op, seq))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, pool: str, pool_state: _Pool, op: str, seq: int) -> None:
        guard = self.store
        assert guard is not None
        store, ratio, floor, window, key = guard.store, self.ratio, self.floor, self.window, self._key(pool)
        try:
            if op == "request":
                left = await guard.call(store.budget_request, key, ratio=ratio, floor=floor, window=window)
            else:  # forced: the attempt is already made, the store counts it even if none was left
                answer = await guard.call(store.budget_spend, key, ratio=ratio, floor=floor, window=window, force=True)
                left = answer.available
        except StateUnavailable:
            if op == "spend" and seq in pool_state.spends:
                pool_state.spends.remove(seq)
            pool_state.shared_left = None  # decide locally until the store answers again
            return
        if op == "spend":
            pool_state.spends.remove(seq)
        if seq <= pool_state.applied:
            return  # a newer answer is already applied: this one knows less
        pool_state.applied = seq
        # The spends still unanswered were already taken from the local count: keep them taken.
        # All of them, not only those sent after this write: the store runs writes that travel
        # on different connections in any order, so an older spend may not be in this answer
        # yet. (One that is counts twice until the next answer: a short underspend, never an
        # overspend.)
        pool_state.shared_left = left - len(pool_state.spends)

    async def drain(self) -> None:
        """Wait until every write made in the background has reached the store."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)


class Unlimited:
    """No retry budget (for comparisons and single-shot scripts)."""

    scope: Scope = "upstream"

    def pool_of(self, target: Target) -> str:
        return GLOBAL

    def record_request(self, now: float, pool: str = GLOBAL) -> None:
        return None

    def available(self, now: float, pool: str = GLOBAL) -> int:
        return 1 << 30

    def try_withdraw(self, now: float, pool: str = GLOBAL) -> bool:
        return True

    def refund(self, now: float, pool: str = GLOBAL) -> None:
        return None
