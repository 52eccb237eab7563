"""Response headers every dialect reads: retry hints, rate-limit state and request ids.

All parsers here are total: a missing, malformed or absurd value yields ``None`` (or is
skipped), never an exception, because a header a proxy mangled must not turn an otherwise
classifiable response into a crash. Waits and resets are seconds, clamped to ``>= 0``; no
upper cap is applied here, the backoff policy decides what is too long to wait for.

Header names are looked up lower-case, as ``HttpResponse`` stores them.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ..model import RateLimitInfo

__all__ = [
    "HeaderMeta",
    "anthropic_rate_limits",
    "first_header",
    "openai_rate_limits",
    "parse_duration",
    "parse_http_date",
    "parse_int",
    "parse_retry_after",
    "parse_rfc3339",
    "parse_seconds",
    "parse_should_retry",
    "read_meta",
    "response_clock",
]

# A plain decimal number of seconds. ``float()`` alone is too lenient for a header: it
# accepts "nan", "inf" and "1_000".
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")

# Go ``time.Duration`` strings, as OpenAI sends in ``x-ratelimit-reset-*`` ("1s", "6m0s",
# "20ms", "1h2m3.5s"), which also covers protobuf Duration JSON ("48s", "1.5s").
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION = re.compile(r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_seconds(value: str | None) -> float | None:
    """A decimal number of seconds, clamped to ``>= 0``; None for anything else."""
    if value is None:
        return None
    text = value.strip()
    if not _NUMBER.fullmatch(text):
        return None
    seconds = float(text)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def parse_int(value: str | None) -> int | None:
    """A non-negative integer count ("150000"); a negative count is clamped to 0."""
    if value is None:
        return None
    text = value.strip()
    if not _NUMBER.fullmatch(text):
        return None
    number = float(text)
    if not math.isfinite(number):
        return None
    return max(0, int(number))


def parse_duration(value: str | None) -> float | None:
    """A Go-style duration ("1h2m3.5s", "6m0s", "20ms", "48s") in seconds, clamped to ``>= 0``.

    A bare number is taken as seconds: some OpenAI-compatible servers send "1" or "0.5".
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    plain = parse_seconds(text)
    if plain is not None:
        return plain
    if not _DURATION.fullmatch(text):
        return None
    total = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if not math.isfinite(total):
        return None
    return 0.0 if text.startswith("-") else total


def parse_http_date(value: str | None) -> float | None:
    """An RFC 9110 HTTP-date ("Wed, 19 Aug 2026 14:34:13 GMT") as a POSIX timestamp."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:  # "-0000" means UTC with unknown origin zone
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def parse_rfc3339(value: str | None) -> float | None:
    """An RFC 3339 timestamp ("2026-08-19T14:34:11Z") as a POSIX timestamp."""
    if not value:
        return None
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:  # RFC 3339 requires an offset; a missing one is read as UTC
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def response_clock(headers: Mapping[str, str], now: float | None = None) -> float:
    """The moment the response was produced: its ``date`` header, else ``now``, else the wall clock.

    Absolute times a provider sends (an HTTP-date Retry-After, Anthropic's RFC 3339 resets)
    are measured against the server's own ``date`` so that local clock skew cancels out.
    """
    stamp = parse_http_date(headers.get("date"))
    if stamp is not None:
        return stamp
    return time.time() if now is None else now


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait the server asked for, in seconds.

    ``retry-after-ms`` (OpenAI, Anthropic) wins because it is more precise; then
    ``retry-after`` as delay-seconds or as an HTTP-date, the latter relative to the
    response's ``date`` header (or ``now``). A malformed value is ignored, not fatal.
    """
    ms = parse_seconds(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = parse_seconds(raw)
    if seconds is not None:
        return seconds
    when = parse_http_date(raw)
    if when is None:
        return None
    return max(0.0, when - response_clock(headers, now))


def parse_should_retry(headers: Mapping[str, str]) -> bool | None:
    """``x-should-retry: true|false`` (Anthropic, OpenAI); None when absent or unreadable."""
    value = headers.get("x-should-retry")
    if value is None:
        return None
    text = value.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    return None


def first_header(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The first non-empty header among ``names``."""
    for name in names:
        value = headers.get(name)
        if value and value.strip():
            return value.strip()
    return None


_NO_RATE_LIMITS = (None,) * 6


def openai_rate_limits(headers: Mapping[str, str], now: float | None = None) -> RateLimitInfo | None:
    """``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``; resets are durations ("6m0s")."""
    del now  # resets are already relative
    values = (
        headers.get("x-ratelimit-limit-requests"),
        headers.get("x-ratelimit-remaining-requests"),
        headers.get("x-ratelimit-reset-requests"),
        headers.get("x-ratelimit-limit-tokens"),
        headers.get("x-ratelimit-remaining-tokens"),
        headers.get("x-ratelimit-reset-tokens"),
    )
    if values == _NO_RATE_LIMITS:  # none sent (most compatible servers): one C comparison
        return None
    return RateLimitInfo(
        limit_requests=parse_int(values[0]),
        remaining_requests=parse_int(values[1]),
        reset_requests=parse_duration(values[2]),
        limit_tokens=parse_int(values[3]),
        remaining_tokens=parse_int(values[4]),
        reset_tokens=parse_duration(values[5]),
    )


def anthropic_rate_limits(headers: Mapping[str, str], now: float | None = None) -> RateLimitInfo | None:
    """``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``.

    Resets are RFC 3339 instants; they become seconds from the response's ``date`` (or
    ``now``), clamped to 0 when the instant is already past (it often is, by a second).
    """
    prefix = "anthropic-ratelimit-"
    if not any(name.startswith(prefix) for name in headers):
        return None
    clock: list[float] = []  # computed once, and only if some reset is present

    def bucket(name: str) -> tuple[int | None, int | None, float | None]:
        reset_at = parse_rfc3339(headers.get(f"{prefix}{name}-reset"))
        reset: float | None = None
        if reset_at is not None:
            if not clock:
                clock.append(response_clock(headers, now))
            reset = max(0.0, reset_at - clock[0])
        return (
            parse_int(headers.get(f"{prefix}{name}-limit")),
            parse_int(headers.get(f"{prefix}{name}-remaining")),
            reset,
        )

    req, tok, inp, out = bucket("requests"), bucket("tokens"), bucket("input-tokens"), bucket("output-tokens")
    return RateLimitInfo(
        limit_requests=req[0],
        remaining_requests=req[1],
        reset_requests=req[2],
        limit_tokens=tok[0],
        remaining_tokens=tok[1],
        reset_tokens=tok[2],
        limit_input_tokens=inp[0],
        remaining_input_tokens=inp[1],
        reset_input_tokens=inp[2],
        limit_output_tokens=out[0],
        remaining_output_tokens=out[1],
        reset_output_tokens=out[2],
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderMeta:
    """What a dialect reads from the headers of every response, success or failure."""

    request_id: str | None = None
    retry_after: float | None = None
    should_retry: bool | None = None
    rate_limits: RateLimitInfo | None = None


RateLimitReader = Callable[[Mapping[str, str], float | None], RateLimitInfo | None]


def read_meta(
    headers: Mapping[str, str],
    *,
    request_id_headers: tuple[str, ...],
    rate_limits: RateLimitReader | None = None,
    now: float | None = None,
) -> HeaderMeta:
    """Request id, retry hints and rate-limit state from one response's headers."""
    return HeaderMeta(
        request_id=first_header(headers, request_id_headers),
        retry_after=parse_retry_after(headers, now),
        should_retry=parse_should_retry(headers),
        rate_limits=rate_limits(headers, now) if rate_limits is not None else None,
    )
