"""The HTTP client (one shared pool), per-attempt timeouts and cancellation."""

from ._httpx import HttpxTransport
from ._types import HttpRequest, HttpResponse, StreamingResponse, StreamingTransport, Transport, TransportError

__all__ = [
    "HttpRequest",
    "HttpResponse",
    "HttpxTransport",
    "StreamingResponse",
    "StreamingTransport",
    "Transport",
    "TransportError",
]
