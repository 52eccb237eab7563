from __future__ import annotations

from pathlib import Path

import pytest

from failover.model import RateLimitInfo
from failover.providers._headers import (
    anthropic_rate_limits,
    first_header,
    openai_rate_limits,
    parse_duration,
    parse_http_date,
    parse_int,
    parse_retry_after,
    parse_rfc3339,
    parse_seconds,
    parse_should_retry,
    read_meta,
    response_clock,
)

from ._wire import load

NOW = 1_787_150_000.0  # an arbitrary fixed "now" for tests without a date header
DATE = "Wed, 19 Aug 2026 14:34:12 GMT"
DATE_TS = 1_787_150_052.0  # DATE as a POSIX timestamp


def test_date_constant_is_right() -> None:
    assert parse_http_date(DATE) == DATE_TS


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("48s", 48.0),
        ("1.5s", 1.5),
        ("0.5", 0.5),  # a bare number is seconds
        ("0", 0.0),
        ("250us", 0.00025),
        ("3µs", 3e-6),
        ("7ns", 7e-9),
        (" 2m ", 120.0),
        ("-1s", 0.0),  # negative clamps to 0
        ("-3", 0.0),
        ("", None),
        ("soon", None),
        ("1x", None),
        ("s", None),
        ("1s2", None),
        ("nan", None),
        ("inf", None),
        ("1_000s", None),
        (None, None),
    ],
)
def test_parse_duration(text: str | None, seconds: float | None) -> None:
    got = parse_duration(text)
    if seconds is None:
        assert got is None
    else:
        assert got == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("56", 56.0),
        ("1.5", 1.5),
        (" 3 ", 3.0),
        ("-2", 0.0),
        ("nan", None),
        ("Infinity", None),
        ("1e3", None),
        ("", None),
    ],
)
def test_parse_seconds(value: str, expected: float | None) -> None:
    assert parse_seconds(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("150000", 150000), ("-5", 0), ("12.0", 12), ("many", None), ("", None), (None, None)]
)
def test_parse_int(value: str | None, expected: int | None) -> None:
    assert parse_int(value) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "56"}, 56.0),
        ({"retry-after": "1.25"}, 1.25),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "56"}, 0.25),  # the precise one wins
        ({"retry-after-ms": "soon", "retry-after": "7"}, 7.0),  # garbage ms falls through
        ({"retry-after": "-5"}, 0.0),  # negative clamps
        ({"retry-after-ms": "-100"}, 0.0),
        ({"retry-after": "later"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": ""}, None),
        ({}, None),
        # HTTP-date: relative to the response's own date header, not to our clock
        ({"retry-after": "Wed, 19 Aug 2026 14:34:42 GMT", "date": DATE}, 30.0),
        ({"retry-after": "Wed, 19 Aug 2026 14:34:02 GMT", "date": DATE}, 0.0),  # already past
        ({"retry-after": "Wed, 32 Foo 2026 99:99:99 GMT", "date": DATE}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_retry_after_http_date_without_date_header_uses_now() -> None:
    headers = {"retry-after": "Wed, 19 Aug 2026 14:34:42 GMT"}
    assert parse_retry_after(headers, now=DATE_TS - 10) == pytest.approx(40.0)


def test_retry_after_http_date_with_garbage_date_header_uses_now() -> None:
    headers = {"retry-after": "Wed, 19 Aug 2026 14:34:42 GMT", "date": "yesterday"}
    assert parse_retry_after(headers, now=DATE_TS) == pytest.approx(30.0)


def test_response_clock() -> None:
    assert response_clock({"date": DATE}, now=NOW) == DATE_TS
    assert response_clock({}, now=NOW) == NOW
    assert response_clock({"date": "garbage"}, now=NOW) == NOW


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("false", False), ("TRUE", True), (" False ", False), ("yes", None), ("", None), (None, None)],
)
def test_parse_should_retry(value: str | None, expected: bool | None) -> None:
    headers = {} if value is None else {"x-should-retry": value}
    assert parse_should_retry(headers) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-08-19T14:34:11Z", DATE_TS - 1),
        ("2026-08-19T16:34:11+02:00", DATE_TS - 1),
        ("2026-08-19T14:34:11", DATE_TS - 1),  # no offset: read as UTC
        ("2026-13-45T00:00:00Z", None),
        ("tomorrow", None),
        ("", None),
    ],
)
def test_parse_rfc3339(value: str, expected: float | None) -> None:
    assert parse_rfc3339(value) == expected


def test_first_header_skips_blank() -> None:
    assert first_header({"a": " ", "b": " id-1 "}, ("a", "b")) == "id-1"
    assert first_header({}, ("a",)) is None


def test_openai_rate_limits_from_sample(wire: Path) -> None:
    resp = load(wire, "openai-chat/12-error-429-rate-limit-exceeded.http")
    assert openai_rate_limits(resp.headers) == RateLimitInfo(
        limit_requests=60,
        remaining_requests=59,
        reset_requests=1.0,
        limit_tokens=150000,
        remaining_tokens=149984,
        reset_tokens=360.0,
    )


def test_openai_rate_limits_garbage_values_are_dropped() -> None:
    info = openai_rate_limits(
        {
            "x-ratelimit-limit-requests": "lots",
            "x-ratelimit-reset-tokens": "whenever",
            "x-ratelimit-remaining-tokens": "7",
        }
    )
    assert info == RateLimitInfo(remaining_tokens=7)


def test_openai_rate_limits_absent() -> None:
    assert openai_rate_limits({"content-type": "application/json"}) is None


def test_anthropic_rate_limits_from_sample(wire: Path) -> None:
    # The real capture's resets (14:34:11) are one second before its date (14:34:12): clamp to 0.
    resp = load(wire, "anthropic/02-stream-text-ratelimit-headers.http")
    assert anthropic_rate_limits(resp.headers, now=0.0) == RateLimitInfo(
        limit_requests=10000,
        remaining_requests=9999,
        reset_requests=0.0,
        limit_tokens=12000000,
        remaining_tokens=12000000,
        reset_tokens=0.0,
        limit_input_tokens=10000000,
        remaining_input_tokens=10000000,
        reset_input_tokens=0.0,
        limit_output_tokens=2000000,
        remaining_output_tokens=2000000,
        reset_output_tokens=0.0,
    )


def test_anthropic_rate_limit_reset_is_relative_to_date_header() -> None:
    headers = {
        "date": DATE,
        "anthropic-ratelimit-tokens-limit": "100",
        "anthropic-ratelimit-tokens-reset": "2026-08-19T14:35:12Z",
        "anthropic-ratelimit-requests-reset": "not a time",
    }
    info = anthropic_rate_limits(headers, now=0.0)
    assert info == RateLimitInfo(limit_tokens=100, reset_tokens=60.0)


def test_anthropic_rate_limit_reset_without_date_uses_now() -> None:
    info = anthropic_rate_limits({"anthropic-ratelimit-requests-reset": "2026-08-19T14:34:22Z"}, now=DATE_TS)
    assert info is not None
    assert info.reset_requests == pytest.approx(10.0)


def test_read_meta_collects_everything(wire: Path) -> None:
    resp = load(wire, "openai-chat/12-error-429-rate-limit-exceeded.http")
    meta = read_meta(resp.headers, request_id_headers=("x-request-id",), rate_limits=openai_rate_limits)
    assert meta.request_id == "<X_REQUEST_ID>"
    assert meta.retry_after == 56.0
    assert meta.should_retry is None
    assert meta.rate_limits is not None
    assert meta.rate_limits.reset_tokens == 360.0
