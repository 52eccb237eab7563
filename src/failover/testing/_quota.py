"""A fake provider's own request quota: a sliding minute of requests, the 429 past it, and the
rate-limit headers the real APIs send on every answer (OpenAI ``x-ratelimit-*-requests``,
Anthropic ``anthropic-ratelimit-requests-*``), so a balancer reading them can be tested."""

from __future__ import annotations

import math
import time
from collections import deque
from datetime import UTC, datetime

from ..model import Dialect
from ._exchange import Headers
from ._reply import Reply
from ._wire import num

WINDOW = 60.0  # seconds: a requests-per-minute quota

# The rate-limit headers of one dialect's answers, replaced by the quota's own when it has one.
_OPENAI_PREFIX = "x-ratelimit-"
_ANTHROPIC_PREFIX = "anthropic-ratelimit-"


class Quota:
    """``rpm`` requests in any 60 s of the loop clock. A request over it is answered 429 with a
    ``retry-after`` until the oldest request leaves the window, and does not count. Every answer
    says what is left, in the dialect's own headers."""

    __slots__ = ("_times", "rpm")

    def __init__(self, rpm: int) -> None:
        if isinstance(rpm, bool) or not isinstance(rpm, int) or rpm < 1:
            raise ValueError(f"FakeProvider rpm must be a whole number >= 1, got {rpm!r}")
        self.rpm = rpm
        self._times: deque[float] = deque()

    def _slide(self, now: float) -> None:
        times = self._times
        while times and times[0] <= now - WINDOW:
            times.popleft()

    def full(self, now: float) -> bool:
        """Whether a request arriving at ``now`` would be answered 429 (a read: counts nothing)."""
        self._slide(now)
        return len(self._times) >= self.rpm

    def admit(self, now: float) -> Reply | None:
        """Count a request arriving at ``now``; the 429 to answer instead when it is over."""
        if self.full(now):
            wait = self._times[0] + WINDOW - now
            return Reply.rate_limit(retry_after=max(1, math.ceil(wait)))
        self._times.append(now)
        return None

    def headers(self, dialect: Dialect, now: float) -> Headers:
        """What is left at ``now``, as ``dialect`` says it (none for a dialect with no such headers)."""
        self._slide(now)
        left = self.rpm - len(self._times)
        # until the window is empty again: "the time until the rate limit resets to its initial state"
        reset = self._times[-1] + WINDOW - now if self._times else 0.0
        if dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES):
            return (
                (_OPENAI_PREFIX + "limit-requests", str(self.rpm)),
                (_OPENAI_PREFIX + "remaining-requests", str(left)),
                (_OPENAI_PREFIX + "reset-requests", f"{num(round(reset, 3))}s"),
            )
        if dialect is Dialect.ANTHROPIC:
            at = datetime.fromtimestamp(time.time() + math.ceil(reset), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return (
                (_ANTHROPIC_PREFIX + "requests-limit", str(self.rpm)),
                (_ANTHROPIC_PREFIX + "requests-remaining", str(left)),
                (_ANTHROPIC_PREFIX + "requests-reset", at),
            )
        return ()


def with_headers(headers: Headers, quota: Headers) -> Headers:
    """``headers`` with the request-quota headers replaced by ``quota``'s."""
    if not quota:
        return headers
    names = {name for name, _ in quota}
    return (*(h for h in headers if h[0] not in names), *quota)


__all__ = ["WINDOW", "Quota", "with_headers"]
