"""The HTTP client (one shared pool), per-attempt timeouts and cancellation.

``Http1Transport`` (the default) needs only the core install. ``AiohttpTransport`` and
``HttpxTransport`` are for programs that already share one of those clients; they are
imported on first use and need the ``aiohttp`` / ``httpx`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._http1 import Http1Transport
from ._limits import DEFAULT_MAX_DECODED_RATIO, DEFAULT_MAX_RESPONSE_BYTES
from ._types import HttpRequest, HttpResponse, StreamingResponse, StreamingTransport, Transport, TransportError

if TYPE_CHECKING:
    from ._aiohttp import AiohttpTransport
    from ._httpx import HttpxTransport

_LAZY = {"AiohttpTransport": "._aiohttp", "HttpxTransport": "._httpx"}  # optional clients: on first use


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DEFAULT_MAX_DECODED_RATIO",
    "DEFAULT_MAX_RESPONSE_BYTES",
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
