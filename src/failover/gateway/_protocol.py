"""uvicorn's httptools protocol with the bounds ``failover serve`` puts on every client.

uvicorn bounds only the idle time between requests on a keep-alive connection
(``timeout_keep_alive``), cancels even that as soon as any byte arrives, and lets httptools
gather a request head of any size (joining its pieces as they arrive, which costs time
quadratic in the head's length). Here, from the gateway settings' ``limits:`` section:

* ``header_timeout_s``: the head of every request must be complete within this of the
  connection being made (for the first request) or of the first byte of its request line
  (for the next ones on a keep-alive connection); otherwise 408 and the connection is closed.
* ``keep_alive_s``: an idle kept-alive connection is closed after this. Only the start of a
  request line ends the idle time: bytes the parser skips between requests (a lone CRLF)
  neither cancel nor re-arm it, so a trickle of them cannot hold a connection open.
* ``max_head_bytes`` and ``max_headers``: bytes are counted as they arrive, before they reach
  the parser, and header lines as the parser reports them; a head over either gets 431 and
  the connection is closed. The parser is never fed more than ``max_head_bytes`` of one head,
  so parsing stays linear in what is accepted.
* ``write_timeout_s``: while the connection's send buffer is full (the client does not read)
  a timer runs; when the client has not let it drain within this, the connection is dropped.
  The app hears of it as a lost connection (a stream ends, its upstream closed, 499).

The body has its own deadline, enforced by the app (``limits.body_timeout_s``).

It also tells the app at once when a connection is lost (a future in the
``failover.connection_lost`` scope extension), so the app needs no task per request waiting
on ``receive()`` for the disconnect, and whether the request's whole body has arrived
(``failover.body_received``), so a body that came with its head is read without arming the
body timer; and it sends each response's head with the start of its
body (:class:`_OneWrite`): uvicorn writes the status line and headers, then the body, as two
writes, which on a kept-alive TCP connection with TCP_NODELAY are two system calls and two
segments per answer.

Imported only where httptools is installed (uvicorn[standard] brings it on the usual
platforms); the h11 fallback keeps h11's own head-size cap (``max_head_bytes``, answered 400)
and uvicorn's keep-alive timer, without the other bounds.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ._disconnect import BODY_RECEIVED, CONNECTION_LOST, WRITE_TIMED_OUT

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def _too_large(message: str) -> bytes:
    body = json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": "headers_too_large", "param": None}}
    ).encode()
    head = (
        "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _TooManyHeaders(Exception):
    """Raised from the parser's header callback: stops the parser where it is."""


class HeadTimeoutProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` plus the bounds above. The limits are class attributes set by
    ``failover serve`` from the gateway settings (uvicorn creates protocols itself, also in
    worker processes)."""

    head_timeout_s: ClassVar[float] = 10.0
    max_head_bytes: ClassVar[int] = 64 * 1024
    max_headers: ClassVar[int] = 100
    write_timeout_s: ClassVar[float] = 30.0
    _head_timer: asyncio.TimerHandle | None = None
    _write_timer: asyncio.TimerHandle | None = None
    _lost: asyncio.Future[None] | None = None  # resolved when the connection is lost
    _in_head = True  # the next bytes belong to a request head (or to the gap before one)
    _head_seen = 0  # bytes of the current head (and the gap before it) fed to the parser
    _refused = False  # a head over a limit: answered 431, the connection closing
    _heads = 0  # request heads completed on this connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._cancel_write_timer()
        lost = self._lost
        if lost is not None and not lost.done():
            lost.set_result(None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Unlike uvicorn's, no byte cancels the keep-alive timer here: the start of a request
        # line does (on_message_begin). Bytes of a head are counted before the parser sees them.
        if self._in_head:
            seen = self._head_seen + len(data)
            if seen > self.max_head_bytes:
                self._capped(memoryview(data))
                return
            self._head_seen = seen
        self._feed(data)

    def _capped(self, view: memoryview) -> None:
        """More bytes than the head may still take: feed only what it may; what follows the
        end of the head (its body, the next request) is counted again as it must be."""
        while True:
            room = self.max_head_bytes - self._head_seen
            if len(view) <= room:
                self._head_seen += len(view)
                break
            heads = self._heads
            if not self._feed(view[:room]):
                return
            if self._heads == heads:  # max_head_bytes fed and the head is not over
                self._refuse(f"the request head (request line and headers) exceeds {self.max_head_bytes} bytes")
                return
            view = view[room:]  # the head ended inside: the rest is its body (or the next request)
            if not self._head_open():
                break
        self._feed(view)

    def _head_open(self) -> bool:
        return self._in_head  # (the parser's callbacks change it while feeding)

    def _feed(self, data: bytes | memoryview) -> bool:
        """Parse ``data``; False when the connection is being closed (a bad or refused head)."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refused:
                self._refuse(f"the request has more than {self.max_headers} header lines")
                return False
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        return True

    def _refuse(self, message: str) -> None:
        """A head over a limit: 431 (unless an answer of ours is under way) and close."""
        self._refused = True
        self._cancel_head_timer()
        transport = self.transport
        if transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            transport.write(_too_large(f"{message}: see gateway.limits.max_head_bytes and max_headers"))
        transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._unset_keepalive_if_required()  # a request line began: the head deadline applies now
        self._arm_head_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        # uvicorn's, inlined, plus the count
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        headers = self.headers
        headers.append((name, value))
        if len(headers) > self.max_headers:
            self._refused = True
            raise _TooManyHeaders

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        self._unset_keepalive_if_required()  # (a head that began before the last answer ended)
        self._in_head = False
        self._head_seen = 0
        self._heads += 1
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # a new cycle (not an upgrade)
            cycle.transport = _OneWrite(self.transport, self.loop)  # type: ignore[assignment]
            # The app learns of a disconnect from this future instead of a task on receive().
            if self._lost is None:
                self._lost = self.loop.create_future()
            extensions: dict[str, object] = cycle.scope.setdefault("extensions", {})  # type: ignore[assignment]
            extensions[CONNECTION_LOST] = self._lost
            # Most bodies arrive with their head: the app then reads one without a timer.
            extensions[BODY_RECEIVED] = self._body_received

    def on_message_complete(self) -> None:
        self._in_head = True
        super().on_message_complete()

    def _body_received(self) -> bool:
        """Whether the body of the request being read has all arrived. A method of the
        connection, not a closure over the request's cycle: the cycle's scope holds it, and a
        closure would make every cycle a reference loop left to the garbage collector. When a
        pipelined request's head has already replaced the cycle, the earlier body is whole (the
        parser reached the next head), and the answer is the next one's: at worst False, and
        the earlier body is read under the timer as before."""
        cycle = self.cycle
        return cycle is not None and not cycle.more_body and cycle.message_event.is_set()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout_s, self._write_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_timer()

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_timed_out(self) -> None:
        """The client let the send buffer stay full for write_timeout_s: drop the connection
        (what is still buffered for it is discarded); the app hears of a lost connection."""
        self._write_timer = None
        cycle = self.cycle
        if cycle is not None:
            extensions: dict[str, object] | None = cycle.scope.get("extensions")  # type: ignore[assignment]
            if extensions is not None:
                extensions[WRITE_TIMED_OUT] = True
        self.transport.abort()

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # no answer of ours is under way
            self.transport.write(_TIMED_OUT)
        self.transport.close()


class _OneWrite:
    """One response's view of the connection: the head is held until the first body write,
    which carries it, or until the loop's next turn (a stream whose first event comes later),
    so a plain answer leaves in one write and a stream's head is never held back."""

    __slots__ = ("_flush", "_held", "_loop", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._started = False  # the head was written (or is held)
        self._held: bytes | None = None
        self._flush: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        if self._held is not None:
            data = self._take() + data
        elif not self._started and not data.startswith(b"HTTP/1.1 1"):
            self._started = True
            self._held = data  # the head (not a 100 Continue, which the client waits for)
            self._flush = self._loop.call_soon(self._flush_held)
            return
        self._transport.write(data)

    def _take(self) -> bytes:
        """The held head, no longer held (its flush on the next turn called off)."""
        held, self._held = self._held or b"", None
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        return held

    def _flush_held(self) -> None:
        held = self._take()
        if held and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._flush_held()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


__all__ = ["HeadTimeoutProtocol"]
