"""AiohttpTransport and Http1Transport over real HTTP on loopback: the contract HttpxTransport keeps."""

from __future__ import annotations

import asyncio
import gzip
import socket
from collections.abc import AsyncIterator, Callable

import pytest

from failover.testing import FakeProvider, FakeServer, Outcome, Reply, Script
from failover.transport import AiohttpTransport, Http1Transport, HttpRequest, StreamingTransport, TransportError

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]


@pytest.fixture(params=[AiohttpTransport, Http1Transport], ids=["aiohttp", "http1"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[StreamingTransport]:
    t: StreamingTransport = request.param()
    yield t
    await t.aclose()


def chat(srv: FakeServer, provider: FakeProvider, *, stream: bool = False) -> HttpRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    return HttpRequest(
        method="POST",
        url=f"{srv.api_url_for(provider)}/chat/completions",
        headers={"Authorization": "Bearer sk-test"},
        json=body,
    )


async def settled(provider: FakeProvider) -> None:
    for _ in range(200):  # let the server's read of the closed socket run
        if provider.calls[-1].outcome is not Outcome.PENDING:
            return
        await asyncio.sleep(0.001)


async def raw_server(answer: Callable[[bytes], bytes]) -> tuple[asyncio.Server, str]:
    """A one-shot HTTP/1.1 server that answers every request with ``answer(request_head)``."""

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(head))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/x"


async def test_send_returns_the_complete_response(transport: StreamingTransport) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("hello there", latency=0.2)))
    async with FakeServer(a) as srv:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        resp = await transport.send(chat(srv, a), connect_timeout=1.0, total_timeout=5.0)
        assert loop.time() - t0 == pytest.approx(0.2, abs=0.01)
    assert resp.status == 200
    assert b"hello there" in resp.body
    assert resp.header("Content-Type") == "application/json"
    (call,) = a.calls
    assert call.outcome is Outcome.COMPLETED
    assert call.json is not None and call.json["messages"][0]["content"] == "hi"
    assert call.headers["content-type"] == "application/json"


async def test_header_names_are_lower_cased(transport: StreamingTransport) -> None:
    def answer(_: bytes) -> bytes:
        return (
            b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 2\r\nRetry-After: 3\r\n"
            b"X-Request-ID: abc\r\nX-Multi: 1\r\nX-Multi: 2\r\n\r\n{}"
        )

    server, url = await raw_server(answer)
    async with server:
        resp = await transport.send(
            HttpRequest(method="GET", url=url, headers={}), connect_timeout=1.0, total_timeout=5.0
        )
    assert resp.status == 429
    assert all(k == k.lower() for k in resp.headers)
    assert resp.headers["retry-after"] == "3"
    assert resp.header("X-Request-ID") == "abc"
    assert resp.headers["x-multi"] == "1, 2"  # joined, as httpx does
    assert resp.body == b"{}"


async def test_a_refused_connection_is_a_connect_error(transport: StreamingTransport) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    req = HttpRequest(method="GET", url=f"http://127.0.0.1:{port}/x", headers={})
    with pytest.raises(TransportError) as ei:
        await transport.send(req, connect_timeout=1.0, total_timeout=5.0)
    assert ei.value.phase == "connect"
    with pytest.raises(TransportError) as ei:
        async with transport.stream(req, connect_timeout=1.0):
            pass  # pragma: no cover
    assert ei.value.phase == "connect"


async def test_a_hang_is_cut_at_the_total_and_the_server_sees_the_client_go(transport: StreamingTransport) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.hang()))
    async with FakeServer(a) as srv:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TransportError) as ei:
            await transport.send(chat(srv, a), connect_timeout=1.0, total_timeout=2.5)
        assert ei.value.phase == "total"
        assert loop.time() - t0 == pytest.approx(2.5, abs=1e-3)
        await settled(a)
        (call,) = a.calls
        assert call.outcome is Outcome.CLIENT_DISCONNECTED
        assert call.disconnected_at is not None
        assert call.disconnected_at - t0 == pytest.approx(2.5, abs=1e-3)


async def test_a_cancelled_send_closes_the_connection(transport: StreamingTransport) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.hang()))
    async with FakeServer(a) as srv:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.5):  # the request's deadline, outside the transport
                await transport.send(chat(srv, a), connect_timeout=1.0, total_timeout=30.0)
        await settled(a)
        (call,) = a.calls
        assert call.outcome is Outcome.CLIENT_DISCONNECTED
        assert call.disconnected_at is not None
        assert call.disconnected_at - t0 == pytest.approx(1.5, abs=1e-3)


async def test_stream_chunks_arrive_as_sent(transport: StreamingTransport) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("one two three four", chunk_interval=0.1)))
    async with FakeServer(a) as srv:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        arrivals: list[tuple[float, bytes]] = []
        async with transport.stream(chat(srv, a, stream=True), connect_timeout=1.0) as s:
            assert s.status == 200
            assert s.headers["content-type"].startswith("text/event-stream")
            async for chunk in s.aiter_bytes():
                arrivals.append((loop.time() - t0, chunk))
    body = b"".join(c for _, c in arrivals)
    assert body.rstrip().endswith(b"data: [DONE]")
    times = [t for t, _ in arrivals]
    assert len(arrivals) >= 4
    assert times == sorted(times) and times[-1] - times[0] >= 0.3  # delivered over time, not at the end
    assert all(b"data: " in c for _, c in arrivals)
    assert a.calls[0].stream


async def test_leaving_a_stream_early_closes_the_upstream(transport: StreamingTransport) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok(" ".join(["word"] * 40), chunk_interval=0.1)))
    async with FakeServer(a) as srv:
        loop = asyncio.get_running_loop()
        seen = 0
        t_left = 0.0
        async with transport.stream(chat(srv, a, stream=True), connect_timeout=1.0) as s:
            async for _ in s.aiter_bytes():
                seen += 1
                if seen == 3:
                    t_left = loop.time()
                    break
        await settled(a)
        (call,) = a.calls
        assert call.outcome is Outcome.CLIENT_DISCONNECTED
        assert call.disconnected_at is not None and call.disconnected_at - t_left <= 0.1 + 1e-6
        assert call.events_sent < 40


async def test_gzip_bodies_are_decoded(transport: StreamingTransport) -> None:
    plain = b'{"answer": "' + b"x" * 500 + b'"}'
    packed = gzip.compress(plain)

    def answer(_: bytes) -> bytes:
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            + f"Content-Length: {len(packed)}\r\n\r\n".encode()
            + packed
        )

    server, url = await raw_server(answer)
    async with server:
        req = HttpRequest(method="GET", url=url, headers={})
        resp = await transport.send(req, connect_timeout=1.0, total_timeout=5.0)
        assert resp.body == plain
        async with transport.stream(req, connect_timeout=1.0) as s:
            assert b"".join([c async for c in s.aiter_bytes()]) == plain
        async with transport.stream(req, connect_timeout=1.0) as s:
            assert await s.aread() == plain
