"""A breaker's sliding window: the last N recorded calls, or the last N seconds of them.

Both keep running totals (calls, failures, slow calls) that are adjusted as calls enter and
leave, so reading the rates never walks the window (a time window's read subtracts only the
buckets that left it since the last write, and changes nothing).
"""

from __future__ import annotations

import math
from collections import deque


class Totals:
    __slots__ = ("calls", "failures", "slow")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.slow = 0


class CountWindow:
    """The last ``size`` recorded calls, with running totals (subtract on evict)."""

    __slots__ = ("_items", "_size", "_t")

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: deque[tuple[bool, bool]] = deque()
        self._t = Totals()

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

    def totals(self, now: float) -> Totals:
        return self._t

    def clear(self) -> None:
        self._items.clear()
        self._t = Totals()


class TimeWindow:
    """The last ``seconds`` one-second buckets (``floor(now)``), with running totals."""

    __slots__ = ("_buckets", "_seconds", "_t")

    def __init__(self, seconds: int) -> None:
        self._seconds = seconds
        self._buckets: deque[tuple[int, Totals]] = deque()
        self._t = Totals()

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
            b = Totals()
            self._buckets.append((second, b))
        for t in (b, self._t):
            t.calls += 1
            t.failures += failed
            t.slow += slow

    def totals(self, now: float) -> Totals:
        """The totals at ``now`` (a read: buckets past the window are left for the next write)."""
        horizon = math.floor(now) - self._seconds
        buckets = self._buckets
        if not buckets or buckets[0][0] > horizon:
            return self._t
        live = Totals()
        live.calls, live.failures, live.slow = self._t.calls, self._t.failures, self._t.slow
        for second, b in buckets:
            if second > horizon:
                break
            live.calls -= b.calls
            live.failures -= b.failures
            live.slow -= b.slow
        return live

    def clear(self) -> None:
        self._buckets.clear()
        self._t = Totals()
