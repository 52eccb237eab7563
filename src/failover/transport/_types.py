"""The wire-level request and response exchanged between dialects and transports."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """An HTTP request a dialect built. ``headers`` may hold a credential: never log them."""

    method: str
    url: str
    headers: Mapping[str, str] = field(repr=False)
    json: Mapping[str, Any] | None = None

    def body_bytes(self) -> bytes:
        return b"" if self.json is None else json.dumps(self.json, separators=(",", ":")).encode()


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
    cap fired and the connection was closed) or "read" (the connection broke mid-response).
    """

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase


class Transport(Protocol):
    """Sends one request. Implementations must abort the HTTP exchange on cancellation."""

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse: ...

    async def aclose(self) -> None: ...
