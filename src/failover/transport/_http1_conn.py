"""One HTTP/1.1 connection of the pool: the exchange on it, its response parser, a streamed body.

:class:`Connection` is the asyncio protocol of one keep-alive connection and the state of the
one exchange it carries at a time. ``httptools`` (the llhttp parser uvicorn uses) calls it back
with the status, headers and body: framed by Content-Length, chunked, or read to the end of the
connection; gzip and deflate decoded in bounded steps; a body over ``max_response_bytes`` (or
inflating past ``max_decoded_ratio``) stops the reading and closes the connection. A streamed
body pauses the socket while its reader is behind. :class:`Http1Stream` is that streamed body
as the router reads it.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable, Mapping

import httptools

from ._limits import BoundedDecoder, decoder_for, too_large
from ._types import TransportError

HIGH_WATER = 256 * 1024  # a streamed body buffered beyond this (its reader is behind) pauses reading the socket


class Connection(asyncio.Protocol):
    """One keep-alive connection and the state of the exchange on it (one at a time)."""

    def __init__(
        self,
        origin: tuple[str, str, int],
        *,
        max_body: int,
        ratio: int,
        on_lost: Callable[[Connection], None],
    ) -> None:
        self._on_lost = on_lost  # the pool's: the connection closed (by either side), its slot is free
        self._ratio = ratio  # max_decoded_ratio
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.reused = False
        self.counted = False  # holds one of the pool's slots
        self.generation = 0  # the pool's event loop it belongs to (Http1Transport._bind)
        self.streaming = False
        self.max_body = max_body  # max_response_bytes (a plain body)
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.buffered = 0
        self.framed = False  # Content-Length or chunked: the end is known without EOF
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.error: TransportError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.headers_waiter: asyncio.Future[None] | None = None
        self.informational = False
        self.paused = False
        self.decoder: BoundedDecoder | None = None
        self.answered = False  # any byte of a response arrived

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's is not an asyncio.Transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None and self.headers_waiter is None:
            self.abort()  # bytes on an idle connection: nothing was asked, so it cannot be trusted again
            return
        self.answered = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(TransportError("read", "the provider switched protocols, which no dialect asks for"))
        except httptools.HttpParserError as exc:
            self._fail(TransportError("read", f"malformed HTTP response: {exc}"))

    def eof_received(self) -> bool | None:
        self._ended()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)
        self.closed = True
        self._on_lost(self)

    # -- httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        k = name.decode("latin-1").lower()
        v = value.decode("latin-1")
        h = self.headers
        h[k] = f"{h[k]}, {v}" if k in h else v

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue and friends: the real answer follows
            self.informational = True
            self.headers = {}
            return
        self.status = status
        h = self.headers
        self.framed = "content-length" in h or "chunked" in h.get("transfer-encoding", "").lower()
        enc = h.get("content-encoding")
        if enc is not None:
            self.decoder = decoder_for(enc, None if self.streaming else self.max_body, self._ratio)
        self.headers_done = True
        if not self.streaming and "content-length" in h:
            declared = h["content-length"]  # (a malformed one the parser refuses itself)
            if declared.isdigit() and int(declared) > self.max_body:  # refused before a byte of it is read
                self._fail(too_large(f"body ({declared} bytes declared)", self.max_body))
                return
        w = self.headers_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.informational or self.error is not None:
            return
        if self.decoder is not None:
            try:
                body = self.decoder.feed(body)
            except zlib.error as exc:
                self._fail(TransportError("read", f"the body does not decode as declared: {exc}"))
                return
            except TransportError as exc:
                self._fail(exc)
                return
        if body:
            self.body.append(body)
            self.buffered += len(body)
            if not self.streaming:
                if self.buffered > self.max_body:
                    self._fail(too_large("body", self.max_body))
            else:
                if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
                    self.paused = True
                    self.transport.pause_reading()
                self._wake()

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        if self.error is not None:
            return
        if self.decoder is not None:
            try:
                tail = self.decoder.flush()
            except TransportError as exc:
                self._fail(exc)
                return
            if tail:
                self.body.append(tail)
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True
        self._wake()

    # -- the exchange ------------------------------------------------------------------------

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, error: TransportError) -> None:
        if self.error is None and not self.complete:
            self.error = error
        for w in (self.headers_waiter, self.waiter):
            if w is not None and not w.done():
                w.set_result(None)
        self.abort()

    def _ended(self, exc: Exception | None = None) -> None:
        """The server closed the connection (or it broke)."""
        if self.complete or self.error is not None:
            return
        if self.headers_done and not self.framed and exc is None:
            self.on_message_complete()  # a body delimited by the end of the connection
            self.keep_alive = False
            return
        if self.waiter is None and self.headers_waiter is None and not self.headers_done:
            return  # idle in the pool: nothing was asked
        what = "mid-response" if self.headers_done else "before the response"
        detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        self._fail(TransportError("read", f"the provider closed the connection {what}{detail}"))

    def begin(self, data: bytes, loop: asyncio.AbstractEventLoop, *, streaming: bool = False) -> None:
        self._reset()
        self.streaming = streaming
        self.waiter = loop.create_future()
        assert self.transport is not None
        self.transport.write(data)

    def stale(self) -> bool:
        """A kept-alive connection that the server had closed before it answered a byte."""
        return self.reused and not self.answered and self.error is not None

    def take_body(self) -> bytes:
        body = self.body
        self.body = []
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return body[0] if len(body) == 1 else b"".join(body)

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.abort()


class Http1Stream:
    __slots__ = ("_conn", "_loop", "_max_body", "done", "headers", "status")

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop, max_body: int) -> None:
        self._conn = conn
        self._loop = loop
        self._max_body = max_body
        self.done = False
        self.status: int = conn.status
        self.headers: Mapping[str, str] = conn.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.body:
                yield conn.take_body()
                continue
            if conn.error is not None:
                if conn.error.phase == "too_large":
                    raise conn.error
                raise TransportError("read", f"connection broke mid-stream: {conn.error}")
            if conn.complete:
                self.done = True
                return
            conn.waiter = self._loop.create_future()
            await conn.waiter

    async def aread(self) -> bytes:
        """The rest of the body, at most ``max_response_bytes`` of it (an error body, a plain answer)."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.aiter_bytes():
            size += len(chunk)
            if size > self._max_body:
                self._conn.abort()
                raise too_large("body", self._max_body)
            parts.append(chunk)
        return b"".join(parts)
