"""Backoff between replays: full jitter, replaced by the server's Retry-After when given."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..model import Failure


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Full-jitter exponential backoff (the AWS Architecture Blog's "full jitter").

    Before replay ``n`` (0 for the first replay) the wait is::

        random.uniform(0, min(cap, base * 2 ** n))

    When the provider says how long to wait (``retry-after-ms``, ``retry-after``, Gemini
    ``RetryInfo``) that value replaces the schedule, up to ``max_retry_after``: a server
    asking for longer than that is treated as "not on this target".
    """

    base: float = 0.5
    cap: float = 30.0
    max_retry_after: float = 60.0

    def schedule(self, n: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap, self.base * (2.0**n)))

    def wait(self, failure: Failure, n: int, rng: random.Random) -> BackoffDecision:
        """How long to wait before replay ``n`` after ``failure``."""
        if failure.retry_after is not None:
            ra = max(0.0, failure.retry_after)
            if ra > self.max_retry_after:
                return BackoffDecision(seconds=ra, source="retry_after", acceptable=False, limit=self.max_retry_after)
            return BackoffDecision(seconds=ra, source="retry_after", acceptable=True, limit=self.max_retry_after)
        return BackoffDecision(seconds=self.schedule(n, rng), source="backoff", acceptable=True, limit=self.cap)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackoffDecision:
    seconds: float
    source: str  # "backoff" | "retry_after"
    acceptable: bool  # False: the server asked for more than we ever wait on one target
    limit: float = 60.0  # the longest wait of this source (max_retry_after, or the schedule's cap)

    def fits(self, remaining: float, min_attempt: float) -> bool:
        """Does a replay after this wait still have time for a useful attempt?"""
        return self.acceptable and self.seconds + min_attempt <= remaining
