"""uvicorn's httptools protocol with a deadline on the request head (``limits.header_timeout_s``).

uvicorn bounds only the idle time between requests on a keep-alive connection
(``timeout_keep_alive``), and cancels even that as soon as a byte arrives. A client that
connects and sends nothing, or sends its request line and headers a byte at a time, holds a
connection (a file descriptor and a protocol object) for as long as it likes. Here the head
of every request must be complete within ``head_timeout_s`` of the connection being made (for
the first request) or of its first byte (for the next ones on a keep-alive connection);
otherwise the gateway answers 408 and closes the connection. The body has its own deadline,
enforced by the app (``limits.body_timeout_s``).

Imported only where httptools is installed (uvicorn[standard] brings it on the usual
platforms); the h11 fallback runs without this deadline.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class HeadTimeoutProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` plus a timer from the connection (or a request's first byte) to
    the end of its headers. ``head_timeout_s`` is set by ``failover serve`` from the gateway
    settings (a class attribute: uvicorn creates protocols itself, also in worker processes)."""

    head_timeout_s: ClassVar[float] = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        super().on_headers_complete()

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


__all__ = ["HeadTimeoutProtocol"]
