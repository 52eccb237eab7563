"""Streams delivered over time by FakeNetwork.stream, with faults exactly when scripted.

Every test runs on looptime's virtual clock: the 10 s stalls cost nothing, and the times of
the chunks are exact. Times are measured from the moment the headers arrived.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from failover.model import Dialect
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply, ReplyKind
from failover.transport._types import HttpRequest, StreamingResponse, TransportError

from ._helpers import SSE, body, headers, parse_sse, request, send, stream_pieces, url

pytestmark = pytest.mark.looptime

OA, AN, GE = Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI
DIALECTS = [OA, AN, GE]
TEXT = "alpha beta gamma"  # three deltas
# Events of the TEXT stream: OpenAI role, 3 deltas, finish, usage, [DONE]; Anthropic
# message_start, content_block_start, ping, 3 deltas, content_block_stop, message_delta,
# message_stop; Gemini one chunk per delta.
EVENTS = {OA: 7, AN: 9, GE: 3}
HEARTBEAT = {OA: b": keep-alive\n\n", AN: b'event: ping\ndata: {"type": "ping"}\n\n', GE: b": keep-alive\r\n\r\n"}


def stream_request(p: FakeProvider, **extra: Any) -> HttpRequest:
    if p.dialect is OA:
        extra.setdefault("stream_options", {"include_usage": True})
    return request(p, stream=True, **extra)


async def play(
    dialect: Dialect, reply: Reply, *, leave_after: int | None = None, **extra: Any
) -> tuple[list[tuple[float, bytes]], TransportError | None, FakeProvider]:
    p = FakeProvider("p", dialect, [reply])
    pieces, error = await stream_pieces(FakeNetwork(p), stream_request(p, **extra), leave_after=leave_after)
    return pieces, error, p


def times(pieces: list[tuple[float, bytes]]) -> list[float]:
    return [round(t, 6) for t, _ in pieces]


def joined(pieces: list[tuple[float, bytes]]) -> bytes:
    return b"".join(data for _, data in pieces)


def same_bytes(raw: bytes) -> bytes:
    """OpenAI chunks carry a wall-clock ``created``: blank it to compare two renderings."""
    return re.sub(rb'"created":\d+', b'"created":0', raw)


async def untimed(dialect: Dialect, reply: Reply, **extra: Any) -> bytes:
    """The same answer sent all at once (the reference bytes)."""
    p = FakeProvider("p", dialect, [reply])
    resp = await FakeNetwork(p).send(stream_request(p, **extra), connect_timeout=1, total_timeout=60)
    return resp.body


async def collect(resp: StreamingResponse, into: list[tuple[float, bytes]]) -> None:
    """Read the body into ``into``, each chunk with its loop time from the start of reading."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    async for piece in resp.aiter_bytes():
        into.append((loop.time() - start, piece))


def data_of(events: list[SSE]) -> list[Any]:
    return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in events]


# -- normal streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_events_are_spaced_by_chunk_interval(dialect: Dialect) -> None:
    pieces, error, p = await play(dialect, Reply.ok(TEXT, chunk_interval=0.25))
    n = EVENTS[dialect]
    assert error is None
    assert times(pieces) == [0.25 * i for i in range(n)]
    assert same_bytes(joined(pieces)) == same_bytes(await untimed(dialect, Reply.ok(TEXT)))
    (call,) = p.calls
    assert (call.kind, call.status, call.outcome, call.events_sent) == (ReplyKind.OK, 200, Outcome.COMPLETED, n)
    assert call.answered_at is not None
    assert call.answered_at - call.time == pytest.approx(0.25 * (n - 1), abs=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_heartbeats_fill_every_silence_longer_than_their_interval(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.ok(TEXT, chunk_interval=1, heartbeat_interval=0.4))
    n = EVENTS[dialect]
    expected: list[float] = [0.0]
    for i in range(1, n):
        expected += [i - 0.6, i - 0.2, i]
    assert times(pieces) == pytest.approx(expected, abs=1e-6)
    beats = [data for t, data in pieces if round(t, 6) % 1]
    assert beats and all(b == HEARTBEAT[dialect] for b in beats)
    # Without the keep-alives the bytes are the plain stream's.
    rest = b"".join(data for t, data in pieces if not round(t, 6) % 1)
    assert same_bytes(rest) == same_bytes(await untimed(dialect, Reply.ok(TEXT)))
    assert p.calls[0].events_sent == n


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_split_bytes_cuts_every_event_at_odd_boundaries(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.ok(TEXT, chunk_interval=0.5, split_bytes=7))
    assert all(0 < len(data) <= 7 for _, data in pieces)
    assert len(pieces) > 3 * EVENTS[dialect]
    assert same_bytes(joined(pieces)) == same_bytes(await untimed(dialect, Reply.ok(TEXT)))
    assert sorted(set(times(pieces))) == [0.5 * i for i in range(EVENTS[dialect])]  # an event's pieces go at once
    assert p.calls[0].events_sent == EVENTS[dialect]


# -- stalls ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stall_before_first_sends_headers_then_nothing(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.stall_before_first(10, text=TEXT, chunk_interval=0.5))
    assert times(pieces) == [10 + 0.5 * i for i in range(EVENTS[dialect])]
    assert p.calls[0].outcome is Outcome.COMPLETED


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stall_forever_ends_when_the_client_gives_up(dialect: Dialect) -> None:
    p = FakeProvider("p", dialect, [Reply.stall_before_first(text=TEXT)])
    async with FakeNetwork(p).stream(stream_request(p), connect_timeout=1) as resp:
        assert resp.status == 200  # the headers came at once
        got: list[tuple[float, bytes]] = []
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(collect(resp, got), 30)
        assert got == []
    (call,) = p.calls
    assert (call.outcome, call.status, call.events_sent) == (Outcome.CLIENT_DISCONNECTED, 200, 0)
    assert call.disconnected_at is not None and call.disconnected_at - call.time == pytest.approx(30, abs=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_stall_after_three_events_for_ten_seconds(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.stall_after(3, 10, text=TEXT, chunk_interval=0.1))
    n = EVENTS[dialect]
    if dialect is GE:  # three events in all: the stall comes before the last
        assert times(pieces) == [0.0, 0.1, 10.1]
    else:
        assert times(pieces) == pytest.approx([0.0, 0.1, 0.2] + [10.2 + 0.1 * i for i in range(n - 3)], abs=1e-6)
    call = p.calls[0]
    assert (call.kind, call.outcome, call.events_sent) == (ReplyKind.STALL_AFTER, Outcome.COMPLETED, n)


@pytest.mark.parametrize("dialect", [OA, AN])
async def test_a_stall_forever_mid_stream_records_the_events_sent(dialect: Dialect) -> None:
    p = FakeProvider("p", dialect, [Reply.stall_after(3, text=TEXT, chunk_interval=0.1)])
    got: list[tuple[float, bytes]] = []
    async with FakeNetwork(p).stream(stream_request(p), connect_timeout=1) as resp:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(collect(resp, got), 5)
    assert times(got) == pytest.approx([0.0, 0.1, 0.2], abs=1e-6)
    (call,) = p.calls
    assert (call.outcome, call.events_sent) == (Outcome.CLIENT_DISCONNECTED, 3)
    assert call.disconnected_at is not None and call.disconnected_at - call.time == pytest.approx(5, abs=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_heartbeats_only_for_seven_seconds_then_the_stream(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.heartbeats_only(2, 7, text=TEXT))
    n = EVENTS[dialect]
    assert times(pieces) == [2.0, 4.0, 6.0] + [7.0] * n
    assert [data for _, data in pieces[:3]] == [HEARTBEAT[dialect]] * 3
    assert p.calls[0].events_sent == n


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_heartbeats_only_forever_never_delivers_an_event(dialect: Dialect) -> None:
    p = FakeProvider("p", dialect, [Reply.heartbeats_only(1.5)])
    got: list[tuple[float, bytes]] = []
    async with FakeNetwork(p).stream(stream_request(p), connect_timeout=1) as resp:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(collect(resp, got), 10)
    assert times(got) == [1.5, 3.0, 4.5, 6.0, 7.5, 9.0]
    assert {data for _, data in got} == {HEARTBEAT[dialect]}
    events, comments = parse_sse(joined(got))
    assert (len(events), len(comments)) == ((6, 0) if dialect is AN else (0, 6))
    (call,) = p.calls
    assert (call.outcome, call.events_sent) == (Outcome.CLIENT_DISCONNECTED, 0)


# -- broken streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_drop_after_closes_mid_stream_without_a_terminal_event(dialect: Dialect) -> None:
    pieces, error, p = await play(dialect, Reply.drop_after(2, text=TEXT, chunk_interval=0.5))
    assert times(pieces) == [0.0, 0.5]
    assert error is not None and error.phase == "read"
    events, _ = parse_sse(joined(pieces))
    assert len(events) == 2
    raw = joined(pieces)
    assert b"[DONE]" not in raw and b"message_stop" not in raw and b"finishReason" not in raw
    (call,) = p.calls
    assert (call.outcome, call.status, call.events_sent) == (Outcome.RESET, 200, 2)
    assert call.disconnected_at is not None
    assert call.disconnected_at - call.time == pytest.approx(1.0, abs=1e-6)  # when the third event was due


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_malformed_after_cuts_one_event_and_keeps_the_rest(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.malformed_after(1, text=TEXT))
    events, _ = parse_sse(joined(pieces))
    n = EVENTS[dialect]
    assert len(events) == n == p.calls[0].events_sent
    broken = []
    for i, e in enumerate(events):
        try:
            json.loads(e.data)
        except json.JSONDecodeError:
            broken.append(i)
    assert broken == [1] or (dialect is OA and broken == [1, n - 1])  # OpenAI's "[DONE]" is not JSON either
    assert events[1].data.startswith("{")  # a JSON text cut short, framing intact
    assert p.calls[0].outcome is Outcome.COMPLETED


async def test_malformed_after_skips_anthropic_pings() -> None:
    pieces, _, _ = await play(AN, Reply.malformed_after(2, text=TEXT))  # event 2 is the ping
    events, _ = parse_sse(joined(pieces))
    assert events[2] == SSE("ping", '{"type": "ping"}')
    assert events[3].event == "content_block_delta"
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[3].data)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_error_event_after_two_events(dialect: Dialect) -> None:
    pieces, error, p = await play(dialect, Reply.error_event_after(2, text=TEXT, chunk_interval=0.5))
    assert error is None
    assert times(pieces) == [0.0, 0.5, 1.0]
    events, _ = parse_sse(joined(pieces))
    last = json.loads(events[-1].data)
    if dialect is AN:
        assert [e.event for e in events] == ["message_start", "content_block_start", "error"]
        assert last == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    elif dialect is OA:
        assert last["error"]["code"] == "server_is_overloaded"
        assert set(last["error"]) == {"message", "type", "param", "code"}
        assert b"[DONE]" not in joined(pieces)
    else:
        assert last == {
            "error": {
                "code": 503,
                "message": "The model is overloaded. Please try again later.",
                "status": "UNAVAILABLE",
            }
        }
        assert joined(pieces).endswith(b"\r\n\r\n")
    (call,) = p.calls
    assert (call.kind, call.status, call.outcome, call.events_sent) == (
        ReplyKind.ERROR_EVENT_AFTER,
        200,
        Outcome.COMPLETED,
        3,
    )


CAUSES = {
    # cause: (OpenAI code, Anthropic error type, Gemini code and status, the plain answer's status)
    "overloaded": ("server_is_overloaded", "overloaded_error", (503, "UNAVAILABLE"), {OA: 503, AN: 529, GE: 503}),
    "rate_limit": ("rate_limit_exceeded", "rate_limit_error", (429, "RESOURCE_EXHAUSTED"), {OA: 429, AN: 429, GE: 429}),
    "server_error": ("server_error", "api_error", (500, "INTERNAL"), {OA: 500, AN: 500, GE: 500}),
}


@pytest.mark.parametrize("cause", list(CAUSES))
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_error_event_after_sends_the_chosen_cause_in_the_dialects_codes(dialect: Dialect, cause: str) -> None:
    reply = Reply.error_event_after(1, cause=cause, text=TEXT)
    pieces, _, _ = await play(dialect, reply)
    events, _ = parse_sse(joined(pieces))
    error = json.loads(events[-1].data)["error"]
    openai_code, anthropic_type, gemini, status = CAUSES[cause]
    if dialect is OA:
        assert error["code"] == openai_code and error["message"]
    elif dialect is AN:
        assert (events[-1].event, error["type"]) == ("error", anthropic_type) and error["message"]
    else:
        assert (error["code"], error["status"]) == gemini and error["message"]
    p = FakeProvider("p", dialect, [reply])
    plain = await send(p)  # no stream to put it in: the plain error of that kind
    assert plain.status == status[dialect]
    assert p.calls[0].kind is ReplyKind.ERROR_EVENT_AFTER


async def test_error_event_after_a_message_keeps_the_cause() -> None:
    pieces, _, _ = await play(AN, Reply.error_event_after(1, cause="server_error", message="boom"))
    events, _ = parse_sse(joined(pieces))
    assert json.loads(events[-1].data)["error"] == {"type": "api_error", "message": "boom"}


def test_an_unknown_cause_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="'overloaded', 'rate_limit', 'server_error', got 'quota'"):
        Reply.error_event_after(1, cause="quota")


def _tool_deltas(raw: bytes) -> list[dict[str, Any]]:
    events, _ = parse_sse(raw)
    out: list[dict[str, Any]] = []
    for e in events:
        if e.data != "[DONE]":
            for choice in json.loads(e.data)["choices"]:
                out.extend(choice["delta"].get("tool_calls") or ())
    return out


THREE_CALLS = [
    ("get_weather", {"city": "Paris, île-de-France"}),
    ("search", {"q": "météo"}),
    ("get_time", {"tz": "CET"}),
]


async def test_interleaved_tool_calls_take_turns_in_an_openai_stream() -> None:
    pieces, _, _ = await play(OA, Reply.ok(tool_calls=THREE_CALLS, interleave=True))
    deltas = _tool_deltas(joined(pieces))
    order = [(d["index"], "head" if "id" in d else "part") for d in deltas]
    # call 1 starts after call 0's first fragment, call 2 after call 1's: as the servers send them
    assert order[:6] == [(0, "head"), (0, "part"), (1, "head"), (0, "part"), (1, "part"), (2, "head")]
    assert order != sorted(order, key=lambda o: o[0])  # really interleaved
    for i, (name, args) in enumerate(THREE_CALLS):
        mine = [d for d in deltas if d["index"] == i]
        assert mine[0]["function"]["name"] == name and mine[0]["id"]
        assert json.loads("".join(d["function"]["arguments"] for d in mine)) == args
    plain, _, _ = await play(OA, Reply.ok(tool_calls=THREE_CALLS))
    indexes = [d["index"] for d in _tool_deltas(joined(plain))]
    assert indexes == sorted(indexes)  # without interleave: one call after the other


@pytest.mark.parametrize("dialect", [AN, GE])
async def test_interleave_leaves_dialects_without_interleaving_as_they_are(dialect: Dialect) -> None:
    mixed = await untimed(dialect, Reply.ok(tool_calls=THREE_CALLS, interleave=True))
    assert same_bytes(mixed) == same_bytes(await untimed(dialect, Reply.ok(tool_calls=THREE_CALLS)))


async def test_fault_positions_are_capped_before_the_last_event() -> None:
    pieces, error, _ = await play(GE, Reply.drop_after(50, text=TEXT))
    assert len(pieces) == 2 and error is not None  # the chunk with finishReason never comes
    pieces, _, _ = await play(OA, Reply.error_event_after(50, text=TEXT))
    events, _ = parse_sse(joined(pieces))
    assert len(events) == EVENTS[OA] and "error" in json.loads(events[-1].data)  # instead of [DONE]


# -- the client side -------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_leaving_mid_stream_is_a_disconnect_at_that_time(dialect: Dialect) -> None:
    pieces, _, p = await play(dialect, Reply.ok(TEXT, chunk_interval=1), leave_after=2)
    assert times(pieces) == [0.0, 1.0]
    (call,) = p.calls
    assert (call.outcome, call.events_sent) == (Outcome.CLIENT_DISCONNECTED, 2)
    assert call.disconnected_at is not None and call.disconnected_at - call.time == pytest.approx(1.0, abs=1e-6)


async def test_leaving_after_the_last_event_is_a_completed_call() -> None:
    pieces, _, p = await play(OA, Reply.ok(TEXT, chunk_interval=1), leave_after=EVENTS[OA])
    assert pieces[-1][1] == b"data: [DONE]\n\n"
    assert p.calls[0].outcome is Outcome.COMPLETED


async def test_aread_waits_for_the_whole_body_and_a_cancelled_read_loses_nothing() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("p", AN, [Reply.stall_after(1, 3, text=TEXT)])
    async with FakeNetwork(p).stream(stream_request(p), connect_timeout=1) as resp:
        chunks = resp.aiter_bytes()
        first = await anext(chunks)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(chunks), 1)  # an idle timeout that gives the stream another chance
        rest = await resp.aread()
        assert loop.time() - p.calls[0].time == pytest.approx(3, abs=1e-6)
    assert same_bytes(first + rest) == same_bytes(await untimed(AN, Reply.ok(TEXT)))
    assert p.calls[0].outcome is Outcome.COMPLETED


async def test_headers_wait_for_the_latency_and_a_hang_never_sends_them() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("p", OA, [Reply.ok(TEXT, chunk_interval=0.5, latency=2), "hang"], latency=0.5)
    net = FakeNetwork(p)
    start = loop.time()
    async with net.stream(stream_request(p), connect_timeout=1) as resp:
        assert loop.time() - start == pytest.approx(2.5, abs=1e-6)
        assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert resp.headers["x-request-id"] == "req_p_1"
        await resp.aread()

    async def open_stream() -> None:
        async with net.stream(stream_request(p), connect_timeout=1):
            raise AssertionError("a hang sends no headers")

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(open_stream(), 4)
    assert p.calls[1].outcome is Outcome.CLIENT_DISCONNECTED


async def test_an_error_answer_to_a_stream_request_is_plain_json() -> None:
    p = FakeProvider("p", AN, [Reply.rate_limit(retry_after=2), "reset", "connect_error"])
    net = FakeNetwork(p)
    async with net.stream(stream_request(p), connect_timeout=1) as resp:
        assert (resp.status, resp.headers["retry-after"], resp.headers["content-type"]) == (
            429,
            "2",
            "application/json",
        )
        assert json.loads(await resp.aread())["error"]["type"] == "rate_limit_error"
    with pytest.raises(TransportError) as info:
        async with net.stream(stream_request(p), connect_timeout=1):
            pass
    assert info.value.phase == "read"
    with pytest.raises(TransportError) as info:
        async with net.stream(stream_request(p), connect_timeout=1):
            pass
    assert info.value.phase == "connect"
    first = p.calls[0]
    assert (first.outcome, first.events_sent, first.answered_at) == (Outcome.COMPLETED, 1, first.time)


async def test_a_plain_stream_is_sent_whole_with_the_headers() -> None:
    p = FakeProvider("p", GE, [Reply.ok(TEXT)])
    pieces, _, _ = await play(GE, Reply.ok(TEXT))
    assert times(pieces) == [0.0, 0.0, 0.0]
    async with FakeNetwork(p).stream(stream_request(p), connect_timeout=1):
        pass  # not even read: the server had written it all
    assert (p.calls[0].outcome, p.calls[0].events_sent) == (Outcome.COMPLETED, 3)


# -- what the bytes are ----------------------------------------------------------------------------


async def test_openai_stream_structure_with_two_streamed_tool_calls() -> None:
    calls = [("get_weather", {"city": "Paris", "units": "c"}), ("get_time", {"tz": "Europe/Paris"})]
    pieces, _, _ = await play(OA, Reply.ok("Checking.", tool_calls=calls, chunk_interval=0.1))
    events, comments = parse_sse(joined(pieces))
    assert comments == [] and all(e.event is None for e in events)
    data = data_of(events)
    assert data[-1] == "[DONE]"
    chunks = data[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "chatcmpl-p-1" for c in chunks)
    *with_choices, usage = chunks
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    assert all(c["usage"] is None and len(c["choices"]) == 1 for c in with_choices)
    deltas = [c["choices"][0]["delta"] for c in with_choices]
    assert deltas[0] == {"role": "assistant", "content": "", "refusal": None}
    assert "".join(d.get("content") or "" for d in deltas) == "Checking."
    fragments: dict[int, list[dict[str, Any]]] = {}
    for d in deltas:
        for tc in d.get("tool_calls", ()):
            fragments.setdefault(tc["index"], []).append(tc)
    assert sorted(fragments) == [0, 1]
    for i, (name, args) in enumerate(calls):
        first, *more = fragments[i]
        assert (first["type"], first["function"]["name"], first["function"]["arguments"]) == ("function", name, "")
        assert first["id"].startswith("call_") and all("id" not in f for f in more)
        assert len(more) > 1  # the arguments come in several fragments
        assert json.loads("".join(f["function"]["arguments"] for f in more)) == args
    assert with_choices[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["choices"][0]["finish_reason"] is None for c in with_choices[:-1])


async def test_anthropic_stream_structure_and_padding() -> None:
    pieces, _, _ = await play(AN, Reply.ok("Let me look.", tool_calls=[("get_weather", {"city": "Paris"})]))
    raw = joined(pieces)
    events, _ = parse_sse(raw)
    names = [e.event for e in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    data = [json.loads(e.data) for e in events]
    assert all(d["type"] == e.event for d, e in zip(data, events, strict=True))
    assert data[0]["message"]["content"] == [] and data[0]["message"]["stop_reason"] is None
    text = "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta" and d["index"] == 0)
    partial = "".join(
        d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta" and d["index"] == 1
    )
    assert (text, json.loads(partial)) == ("Let me look.", {"city": "Paris"})
    assert data[-2]["delta"]["stop_reason"] == "tool_use"
    # The real padding before the closing brace, and the real ping.
    assert b'"index":0    }\n\n' in raw and b"}     }\n\n" in raw
    assert b'event: ping\ndata: {"type": "ping"}\n\n' in raw


async def test_gemini_stream_structure_crlf_and_spacing() -> None:
    pieces, _, _ = await play(GE, Reply.ok(TEXT, chunk_interval=0.2))
    raw = joined(pieces)
    assert all(data.startswith(b"data: ") and data.endswith(b"\r\n\r\n") for _, data in pieces)
    assert b"\n\n" not in raw.replace(b"\r\n\r\n", b"")
    assert raw.startswith(b'data: {"candidates": [{"content": {"parts": [{"text": "alpha "}],"role": "model"}')
    chunks = data_of(parse_sse(raw)[0])
    assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == TEXT
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in chunks[-1]
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])


async def test_gemini_without_alt_sse_streams_one_json_array() -> None:
    p = FakeProvider("p", GE, [Reply.drop_after(2, text=TEXT, chunk_interval=0.5), Reply.ok(TEXT, chunk_interval=0.5)])
    req = HttpRequest(
        method="POST",
        url=url(p, stream=True).replace("?alt=sse", ""),
        headers=headers(GE),
        json=body(GE),
    )
    net = FakeNetwork(p)
    pieces, error = await stream_pieces(net, req)
    assert error is not None and joined(pieces).startswith(b"[{")
    pieces, error = await stream_pieces(net, req)
    assert error is None and times(pieces) == [0.0, 0.5, 1.0]
    elements = json.loads(joined(pieces))
    assert [e["candidates"][0]["content"]["parts"][0]["text"] for e in elements] == ["alpha ", "beta ", "gamma"]


# -- send() and requests that are not streams -------------------------------------------------------


async def test_send_reads_a_timed_stream_whole_on_its_schedule() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("p", OA, [Reply.ok(TEXT, chunk_interval=0.5), Reply.stall_after(2, text=TEXT)])
    net = FakeNetwork(p)
    start = loop.time()
    resp = await net.send(stream_request(p), connect_timeout=1, total_timeout=60)
    assert loop.time() - start == pytest.approx(0.5 * (EVENTS[OA] - 1), abs=1e-6)
    assert data_of(parse_sse(resp.body)[0])[-1] == "[DONE]"
    with pytest.raises(TransportError) as info:
        await net.send(stream_request(p), connect_timeout=1, total_timeout=8)
    assert info.value.phase == "total"
    second = p.calls[1]
    assert (second.outcome, second.events_sent) == (Outcome.CLIENT_DISCONNECTED, 2)
    assert second.disconnected_at is not None and second.disconnected_at - second.time == pytest.approx(8, abs=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_request_that_is_not_a_stream_gets_its_body_as_one_event(dialect: Dialect) -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider(
        "p",
        dialect,
        [
            Reply.stall_before_first(5, text="late"),
            Reply.heartbeats_only(1, 3, text="queued"),
            Reply.malformed_after(4),
            Reply.drop_after(4),
            Reply.error_event_after(4),
        ],
    )
    net = FakeNetwork(p)
    start = loop.time()
    late = await net.send(request(p), connect_timeout=1, total_timeout=60)
    assert loop.time() - start == pytest.approx(5, abs=1e-6)
    assert "late" in late.body.decode() and json.loads(late.body)
    queued = await net.send(request(p), connect_timeout=1, total_timeout=60)
    assert queued.body.startswith(b"\n\n{") and json.loads(queued.body)  # blank lines while queued, as DeepSeek
    broken = await net.send(request(p), connect_timeout=1, total_timeout=60)
    assert broken.status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken.body)
    with pytest.raises(TransportError) as info:
        await net.send(request(p), connect_timeout=1, total_timeout=60)
    assert info.value.phase == "read"
    overloaded = await net.send(request(p), connect_timeout=1, total_timeout=60)
    assert overloaded.status == {OA: 503, AN: 529, GE: 503}[dialect]
    assert [c.outcome for c in p.calls] == [Outcome.COMPLETED] * 3 + [Outcome.RESET, Outcome.COMPLETED]
    assert [c.events_sent for c in p.calls] == [1, 1, 1, 0, 1]
