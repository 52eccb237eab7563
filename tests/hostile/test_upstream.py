"""Hostile upstreams: no answer, however large, endless or compressed, takes the gateway down.

Each case runs over real HTTP on loopback against a raw socket server in a thread (the fault
kit answers like a provider; these upstreams do not), with a healthy fallback from the fault
kit, through every transport. Checked: what the caller sees, how many requests reached each
upstream, whether the hostile one saw its connection closed, what the RouteRecord says, and,
for the bombs, the peak of memory and the event loop's worst lag while the answer is read.
Real time, with wide margins: the thread server does real I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import string
import struct
import threading
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from failover import (
    Capability,
    Envelope,
    FailureKind,
    Phase,
    Request,
    Route,
    Router,
    Secret,
    Target,
    Timeouts,
    Unavailable,
)
from failover.gateway import GatewaySettings, create_app
from failover.inbound._failures import CHAT, Scrubber, unavailable
from failover.model import TextDelta
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.providers._common import DETAIL_LIMIT
from failover.testing import FakeProvider, FakeServer, Reply, Script
from failover.transport import (
    AiohttpTransport,
    Http1Transport,
    HttpRequest,
    HttpResponse,
    HttpxTransport,
    StreamingTransport,
)

pytestmark = [pytest.mark.e2e]

MiB = 1024 * 1024
CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
CAP = 1 * MiB  # max_response_bytes of the transports under test (the default is 8 MiB)
TRANSPORTS: dict[str, Callable[..., StreamingTransport]] = {
    "http1": Http1Transport,
    "httpx": HttpxTransport,
    "aiohttp": AiohttpTransport,
}

# -- a raw upstream in a thread ---------------------------------------------------------------------


class RawUpstream:
    """An HTTP/1.1 server on loopback, in threads: each request is answered by ``answer(sock)``.

    Counts the requests it received and the answers the client cut short by closing the
    connection (a write failed, or the client's FIN/RST arrived while answering).
    """

    def __init__(self, answer: Callable[[socket.socket], None]) -> None:
        self._answer = answer
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.requests = 0
        self.cut_short = 0
        self.finished = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                data = conn.recv(65536)
                if not data:
                    return
                rest += data
            with self._lock:
                self.requests += 1
            try:
                self._answer(conn)
            except OSError:  # BrokenPipe / ConnectionReset: the client closed the connection
                with self._lock:
                    self.cut_short += 1
            else:
                with self._lock:
                    self.finished += 1

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=2)

    def settled(self, timeout: float = 5.0) -> None:
        """Wait until every request received has been answered or cut short."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if self.cut_short + self.finished >= self.requests:
                    return
            time.sleep(0.01)


@contextlib.contextmanager
def raw_upstream(answer: Callable[[socket.socket], None]) -> Iterator[RawUpstream]:
    up = RawUpstream(answer)
    try:
        yield up
    finally:
        up.close()


SAFETY_S = 20.0  # an endless writer gives up after this long (the test has failed long before)


def endless(conn: socket.socket, head: bytes, piece: bytes, frame: Callable[[bytes], bytes] = bytes) -> None:
    """``head``, then ``piece`` forever, about 64 MiB/s, until the client goes away."""
    conn.sendall(head)
    end = time.monotonic() + SAFETY_S
    data = frame(piece)
    while time.monotonic() < end:
        conn.sendall(data)
        time.sleep(0.001)
    raise AssertionError("the client never closed the connection of an endless body")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


PIECE = b"x" * 65536
JSON_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"


def endless_unframed(conn: socket.socket) -> None:  # the end of the body is the end of the connection
    endless(conn, JSON_HEAD + b"connection: close\r\n\r\n", PIECE)


def endless_chunked(conn: socket.socket) -> None:
    endless(conn, JSON_HEAD + b"transfer-encoding: chunked\r\n\r\n", PIECE, chunk)


def declared_huge(conn: socket.socket) -> None:  # says 64 GiB up front, then keeps sending
    endless(conn, JSON_HEAD + b"content-length: 68719476736\r\n\r\n", PIECE)


def endless_error_body(conn: socket.socket) -> None:  # an error page that never ends
    endless(conn, b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n", PIECE)


def endless_event(conn: socket.socket) -> None:  # a stream whose first line never ends
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    conn.sendall(head + chunk(b"data: {"))
    endless(conn, b"", PIECE, chunk)


# -- the gzip bomb ----------------------------------------------------------------------------------

BOMB_DECODED = 1024 * MiB


def _bomb() -> bytes:
    """1 GiB of zeros as one gzip member of about 1 MiB, built in milliseconds: after a full
    flush deflate keeps no history, so every further MiB of zeros compresses to the same bytes."""
    zeros = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH) == again
    last = c.compress(zeros) + c.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(BOMB_DECODED // MiB):
        crc = zlib.crc32(zeros, crc)
    n = BOMB_DECODED // MiB
    body = first + again * (n - 2) + last
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + body + struct.pack("<II", crc, BOMB_DECODED & 0xFFFFFFFF)


_BOMB: list[bytes] = []


def bomb() -> bytes:
    if not _BOMB:
        _BOMB.append(_bomb())
    return _BOMB[0]


def test_the_bomb_is_one_mib_that_inflates_to_one_gib() -> None:
    b = bomb()
    assert len(b) < 1.2 * MiB
    d = zlib.decompressobj(zlib.MAX_WBITS | 32)
    head = d.decompress(b[:8192], 64 * MiB)
    assert len(head) > 4 * MiB and not head.strip(b"\0")  # 8 KiB of it: megabytes of zeros
    assert b[-4:] == struct.pack("<I", BOMB_DECODED & 0xFFFFFFFF)  # (inflating it all takes 10 s)


def gzip_bomb(ctype: bytes) -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        b = bomb()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n"
        conn.sendall(head % (ctype, len(b)))
        for i in range(0, len(b), 65536):
            conn.sendall(b[i : i + 65536])
            time.sleep(0.0005)  # a provider on a fast link, not a memcpy

    return answer


# -- a route from the hostile upstream to a healthy fallback ----------------------------------------


@contextlib.asynccontextmanager
async def route_to(up: RawUpstream, transport: StreamingTransport) -> AsyncIterator[tuple[Router, FakeProvider]]:
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    async with FakeServer(b) as srv:
        ta = Target(
            name="a",
            dialect="openai",  # type: ignore[arg-type]
            model="m",
            base_url=up.url,
            api_key=Secret("sk-hostile-a"),
            timeouts=Timeouts(connect=2.0, first_event=10.0, idle=10.0, total=15.0),
            max_attempts=2,
            tokenizer="estimate",
            capabilities=CAPS,
        )
        tb = srv.target_for(
            b, timeouts=Timeouts(connect=2.0, total=10.0), max_attempts=1, tokenizer="estimate", capabilities=CAPS
        )
        router = Router(
            [Route(name="r", primary=(ta,), fallbacks=(tb,))],
            transport=transport,
            retry_budget=Unlimited(),
            backoff=Backoff(base=0.0, cap=0.0),
            rng=random.Random(3),
        )
        try:
            yield router, b
        finally:
            await router.aclose()


def assert_failed_over(
    resp: Any, up: RawUpstream, b: FakeProvider, attempts_on_a: int, *names: str, endless: bool = True
) -> None:
    rec = resp.record
    assert rec is not None
    assert rec.target_used == "b"
    assert rec.attempts[-1].phase is Phase.FALLBACK
    on_a = [x for x in rec.attempts if x.target == "a"]
    assert len(on_a) == attempts_on_a
    for x in on_a:
        assert x.outcome == FailureKind.PROVIDER_SERVER_ERROR.value, x.failure
        assert x.failure is not None and any(n in x.failure.message for n in names), x.failure.message
        assert x.duration < 5.0  # cut at the cap, not at the attempt's 15 s total
    up.settled()
    assert up.requests == attempts_on_a
    if endless:  # (a finite bomb may sit whole in the socket buffers before the client closes)
        assert up.cut_short == attempts_on_a  # every hostile answer's connection was closed under it
    assert len(b.calls) == 1


@pytest.fixture(params=list(TRANSPORTS))
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[StreamingTransport]:
    t = TRANSPORTS[request.param](max_response_bytes=CAP)
    yield t
    await t.aclose()


# -- plain answers over the cap ---------------------------------------------------------------------


@pytest.mark.parametrize("answer", [endless_unframed, endless_chunked, declared_huge, endless_error_body])
async def test_an_endless_body_is_cut_at_max_response_bytes_and_the_fallback_answers(
    answer: Callable[[socket.socket], None], transport: StreamingTransport
) -> None:
    with raw_upstream(answer) as up:
        async with route_to(up, transport) as (router, b):
            tracemalloc.start()
            try:
                resp = await router.complete("r", Request.simple("hi"), Envelope(budget=30.0))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert resp.text == "from b"
            assert_failed_over(resp, up, b, 2, "max_response_bytes")
            assert peak < 16 * MiB, f"peak {peak / MiB:.1f} MiB for a {CAP / MiB:.0f} MiB cap"


async def test_a_stream_whose_event_never_ends_is_cut_at_max_response_bytes(transport: StreamingTransport) -> None:
    with raw_upstream(endless_event) as up:
        async with route_to(up, transport) as (router, b):
            tracemalloc.start()
            try:
                async with router.stream("r", Request.simple("hi"), Envelope(budget=30.0)) as s:
                    events = [e async for e in s]
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from b"
            result = s.result
            assert result is not None
            resp = result.response  # type: ignore[union-attr]
            assert_failed_over(resp, up, b, 2, "max_response_bytes")
            assert peak < 32 * MiB, f"peak {peak / MiB:.1f} MiB for a {CAP / MiB:.0f} MiB cap"


# -- the gzip bomb ----------------------------------------------------------------------------------


async def probe(lags: list[float], stop: asyncio.Event) -> None:
    """Sleeps 5 ms at a time and records by how much each sleep overran: the loop's lag."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.005)
        lags.append(loop.time() - t - 0.005)


@pytest.mark.parametrize("name", list(TRANSPORTS))
@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "stream"])
async def test_a_gzip_bomb_is_stopped_without_memory_or_loop_stall(name: str, streamed: bool) -> None:
    bomb()  # built before the clock and the memory count start
    transport = TRANSPORTS[name]()  # the default limits
    ctype = b"text/event-stream" if streamed else b"application/json"
    with raw_upstream(gzip_bomb(ctype)) as up:
        async with route_to(up, transport) as (router, b):
            lags: list[float] = []
            stop = asyncio.Event()
            prober = asyncio.create_task(probe(lags, stop))
            await asyncio.sleep(0.02)
            tracemalloc.start()
            try:
                if streamed:
                    async with router.stream("r", Request.simple("hi"), Envelope(budget=30.0)) as s:
                        async for _ in s:
                            pass
                    assert s.result is not None
                    resp = s.result.response  # type: ignore[union-attr]
                else:
                    resp = await router.complete("r", Request.simple("hi"), Envelope(budget=30.0))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
                stop.set()
                await prober
            assert resp.text == "from b"
            # past its first MiB, zeros inflate ~1000x: the ratio stops it, or the 8 MiB cap when one
            # read brought enough compressed bytes for the ratio to allow more than that
            assert_failed_over(resp, up, b, 2, "max_decoded_ratio", "max_response_bytes", endless=False)
            assert peak < 64 * MiB, f"peak {peak / MiB:.1f} MiB while a 1 GiB bomb was read"
            assert max(lags) < 0.1, f"the loop stalled {max(lags) * 1000:.0f} ms"
    await transport.aclose()


# -- idle pooled connections ------------------------------------------------------------------------


@pytest.mark.looptime
async def test_an_idle_pooled_connection_is_closed_at_keepalive_s() -> None:
    """Two connections go idle at t=0; one is used again at t=10. The server sees the first
    close at 15 s (keepalive_s) and the other at 25 s: each after its own idle time, on the
    loop clock. (aiohttp's connector closes idle ones on its own timer, on the process clock,
    so not on virtual time; httpx only when the pool is next used.)"""
    loop = asyncio.get_running_loop()
    closed: list[float] = []
    opened = 0
    gate = asyncio.Event()

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal opened
        opened += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")), 0
                )
                await reader.readexactly(length)
                await gate.wait()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            closed.append(loop.time())  # EOF: the client closed the connection
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    req = HttpRequest(method="POST", url=f"http://127.0.0.1:{port}/v1/x", headers={}, json={"a": 1})
    t = Http1Transport(keepalive_s=15.0)
    async with server:
        t0 = loop.time()
        both = [asyncio.create_task(t.send(req, connect_timeout=1, total_timeout=5)) for _ in range(2)]
        await asyncio.sleep(0.01)
        gate.set()
        for r in await asyncio.gather(*both):
            assert isinstance(r, HttpResponse) and r.status == 200
        assert opened == 2
        await asyncio.sleep(10.0)
        assert closed == []  # idle for 10 s: still open
        await t.send(req, connect_timeout=1, total_timeout=5)  # reuses one; idle again from t=10
        assert opened == 2
        await asyncio.sleep(30.0)
        assert len(closed) == 2, closed
        assert closed[0] - t0 == pytest.approx(15.0, abs=0.05)
        assert closed[1] - t0 == pytest.approx(25.0, abs=0.05)
        assert t._open == 0 and not any(t._idle.values())  # the pool forgot them too
        await t.aclose()


# -- redaction before truncation --------------------------------------------------------------------

KEY = "tok" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=23))  # 26 chars
assert len(KEY) == 26


def leaks(text: str, key: str = KEY, n: int = 8) -> list[str]:
    """Every piece of ``key`` of ``n`` characters or more found in ``text``."""
    return [key[i : i + n] for i in range(len(key) - n + 1) if key[i : i + n] in text]


class OneBody:
    """An in-process transport answering every request with one status and body."""

    enforces_total = False

    def __init__(self, status: int, body: bytes, ctype: str) -> None:
        self.status, self.body, self.ctype = status, body, ctype

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        return HttpResponse(status=self.status, headers={"content-type": self.ctype}, body=self.body)

    async def aclose(self) -> None:
        return None


def non_json(start: int) -> bytes:
    return ("<html>" + "a" * (start - 6) + KEY + " b" * 1500 + "</html>").encode()


def json_message(dialect: str, start: int) -> bytes:
    msg = "e" * start + KEY + " tail" * 400
    if dialect == "anthropic":
        return f'{{"type":"error","error":{{"type":"api_error","message":"{msg}"}}}}'.encode()
    if dialect == "gemini":
        return f'{{"error":{{"code":500,"status":"INTERNAL","message":"{msg}"}}}}'.encode()
    return f'{{"error":{{"message":"{msg}","type":"server_error"}}}}'.encode()


CUTS = [
    ("html", 200),  # the one-line excerpt of a non-JSON body
    ("json", 600),  # the provider's message inside the failure's message
    ("detail", DETAIL_LIMIT),  # the raw body kept for the trace
]


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize(("shape", "cut"), CUTS)
async def test_no_part_of_the_key_survives_the_cut_of_an_error_body(
    dialect: str, shape: str, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    target = Target(
        name="a",
        dialect=dialect,  # type: ignore[arg-type]
        model="m",
        base_url="http://a.invalid/v1",
        api_key=Secret(KEY),
        max_attempts=1,
        tokenizer="estimate",
    )
    caplog.set_level(logging.DEBUG)
    upstream = OneBody(500, b"", "text/plain")
    # one router and one gateway for every offset: no breaker, so each request reaches the upstream
    router = Router([Route(name="r", primary=(target,))], transport=upstream, breakers=NoBreakers())
    app = create_app(router, GatewaySettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as gateway:
        for start in range(cut - len(KEY) - 2, cut + 3):
            if shape == "html":
                upstream.body, upstream.ctype = non_json(start), "text/html"
            elif shape == "json":
                # the label ("openai 500: ") comes before the message and is not counted by the cut
                upstream.body, upstream.ctype = json_message(dialect, start), "application/json"
            else:
                upstream.body, upstream.ctype = ("x" * start + KEY + "y" * 3000).encode(), "text/plain"
            assert KEY in upstream.body.decode()
            with pytest.raises(Unavailable) as ei:
                await router.complete("r", Request.simple("hi"), Envelope(budget=5.0))
            exc = ei.value
            (attempt,) = exc.record.attempts
            assert attempt.failure is not None
            seen = {
                "failure.message": attempt.failure.message,
                "failure.detail": attempt.failure.detail or "",
                "unavailable": str(exc) + exc.message,
                "record": repr(exc.record),
                "gateway error": unavailable(exc, CHAT, Scrubber([])).message,  # no secrets known: ours only
            }
            assert "500" in seen["gateway error"]  # the provider's words are shown: the check means something
            # the gateway itself: it scrubs the whole keys it knows, but a part of one it cannot
            # a body of its own each time: the same body after a failure would be a client's
            # retry, charged to an upstream retry budget this failing upstream soon spends
            said = {"model": "r", "messages": [{"role": "user", "content": f"hi {start}"}]}
            r = await gateway.post("/v1/chat/completions", json=said)
            assert r.status_code >= 500 and "500" in r.text, r.text
            seen["gateway answer"] = r.text
            seen["log"] = caplog.text
            for where, text in seen.items():
                assert not leaks(text), f"{where}, key at {start}: {leaks(text)} in {text[:80]!r}..."
            if start + len("[REDACTED]") <= cut and shape != "detail":
                assert "[REDACTED]" in attempt.failure.message
            caplog.clear()
    await router.aclose()


def test_leaks_finds_a_straddling_key() -> None:
    """The checker itself: the old order (cut, then redact) leaves the head of a key."""
    body = "a" * 190 + KEY
    assert leaks(body[:200].replace(KEY, "[REDACTED]"))  # cut, then redact: 10 characters left
    assert not leaks(body.replace(KEY, "[REDACTED]")[:200])


# -- the limits themselves --------------------------------------------------------------------------


def test_the_event_decoder_holds_one_event_up_to_its_limit_and_no_more() -> None:
    from failover.providers._sse import EventTooLarge, SSEDecoder

    d = SSEDecoder(max_event=100)
    (ev,) = d.feed(b"data: " + b"x" * 90 + b"\n\n")  # 96 characters with the field name
    assert ev.data == "x" * 90
    with pytest.raises(EventTooLarge, match=r"max_response_bytes \(100 bytes\)"):
        SSEDecoder(max_event=100).feed(b"data: " + b"x" * 60 + b"\ndata: " + b"y" * 60 + b"\n")  # one event, two lines
    d = SSEDecoder(max_event=100)
    d.feed(b"data: " + b"z" * 50)
    with pytest.raises(EventTooLarge):
        d.feed(b"z" * 60)  # a line that never ends, fed in pieces
    d = SSEDecoder(max_event=100)
    for _ in range(50):  # many events, each small: no limit on the stream as a whole
        assert len(d.feed(b"data: " + b"w" * 80 + b"\n\n")) == 1


def test_the_bounded_decoder_inflates_no_more_than_the_room_left() -> None:
    from failover.transport import TransportError
    from failover.transport._limits import BoundedDecoder

    text = b'{"a": "' + b"hello world " * 50_000 + b'"}'  # 600 KB that compresses ~100x+
    z = zlib.compress(text)
    d = BoundedDecoder("gzip", cap=10 * MiB, ratio=1000)  # zlib-wrapped under "gzip": decoded by the header
    assert b"".join([d.feed(z[i : i + 1000]) for i in range(0, len(z), 1000)]) + d.flush() == text
    d = BoundedDecoder("deflate", cap=100_000, ratio=1000)
    with pytest.raises(TransportError, match="max_response_bytes") as ei:
        d.feed(z)
    assert ei.value.phase == "too_large" and d.decoded == 100_001  # one byte past the room, no more
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    deflated = raw.compress(text) + raw.flush()
    assert BoundedDecoder("deflate", cap=None, ratio=1000).feed(deflated) == text  # raw deflate, as some send
    with pytest.raises(TransportError, match="max_decoded_ratio"):
        BoundedDecoder("gzip", cap=None, ratio=2).feed(zlib.compress(bytes(4 * MiB)))


def test_the_upstream_section_builds_the_default_transport() -> None:
    from failover.config import config_from_dict

    data = {
        "targets": {"a": {"dialect": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}},
        "routes": {"r": {"primary": ["a"]}},
        "upstream": {"max_response_bytes": 65536, "max_decoded_ratio": 20, "keepalive_s": 5},
    }
    cfg = config_from_dict(data, env={})
    router = Router.from_config(cfg)
    t = router.transport
    assert isinstance(t, Http1Transport)
    assert (t.max_response_bytes, t._ratio, t._keepalive) == (65536, 20, 5.0)
    assert isinstance(
        Router.from_config(config_from_dict({**data, "upstream": None}, env={})).transport, Http1Transport
    )
    mine = HttpxTransport(max_response_bytes=1234)
    assert Router.from_config(cfg, transport=mine).transport is mine  # a transport passed in wins
    from failover.model import ConfigError

    with pytest.raises(ConfigError, match=r"upstream\.max_response_bytes"):
        config_from_dict({**data, "upstream": {"max_response_bytes": 0}}, env={})
