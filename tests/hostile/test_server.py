"""Hostile clients against ``failover serve``'s HTTP protocol, over real loopback sockets:

* a request head of many MiB is refused with 431 after ``max_head_bytes``, quickly, and the
  loop keeps answering ``/healthz`` on another connection meanwhile; too many header lines
  are a 431 as well, while a big body right behind a small head is still served;
* a lone CRLF trickled on a kept-alive (or a new) connection neither cancels nor re-arms its
  deadline: the connection is closed at the keep-alive (or head) deadline;
* a stream client that stops reading pauses the upstream (the gateway stops pulling events
  from the provider: the per-stream buffer is bounded), is dropped after ``write_timeout_s``,
  and is logged 499 with a RouteRecord whose outcome says the stream was cancelled; one that
  disconnects mid-stream is a 499 too, on both streaming endpoints;
* memory stays flat while slow readers sit on big streams;
* a trailing slash is a 404, never a redirect built from the Host header; a 405 says Allow.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.types import Message

from failover.config import config_from_dict
from failover.gateway import EnvelopeDefaults, GatewaySettings, create_app
from failover.gateway._disconnect import CONNECTION_LOST
from failover.gateway._logs import ACCESS_LOGGER
from failover.gateway._protocol import HeadTimeoutProtocol
from failover.gateway._serve import http_protocol
from failover.gateway._settings import settings_from_dict
from failover.model import ConfigError
from failover.router import Router
from failover.testing import Outcome, Reply
from tests.gateway._kit import ACME_KEY, Kit, ServerThread, chat_body, chat_scope

pytestmark = pytest.mark.e2e

_LIMITS = ("head_timeout_s", "max_head_bytes", "max_headers", "write_timeout_s")


class Server(ServerThread):
    """The kit's server thread with the protocol and limits ``failover serve`` would use for
    ``settings`` (its keep-alive included)."""

    def __init__(self, app: object, settings: GatewaySettings) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.settings = settings
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,  # type: ignore[arg-type]
                log_level="warning",
                lifespan="on",
                http=HeadTimeoutProtocol,
                timeout_keep_alive=settings.keep_alive_s,  # type: ignore[arg-type]
            )
        )

    def __enter__(self) -> Server:
        self._saved = {name: getattr(HeadTimeoutProtocol, name) for name in _LIMITS}
        assert http_protocol(self.settings) is HeadTimeoutProtocol
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        for name, value in self._saved.items():
            setattr(HeadTimeoutProtocol, name, value)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_answer(sock: socket.socket, limit: float = 10.0) -> bytes:
    """One response with a content-length, head and body."""
    sock.settimeout(limit)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before the response head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


def _closed_within(sock: socket.socket, limit: float) -> float | None:
    """Seconds until the server closed ``sock`` (reading and dropping what it sends), or None."""
    t0 = time.monotonic()
    sock.settimeout(0.05)
    while time.monotonic() - t0 < limit:
        try:
            if not sock.recv(65536):
                return time.monotonic() - t0
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - t0
    return None


_HEALTHZ = b"GET /healthz HTTP/1.1\r\nhost: gateway\r\n\r\n"


# -- the request head: size, count, linear parsing ------------------------------------------------


def test_a_multi_mib_head_is_refused_with_431_quickly_while_healthz_keeps_answering() -> None:
    kit = Kit()
    flood_bytes = 16 * 1024 * 1024
    answer: list[bytes] = []
    flood_done = threading.Event()

    with Server(kit.app, GatewaySettings()) as server:
        probe = _connect(server.port)
        probe.sendall(_HEALTHZ)
        assert _read_answer(probe).startswith(b"HTTP/1.1 200 ")  # warm: the probe connection is up

        def flood() -> None:
            sock = _connect(server.port)
            try:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gateway\r\nx-flood: ")
                piece = b"a" * (256 * 1024)
                try:
                    for _ in range(flood_bytes // len(piece)):
                        sock.sendall(piece)
                except OSError:  # the server closed the connection: what it said is still readable
                    pass
                answer.append(_read_all(sock, 10.0))
            finally:
                sock.close()
                flood_done.set()

        t0 = time.monotonic()
        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        worst = 0.0
        probes = 0
        while not flood_done.is_set() or probes < 20:
            p0 = time.monotonic()
            probe.sendall(_HEALTHZ)
            assert _read_answer(probe).startswith(b"HTTP/1.1 200 ")
            worst = max(worst, time.monotonic() - p0)
            probes += 1
            if time.monotonic() - t0 > 20:
                break
        sender.join(timeout=20)
        refused_after = time.monotonic() - t0
        probe.close()
    print(f"\n{flood_bytes >> 20} MiB head: answered after {refused_after:.3f} s; worst /healthz {worst * 1000:.1f} ms")
    assert answer and answer[0].startswith(b"HTTP/1.1 431 "), answer[:1]
    payload = json.loads(answer[0].partition(b"\r\n\r\n")[2].partition(b"<closed>")[0])
    assert payload["error"]["code"] == "headers_too_large"
    assert refused_after < 5.0  # quickly (wide margin): not after parsing 16 MiB
    assert worst < 0.1, f"/healthz took {worst * 1000:.0f} ms during the flood"


def _read_all(sock: socket.socket, limit: float) -> bytes:
    sock.settimeout(limit)
    out = b""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            return out + b"<closed>"
        out += chunk
    return out


def test_the_head_limit_counts_bytes_as_they_arrive_not_only_whole_headers() -> None:
    kit = Kit()
    settings = GatewaySettings(max_head_bytes=4096)
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gateway\r\nx-long: ")
        for _ in range(8):  # 8 KiB of one unfinished header value, in pieces
            try:
                sock.sendall(b"b" * 1024)
            except OSError:  # refused and closed: what the server said is still readable
                break
            time.sleep(0.01)
        answer = _read_all(sock, 10.0)
    assert answer.startswith(b"HTTP/1.1 431 ") and answer.endswith(b"<closed>"), answer[:200]


def test_too_many_header_lines_is_a_431_and_a_normal_head_is_served() -> None:
    kit = Kit()
    settings = GatewaySettings(max_headers=20)
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        extra = b"".join(b"x-h%d: v\r\n" % i for i in range(18))  # host + 18 = 19 lines: served
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gateway\r\n" + extra + b"\r\n")
        assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
        extra = b"".join(b"x-h%d: v\r\n" % i for i in range(30))
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gateway\r\n" + extra + b"\r\n")
        answer = _read_all(sock, 10.0)
    assert answer.startswith(b"HTTP/1.1 431 ") and answer.endswith(b"<closed>"), answer[:200]
    assert b"more than 20 header lines" in answer


def test_a_big_body_right_behind_a_small_head_is_not_mistaken_for_a_big_head() -> None:
    kit = Kit()
    settings = GatewaySettings(max_head_bytes=4096)
    body = json.dumps(chat_body(text="y" * 50_000)).encode()  # one write: head and 50 KB of body
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {ACME_KEY}\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        for _ in range(2):  # and again on the same connection: the count starts over per request
            sock.sendall(head + body + _HEALTHZ)  # and a pipelined /healthz in the same write
            sock.settimeout(10)
            data = b""
            while not data.endswith(b'{"status":"ok"}'):
                chunk = sock.recv(65536)
                assert chunk, data[-300:]
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 ") and data.count(b"HTTP/1.1 200 OK\r\n") == 2, data[:300]
            assert b'"chat.completion"' in data


# -- slowloris: bytes that are not a request line move no deadline ------------------------------


def test_a_crlf_trickle_after_a_request_does_not_keep_the_connection_open() -> None:
    kit = Kit()
    settings = GatewaySettings(keep_alive_s=1.0, header_timeout_s=1.0)
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        sock.sendall(_HEALTHZ)
        assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
        t0 = time.monotonic()
        closed_at: float | None = None
        while time.monotonic() - t0 < 6.0:  # six times the deadline
            try:
                sock.sendall(b"\r\n")
            except OSError:
                closed_at = time.monotonic() - t0
                break
            gone = _closed_within(sock, 0.2)
            if gone is not None:
                closed_at = time.monotonic() - t0
                break
    assert closed_at is not None, "the CRLF trickle kept the kept-alive connection open"
    assert 0.8 <= closed_at < 3.0, closed_at


def test_a_crlf_trickle_on_a_new_connection_meets_the_head_deadline() -> None:
    kit = Kit()
    settings = GatewaySettings(keep_alive_s=30.0, header_timeout_s=1.0)
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        t0 = time.monotonic()
        closed_at: float | None = None
        while time.monotonic() - t0 < 6.0:
            try:
                sock.sendall(b"\r\n")
            except OSError:
                closed_at = time.monotonic() - t0
                break
            if _closed_within(sock, 0.2) is not None:
                closed_at = time.monotonic() - t0
                break
    assert closed_at is not None and 0.8 <= closed_at < 3.0, closed_at


def test_a_request_on_a_kept_alive_connection_still_gets_its_own_head_deadline() -> None:
    kit = Kit()
    settings = GatewaySettings(keep_alive_s=30.0, header_timeout_s=1.0)
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        sock.sendall(_HEALTHZ)
        assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
        time.sleep(1.5)  # idle longer than the head deadline: keep-alive applies
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: gat")  # a request line began: head deadline
        t0 = time.monotonic()
        answer = _read_all(sock, 10.0)
        waited = time.monotonic() - t0
    assert answer.startswith(b"HTTP/1.1 408 ") and answer.endswith(b"<closed>"), answer[:200]
    assert 0.8 <= waited < 5.0


# -- slow stream readers --------------------------------------------------------------------------


def _stream_request(endpoint: str) -> bytes:
    if endpoint == "chat":
        path = "/v1/chat/completions"
        body = json.dumps(chat_body(stream=True)).encode()
        auth = f"authorization: Bearer {ACME_KEY}"
    else:
        path = "/v1/messages"
        body = json.dumps(
            {"model": "chat", "max_tokens": 1000, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
        ).encode()
        auth = f"x-api-key: {ACME_KEY}\r\nanthropic-version: 2023-06-01"
    head = (
        f"POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n{auth}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Finished:
    """Every ``Gateway.finish`` call (status, record, note) and every access line's fields."""

    def __init__(self, kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, Any]] = []
        self.lines: list[dict[str, Any]] = []
        gw = kit.app.state.gateway
        real = gw.finish

        def spy(ex: Any, status: int, **kw: Any) -> None:
            self.calls.append({"status": status, "exchange": ex, "record": None, "note": "", **kw})
            real(ex, status, **kw)

        monkeypatch.setattr(gw, "finish", spy)
        lines = self.lines

        class Capture(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                lines.append(dict(record.failover))  # type: ignore[attr-defined]

        self._handler = Capture()
        self._logger = logging.getLogger(ACCESS_LOGGER)
        self._level = self._logger.level
        self._logger.addHandler(self._handler)
        self._logger.setLevel(logging.INFO)

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._logger.setLevel(self._level)

    def wait(self, n: int, limit: float) -> None:
        end = time.monotonic() + limit
        while len(self.calls) < n and time.monotonic() < end:
            time.sleep(0.01)


@pytest.fixture
def finished(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Kit, _Finished]]:
    kit = Kit()
    f = _Finished(kit, monkeypatch)
    try:
        yield kit, f
    finally:
        f.close()


WORD = "x" * 1000  # one stream event per word: about 1 KB each


@pytest.mark.parametrize("endpoint", ["chat", "messages"])
def test_a_stream_client_that_stops_reading_pauses_the_upstream_and_is_dropped_as_499(
    endpoint: str, finished: tuple[Kit, _Finished]
) -> None:
    kit, f = finished
    words = 20_000  # a 20 MB stream
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join([WORD] * words), chunk_interval=1e-6)])  # as fast as it is pulled
    settings = GatewaySettings(write_timeout_s=1.0)
    with Server(kit.app, settings) as server:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window, then no reading
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(_stream_request(endpoint))
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")  # the stream began; now read nothing
        t0 = time.monotonic()
        f.wait(1, 15.0)
        dropped_after = time.monotonic() - t0
        assert f.calls, "the stream of a client that does not read never ended"
        assert _closed_within(sock, 10.0) is not None, "the connection was not closed"
        sock.close()
    (call,) = a.calls
    print(f"\npulled {call.events_sent} of {words} events; dropped after {dropped_after:.2f} s")
    assert call.outcome is Outcome.CLIENT_DISCONNECTED  # the upstream stream was closed
    assert call.events_sent < words // 4, f"the gateway pulled {call.events_sent} of {words} events"
    assert 0.9 <= dropped_after < 8.0
    (done,) = f.calls
    assert done["status"] == 499
    assert "write_timeout_s" in done["note"]
    record = done["record"]
    assert record is not None and record.outcome == "cancelled"  # the record says it was cut
    assert record.attempts[-1].outcome == "cancelled"
    (line,) = f.lines
    assert line["status"] == 499 and line["stream"] is True


@pytest.mark.parametrize("endpoint", ["chat", "messages"])
def test_a_stream_client_that_disconnects_mid_stream_is_a_499(endpoint: str, finished: tuple[Kit, _Finished]) -> None:
    kit, f = finished
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join(["w"] * 400), chunk_interval=0.01)])
    with Server(kit.app, GatewaySettings()) as server:
        sock = _connect(server.port)
        sock.sendall(_stream_request(endpoint))
        sock.settimeout(10)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        sock.close()
        f.wait(1, 10.0)
    (done,) = f.calls
    assert done["status"] == 499, done
    assert done["record"] is not None and done["record"].outcome == "cancelled"
    assert [line["status"] for line in f.lines] == [499]


def _rss() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _sse(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    data = b"data: " + json.dumps(body).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


class _BigStream(asyncio.Protocol):
    """A real upstream on a socket: every POST gets ``total`` bytes of SSE, written while the
    socket accepts them and generated as they go (so it holds almost nothing itself); the
    bytes each stream managed to write are in ``written``."""

    def __init__(self, total: int, written: list[int]) -> None:
        self.total, self.written = total, written
        self.buf = b""
        self.paused = False
        self.left = 0
        self.slot = -1
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head, sep, body = self.buf.partition(b"\r\n\r\n")
        length = next(
            (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0
        )
        if not sep or len(body) < length:
            return
        self.buf = b""
        self.slot = len(self.written)
        self.written.append(0)
        self._send(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        self._send(_sse({"role": "assistant", "content": ""}))
        self.left = self.total
        self._pump()

    def _send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        self.written[self.slot] += len(data)

    def _pump(self) -> None:
        event = _sse({"content": WORD * 4})
        t = self.transport
        while self.left > 0 and not self.paused and t is not None and not t.is_closing():
            self._send(event)
            self.left -= len(event)
        if self.left <= 0 and t is not None and not t.is_closing():
            self._send(_sse({}, finish="stop") + b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n"))
            self.left = -1

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.left > 0:
            self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


class _Upstream:
    """``_BigStream`` served from a thread with its own loop."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.written: list[int] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop: asyncio.Future[None] | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        server = await self._loop.create_server(lambda: _BigStream(self.total, self.written), sock=self.sock)
        self._ready.set()
        async with server:
            await self._stop

    def __enter__(self) -> _Upstream:
        self.thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self.thread.join(10)


def _open_stream(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = json.dumps(chat_body("big", stream=True)).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    return sock


def test_slow_readers_on_big_streams_over_a_real_upstream_do_not_grow_memory() -> None:
    """Five clients reading 4 KiB/s from a 24 MB stream each (FAILOVER_SLOW_STREAM_MB changes
    it) through the real HTTP transport: this process (gateway, and an upstream that holds
    next to nothing) grows by little while they read, and the upstream could write only what
    the socket buffers hold beside the gateway's bounded buffers. The old unbounded buffer
    grew by about the whole streams (+227 MiB for five 25 MB streams)."""
    clients, mb = 5, int(os.environ.get("FAILOVER_SLOW_STREAM_MB", "24"))
    total = mb * 1_000_000
    with _Upstream(total) as up:
        cfg = config_from_dict(
            {
                "targets": {
                    "up": {
                        "dialect": "openai",
                        "base_url": f"http://127.0.0.1:{up.port}/v1",
                        "model": "gpt-4o-mini",
                        "api_key_env": "HOSTILE_UPSTREAM_KEY",
                        "capabilities": ["chat", "streaming"],
                        "timeouts": {"total": 120, "idle": 120},
                    }
                },
                "routes": {"big": {"primary": ["up"]}},
            },
            env={"HOSTILE_UPSTREAM_KEY": "sk-hostile"},
        )
        router = Router.from_config(cfg)
        app = create_app(router, GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=120_000)))
        with Server(app, GatewaySettings(write_timeout_s=60.0)) as server:
            warm = _open_stream(server.port)  # one whole stream first: first-request caches are not growth
            warm.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            warm.settimeout(30)
            tail = b""
            while not tail.endswith(b"0\r\n\r\n"):
                chunk = warm.recv(1 << 20)
                assert chunk, tail
                tail = (tail + chunk)[-16:]
            warm.close()
            seen = len(up.written)
            base = peak = _rss()
            socks = [_open_stream(server.port) for _ in range(clients)]
            t0 = time.monotonic()
            while time.monotonic() - t0 < 5.0:  # each client: 1 KiB every 0.25 s, 4 KiB/s
                for sock in socks:
                    sock.settimeout(5)
                    assert sock.recv(1024)
                peak = max(peak, _rss())
                time.sleep(0.25)
            wrote = up.written[seen:]
            for sock in socks:
                sock.close()
    growth = (peak - base) / 2**20
    print(f"\nRSS +{growth:.1f} MiB over 5 s, {clients} readers at 4 KiB/s, {mb} MB streams; upstream wrote {wrote}")
    assert len(wrote) == clients
    assert all(w < total * 0.75 for w in wrote), wrote  # paused: the rest was never written
    assert growth < 48, f"RSS grew {growth:.0f} MiB"


# -- redirects and 405 -----------------------------------------------------------------------------


def _raw(port: int, request: bytes) -> bytes:
    with _connect(port) as sock:
        sock.sendall(request)
        return _read_answer(sock)


def test_a_trailing_slash_is_a_404_never_a_redirect_to_the_host_header() -> None:
    kit = Kit()
    body = json.dumps(chat_body()).encode()
    with Server(kit.app, GatewaySettings()) as server:
        for method, path in (("POST", "/v1/chat/completions/"), ("GET", "/healthz/"), ("GET", "/v1/models/")):
            request = (
                f"{method} {path} HTTP/1.1\r\nhost: evil.example\r\nauthorization: Bearer {ACME_KEY}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body) if method == 'POST' else 0}\r\n\r\n"
            ).encode() + (body if method == "POST" else b"")
            answer = _raw(server.port, request)
            head, _, payload = answer.partition(b"\r\n\r\n")
            assert b"location:" not in head.lower(), head
            assert b"evil.example" not in answer
            if path != "/v1/models/":  # (a model named "" is a 404 of the models listing)
                assert head.startswith(b"HTTP/1.1 404 "), head
            assert "error" in json.loads(payload)


def test_every_405_says_allow() -> None:
    kit = Kit()
    with Server(kit.app, GatewaySettings()) as server:
        for method, path, allowed in (
            ("GET", "/v1/chat/completions", "POST"),  # the fast endpoints' own 405
            ("GET", "/v1/messages", "POST"),
            ("POST", "/healthz", "GET"),  # Starlette's, through the gateway's error handler
            ("DELETE", "/v1/models", "GET"),
        ):
            answer = _raw(
                server.port, f"{method} {path} HTTP/1.1\r\nhost: gateway\r\ncontent-length: 0\r\n\r\n".encode()
            )
            head, _, payload = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 405 "), head
            allow = next(h for h in head.split(b"\r\n") if h.lower().startswith(b"allow:"))
            assert allowed in allow.decode(), allow
            assert json.loads(payload)["error"]["code"] == "method_not_allowed"


async def test_a_stream_whose_client_left_while_its_last_events_were_sent_is_a_499_not_a_200(
    finished: tuple[Kit, _Finished],
) -> None:
    """Once the connection is lost the server's send() returns at once without a word (uvicorn's
    does), so the pump may run through the rest of a short stream before it notices: it must
    still log the client's leaving, not a 200."""
    kit, f = finished
    kit.providers["a"].load([Reply.ok("one two three")])  # the whole stream at once
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    scope = {**chat_scope(), "extensions": {CONNECTION_LOST: lost}}
    body = json.dumps(chat_body(stream=True)).encode()
    sent: list[Message] = []
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if lost.done():
            return  # the connection is gone: nothing is written, nothing is said
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            lost.set_result(None)  # the client leaves after the first chunk

    await kit.app(scope, receive, send)
    (done,) = f.calls
    assert done["status"] == 499, done
    assert "client disconnected" in done["note"]


def test_a_request_ending_inside_the_cap_then_the_next_head_in_the_same_write_is_served() -> None:
    kit = Kit()
    settings = GatewaySettings(max_head_bytes=4096)
    first = b"GET /healthz HTTP/1.1\r\nhost: gateway\r\nx-pad: " + b"p" * 3000 + b"\r\n\r\n"
    second = b"GET /healthz HTTP/1.1\r\nhost: gateway\r\nx-pad: " + b"q" * 3000 + b"\r\n\r\n"
    with Server(kit.app, settings) as server, _connect(server.port) as sock:
        sock.sendall(first + second)  # 6 KB in one write: two heads, each under 4 KiB
        sock.settimeout(10)
        data = b""
        while data.count(b'{"status":"ok"}') < 2:
            chunk = sock.recv(65536)
            assert chunk, data[-300:]
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK\r\n") == 2


def test_the_connection_limits_are_read_from_the_settings_and_validated() -> None:
    s = settings_from_dict(
        {"limits": {"max_head_bytes": 8192, "max_headers": 50, "keep_alive_s": 5, "write_timeout_s": 2.5}}
    )
    assert (s.max_head_bytes, s.max_headers, s.keep_alive_s, s.write_timeout_s) == (8192, 50, 5.0, 2.5)
    d = GatewaySettings()
    assert (d.max_head_bytes, d.max_headers, d.keep_alive_s, d.write_timeout_s) == (65536, 100, 30.0, 30.0)
    for bad in ({"max_head_bytes": 10}, {"max_headers": 0}, {"keep_alive_s": 0}, {"write_timeout_s": -1}):
        with pytest.raises(ConfigError) as err:
            settings_from_dict({"limits": bad})
        assert f"gateway.limits.{next(iter(bad))}" in str(err.value)
