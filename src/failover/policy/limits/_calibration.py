"""Calibration from provider headers: never assume more remains than the provider says.

A provider's rate-limit headers (``RateLimitInfo``) say how much of each quota is left and
when it resets. The limiter lowers its buckets to what they say, on its own scale: minus the
safety headroom (``1 - safety`` of the provider's limit, or of the configured quota when the
headers name no limit), and minus what this limiter granted after the request the headers
answer was sent (the provider had not seen those yet when it counted). Buckets only ever go
down this way; raising them is left to time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterator, Mapping
from typing import Protocol

from ...model import RateLimitInfo


class _Granted(Protocol):
    """A grant, as far as calibration needs it: when, and how much of each bucket."""

    granted_at: float

    @property
    def amounts(self) -> Mapping[str, float]: ...


def header_triples(info: RateLimitInfo) -> dict[str, tuple[int | None, int | None, float | None]]:
    """(limit, remaining, reset seconds) per bucket dimension, from one response's headers."""
    tokens = (info.limit_tokens, info.remaining_tokens, info.reset_tokens)
    inp = (info.limit_input_tokens, info.remaining_input_tokens, info.reset_input_tokens)
    out = (info.limit_output_tokens, info.remaining_output_tokens, info.reset_output_tokens)
    return {
        "rpm": (info.limit_requests, info.remaining_requests, info.reset_requests),
        # A combined token limit (OpenAI) bounds each token bucket when no specific one is sent.
        "input_tpm": inp if inp[1] is not None else tokens,
        "output_tpm": out if out[1] is not None else tokens,
    }


class HeaderCalibration:
    """What one limiter learns from headers: the provider's limits, and its recent grants.

    ``configured`` is the quota per dimension as configured (before ``safety``);
    ``provider_limits`` the last limit the provider's headers reported per dimension.
    """

    __slots__ = ("_configured", "_log", "_safety", "_window", "provider_limits")

    def __init__(self, configured: Mapping[str, int], *, safety: float, window: float) -> None:
        self._configured = configured
        self._safety = safety
        self._window = window
        self._log: deque[tuple[float, _Granted]] = deque()  # recent grants, for header sync
        self.provider_limits: dict[str, int] = {}

    def granted(self, res: _Granted, now: float) -> None:
        """Remember a grant made at ``now``: headers that answer earlier requests did not count it."""
        self.forget(now)
        self._log.append((now, res))

    def forget(self, now: float) -> None:
        """Drop grants older than one window: every header since has counted them."""
        log, horizon = self._log, now - self._window
        while log and log[0][0] < horizon:
            log.popleft()

    def _unseen(self, dim: str, reservation: _Granted | None) -> float:
        if reservation is None:
            return 0.0
        since = reservation.granted_at
        total = 0.0
        for at, res in reversed(self._log):
            if at < since:
                break
            if res is not reservation:
                total += res.amounts.get(dim, 0.0)
        return total

    def levels(
        self, info: RateLimitInfo, dims: Container[str], reservation: _Granted | None = None
    ) -> Iterator[tuple[str, float, float | None]]:
        """(dimension, most our bucket may hold, seconds until the provider's reset) for each of
        ``dims`` the headers report on. ``reservation`` is the request they answer, when its
        grant is in this limiter's log."""
        for dim, (limit, remaining, reset) in header_triples(info).items():
            if dim not in dims or remaining is None:
                continue
            if limit is not None:
                self.provider_limits[dim] = limit
            reference = limit if limit is not None else self._configured[dim]
            yield dim, remaining - reference * (1.0 - self._safety) - self._unseen(dim, reservation), reset
