"""A credential chain that is slow to give a token (a token endpoint that hangs) costs the
attempt its time, not the request's deadline: plain and streamed, the attempt ends at its
``total`` as a timeout and the next candidate answers."""

from __future__ import annotations

import asyncio

import pytest

from failover import Capability, Envelope, Request, Route, Router, Timeouts
from failover.auth import Authorizers
from failover.model import Auth, AuthKind, Completed, Target
from failover.testing import FakeNetwork, FakeProvider, Reply
from failover.transport import HttpRequest

pytestmark = pytest.mark.looptime

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})


class Hanging:
    def __init__(self, auth: Auth) -> None:
        self.calls = 0

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        self.calls += 1
        await asyncio.sleep(3600)
        return request

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("stream", [False, True])
async def test_a_hanging_token_refresh_times_the_attempt_out_and_the_fallback_answers(stream: bool) -> None:
    a = FakeProvider("a", "openai", [Reply.ok("from a")])
    b = FakeProvider("b", "anthropic", [Reply.ok("from b")])
    ta = a.target(
        auth=Auth(kind=AuthKind.AZURE),
        tokenizer="estimate",
        capabilities=CAPS,
        timeouts=Timeouts(connect=1.0, first_event=2.0, total=2.0),
    )
    tb = b.target(tokenizer="estimate", capabilities=CAPS)
    router = Router(
        [Route(name="r", primary=(ta,), fallbacks=(tb,))],
        transport=FakeNetwork(a, b),
        auth=Authorizers({AuthKind.AZURE: Hanging}),
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    if stream:
        async with router.stream("r", Request.simple("hi"), Envelope(budget=30.0)) as s:
            events = [e async for e in s]
        assert isinstance(events[-1], Completed)
        record = events[-1].response.record
    else:
        resp = await router.complete("r", Request.simple("hi"), Envelope(budget=30.0))
        assert resp.text == "from b"
        record = resp.record
    assert record is not None and record.target_used == "b"
    first = record.attempts[0]
    assert first.target == "a" and first.outcome.startswith("timeout")
    assert first.duration == pytest.approx(2.0, abs=0.01)
    assert loop.time() - t0 == pytest.approx(2.0, abs=0.05)
    assert a.calls == []  # nothing was sent without a token
    await router.aclose()
