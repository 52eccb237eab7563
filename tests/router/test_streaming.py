"""Router.stream on virtual time: four timeouts, the commit point, cancellation, coalescing."""

from __future__ import annotations

import asyncio
import random

import pytest

from failover import Capability, Envelope, FailureKind, Request, Route, Router, Timeouts, Tool, Unavailable
from failover.model import (
    Completed,
    PartialOutput,
    Restarted,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    UsageUpdate,
)
from failover.policy import Backoff, Unlimited
from failover.testing import FakeNetwork, FakeProvider, FakeServer, Outcome, Reply, Script
from failover.transport import AiohttpTransport, Http1Transport, HttpxTransport, StreamingTransport

pytestmark = pytest.mark.looptime

C = Capability
CAPS = frozenset({C.CHAT, C.TOOLS, C.STREAMING})
TEXT = "The quick brown fox jumps over the lazy dog"
TIMEOUTS = Timeouts(connect=1.0, first_event=2.0, idle=1.0, total=20.0)
NO_HOLD = Envelope(budget=30, hold_tokens=0)  # the first content event commits: faults after it are partial


def t(p: FakeProvider, *, attempts: int = 1, caps: frozenset[Capability] = CAPS, **kw: object):  # type: ignore[no-untyped-def]
    return p.target(capabilities=caps, timeouts=TIMEOUTS, max_attempts=attempts, tokenizer="estimate", **kw)


def make(*providers: FakeProvider, attempts: int = 1, transport: object = None, **kw: object) -> Router:
    a, *rest = providers
    route = Route(name="r", primary=(t(a, attempts=attempts),), fallbacks=tuple(t(p) for p in rest))
    return Router(
        [route],
        transport=transport or FakeNetwork(*providers),  # type: ignore[arg-type]
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        **kw,  # type: ignore[arg-type]
    )


async def collect(router: Router, env: Envelope | None = None, **kw: object) -> list[object]:
    events: list[object] = []
    async with router.stream("r", Request.simple("tell me", max_tokens=200), env or Envelope(budget=30), **kw) as s:  # type: ignore[arg-type]
        async for ev in s:
            events.append(ev)
    return events


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def now() -> float:
    return asyncio.get_running_loop().time()


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
async def test_a_clean_stream_yields_deltas_then_the_complete_response(dialect: str) -> None:
    a = FakeProvider("a", dialect, Script.always(Reply.ok(TEXT, chunk_interval=0.1)))
    events = await collect(make(a))
    assert text_of(events) == TEXT
    assert sum(isinstance(e, TextDelta) for e in events) >= 2  # really streamed, not one blob
    assert any(isinstance(e, Stop) for e in events)
    assert any(isinstance(e, UsageUpdate) for e in events)
    end = events[-1]
    assert isinstance(end, Completed)
    assert end.response.text == TEXT
    rec = end.response.record
    assert rec is not None and rec.outcome == "ok" and rec.target_used == "a"
    (att,) = rec.attempts
    assert att.first_event == pytest.approx(0.0) and att.first_event_timeout == 2.0 and att.idle_timeout == 1.0


async def test_a_stall_before_the_first_event_fails_over_within_first_event_timeout() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.stall_before_first(text=TEXT)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", chunk_interval=0.1)))
    t0 = now()
    events = await collect(make(a, b))
    assert text_of(events) == "from b"  # nothing of A reached the caller
    end = events[-1]
    assert isinstance(end, Completed)
    rec = end.response.record
    assert rec is not None
    assert [x.outcome for x in rec.attempts] == ["timeout:first_event", "ok"]
    assert rec.attempts[0].duration == pytest.approx(2.0)
    (call,) = a.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED and call.disconnected_at - t0 == pytest.approx(2.0)


async def test_heartbeats_alone_are_not_a_first_event() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.heartbeats_only(0.5, text=TEXT)))
    b = FakeProvider("b", "gemini", Script.always(Reply.ok("b")))
    events = await collect(make(a, b))
    end = events[-1]
    assert isinstance(end, Completed)
    assert end.response.record.attempts[0].outcome == "timeout:first_event"  # type: ignore[union-attr]


async def test_heartbeats_keep_a_slow_stream_alive_past_the_idle_timeout() -> None:
    # a 5 s pause after 3 events, with keep-alives every 0.5 s: idle (1 s) never expires
    a = FakeProvider("a", "openai", Script.always(Reply.stall_after(3, 5.0, text=TEXT, heartbeat_interval=0.5)))
    t0 = now()
    events = await collect(make(a))
    assert isinstance(events[-1], Completed)
    assert text_of(events) == TEXT
    assert now() - t0 >= 5.0


async def test_a_stall_after_output_began_ends_with_partial_output_never_a_splice() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.stall_after(3, text=TEXT, chunk_interval=0.1)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    t0 = now()
    events = await collect(make(a, b), NO_HOLD)
    end = events[-1]
    assert isinstance(end, PartialOutput)
    assert end.failure.kind is FailureKind.TIMEOUT and end.failure.label == "timeout:idle"
    assert end.text == text_of(events) and 0 < len(end.text) < len(TEXT)
    assert len(b.calls) == 0  # no fallback spliced on
    assert end.record.outcome == "partial_output" and end.record.target_used is None
    assert not any(isinstance(e, Completed) for e in events)
    (call,) = a.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    # the idle timer fired one second after the last event
    assert call.disconnected_at - t0 == pytest.approx(0.1 * (call.events_sent - 1) + 1.0)


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        (Reply.drop_after(3, text=TEXT, chunk_interval=0.1), "transport_transient"),
        (Reply.malformed_after(3, text=TEXT, chunk_interval=0.1), "provider_server_error"),
    ],
)
async def test_mid_stream_faults_after_output_are_partial(reply: Reply, label: str) -> None:
    a = FakeProvider("a", "openai", Script.always(reply))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    events = await collect(make(a, b), NO_HOLD)
    end = events[-1]
    assert isinstance(end, PartialOutput)
    assert end.failure.label == label
    assert len(b.calls) == 0


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        (Reply.drop_after(3, text=TEXT, chunk_interval=0.1), "transport_transient"),
        (Reply.malformed_after(3, text=TEXT, chunk_interval=0.1), "provider_server_error"),
        (Reply.stall_after(3, text=TEXT, chunk_interval=0.1), "timeout:idle"),
        (Reply.error_event_after(4, text=TEXT, chunk_interval=0.1), "provider_overloaded"),
    ],
    ids=["cut", "undecodable", "stall", "error event"],
)
async def test_a_stream_that_breaks_inside_the_hold_is_recovered_invisibly(reply: Reply, label: str) -> None:
    """The default commit point holds a short answer whole: a break inside it reached nobody, so
    the fallback answers and the caller sees one whole answer, under one id, none of A's text."""
    a = FakeProvider("a", "openai", Script.always(reply))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", chunk_interval=0.1)))
    t0 = now()
    async with make(a, b).stream("r", Request.simple("tell me", max_tokens=200), Envelope(budget=30)) as s:
        ids = {s.response_id}
        events: list[object] = []
        async for ev in s:
            events.append(ev)
            ids.add(s.response_id)
    assert text_of(events) == "from b" and len(ids) == 1
    assert not any(isinstance(e, PartialOutput | Restarted) for e in events)
    end = events[-1]
    assert isinstance(end, Completed) and end.response.text == "from b"
    rec = end.response.record
    assert rec is not None and rec.target_used == "b" and rec.recovered
    assert [x.outcome for x in rec.attempts] == [label, "ok"]
    assert rec.attempts[0].committed is None and rec.attempts[1].committed is not None
    assert len(a.calls) == 1 and len(b.calls) == 1
    assert now() - t0 < 3.0  # a stall is cut by A's idle timer (1 s), well inside the 30 s budget


async def test_the_hold_ends_by_tokens_or_seconds_on_progress_then_faults_are_partial() -> None:
    words = " ".join(f"w{i}" for i in range(60))
    # by tokens: 10 tokens held, then the 11th event... is shown; a cut at 20 is then partial
    a = FakeProvider("a", "openai", Script.always(Reply.drop_after(20, text=words, chunk_interval=0.1)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    events = await collect(make(a, b), Envelope(budget=30, hold_tokens=10, hold_seconds=60))
    end = events[-1]
    assert isinstance(end, PartialOutput) and len(b.calls) == 0
    (att,) = end.record.attempts
    assert att.committed is not None and att.committed - att.first_event == pytest.approx(
        1.0
    )  # the 10th word, after the role chunk
    # by seconds: 1 s after the first content event, at the next event that arrives
    a = FakeProvider("a", "openai", Script.always(Reply.drop_after(30, text=words, chunk_interval=0.25)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    events = await collect(make(a, b), Envelope(budget=30, hold_tokens=1000, hold_seconds=1.0))
    end = events[-1]
    assert isinstance(end, PartialOutput) and len(b.calls) == 0
    (att,) = end.record.attempts
    assert att.committed is not None and att.first_event is not None
    assert att.committed - att.first_event == pytest.approx(1.0, abs=0.3)


async def test_a_stall_inside_the_hold_shows_nothing_and_is_still_rescued() -> None:
    """The hold ends by progress, not by the clock alone: a stream that stalls inside it has shown
    nobody anything, so the stall is an ordinary failure and the fallback answers."""
    a = FakeProvider("a", "openai", Script.always(Reply.stall_after(3, text=TEXT, chunk_interval=0.1)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    events = await collect(make(a, b), Envelope(budget=30, hold_tokens=1000, hold_seconds=0.5))
    assert text_of(events) == "from b"
    end = events[-1]
    assert isinstance(end, Completed)
    assert [x.outcome for x in end.response.record.attempts] == ["timeout:idle", "ok"]  # type: ignore[union-attr]


async def test_an_error_event_before_any_content_is_an_ordinary_failure() -> None:
    # Anthropic: message_start, then event: error (overloaded) -- nothing reached the caller
    a = FakeProvider("a", "anthropic", Script.of(Reply.error_event_after(1, text=TEXT), default=Reply.ok(TEXT)))
    events = await collect(make(a, attempts=2))
    end = events[-1]
    assert isinstance(end, Completed)
    assert [x.outcome for x in end.response.record.attempts] == ["provider_overloaded", "ok"]  # type: ignore[union-attr]
    assert text_of(events) == TEXT  # exactly one copy of the text


async def test_restart_after_partial_needs_the_envelope_and_the_caller() -> None:
    script = Script.always(Reply.drop_after(3, text=TEXT, chunk_interval=0.1))
    for env, opt_in in ((Envelope(allow_after_partial=True, hold_tokens=0), False), (NO_HOLD, True)):
        a = FakeProvider("a", "openai", script)
        b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
        events = await collect(make(a, b), env, restart_on_partial=opt_in)
        assert isinstance(events[-1], PartialOutput) and len(b.calls) == 0

    a = FakeProvider("a", "openai", script)
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    events = await collect(make(a, b), Envelope(allow_after_partial=True, hold_tokens=0), restart_on_partial=True)
    (restart,) = [e for e in events if isinstance(e, Restarted)]
    assert restart.failure.kind is FailureKind.TRANSPORT_TRANSIENT and restart.response_id != restart.previous_id
    after = events[events.index(restart) + 1 :]
    assert text_of(after) == "from b"
    end = events[-1]
    assert isinstance(end, Completed) and end.response.text == "from b"


@pytest.mark.parametrize(
    "make_transport", [HttpxTransport, AiohttpTransport, Http1Transport], ids=["httpx", "aiohttp", "http1"]
)
async def test_a_caller_that_leaves_closes_the_upstream_over_real_http(
    make_transport: type[StreamingTransport],
) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok(" ".join(["word"] * 40), chunk_interval=0.1)))
    transport = make_transport()
    async with FakeServer(a) as srv:
        route = Route(
            name="r", primary=(srv.target_for(a, capabilities=CAPS, timeouts=TIMEOUTS, tokenizer="estimate"),)
        )
        router = Router([route], transport=transport, retry_budget=Unlimited())
        seen = 0
        t_left = 0.0
        async with router.stream("r", Request.simple("go")) as s:
            async for ev in s:
                if isinstance(ev, TextDelta):
                    seen += 1
                    if seen == 3:
                        t_left = now()
                        break
        for _ in range(200):
            if a.calls[0].outcome is not Outcome.PENDING:
                break
            await asyncio.sleep(0.01)
        (call,) = a.calls
        assert call.outcome is Outcome.CLIENT_DISCONNECTED
        assert call.disconnected_at is not None and call.disconnected_at - t_left <= 0.1 + 1e-6  # within one event
        assert call.events_sent < 40
    await transport.aclose()


@pytest.mark.parametrize(
    "make_transport", [HttpxTransport, AiohttpTransport, Http1Transport], ids=["httpx", "aiohttp", "http1"]
)
@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
async def test_streams_over_real_http_in_every_dialect(dialect: str, make_transport: type[StreamingTransport]) -> None:
    tool = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    a = FakeProvider(
        "a", dialect, Script.always(Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})], chunk_interval=0.05))
    )
    transport = make_transport()
    async with FakeServer(a) as srv:
        target = srv.target_for(a, capabilities=CAPS, timeouts=TIMEOUTS, tokenizer="estimate")
        router = Router([Route(name="r", primary=(target,))], transport=transport, retry_budget=Unlimited())
        events = []
        req = Request.simple("weather in Paris?")
        req = Request(messages=req.messages, tools=(tool,), max_tokens=100)
        async with router.stream("r", req) as s:
            events = [ev async for ev in s]
    await transport.aclose()
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    done = [e for e in events if isinstance(e, ToolCallDone)]
    assert [s.name for s in starts] == ["get_weather"]
    assert done[0].call.parsed == {"city": "Paris"}
    assert "".join(e.arguments for e in events if isinstance(e, ToolCallDelta)) == done[0].call.arguments
    end = events[-1]
    assert isinstance(end, Completed) and end.response.tool_calls[0].parsed == {"city": "Paris"}


async def test_coalescing_merges_text_without_losing_or_reordering() -> None:
    text = " ".join(f"w{i}" for i in range(60))
    a1 = FakeProvider("a", "openai", Script.always(Reply.ok(text, chunk_interval=0.01)))
    plain = await collect(make(a1))
    a2 = FakeProvider("a", "openai", Script.always(Reply.ok(text, chunk_interval=0.01)))
    merged = await collect(make(a2), coalesce=0.05)
    assert text_of(merged) == text_of(plain) == text
    n_plain = sum(isinstance(e, TextDelta) for e in plain)
    n_merged = sum(isinstance(e, TextDelta) for e in merged)
    assert n_merged < n_plain / 2
    # the non-text events come in the same order
    kinds = [type(e).__name__ for e in plain if not isinstance(e, TextDelta)]
    assert [type(e).__name__ for e in merged if not isinstance(e, TextDelta)] == kinds


async def test_streaming_needs_the_capability() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("x")))
    route = Route(name="r", primary=(t(a, caps=frozenset({C.CHAT})),))
    router = Router([route], transport=FakeNetwork(a))
    with pytest.raises(Unavailable) as ei:
        await collect(router)
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE
    assert "missing capability: streaming" in str(ei.value)
    assert len(a.calls) == 0


async def test_a_long_plain_call_is_streamed_internally_and_gets_first_event_timeouts() -> None:
    a = FakeProvider("a", "openai", Script.of(Reply.stall_before_first(text=TEXT), default=Reply.ok(TEXT)))
    router = make(a, attempts=2, stream_threshold=10.0)  # 1,000 tokens at 50 tok/s = 20 s > 10 s
    resp = await router.complete("r", Request.simple("long", max_tokens=1000), Envelope(budget=30))
    assert resp.text == TEXT
    rec = resp.record
    assert rec is not None
    assert [x.outcome for x in rec.attempts] == ["timeout:first_event", "ok"]
    assert all(c.stream for c in a.calls)
    # a short call stays a plain request
    resp2 = await router.complete("r", Request.simple("short", max_tokens=100), Envelope(budget=30))
    assert resp2.record is not None and resp2.record.attempts[0].first_event is None
    assert not a.calls[-1].stream


async def test_total_cap_and_deadline_bound_a_stream() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok(TEXT * 20, chunk_interval=0.5)))
    router = make(a)
    events = await collect(router, Envelope(budget=3.0))
    end = events[-1]
    assert isinstance(end, PartialOutput)
    assert end.failure.label == "timeout:total"
    assert end.record.elapsed_ms == pytest.approx(3000.0)
