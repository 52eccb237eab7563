"""A fake provider's own request quota (``rpm``): the 429 past it, and the rate-limit headers
every answer carries, read back by the parsers the router uses on real providers."""

from __future__ import annotations

import asyncio

import pytest

from failover.model import Dialect
from failover.providers._headers import anthropic_rate_limits, openai_rate_limits
from failover.testing import FakeProvider, ReplyKind

from ._helpers import send

pytestmark = pytest.mark.looptime

OA, AN, GE = Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI


async def test_openai_answers_say_what_is_left_and_the_request_past_the_quota_gets_429() -> None:
    p = FakeProvider("p", OA, rpm=2)
    first = await send(p)
    assert (first.status, first.header("x-ratelimit-limit-requests")) == (200, "2")
    assert first.header("x-ratelimit-remaining-requests") == "1"
    second = await send(p)
    assert second.header("x-ratelimit-remaining-requests") == "0"
    info = openai_rate_limits(second.headers, now=0.0)
    assert info is not None and info.remaining_requests == 0 and info.limit_requests == 2
    assert info.reset_requests is not None and 59.0 <= info.reset_requests <= 60.0
    third = await send(p)
    assert third.status == 429
    assert third.header("retry-after") == "60"
    assert third.header("x-ratelimit-remaining-requests") == "0"
    assert [c.scripted for c in p.calls] == [True, True, False]  # the 429 took no scripted reply
    assert p.calls[-1].kind is ReplyKind.RATE_LIMIT
    await asyncio.sleep(60.0)  # the window slides: both slots free again
    again = await send(p)
    assert (again.status, again.header("x-ratelimit-remaining-requests")) == (200, "1")


async def test_anthropic_answers_carry_its_request_headers() -> None:
    p = FakeProvider("p", AN, rpm=5)
    resp = await send(p)
    assert resp.status == 200
    info = anthropic_rate_limits(resp.headers)
    assert info is not None and (info.limit_requests, info.remaining_requests) == (5, 4)
    assert info.reset_requests is not None and 0.0 < info.reset_requests <= 61.0


async def test_a_dialect_without_such_headers_still_enforces_the_quota() -> None:
    p = FakeProvider("p", GE, rpm=1)
    assert (await send(p)).status == 200
    over = await send(p)
    assert over.status == 429
    assert not [h for h in over.headers if "ratelimit" in h.lower()]


async def test_without_rpm_there_is_no_quota_and_no_header() -> None:
    p = FakeProvider("p", OA)
    for _ in range(5):
        resp = await send(p)
        assert resp.status == 200 and resp.header("x-ratelimit-remaining-requests") is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "60"])
def test_a_bad_rpm_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValueError, match="rpm must be a whole number >= 1"):
        FakeProvider("p", OA, rpm=bad)  # type: ignore[arg-type]
