"""One absolute deadline per request, read by every layer below the router."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Deadline:
    """An absolute point on the event loop's clock (``loop.time()``); ``math.inf`` for none.

    Every attempt timeout and every backoff is capped by :meth:`remaining`, so nothing
    below the router sleeps or waits past it.

    >>> d = Deadline.after(now=100.0, budget=5.0)
    >>> d.remaining(now=103.5)
    1.5
    """

    at: float

    @classmethod
    def after(cls, *, now: float, budget: float | None) -> Deadline:
        return cls(math.inf if budget is None else now + max(0.0, budget))

    def remaining(self, now: float) -> float:
        return max(0.0, self.at - now)

    def expired(self, now: float) -> bool:
        return now >= self.at

    def cap(self, value: float, now: float) -> float:
        """``value`` limited to what is left of the deadline."""
        return min(value, self.remaining(now))
