"""FakeServer streams over real HTTP/1.1: chunked, one chunk per event, on the loop clock."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest

from failover.model import Dialect
from failover.testing import FakeNetwork, FakeProvider, FakeServer, Outcome, Reply

from ._helpers import body, headers, parse_sse, request

pytestmark = pytest.mark.looptime

OA, AN, GE = Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI
TEXT = "alpha beta gamma"
EVENTS = {OA: 7, AN: 9, GE: 3}
LONG = " ".join(f"w{i}" for i in range(20))  # 20 deltas


async def _wait_for(predicate: Any, *, steps: int = 500) -> None:
    """Let the server observe socket events (each step one trip around the loop)."""
    for _ in range(steps):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def endpoint(srv: FakeServer, p: FakeProvider) -> str:
    if p.dialect is OA:
        return f"{srv.api_url_for(p)}/chat/completions"
    if p.dialect is AN:
        return f"{srv.api_url_for(p)}/messages"
    return f"{srv.api_url_for(p)}/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def stream_body(dialect: Dialect) -> dict[str, Any]:
    if dialect is GE:
        return body(GE)
    extra: dict[str, Any] = {"stream": True}
    if dialect is OA:
        extra["stream_options"] = {"include_usage": True}
    return body(dialect, **extra)


async def read_stream(
    client: httpx.AsyncClient, srv: FakeServer, p: FakeProvider, into: list[tuple[float, bytes]]
) -> None:
    """POST a stream request and read the raw body into ``into``, with loop times from the headers."""
    loop = asyncio.get_running_loop()
    async with client.stream("POST", endpoint(srv, p), json=stream_body(p.dialect), headers=headers(p.dialect)) as r:
        start = loop.time()
        async for chunk in r.aiter_raw():
            into.append((loop.time() - start, chunk))


def same_bytes(raw: bytes) -> bytes:
    """Blank what differs between two answers: OpenAI's wall-clock ``created``, the ids."""
    raw = re.sub(rb'"created":\d+', b'"created":0', raw)
    return re.sub(rb"(chatcmpl-p-|msg_p_|\"p-)\d+", rb"\g<1>N", raw)


async def reference(dialect: Dialect, reply: Reply) -> bytes:
    """The bytes of ``reply`` sent at once, in-process: the HTTP body must be the same."""
    p = FakeProvider("p", dialect, [reply])
    extra = {"stream_options": {"include_usage": True}} if dialect is OA else {}
    resp = await FakeNetwork(p).send(request(p, stream=True, **extra), connect_timeout=1, total_timeout=60)
    return resp.body


@pytest.mark.parametrize("dialect", [OA, AN, GE])
async def test_events_arrive_over_http_at_their_scripted_times(dialect: Dialect) -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("p", dialect, [Reply.ok(TEXT, chunk_interval=0.5)])
    got: list[tuple[float, bytes]] = []
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=30) as client:
        async with client.stream("POST", endpoint(srv, p), json=stream_body(dialect), headers=headers(dialect)) as r:
            start = loop.time()
            assert r.headers["transfer-encoding"] == "chunked" and "content-length" not in r.headers
            assert r.headers["content-type"].startswith("text/event-stream")
            async for chunk in r.aiter_raw():
                got.append((loop.time() - start, chunk))
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    n = EVENTS[dialect]
    assert [round(t, 3) for t, _ in got] == [0.5 * i for i in range(n)]
    assert same_bytes(b"".join(c for _, c in got)) == same_bytes(await reference(dialect, Reply.ok(TEXT)))
    (call,) = p.calls
    assert (call.outcome, call.events_sent) == (Outcome.COMPLETED, n)
    assert call.answered_at is not None and call.answered_at - call.time == pytest.approx(0.5 * (n - 1), abs=1e-3)


async def _raw_exchange(srv: FakeServer, p: FakeProvider) -> list[bytes]:
    """POST over a bare socket (Connection: close) and return the HTTP chunks of the body."""
    data = json.dumps(stream_body(p.dialect)).encode()
    target = endpoint(srv, p).split(str(srv.port), 1)[1]
    head = "".join(f"{k}: {v}\r\n" for k, v in headers(p.dialect).items())
    reader, writer = await asyncio.open_connection(srv.host, srv.port)
    writer.write(
        f"POST {target} HTTP/1.1\r\nhost: x\r\n{head}content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
        + data
    )
    raw = await reader.read()
    writer.close()
    _, _, rest = raw.partition(b"\r\n\r\n")
    chunks: list[bytes] = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return chunks
        chunks.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]


@pytest.mark.parametrize("dialect", [OA, AN, GE])
async def test_one_http_chunk_per_event_or_per_split_piece(dialect: Dialect) -> None:
    p = FakeProvider("p", dialect, [Reply.ok(TEXT, chunk_interval=0.1), Reply.ok(TEXT, split_bytes=7)])
    async with FakeServer(p) as srv:
        per_event = await _raw_exchange(srv, p)
        split = await _raw_exchange(srv, p)
    assert len(per_event) == EVENTS[dialect]
    assert len(parse_sse(b"".join(per_event))[0]) == EVENTS[dialect]
    assert all(len(c) <= 7 for c in split) and len(split) > 3 * EVENTS[dialect]
    assert same_bytes(b"".join(split)) == same_bytes(b"".join(per_event))


async def test_drop_after_is_an_incomplete_chunked_body() -> None:
    p = FakeProvider("p", AN, [Reply.drop_after(2, text=TEXT, chunk_interval=0.5)])
    got: list[tuple[float, bytes]] = []
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=30) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await read_stream(client, srv, p, got)
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    assert [round(t, 3) for t, _ in got] == [0.0, 0.5]
    assert [e.event for e in parse_sse(b"".join(c for _, c in got))[0]] == ["message_start", "content_block_start"]
    (call,) = p.calls
    assert (call.outcome, call.status, call.events_sent) == (Outcome.RESET, 200, 2)
    assert call.disconnected_at is not None and call.disconnected_at - call.time == pytest.approx(1.0, abs=1e-3)


async def test_end_after_is_a_complete_body_without_the_terminal_event() -> None:
    p = FakeProvider("p", OA, [Reply.end_after(10**6, text=TEXT, chunk_interval=0.5)])
    got: list[tuple[float, bytes]] = []
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=30) as client:
        await read_stream(client, srv, p, got)  # a complete chunked body: no protocol error
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    events = parse_sse(b"".join(c for _, c in got))[0]
    assert len(events) == EVENTS[OA] - 1  # every event but the last
    assert events[-1].data != "[DONE]" and json.loads(events[-1].data)["usage"] is not None
    (call,) = p.calls
    assert (call.outcome, call.status, call.events_sent) == (Outcome.COMPLETED, 200, EVENTS[OA] - 1)


async def test_a_client_that_leaves_mid_stream_is_seen_within_one_interval() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("p", OA, [Reply.ok(LONG, chunk_interval=1)])
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=30) as client:
        async with client.stream("POST", endpoint(srv, p), json=stream_body(OA), headers=headers(OA)) as r:
            seen = 0
            async for _ in r.aiter_raw():
                seen += 1
                if seen == 3:
                    break
            left_at = loop.time()
        # leaving the block closed the connection mid-body
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    (call,) = p.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.disconnected_at is not None and 0 <= call.disconnected_at - left_at < 1
    assert call.events_sent == 3 < 20


async def test_a_stalled_stream_ends_at_the_client_read_timeout() -> None:
    p = FakeProvider("p", GE, [Reply.stall_after(1, text=TEXT, heartbeat_interval=10)])
    got: list[tuple[float, bytes]] = []
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=httpx.Timeout(5.0)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await read_stream(client, srv, p, got)
        await _wait_for(lambda: p.calls[0].outcome is not Outcome.PENDING)
    (call,) = p.calls
    assert (call.outcome, call.events_sent) == (Outcome.CLIENT_DISCONNECTED, 1)
    assert call.disconnected_at is not None and call.disconnected_at - call.time == pytest.approx(5, abs=1e-3)


async def test_heartbeats_flow_over_http_while_nothing_happens() -> None:
    p = FakeProvider("p", OA, [Reply.heartbeats_only(2, 7, text=TEXT)])
    got: list[tuple[float, bytes]] = []
    async with FakeServer(p) as srv, httpx.AsyncClient(timeout=30) as client:
        await read_stream(client, srv, p, got)
    assert [(round(t, 3), c) for t, c in got[:3]] == [(t, b": keep-alive\n\n") for t in (2.0, 4.0, 6.0)]
    assert {round(t, 3) for t, _ in got[3:]} == {7.0}
    events, comments = parse_sse(b"".join(c for _, c in got))
    assert comments == ["keep-alive"] * 3 and events[-1].data == "[DONE]"


async def test_keep_alive_after_a_timed_stream_and_shutdown_mid_stream() -> None:
    p = FakeProvider("p", AN, [Reply.ok(TEXT, chunk_interval=0.1), Reply.stall_after(2, text=TEXT)])
    srv = await FakeServer(p).start()
    client = httpx.AsyncClient(timeout=None)
    try:
        async with client.stream("POST", endpoint(srv, p), json=stream_body(AN), headers=headers(AN)) as r:
            assert len(parse_sse(await r.aread())[0]) == EVENTS[AN]
        received: list[bytes] = []

        async def read_forever() -> None:
            async with client.stream("POST", endpoint(srv, p), json=stream_body(AN), headers=headers(AN)) as r:
                async for chunk in r.aiter_raw():
                    received.append(chunk)

        task = asyncio.create_task(read_forever())
        await _wait_for(lambda: len(p.calls) == 2 and p.calls[1].events_sent == 2)
        assert srv.connections_accepted == 1  # the first stream left the connection reusable
        await srv.aclose()
        with pytest.raises(httpx.HTTPError):
            await task
    finally:
        await client.aclose()
        await srv.aclose()
    assert (p.calls[1].outcome, p.calls[1].events_sent) == (Outcome.ABORTED, 2)
