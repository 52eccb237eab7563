"""Http1Transport, failover's own HTTP/1.1 client, against raw servers on loopback.

What the shared contract (test_pooled.py) does not reach: the request it writes, framing
(Content-Length, chunked, read to the end), keep-alive reuse and its limits, a pooled
connection the server had closed, the pool's connection limit, broken and malformed
answers, and TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import trustme

from failover.transport import Http1Transport, HttpRequest, TransportError

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]


@dataclass
class Seen:
    """One request as the server read it."""

    connection: int
    head: bytes
    body: bytes

    @property
    def line(self) -> bytes:
        return self.head.split(b"\r\n", 1)[0]

    def header(self, name: bytes) -> bytes | None:
        for line in self.head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == name:
                return v.strip()
        return None


Handler = Callable[[Seen, asyncio.StreamWriter], Awaitable[bool]]


@dataclass
class RawServer:
    """A keep-alive HTTP/1.1 server that hands every request it reads to ``handler``, which
    writes the answer and returns whether to keep the connection open."""

    handler: Handler
    tls: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    closed: int = 0
    port: int = 0
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        await idle()

    def url(self, path: str = "/v1/chat/completions") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        self.connections += 1
        index = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                seen = Seen(index, head, b"")
                length = seen.header(b"content-length")
                if length:
                    seen.body = await reader.readexactly(int(length))
                self.seen.append(seen)
                if not await self.handler(seen, writer):
                    return
        finally:
            self.closed += 1
            self.writers.discard(writer)
            writer.close()


def answer(body: bytes = b'{"ok":true}', *, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\ncontent-type: application/json\r\n"
        + extra
        + b"content-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def keep(data: bytes) -> Handler:
    async def handler(_: Seen, w: asyncio.StreamWriter) -> bool:
        w.write(data)
        await w.drain()
        return True

    return handler


def post(url: str, **headers: str) -> HttpRequest:
    return HttpRequest(
        method="POST",
        url=url,
        headers={"Authorization": "Bearer sk-secret-key", **headers},
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    )


def after(seconds: float, data: bytes) -> Handler:
    """Answers every request with ``data`` after ``seconds`` and keeps the connection."""

    async def handler(_: Seen, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(seconds)
        w.write(data)
        await w.drain()
        return True

    return handler


@pytest.fixture
async def transport() -> AsyncIterator[Http1Transport]:
    t = Http1Transport()
    yield t
    await t.aclose()


async def idle() -> None:
    """Let the loop run the callbacks of what the server just did (a close, say)."""
    for _ in range(5):
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)


async def test_the_request_is_one_well_formed_http11_message(transport: Http1Transport) -> None:
    async with RawServer(keep(answer())) as srv:
        resp = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert resp.status == 200 and resp.body == b'{"ok":true}'
    (seen,) = srv.seen
    assert seen.line == b"POST /v1/chat/completions HTTP/1.1"
    assert seen.header(b"host") == srv.url().split("/")[2].encode()
    assert seen.header(b"content-type") == b"application/json"
    assert seen.header(b"authorization") == b"Bearer sk-secret-key"
    assert seen.header(b"content-length") == str(len(seen.body)).encode()
    assert seen.body == b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    assert (seen.header(b"user-agent") or b"").startswith(b"failover")
    assert seen.header(b"accept-encoding") == b"gzip, deflate"


async def test_a_query_string_and_a_default_port_are_written_as_they_should(transport: Http1Transport) -> None:
    async with RawServer(keep(answer())) as srv:
        await transport.send(post(srv.url("/v1/x?api-version=2024-10-21")), connect_timeout=1.0, total_timeout=5.0)
    assert srv.seen[0].line == b"POST /v1/x?api-version=2024-10-21 HTTP/1.1"


async def test_framing_headers_from_the_caller_are_ignored(transport: Http1Transport) -> None:
    async with RawServer(keep(answer())) as srv:
        req = post(srv.url(), **{"Content-Length": "1", "Host": "evil.example", "Connection": "close"})
        await transport.send(req, connect_timeout=1.0, total_timeout=5.0)
        await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    first = srv.seen[0]
    assert first.header(b"host") != b"evil.example"
    assert first.header(b"content-length") == str(len(first.body)).encode()
    assert srv.connections == 1  # the caller's "Connection: close" did not end the keep-alive


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(transport: Http1Transport) -> None:
    async with RawServer(keep(answer())) as srv:
        req = post(srv.url(), **{"X-Note": "a\r\nX-Injected: 1"})
        with pytest.raises(TransportError) as ei:
            await transport.send(req, connect_timeout=1.0, total_timeout=5.0)
    assert ei.value.phase == "connect"
    assert "line break" in str(ei.value)
    assert srv.seen == []


async def test_sequential_requests_share_one_kept_alive_connection(transport: Http1Transport) -> None:
    async with RawServer(keep(answer())) as srv:
        for _ in range(5):
            resp = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
            assert resp.status == 200
    assert len(srv.seen) == 5
    assert srv.connections == 1


async def test_concurrent_requests_open_connections_up_to_the_limit_and_then_wait() -> None:
    t = Http1Transport(max_connections=2)
    try:
        async with RawServer(after(1.0, answer())) as srv:
            loop = asyncio.get_running_loop()
            t0 = loop.time()

            async def one() -> float:
                await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=10.0)
                return loop.time() - t0

            times = sorted(await asyncio.gather(*(one() for _ in range(5))))
    finally:
        await t.aclose()
    assert srv.connections == 2  # never more than the limit
    assert times == pytest.approx([1.0, 1.0, 2.0, 2.0, 3.0], abs=0.05)  # the rest waited for a slot


async def test_waiting_for_a_slot_is_bounded_by_the_total_timeout() -> None:
    async def hang(_: Seen, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(60)
        return False

    t = Http1Transport(max_connections=1)
    try:
        async with RawServer(hang) as srv:
            loop = asyncio.get_running_loop()
            first = asyncio.ensure_future(t.send(post(srv.url()), connect_timeout=1.0, total_timeout=30.0))
            await idle()
            t0 = loop.time()
            with pytest.raises(TransportError) as ei:
                await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=1.5)
            assert ei.value.phase == "total"
            assert loop.time() - t0 == pytest.approx(1.5, abs=0.01)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
    finally:
        await t.aclose()
    assert len(srv.seen) == 1  # the second never reached the server


async def test_a_connection_the_server_closed_while_idle_is_not_reused(transport: Http1Transport) -> None:
    async def once(_: Seen, w: asyncio.StreamWriter) -> bool:
        w.write(answer())
        await w.drain()
        return False  # keep-alive announced, then closed by the server

    async with RawServer(once) as srv:
        await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        await idle()
        resp = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert resp.status == 200
    assert srv.connections == 2


async def test_connection_close_from_the_server_is_honoured(transport: Http1Transport) -> None:
    async with RawServer(keep(answer(extra=b"connection: close\r\n"))) as srv:
        for _ in range(3):
            await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert srv.connections == 3


async def test_an_idle_connection_older_than_keepalive_is_dropped() -> None:
    t = Http1Transport(keepalive_s=5.0)
    try:
        async with RawServer(keep(answer())) as srv:
            await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
            await asyncio.sleep(4.0)
            await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)  # reused: 4 s idle
            await asyncio.sleep(6.0)
            await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)  # 6 s idle: a new one
    finally:
        await t.aclose()
    assert [s.connection for s in srv.seen] == [1, 1, 2]


def stale_after_first() -> Handler:
    """Answers the first request of each connection and keeps it open; reads the second and
    closes without a byte: a kept-alive connection that died just as it was reused."""

    async def handler(seen: Seen, w: asyncio.StreamWriter) -> bool:
        on_this = [s for s in handler.seen if s.connection == seen.connection]  # type: ignore[attr-defined]
        handler.seen.append(seen)  # type: ignore[attr-defined]
        if on_this:
            return False
        w.write(answer())
        await w.drain()
        return True

    handler.seen = []  # type: ignore[attr-defined]
    return handler


async def test_a_get_on_a_stale_kept_alive_connection_is_sent_once_more(transport: Http1Transport) -> None:
    async with RawServer(stale_after_first()) as srv:
        get = HttpRequest(method="GET", url=srv.url("/v1/models"), headers={})
        await transport.send(get, connect_timeout=1.0, total_timeout=5.0)
        resp = await transport.send(get, connect_timeout=1.0, total_timeout=5.0)
    assert resp.status == 200
    assert [s.connection for s in srv.seen] == [1, 1, 2]  # the stale try, then a new connection


async def test_a_post_on_a_stale_connection_is_never_sent_twice(transport: Http1Transport) -> None:
    async with RawServer(stale_after_first()) as srv:
        await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        with pytest.raises(TransportError) as ei:
            await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        assert ei.value.phase == "read"
        assert "closed the connection before the response" in str(ei.value)
        # with an idempotency key, the transport may send it again on a new connection
        for key in ("k0", "k1"):  # k0 answered on a new connection; k1 finds it stale
            keyed = await transport.send(
                post(srv.url(), **{"Idempotency-Key": key}), connect_timeout=1.0, total_timeout=5.0
            )
    assert keyed.status == 200
    assert [s.connection for s in srv.seen] == [1, 1, 2, 2, 3]
    assert "sk-secret-key" not in str(ei.value)


async def test_a_chunked_answer_is_reassembled(transport: Http1Transport) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        b'5\r\n{"a":\r\n6\r\n"bcde"\r\n1\r\n}\r\n0\r\n\r\n'
    )
    async with RawServer(keep(chunked)) as srv:
        first = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        second = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert first.body == second.body == b'{"a":"bcde"}'
    assert "transfer-encoding" in first.headers
    assert srv.connections == 1  # chunked framing keeps the connection reusable


async def test_a_body_without_framing_is_read_to_the_end_of_the_connection(transport: Http1Transport) -> None:
    async def eof_framed(_: Seen, w: asyncio.StreamWriter) -> bool:
        w.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"until":')
        await w.drain()
        await asyncio.sleep(0.2)
        w.write(b'"eof"}')
        await w.drain()
        return False

    async with RawServer(eof_framed) as srv:
        resp = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert resp.body == b'{"until":"eof"}'
    assert srv.connections == 2  # such a connection cannot be reused


async def test_a_connection_cut_mid_body_is_a_read_error(transport: Http1Transport) -> None:
    async def cut(_: Seen, w: asyncio.StreamWriter) -> bool:
        w.write(b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"partial":')
        await w.drain()
        return False

    async with RawServer(cut) as srv:
        with pytest.raises(TransportError) as ei:
            await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert ei.value.phase == "read"
    assert "mid-response" in str(ei.value)


async def test_a_malformed_answer_is_a_read_error_and_the_connection_is_dropped(transport: Http1Transport) -> None:
    async with RawServer(keep(b"HTTP/1.1 two hundred\r\n\r\n")) as srv:
        with pytest.raises(TransportError) as ei:
            await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        assert ei.value.phase == "read"
        assert "malformed" in str(ei.value)
        await idle()
    assert srv.closed == 1


async def test_informational_answers_are_skipped(transport: Http1Transport) -> None:
    async with RawServer(keep(b"HTTP/1.1 100 Continue\r\n\r\n" + answer(b"{}", status=b"201 Created"))) as srv:
        resp = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert resp.status == 201 and resp.body == b"{}"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_answers_are_decoded_plain_and_streamed(transport: Http1Transport, encoding: str) -> None:
    plain = b'{"answer": "' + b"x" * 2000 + b'"}'
    if encoding == "gzip":
        packed = gzip.compress(plain)
    elif encoding == "deflate":
        packed = zlib.compress(plain)
    else:
        d = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        packed = d.compress(plain) + d.flush()
    name = b"deflate" if "deflate" in encoding else b"gzip"
    pieces = [packed[i : i + 100] for i in range(0, len(packed), 100)]
    chunked = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\ncontent-encoding: " + name + b"\r\ntransfer-encoding: chunked\r\n\r\n"
    async with RawServer(keep(head + chunked)) as srv:
        resp = await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        async with transport.stream(post(srv.url()), connect_timeout=1.0) as s:
            streamed = b"".join([c async for c in s.aiter_bytes()])
    assert resp.body == plain
    assert streamed == plain


async def test_a_body_that_does_not_decode_is_a_read_error(transport: Http1Transport) -> None:
    async with RawServer(keep(answer(b"not gzip at all", extra=b"content-encoding: gzip\r\n"))) as srv:
        with pytest.raises(TransportError) as ei:
            await transport.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert ei.value.phase == "read"
    assert "decode" in str(ei.value)


async def test_a_stream_read_to_its_end_returns_its_connection_to_the_pool(transport: Http1Transport) -> None:
    sse = b'data: {"n":1}\n\ndata: [DONE]\n\n'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + str(len(sse)).encode()
    async with RawServer(keep(head + b"\r\n\r\n" + sse)) as srv:
        for _ in range(3):
            async with transport.stream(post(srv.url()), connect_timeout=1.0) as s:
                assert s.status == 200
                assert b"".join([c async for c in s.aiter_bytes()]) == sse
    assert srv.connections == 1
    assert srv.seen[0].header(b"accept") == b"text/event-stream"


async def test_a_stream_cut_mid_body_raises_a_read_error(transport: Http1Transport) -> None:
    async def cut(_: Seen, w: asyncio.StreamWriter) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        w.write(b"c\r\ndata: {}\n\n..\r\n")
        await w.drain()
        return False

    async with RawServer(cut) as srv:
        got: list[bytes] = []

        async def read_all() -> None:
            async with transport.stream(post(srv.url()), connect_timeout=1.0) as s:
                async for c in s.aiter_bytes():
                    got.append(c)

        with pytest.raises(TransportError) as ei:
            await read_all()
    assert ei.value.phase == "read"
    assert b"".join(got) == b"data: {}\n\n.."


async def test_tls_with_a_trusted_ca_and_refusal_without_it() -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    trusting = Http1Transport(ssl_context=client_ctx)
    default = Http1Transport()  # the system's trust store does not know this CA
    try:
        async with RawServer(keep(answer()), tls=server_ctx) as srv:
            assert srv.url().startswith("https://")
            for _ in range(2):
                resp = await trusting.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
                assert resp.status == 200
            assert srv.connections == 1  # kept alive over TLS too
            with pytest.raises(TransportError) as ei:
                await default.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    finally:
        await trusting.aclose()
        await default.aclose()
    assert ei.value.phase == "connect"
    assert "TLS" in str(ei.value) or "certificate" in str(ei.value)


async def test_only_http_and_https_urls_are_accepted(transport: Http1Transport) -> None:
    with pytest.raises(TransportError) as ei:
        await transport.send(post("ftp://127.0.0.1/x"), connect_timeout=1.0, total_timeout=5.0)
    assert ei.value.phase == "connect"
    assert "scheme" in str(ei.value)


@contextlib.contextmanager
def unanswered_address() -> Iterator[tuple[str, int]]:
    """An address whose handshake never completes: a listening socket that never accepts,
    its backlog already full (as a route that drops packets looks to a client)."""
    with socket.socket() as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(0)
        port = lsock.getsockname()[1]
        fillers = []
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect(("127.0.0.1", port))
            fillers.append(s)
        try:
            yield "127.0.0.1", port
        finally:
            for s in fillers:
                s.close()


async def test_a_connect_that_does_not_complete_is_a_connect_timeout() -> None:
    t = Http1Transport()
    loop = asyncio.get_running_loop()
    try:
        with unanswered_address() as (host, port):
            t0 = loop.time()
            with pytest.raises(TransportError) as ei:
                await t.send(post(f"http://{host}:{port}/x"), connect_timeout=0.5, total_timeout=5.0)
            elapsed = loop.time() - t0
    finally:
        await t.aclose()
    assert ei.value.phase == "connect_timeout"
    assert elapsed == pytest.approx(0.5, abs=0.01)


async def test_a_closed_transport_refuses_new_requests() -> None:
    t = Http1Transport()
    async with RawServer(keep(answer())) as srv:
        await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        await t.aclose()
        await idle()
        assert srv.closed == 1  # the idle connection was closed with the transport
        with pytest.raises(TransportError) as ei:
            await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
    assert "closed" in str(ei.value)


def test_one_transport_serves_successive_event_loops() -> None:
    """A script's SyncRouter or two asyncio.run calls: the pool of a finished loop is left behind."""
    t = Http1Transport(max_connections=1)

    async def once() -> tuple[int, int]:
        async with RawServer(keep(answer())) as srv:
            for _ in range(2):
                resp = await t.send(post(srv.url()), connect_timeout=1.0, total_timeout=5.0)
        return resp.status, srv.connections

    assert asyncio.run(once()) == (200, 1)
    assert asyncio.run(once()) == (200, 1)  # not stuck on the first loop's slot, nor its connection
    asyncio.run(t.aclose())


async def test_a_waiter_that_gives_up_after_being_woken_passes_the_slot_on() -> None:
    t = Http1Transport(max_connections=1)
    try:
        async with RawServer(after(1.0, answer())) as srv:
            loop = asyncio.get_running_loop()
            first = asyncio.ensure_future(t.send(post(srv.url()), connect_timeout=1.0, total_timeout=10.0))
            await idle()
            quitter = asyncio.ensure_future(t.send(post(srv.url()), connect_timeout=1.0, total_timeout=10.0))
            patient = asyncio.ensure_future(t.send(post(srv.url()), connect_timeout=1.0, total_timeout=10.0))
            await idle()
            wake = t._wake_one

            def wake_then_cancel() -> None:  # the quitter's deadline fires in the same turn as its wake-up
                wake()
                if not quitter.done():
                    quitter.cancel()

            t._wake_one = wake_then_cancel  # type: ignore[method-assign]
            await first  # its connection goes back to the pool and wakes the quitter, cancelled before it runs
            with pytest.raises(asyncio.CancelledError):
                await quitter
            t0 = loop.time()
            resp = await patient
            assert resp.status == 200
            assert loop.time() - t0 == pytest.approx(1.0, abs=0.05)  # served next, not stranded
    finally:
        await t.aclose()


async def test_closing_the_transport_refuses_requests_waiting_for_a_connection() -> None:
    async def hang(_: Seen, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(60)
        return False

    t = Http1Transport(max_connections=1)
    async with RawServer(hang) as srv:
        first = asyncio.ensure_future(t.send(post(srv.url()), connect_timeout=1.0, total_timeout=30.0))
        await idle()
        waiting = asyncio.ensure_future(t.send(post(srv.url()), connect_timeout=1.0, total_timeout=30.0))
        await idle()
        await t.aclose()
        with pytest.raises(TransportError) as ei:
            await waiting
        assert "closed" in str(ei.value)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first


def resolving(monkeypatch: pytest.MonkeyPatch, *addrs: tuple[str, int]) -> list[str]:
    """Make the running loop resolve every name to ``addrs`` (in that order); returns the names asked."""
    asked: list[str] = []

    async def getaddrinfo(host: str, port: int, **_: object) -> list[tuple[Any, ...]]:
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", a) for a in addrs]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    return asked


async def test_an_address_that_never_answers_costs_250_ms_not_the_connect_timeout(
    transport: Http1Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with RawServer(keep(answer())) as srv:
        with unanswered_address() as dead:
            asked = resolving(monkeypatch, dead, ("127.0.0.1", srv.port))
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            resp = await transport.send(
                post(f"http://provider.test:{srv.port}/v1/x"), connect_timeout=5.0, total_timeout=10.0
            )
            elapsed = loop.time() - t0
    assert resp.status == 200
    assert asked == ["provider.test"]
    assert elapsed == pytest.approx(0.25, abs=0.02)  # the second address started after the stagger
    assert srv.seen[0].header(b"host") == f"provider.test:{srv.port}".encode()  # the name, not the address


async def test_a_refused_address_moves_on_at_once(transport: Http1Transport, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]  # closed again: nothing listens there
    async with RawServer(keep(answer())) as srv:
        resolving(monkeypatch, ("127.0.0.1", refused), ("127.0.0.1", srv.port))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        resp = await transport.send(post(f"http://provider.test:{srv.port}/x"), connect_timeout=5.0, total_timeout=10.0)
        assert loop.time() - t0 < 0.01
    assert resp.status == 200


async def test_every_address_refused_is_one_connect_error(
    transport: Http1Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    resolving(monkeypatch, *(("127.0.0.1", p) for p in ports))
    with pytest.raises(TransportError) as ei:
        await transport.send(post("http://provider.test/x"), connect_timeout=5.0, total_timeout=10.0)
    assert ei.value.phase == "connect"
    assert "provider.test" in str(ei.value)


async def test_no_answer_on_any_address_is_a_connect_timeout(
    transport: Http1Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    with unanswered_address() as dead:
        resolving(monkeypatch, dead, dead)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TransportError) as ei:
            await transport.send(post("http://provider.test/x"), connect_timeout=1.0, total_timeout=10.0)
        elapsed = loop.time() - t0
    assert ei.value.phase == "connect_timeout"
    assert elapsed == pytest.approx(1.0, abs=0.01)


def test_addresses_alternate_families() -> None:
    from failover.transport._dial import interleave as _interleave

    v6, v4 = socket.AF_INET6, socket.AF_INET
    infos = [(v6, 1, 6, "", ("::1", 1)), (v6, 1, 6, "", ("::2", 1)), (v4, 1, 6, "", ("10.0.0.1", 1))]
    assert [a[0] for _, a in _interleave(infos)] == ["::1", "10.0.0.1", "::2"]


def test_the_host_header_of_a_non_ascii_name_is_its_idna_form() -> None:
    from failover.transport._http1 import _split

    origin, target, host = _split("https://bücher.example:8443/v1/x?a=1")
    assert origin == ("https", "bücher.example", 8443)
    assert target == b"/v1/x?a=1"
    assert host == b"xn--bcher-kva.example:8443"
    assert _split("http://[::1]:80/")[2] == b"[::1]"  # the default port is left out
