"""Router.stream to a Bedrock target over loopback: the event-stream framing through the router's
decoder seam, on every transport, with its faults: split frames, a mid-stream exception before
and after the commit point, an idle stall. Signatures are checked by the fake."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from failover import Capability, Envelope, Message, Request, Route, Router, Timeouts, Tool
from failover.model import Completed, PartialOutput, TextDelta, ToolCallDone
from failover.policy import Unlimited
from failover.testing import FakeProvider, FakeServer, Outcome, Reply, Script
from failover.transport import AiohttpTransport, Http1Transport, HttpxTransport, Transport

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
WEATHER = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
REQUEST = Request(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))


@pytest.fixture(autouse=True)
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(params=[HttpxTransport, AiohttpTransport, Http1Transport], ids=["httpx", "aiohttp", "http1"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    t: Transport = request.param()
    yield t
    await t.aclose()


async def _stream(
    a_script: Script, transport: Transport, *, hold_tokens: int = 0
) -> tuple[list[object], FakeProvider, FakeProvider, float]:
    """A streamed request over A (Bedrock) then B; ``hold_tokens=0`` by default: these tests put
    faults after output began."""
    a = FakeProvider("a", "bedrock", a_script, api_key=KEY_ID, secret_key=SECRET)
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    async with FakeServer(a, b) as srv:
        timeouts = Timeouts(connect=1.0, first_event=2.0, idle=1.0, total=10.0)
        caps = frozenset({Capability.CHAT, Capability.STREAMING, Capability.TOOLS})
        ta = srv.target_for(a, timeouts=timeouts, max_attempts=1, tokenizer="estimate", capabilities=caps)
        tb = srv.target_for(b, timeouts=timeouts, max_attempts=1, tokenizer="estimate", capabilities=caps)
        router = Router(
            [Route(name="r", primary=(ta,), fallbacks=(tb,), hold_tokens=hold_tokens)],
            transport=transport,
            retry_budget=Unlimited(),
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with router.stream("r", REQUEST, Envelope(budget=20.0)) as s:
            events = [e async for e in s]
        elapsed = loop.time() - t0
        await router.aclose()
    return events, a, b, elapsed


async def test_a_stream_in_split_frames_arrives_whole(transport: Transport) -> None:
    reply = Reply.ok(
        "It is sunny in Paris.", tool_calls=[("get_weather", {"city": "Paris"})], chunk_interval=0.1, split_bytes=5
    )
    events, a, b, _ = await _stream(Script.of(reply), transport)
    done = events[-1]
    assert isinstance(done, Completed) and done.response.text == "It is sunny in Paris."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is sunny in Paris."
    assert [e.call.parsed for e in events if isinstance(e, ToolCallDone)] == [{"city": "Paris"}]
    assert done.response.record is not None and done.response.record.target_used == "a"
    assert (len(a.calls), len(b.calls)) == (1, 0) and a.calls[0].scripted


async def test_an_exception_before_any_output_fails_over(transport: Transport) -> None:
    events, a, b, _ = await _stream(Script.of(Reply.error_event_after(0, cause="overloaded")), transport)
    done = events[-1]
    assert isinstance(done, Completed) and done.response.text == "from b"
    record = done.response.record
    assert record is not None and record.attempts[0].outcome == "provider_overloaded"
    assert (len(a.calls), len(b.calls)) == (1, 1)


async def test_an_exception_inside_the_default_hold_is_rescued_by_the_fallback(transport: Transport) -> None:
    reply = Reply.error_event_after(3, cause="rate_limit", text="one two three four five")
    events, a, b, _ = await _stream(Script.of(reply), transport, hold_tokens=100)
    done = events[-1]
    assert isinstance(done, Completed) and done.response.text == "from b"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from b"  # nothing of A's
    assert len(a.calls) == 1 and len(b.calls) == 1


async def test_an_exception_after_output_ends_the_stream_with_partial_output(transport: Transport) -> None:
    reply = Reply.error_event_after(3, cause="rate_limit", text="one two three four five")
    events, _, b, _ = await _stream(Script.of(reply), transport)
    done = events[-1]
    assert isinstance(done, PartialOutput) and done.failure.kind == "rate_limited"
    assert done.text == "".join(e.text for e in events if isinstance(e, TextDelta)) != ""
    assert b.calls == []  # nothing is spliced onto output the caller has seen


async def test_a_stall_before_the_first_frame_is_a_first_event_timeout(transport: Transport) -> None:
    events, a, _, elapsed = await _stream(Script.of(Reply.stall_before_first(30, text="late")), transport)
    done = events[-1]
    assert isinstance(done, Completed) and done.response.text == "from b"
    record = done.response.record
    assert record is not None and record.attempts[0].outcome == "timeout:first_event"
    assert record.attempts[0].duration == pytest.approx(2.0, abs=0.05)
    for _ in range(100):
        if a.calls[0].outcome is not Outcome.PENDING:
            break
        await asyncio.sleep(0)
    assert a.calls[0].outcome is Outcome.CLIENT_DISCONNECTED
    assert elapsed == pytest.approx(sum(x.duration for x in record.attempts), abs=0.05)
