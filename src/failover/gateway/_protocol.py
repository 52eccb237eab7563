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
segments per answer. Each request's cycle is a :class:`_Cycle`, uvicorn's with less work per
message and the same bytes on the wire.

Imported only where httptools is installed (uvicorn[standard] brings it on the usual
platforms); the h11 fallback keeps h11's own head-size cap (``max_head_bytes``, answered 400)
and uvicorn's keep-alive timer, without the other bounds.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

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
    _begun = False  # a request line began and its head has not ended

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
        if self._in_head and (seen := self._head_seen + len(data)) > self.max_head_bytes:
            self._capped(memoryview(data))
        else:
            if self._in_head:
                self._head_seen = seen
            self._feed(data)
        if self._begun and self._head_timer is None:
            # A head that began in these bytes and did not end in them: its deadline runs from
            # now, the moment its request line began. Most heads end in the bytes that began
            # them, and so never arm (or cancel) a timer.
            self._arm_head_timer()

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
        self._begun = True  # (data_received arms it if the head does not end in these bytes)

    def on_header(self, name: bytes, value: bytes) -> None:
        # uvicorn's, inlined, plus the count; llhttp keeps a value's trailing whitespace,
        # which is not part of it (RFC 9110, section 5.5)
        name = name.lower()
        value = value.rstrip(b" \t")
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
        self._begun = False
        self._head_seen = 0
        self._heads += 1
        # uvicorn's, with the request's cycle a _Cycle and the scope's extensions filled in
        parser, scope = self.parser, self.scope
        http_version = parser.get_http_version()
        scope["method"] = parser.get_method().decode("ascii")
        if http_version != "1.1":
            scope["http_version"] = http_version
        if parser.should_upgrade() and self._should_upgrade():
            return
        url = httptools.parse_url(self.url)
        raw_path = url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root = self.root_path
        scope["path"] = root + path
        scope["raw_path"] = root.encode("ascii") + raw_path if root else raw_path
        scope["query_string"] = url.query or b""
        app = self.app
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")
        # The app learns of a disconnect from this future instead of a task on receive(), and
        # reads a body that came with its head without a timer.
        if self._lost is None:
            self._lost = self.loop.create_future()
        scope["extensions"] = {CONNECTION_LOST: self._lost, BODY_RECEIVED: self._body_received}  # type: ignore[dict-item]
        existing = self.cycle
        cycle = self.cycle = _Cycle(
            scope=scope,
            transport=_OneWrite(self.transport, self.loop),  # type: ignore[arg-type]
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=self.access_log,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=self.expect_100_continue,
            keep_alive=http_version != "1.0" and parser.should_keep_alive(),
            on_response=self.on_response_complete,
        )
        if existing is None or existing.response_complete:
            self._start_asgi_task(cycle, app)
        else:  # a pipelined request waits for the one before
            self.flow.pause_reading()
            self.pipeline.appendleft((cycle, app))

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
        return isinstance(cycle, _Cycle) and cycle.body_here()

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


class _Cycle(RequestResponseCycle):
    """uvicorn's request cycle with the same answers for less work per message: a response
    head's names and values are checked by one search each over all of them (uvicorn runs two
    regular expressions per header: the verdict is the same, as each looks for one character),
    and a body that has all arrived is received without waiting on the cycle's event. Anything
    uncommon (a paused or lost connection, a HEAD request's body, an out-of-order message)
    takes uvicorn's own path."""

    async def send(self, message: Any) -> None:
        if self.disconnected or self.flow.write_paused or self.response_complete:
            await super().send(message)
            return
        if self.response_started:
            if message["type"] != "http.response.body" or self.scope["method"] == "HEAD":
                await super().send(message)
                return
            body = message.get("body", b"")
            more = message.get("more_body", False)
            if self.chunked_encoding:
                chunk = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
                self.transport.write(chunk if more else chunk + b"0\r\n\r\n")
            else:
                left = self.expected_content_length - len(body)
                if left < 0:
                    raise RuntimeError("Response content longer than Content-Length")
                self.expected_content_length = left
                self.transport.write(body)
            if not more:
                if self.expected_content_length != 0:
                    raise RuntimeError("Response content shorter than Content-Length")
                self.response_complete = True
                self.message_event.set()
                if not self.keep_alive:
                    self.transport.close()
                self.on_response()
            return
        if message["type"] != "http.response.start":
            await super().send(message)
            return
        self.response_started = True
        self.waiting_for_100_continue = False
        status = message["status"]
        headers = message.get("headers", ())
        if self.default_headers:
            headers = [*self.default_headers, *headers]
        if self.access_log:  # uvicorn's line (failover serve writes its own)
            scope = self.scope
            self.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),
                scope["method"],
                get_path_with_query_string(scope),
                scope["http_version"],
                status,
            )
        content = [STATUS_LINE[status]]
        close = False
        for raw, value in headers:
            name = raw.lower()
            if name == b"content-length" and self.chunked_encoding is None:
                self.expected_content_length = int(value.decode())
                self.chunked_encoding = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.expected_content_length = 0
                self.chunked_encoding = True
            elif name == b"connection" and b"close" in [t.lower().strip() for t in value.split(b",")]:
                self.keep_alive = False
                close = True
            content += (name, b": ", value, b"\r\n")
        if HEADER_RE.search(b"".join(content[1::4])):
            raise RuntimeError("Invalid HTTP header name.")
        if HEADER_VALUE_RE.search(b"".join(content[3::4])):
            raise RuntimeError("Invalid HTTP header value.")
        if not self.keep_alive and not close:
            content.append(b"connection: close\r\n")
        if self.chunked_encoding is None and self.scope["method"] != "HEAD" and status not in (204, 304):
            self.chunked_encoding = True  # neither content-length nor transfer-encoding given
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        self.transport.write(b"".join(content))

    def body_here(self) -> bool:
        """The request's whole body has arrived (receive() would not wait)."""
        return not self.more_body and self.message_event.is_set()

    async def receive(self) -> Any:
        if self.waiting_for_100_continue or self.disconnected or self.response_complete or not self.body_here():
            return await super().receive()
        self.message_event.clear()  # the whole body is here: nothing to wait for
        self.flow.resume_reading()
        message = {"type": "http.request", "body": bytes(self.body), "more_body": False}
        self.body = bytearray()
        return message


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
