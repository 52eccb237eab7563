"""uvicorn's httptools protocol with a deadline on the request head (``limits.header_timeout_s``).

uvicorn bounds only the idle time between requests on a keep-alive connection
(``timeout_keep_alive``), and cancels even that as soon as a byte arrives. A client that
connects and sends nothing, or sends its request line and headers a byte at a time, holds a
connection (a file descriptor and a protocol object) for as long as it likes. Here the head
of every request must be complete within ``head_timeout_s`` of the connection being made (for
the first request) or of its first byte (for the next ones on a keep-alive connection);
otherwise the gateway answers 408 and closes the connection. The body has its own deadline,
enforced by the app (``limits.body_timeout_s``).

It also tells the app at once when a connection is lost (a future in the
``failover.connection_lost`` scope extension), so the app needs no task per request waiting
on ``receive()`` for the disconnect; and it sends each response's head with the start of its
body (:class:`_OneWrite`): uvicorn writes the status line and headers, then the body, as two
writes, which on a kept-alive TCP connection with TCP_NODELAY are two system calls and two
segments per answer.

Imported only where httptools is installed (uvicorn[standard] brings it on the usual
platforms); the h11 fallback runs without this deadline.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ._app import CONNECTION_LOST

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class HeadTimeoutProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` plus a timer from the connection (or a request's first byte) to
    the end of its headers. ``head_timeout_s`` is set by ``failover serve`` from the gateway
    settings (a class attribute: uvicorn creates protocols itself, also in worker processes)."""

    head_timeout_s: ClassVar[float] = 10.0
    _head_timer: asyncio.TimerHandle | None = None
    _lost: asyncio.Future[None] | None = None  # resolved when the connection is lost

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        lost = self._lost
        if lost is not None and not lost.done():
            lost.set_result(None)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:  # a new cycle (not an upgrade)
            cycle.transport = _OneWrite(self.transport, self.loop)  # type: ignore[assignment]
            # The app learns of a disconnect from this future instead of a task on receive().
            if self._lost is None:
                self._lost = self.loop.create_future()
            extensions: dict[str, object] = cycle.scope.setdefault("extensions", {})  # type: ignore[assignment]
            extensions[CONNECTION_LOST] = self._lost

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
