"""The HTTP client (one shared pool), per-attempt timeouts and cancellation."""

from ._aiohttp import AiohttpTransport
from ._http1 import Http1Transport
from ._httpx import HttpxTransport
from ._types import HttpRequest, HttpResponse, StreamingResponse, StreamingTransport, Transport, TransportError

__all__ = [
    "AiohttpTransport",
    "HttpRequest",
    "Http1Transport",
    "HttpResponse",
    "HttpxTransport",
    "StreamingResponse",
    "StreamingTransport",
    "Transport",
    "TransportError",
]
