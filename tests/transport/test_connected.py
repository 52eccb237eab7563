"""Both real transports report when an attempt's connection was ready (``Attempt.connected``).

The lab draws the connect segment of each attempt from it, so it must be there over real
HTTP, before the first byte of the answer, for a new connection and a pooled one, plain and
streamed, and absent when no connection was ever made.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from failover import Capability, Envelope, Request, Route, Router, Timeouts, Unavailable
from failover.model import Completed
from failover.policy import Unlimited
from failover.testing import FakeProvider, FakeServer, Reply, Script
from failover.transport import AiohttpTransport, Http1Transport, HttpxTransport, Transport

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})


@pytest.fixture(params=[HttpxTransport, AiohttpTransport, Http1Transport], ids=["httpx", "aiohttp", "http1"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    t: Transport = request.param()
    yield t
    await t.aclose()


def route_over(srv: FakeServer, provider: FakeProvider) -> Route:
    target = srv.target_for(
        provider, timeouts=Timeouts(connect=1.0, total=5.0), tokenizer="estimate", capabilities=CAPS
    )
    return Route(name="r", primary=(target,))


async def test_a_plain_attempt_records_its_connection_before_its_end(transport: Transport) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("hi", latency=0.3)))
    async with FakeServer(a) as srv:
        router = Router([route_over(srv, a)], transport=transport, retry_budget=Unlimited())
        first = await router.complete("r", Request.simple("hello"), Envelope(budget=10.0))
        again = await router.complete("r", Request.simple("hello"), Envelope(budget=10.0))  # a pooled connection
    for resp in (first, again):
        (att,) = resp.record.attempts
        assert att.connected is not None
        # the provider answers 0.3 s after the request arrives: the connection was up well before that
        assert att.start <= att.connected <= att.end - 0.29


async def test_a_streamed_attempt_records_its_connection_before_its_first_event(transport: Transport) -> None:
    a = FakeProvider("a", "anthropic", Script.always(Reply.ok("one two three", latency=0.2, chunk_interval=0.05)))
    async with FakeServer(a) as srv:
        router = Router([route_over(srv, a)], transport=transport, retry_budget=Unlimited())
        async with router.stream("r", Request.simple("hello"), Envelope(budget=10.0)) as stream:
            events = [e async for e in stream]
    end = events[-1]
    assert isinstance(end, Completed)
    record = end.response.record
    assert record is not None
    (att,) = record.attempts
    assert att.connected is not None and att.first_event is not None
    assert att.start <= att.connected <= att.first_event - 0.19


async def test_no_connection_no_connected_time(transport: Transport) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    a = FakeProvider("a", "openai", Script.always(Reply.ok("hi")))
    async with FakeServer(a) as srv:
        route = route_over(srv, a)
    dead = Route(name="r", primary=(replace(route.primary[0], base_url=f"http://127.0.0.1:{port}/v1"),))
    router = Router([dead], transport=transport, retry_budget=Unlimited())
    with pytest.raises(Unavailable) as caught:
        await router.complete("r", Request.simple("hello"), Envelope(budget=2.0, max_attempts=1))
    att = caught.value.record.attempts[0]
    assert att.outcome.startswith("transport") or "connect" in att.outcome
    assert att.connected is None
