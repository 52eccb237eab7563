"""A global retry budget, so an outage does not multiply traffic.

Like gRPC retry throttling and Finagle's RetryBudget: every first attempt deposits, every
extra attempt (a replay, a failover, a fallback, a repair) withdraws. Over a sliding window
extra attempts may be at most ``ratio`` of first attempts, plus a small ``floor`` so that a
quiet service can still retry. With ratio 0.1, 1,000 requests against a provider that
answers 503 send at most 1,000 + 100 + floor requests, not 1,000 x max_attempts.

With ``store`` (``failover.state``) the budget is shared by every process using the store:
each request and each extra attempt is written there in the background, and every answer
brings back how many extra attempts the fleet has left; ``try_withdraw`` decides on that
number, so it stays a synchronous call (it may overspend by the withdrawals of one round
trip). While the store is unavailable the local window decides, as without a store.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field

from ..state import GuardedStore, StateUnavailable


@dataclass(slots=True, kw_only=True)
class RetryBudget:
    ratio: float = 0.1
    floor: int = 10  # extra attempts always allowed per window
    window: float = 10.0  # seconds of loop time
    store: GuardedStore | None = field(default=None, repr=False)
    name: str = "default"  # the shared budget's key: routers that share one use the same name
    _requests: deque[float] = field(default_factory=deque, repr=False)
    _retries: deque[float] = field(default_factory=deque, repr=False)
    _shared_left: int | None = field(default=None, repr=False)  # fleet-wide, from the last answer
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        if self.ratio < 0 or self.floor < 0 or self.window <= 0:
            raise ValueError("RetryBudget needs ratio >= 0, floor >= 0 and window > 0")

    def _trim(self, now: float) -> None:
        horizon = now - self.window
        for q in (self._requests, self._retries):
            while q and q[0] <= horizon:
                q.popleft()

    def record_request(self, now: float) -> None:
        if self.store is not None:
            self._spawn("request")
        q = self._requests
        q.append(now)
        # Trim here too, not only in available(): a service that never retries would
        # otherwise keep the time of every request it ever made.
        horizon = now - self.window
        while q and q[0] <= horizon:
            q.popleft()

    def available(self, now: float) -> int:
        self._trim(now)
        allowed = self.floor + math.floor(self.ratio * len(self._requests))
        return max(0, allowed - len(self._retries))

    def try_withdraw(self, now: float) -> bool:
        """Take one extra attempt from the budget; False when it is spent."""
        if self.store is not None and self.store.up and self._shared_left is not None:
            if self._shared_left <= 0:
                return False
            self._shared_left -= 1
            self._retries.append(now)
            self._spawn("spend")
            return True
        if self.available(now) <= 0:
            return False
        self._retries.append(now)
        return True

    def _spawn(self, op: str) -> None:
        task = asyncio.get_running_loop().create_task(self._write(op))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, op: str) -> None:
        guard = self.store
        assert guard is not None
        store, ratio, floor, window = guard.store, self.ratio, self.floor, self.window
        try:
            if op == "request":
                self._shared_left = await guard.call(
                    store.budget_request, self.name, ratio=ratio, floor=floor, window=window
                )
            else:
                answer = await guard.call(store.budget_spend, self.name, ratio=ratio, floor=floor, window=window)
                self._shared_left = answer.available
        except StateUnavailable:
            self._shared_left = None  # decide locally until the store answers again

    async def drain(self) -> None:
        """Wait until every write made in the background has reached the store."""
        while self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)


class Unlimited:
    """No retry budget (for comparisons and single-shot scripts)."""

    def record_request(self, now: float) -> None:
        return None

    def available(self, now: float) -> int:
        return 1 << 30

    def try_withdraw(self, now: float) -> bool:
        return True
