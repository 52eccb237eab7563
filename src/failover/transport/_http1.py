"""failover's own HTTP/1.1 client: the default transport.

One provider call is one HTTP/1.1 exchange on a pooled keep-alive connection: a POST with a
JSON body, a JSON (or SSE) answer. A general-purpose client does much more per request than
that needs (cookies, redirects, proxies, multipart, tracing signals, per-request timeout and
header objects), and on a one-core gateway that is a sixth of the CPU of every request
(docs/benchmarks.md, "Upstream HTTP client"). This one does only what an attempt needs:

* a connection pool per origin (scheme, host, port), last in first out, with a limit on open
  connections shared by all origins; idle connections are closed after ``keepalive_s`` (one
  timer for the pool) or as soon as the server closes them;
* the request head and body written in one call; responses parsed by ``httptools`` (the
  llhttp parser uvicorn uses): Content-Length, chunked, or read to the end of the connection;
  gzip and deflate decoded in bounded steps; an answer over ``max_response_bytes`` (or
  inflating past ``max_decoded_ratio``) stops the reading and closes the connection;
* TLS with the system's trust store (``ssl.create_default_context()``, as aiohttp) or a
  context of the caller's;
* the connect bounded by ``connect_timeout`` and the whole exchange, waiting for a pool slot
  included, by ``total_timeout``, on the loop clock (``enforces_total``); ``Attempt.connected``
  reported when the connection is ready;
* a cancelled, timed-out or broken exchange aborts its connection (never pooled again), so the
  provider sees the client go instead of generating for nobody.

Never: redirects (a provider must not send our credentials elsewhere), proxies from the
environment (base URLs come only from config), cookies (they must not carry across tenants),
a second send of a POST (one that may have reached the provider is the router's to replay or
not; only idempotent or idempotency-keyed requests go again, on a kept-alive connection that
turned out closed), HEAD requests or HTTP upgrades (no dialect sends them).

This module is the pool and the exchanges; one connection, its response parser and a streamed
body are in ``_http1_conn``, and connecting to a host name's addresses in ``_dial``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import math
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..model import mark_connected
from ._dial import dial, is_ip
from ._http1_conn import Connection, Http1Stream
from ._limits import DEFAULT_MAX_DECODED_RATIO, DEFAULT_MAX_RESPONSE_BYTES, check_limits
from ._types import HttpRequest, HttpResponse, StreamingResponse, TransportError

try:
    from importlib.metadata import version as _version

    _USER_AGENT = f"failover/{_version('failover')}"
except Exception:  # pragma: no cover - an uninstalled checkout
    _USER_AGENT = "failover"


@functools.lru_cache(maxsize=512)
def _split(url: str) -> tuple[tuple[str, str, int], bytes, bytes]:
    """(origin, request target, Host header value) of a URL; cached, as targets have few URLs."""
    u = urlsplit(url)
    scheme = u.scheme.lower()
    if scheme not in ("http", "https"):
        raise TransportError("connect", f"unsupported URL scheme {u.scheme!r} (http or https)")
    host = u.hostname
    if not host:
        raise TransportError("connect", "the URL has no host")
    default = 443 if scheme == "https" else 80
    try:
        port = u.port or default
    except ValueError as exc:
        raise TransportError("connect", f"bad port in URL: {exc}") from None
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    shown = f"[{host}]" if ":" in host else (host if host.isascii() else host.encode("idna").decode("ascii"))
    host_header = shown if port == default else f"{shown}:{port}"
    return (scheme, host, port), path.encode("ascii"), host_header.encode("ascii")


_OURS = frozenset({"host", "content-length", "transfer-encoding", "connection"})  # framing is this client's
_Defaults = tuple[tuple[str, bytes], ...]  # (lower-case name, its whole header line)
_ALWAYS: _Defaults = (
    ("user-agent", f"user-agent: {_USER_AGENT}\r\n".encode()),
    ("accept-encoding", b"accept-encoding: gzip, deflate\r\n"),
)
_JSON_BODY: _Defaults = (("content-type", b"content-type: application/json\r\n"),)
_SSE: _Defaults = (("accept", b"accept: text/event-stream\r\n"),)


def _head(
    method: str, target: bytes, host: bytes, headers: Mapping[str, str], length: int, defaults: _Defaults
) -> bytes:
    """The request line and headers: the caller's, then each of ``defaults`` it did not set."""
    lines = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\nhost: ", host, b"\r\n"]
    seen: set[str] = set()
    for k, v in headers.items():
        name = k.lower()
        if name in _OURS:
            continue
        if "\r" in v or "\n" in v or "\r" in k or "\n" in k:
            raise TransportError("connect", f"header {k!r} holds a line break")  # no header injection
        seen.add(name)
        lines += (k.encode("latin-1"), b": ", v.encode("latin-1"), b"\r\n")
    lines += [line for name, line in defaults if name not in seen]
    if length or method not in ("GET", "HEAD"):
        lines += (b"content-length: ", str(length).encode("ascii"), b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


class Http1Transport:
    """The default transport: failover's own pooled HTTP/1.1 client (see the module docstring).

    ``max_connections`` bounds the connections open at once, over all providers (a request
    beyond it waits for one, within its total timeout); ``keepalive_s`` is how long an idle
    connection is kept for reuse (then it is closed); ``ssl_context`` replaces the system trust
    store for https. ``max_response_bytes`` and ``max_decoded_ratio`` bound what one answer may
    take (transport/_limits.py): a plain body, an error body or one stream event over
    ``max_response_bytes`` decoded, or a compressed body inflating past the ratio, fails the
    attempt (``TransportError("too_large")``) and closes its connection.
    """

    enforces_total = True  # send() is bounded by asyncio.timeout(total) below

    def __init__(
        self,
        *,
        max_connections: int = 200,
        keepalive_s: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_decoded_ratio: int = DEFAULT_MAX_DECODED_RATIO,
    ) -> None:
        self._limit = max(max_connections, 1)
        self._keepalive = keepalive_s
        self._max_body, self._ratio = check_limits(max_response_bytes, max_decoded_ratio)
        self._sweeper: asyncio.TimerHandle | None = None  # closes idle connections at keepalive_s
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], collections.deque[Connection]] = {}
        self._open = 0  # connections open or being opened
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generation = 0

    @property
    def max_response_bytes(self) -> int:
        """The most one answer may take: a plain body, an error body, one stream event."""
        return self._max_body

    # -- the pool ----------------------------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def _acquire(
        self, origin: tuple[str, str, int], connect_timeout: float, loop: asyncio.AbstractEventLoop, *, fresh: bool
    ) -> Connection:
        """A pooled connection to ``origin`` (unless ``fresh``), or a new one when a slot is free."""
        if self._closed:
            raise TransportError("connect", "the transport is closed")
        if loop is not self._loop:
            self._bind(loop)
        idle = None if fresh else self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.closed or loop.time() - conn.idle_since > self._keepalive:
                conn.abort()
                continue
            conn.reused = True
            return conn
        while self._open >= self._limit:
            if self._evict_idle():
                continue
            w = loop.create_future()
            self._slot_waiters.append(w)
            try:
                await w
            except BaseException:
                if w.done() and not w.cancelled():
                    self._wake_one()  # woken, then cancelled (its deadline): the next in line gets the slot
                elif w in self._slot_waiters:
                    self._slot_waiters.remove(w)
                raise
            if self._closed:
                raise TransportError("connect", "the transport is closed")
            idle = None if fresh else self._idle.get(origin)
            while idle:  # a connection to this origin came back while we waited
                conn = idle.pop()
                if not conn.closed:
                    conn.reused = True
                    return conn
        conn = Connection(origin, max_body=self._max_body, ratio=self._ratio, on_lost=self._forget)
        conn.counted = True
        conn.generation = self._generation
        self._open += 1
        try:
            await self._connect(conn, connect_timeout, loop)
        except BaseException:
            self._uncount(conn)
            raise
        return conn

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """First use, or use from another event loop (a new ``asyncio.run``): connections of
        the old loop cannot be used from this one, so the pool starts empty."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._loop is not None:
            self._idle.clear()
            self._slot_waiters.clear()
            self._open = 0
            self._generation += 1  # what the old loop's connections do no longer counts here
        self._loop = loop

    async def _connect(self, conn: Connection, connect_timeout: float, loop: asyncio.AbstractEventLoop) -> None:
        scheme, host, port = conn.origin
        tls: dict[str, Any] = {"ssl": self._context(), "server_hostname": host} if scheme == "https" else {}
        try:
            async with asyncio.timeout(connect_timeout) as cm:
                sock = None if is_ip(host) else await dial(loop, host, port)
                if sock is None:
                    await loop.create_connection(lambda: conn, host, port, **tls)
                else:
                    await loop.create_connection(lambda: conn, sock=sock, **tls)
        except TimeoutError as exc:
            if cm.expired():
                raise TransportError("connect_timeout", f"connect timed out after {connect_timeout:.3f}s") from exc
            raise
        except ssl.SSLError as exc:
            raise TransportError("connect", f"TLS handshake with {host}:{port} failed: {exc}") from exc
        except OSError as exc:  # refused, unreachable, DNS
            raise TransportError("connect", f"could not connect to {host}:{port}: {exc}") from exc

    def _evict_idle(self) -> bool:
        """Close one idle connection (any origin) to make room; False when none is idle."""
        for q in self._idle.values():
            while q:
                conn = q.popleft()
                if not conn.closed:
                    conn.abort()
                    self._uncount(conn)
                    return True
        return False

    def _release(self, conn: Connection, loop: asyncio.AbstractEventLoop) -> None:
        """Back to the pool after a complete exchange, or closed when it cannot be reused."""
        if conn.closed or not conn.keep_alive or self._closed:
            conn.abort()
            return
        conn.waiter = conn.headers_waiter = None
        conn.idle_since = loop.time()
        self._idle.setdefault(conn.origin, collections.deque()).append(conn)
        if self._sweeper is None:
            self._sweeper = loop.call_at(conn.idle_since + self._keepalive, self._sweep)
        self._wake_one()

    def _sweep(self) -> None:
        """Close every connection idle for ``keepalive_s``; run again when the next one is due.

        One timer for the whole pool, armed only while a connection is idle: a busy pool pays
        nothing per exchange. Each origin's queue is oldest first (connections go back on the
        right), so a sweep looks at the expired ones and one more per origin."""
        self._sweeper = None
        loop = self._loop
        if loop is None or self._closed:
            return
        due = loop.time() - self._keepalive
        soonest = math.inf
        for q in self._idle.values():
            while q and (q[0].closed or q[0].idle_since <= due + 1e-9):
                conn = q.popleft()
                conn.abort()  # the socket is closed now, not just left out of reuse
                self._uncount(conn)
            if q and q[0].idle_since < soonest:
                soonest = q[0].idle_since
        if soonest != math.inf:
            self._sweeper = loop.call_at(soonest + self._keepalive, self._sweep)

    def _uncount(self, conn: Connection) -> None:
        if conn.counted and conn.generation == self._generation:
            conn.counted = False
            self._open -= 1
            self._wake_one()

    def _forget(self, conn: Connection) -> None:
        """A connection closed (by either side): its slot is free."""
        self._uncount(conn)
        q = self._idle.get(conn.origin)
        if q is not None:
            with contextlib.suppress(ValueError):
                q.remove(conn)

    def _wake_one(self) -> None:
        while self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    # -- Transport ---------------------------------------------------------------------------

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        if total_timeout <= 0:
            raise TransportError("total", "no time left for this attempt")
        data = self._encode(request, stream=False)
        origin = _split(request.url)[0]
        loop = asyncio.get_running_loop()
        cap = None if math.isinf(total_timeout) else total_timeout
        conn: Connection | None = None
        try:
            async with asyncio.timeout(cap):
                fresh = False
                while True:
                    conn = await self._acquire(origin, min(connect_timeout, total_timeout), loop, fresh=fresh)
                    mark_connected(loop.time())
                    conn.begin(data, loop)
                    if not conn.complete and conn.error is None:
                        assert conn.waiter is not None
                        await conn.waiter  # woken at the end of the message, or by an error
                    if conn.error is None or not conn.stale() or not _replayable(request) or fresh:
                        break
                    fresh = True  # a kept-alive connection the server had closed: once more, on a new one
        except TimeoutError as exc:
            if conn is not None:
                conn.abort()
            raise TransportError("total", f"no complete response within {total_timeout:.3f}s") from exc
        except BaseException:
            if conn is not None:
                conn.abort()  # cancelled: drop the connection, never pool it
            raise
        if conn.error is not None:
            raise conn.error
        resp = HttpResponse(status=conn.status, headers=conn.headers, body=conn.take_body())
        self._release(conn, loop)
        return resp

    def _encode(self, request: HttpRequest, *, stream: bool) -> bytes:
        _, target, host = _split(request.url)
        body = request.body_bytes()
        defaults = _ALWAYS
        if request.json is not None:
            defaults += _JSON_BODY
        if stream:
            defaults += _SSE
        return _head(request.method.upper(), target, host, request.headers, len(body), defaults) + body

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[StreamingResponse]:
        """Open a streaming exchange; leaving the block before the end closes the connection.

        Only the connect timeout is set here; the router bounds the wait for the headers and
        every chunk on the loop clock (first event, idle, total).
        """
        data = self._encode(request, stream=True)
        origin = _split(request.url)[0]
        loop = asyncio.get_running_loop()
        fresh = False
        while True:
            conn = await self._acquire(origin, connect_timeout, loop, fresh=fresh)
            try:
                mark_connected(loop.time())
                conn.begin(data, loop, streaming=True)
                conn.headers_waiter = loop.create_future()
                if not conn.headers_done and conn.error is None:
                    await conn.headers_waiter
            except BaseException:
                conn.abort()
                raise
            if conn.error is None:
                break
            if fresh or not conn.stale() or not _replayable(request):
                raise conn.error
            fresh = True  # a kept-alive connection the server had closed: once more, on a new one
        resp = Http1Stream(conn, loop, self._max_body)
        try:
            yield resp
        finally:
            if resp.done:
                self._release(conn, loop)  # the body was read to its end: the connection may be reused
            else:
                conn.abort()  # left early: drop the connection so the provider sees us go

    async def aclose(self) -> None:
        """Close the idle connections; exchanges in flight finish and then close theirs, and
        requests waiting for a connection are refused."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for q in self._idle.values():
            while q:
                q.pop().abort()
        self._idle.clear()
        while self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)


_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})


def _replayable(request: HttpRequest) -> bool:
    """Whether a request may be sent again when a kept-alive connection turns out closed.

    As Go's net/http: an idempotent method, or a request that carries an idempotency key. A
    POST without one is never sent twice by the transport; the router decides on a replay.
    """
    if request.method.upper() in _IDEMPOTENT:
        return True
    return any(k.lower() in ("idempotency-key", "x-idempotency-key") for k in request.headers)
