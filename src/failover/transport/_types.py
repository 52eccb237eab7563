"""The wire-level request and response exchanged between dialects and transports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model import dumps


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """An HTTP request a dialect built. ``headers`` may hold a credential: never log them.

    ``content``: the body's exact bytes, when they are fixed before sending (a SigV4
    signature covers them); otherwise the body is ``json`` serialized by the transport.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(repr=False)
    json: Mapping[str, Any] | None = None
    content: bytes | None = field(default=None, repr=False)

    def body_bytes(self) -> bytes:
        if self.content is not None:
            return self.content
        return b"" if self.json is None else dumps(self.json)


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpResponse:
    """A complete HTTP response. Header names are lower-case."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class TransportError(Exception):
    """Raised by a transport when no complete HTTP response arrived.

    ``phase`` is "connect" (refused, reset or DNS: the request never reached the server),
    "connect_timeout" (no connection within the connect timeout), "total" (the per-attempt
    cap fired and the connection was closed), "read" (the connection broke mid-response) or
    "too_large" (the answer went past ``max_response_bytes`` or ``max_decoded_ratio``: reading
    stopped and the connection was closed).
    """

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase


class Transport(Protocol):
    """Sends one request. Implementations must abort the HTTP exchange on cancellation.

    A transport that bounds ``send`` by ``total_timeout`` on the loop clock itself (raising
    ``TransportError("total")``) may set ``enforces_total = True``; the router then skips its
    own timer. Otherwise the router cancels ``send`` at the total timeout.
    """

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse: ...

    async def aclose(self) -> None: ...


class StreamingResponse(Protocol):
    """An HTTP response whose body arrives in chunks. Header names are lower-case."""

    status: int
    headers: Mapping[str, str]

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body chunks as they arrive (no timeouts here: the caller applies them)."""
        ...

    async def aread(self) -> bytes:
        """The rest of the body (for error statuses)."""
        ...


class StreamingTransport(Transport, Protocol):
    """A transport that can also stream a response body.

    ``stream`` returns an async context manager: entering it connects, sends the request
    and waits for the status line and headers; leaving it, however it is left (end of body,
    error, cancellation), closes the exchange at once so the provider sees the client go.
    """

    def stream(
        self, request: HttpRequest, *, connect_timeout: float
    ) -> AbstractAsyncContextManager[StreamingResponse]: ...
