"""A global retry budget, so an outage does not multiply traffic.

Like gRPC retry throttling and Finagle's RetryBudget: every first attempt deposits, every
extra attempt (a replay, a failover, a fallback, a repair) withdraws. Over a sliding window
extra attempts may be at most ``ratio`` of first attempts, plus a small ``floor`` so that a
quiet service can still retry. With ratio 0.1, 1,000 requests against a provider that
answers 503 send at most 1,000 + 100 + floor requests, not 1,000 x max_attempts.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True, kw_only=True)
class RetryBudget:
    ratio: float = 0.1
    floor: int = 10  # extra attempts always allowed per window
    window: float = 10.0  # seconds of loop time
    _requests: deque[float] = field(default_factory=deque, repr=False)
    _retries: deque[float] = field(default_factory=deque, repr=False)

    def __post_init__(self) -> None:
        if self.ratio < 0 or self.floor < 0 or self.window <= 0:
            raise ValueError("RetryBudget needs ratio >= 0, floor >= 0 and window > 0")

    def _trim(self, now: float) -> None:
        horizon = now - self.window
        for q in (self._requests, self._retries):
            while q and q[0] <= horizon:
                q.popleft()

    def record_request(self, now: float) -> None:
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
        if self.available(now) <= 0:
            return False
        self._retries.append(now)
        return True


class Unlimited:
    """No retry budget (for comparisons and single-shot scripts)."""

    def record_request(self, now: float) -> None:
        return None

    def available(self, now: float) -> int:
        return 1 << 30

    def try_withdraw(self, now: float) -> bool:
        return True
