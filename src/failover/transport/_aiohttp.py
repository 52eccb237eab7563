"""AiohttpTransport: one pooled aiohttp.ClientSession shared by every attempt.

The default transport before Http1Transport; kept for programs that already share an aiohttp
session."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import zlib
from collections.abc import AsyncIterator, Mapping

from .._extras import missing

try:
    import aiohttp
    from aiohttp.client_reqrep import ClientRequest
    from aiohttp.connector import Connection
    from aiohttp.tracing import Trace
    from yarl import URL  # aiohttp's own URL type
except ModuleNotFoundError as exc:  # an extra: say which
    raise missing("AiohttpTransport", exc) from exc

from ..model import mark_connected
from ._limits import (
    DEFAULT_MAX_DECODED_RATIO,
    DEFAULT_MAX_RESPONSE_BYTES,
    BoundedDecoder,
    check_limits,
    decoder_for,
    read_bounded,
)
from ._types import HttpRequest, HttpResponse, StreamingResponse, TransportError


def _headers(raw: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased names; a repeated header is joined with ", " (as httpx does)."""
    out: dict[str, str] = {}
    for k, v in raw.items():
        name = k.lower()
        out[name] = f"{out[name]}, {v}" if name in out else v
    return out


@functools.lru_cache(maxsize=256)
def _timeout(connect: float | None) -> aiohttp.ClientTimeout:
    # Only the socket connect is bounded by aiohttp (on the loop clock, never rounded up: the
    # ceil threshold is infinite); the total is bounded by asyncio.timeout in send(), and a
    # stream by the router. Waiting for a pool slot is bounded by the total, as with httpx.
    # Cached: targets have a handful of connect timeouts, and the object is immutable.
    return aiohttp.ClientTimeout(
        total=None, connect=None, sock_read=None, sock_connect=connect, ceil_threshold=math.inf
    )


class _ReportingConnector(aiohttp.TCPConnector):
    """A TCPConnector that tells the attempt when its connection is ready (``Attempt.connected``).

    ``connect`` runs once per request, in the caller's task, and returns a pooled connection
    at once or a new one after the TCP/TLS handshake; either way the moment it returns is when
    the request can go out. Overriding it costs one frame per request, where a TraceConfig
    would build trace objects and await signal handlers on every request.
    """

    async def connect(
        self,
        req: ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp's signature)
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        mark_connected(self._loop.time())
        return conn


class AiohttpTransport:
    """Sends attempts over one shared, pooled ``aiohttp.ClientSession``.

    The session (and its ``TCPConnector``) is created lazily in the running loop on first use.
    Per attempt it sets the connect timeout, and bounds the whole exchange by the total
    timeout on the event loop's clock. When the total expires, or the caller is cancelled
    (the request's deadline), the response is closed, not released: that connection is
    dropped, so the server sees it go away instead of generating for nobody.

    Bodies are read undecoded (``auto_decompress=False`` per request) and decoded here within
    ``max_response_bytes`` and ``max_decoded_ratio`` (as ``Http1Transport``;
    transport/_limits.py). ``keepalive_s`` (an owned session only) is the connector's
    keep-alive timeout: aiohttp closes idle connections on a timer after it.
    """

    enforces_total = True  # send() is bounded by asyncio.timeout(total) below

    def __init__(
        self,
        session: aiohttp.ClientSession | None = None,
        *,
        max_connections: int = 200,
        keepalive_s: float = 15.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_decoded_ratio: int = DEFAULT_MAX_DECODED_RATIO,
    ) -> None:
        self._own = session is None
        self._session = session
        self._max_connections = max_connections
        self._keepalive = keepalive_s
        self._max_body, self._ratio = check_limits(max_response_bytes, max_decoded_ratio)

    @property
    def max_response_bytes(self) -> int:
        """The most one answer may take: a plain body, an error body, one stream event."""
        return self._max_body

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=_ReportingConnector(
                    limit=max(self._max_connections, 1), limit_per_host=0, keepalive_timeout=self._keepalive
                ),
                timeout=_timeout(None),
                auto_decompress=True,
                trust_env=False,  # base URLs come only from config, not from ambient proxies
                # No cookie jar: a provider's cookies must not carry from one tenant's request
                # to another's, and matching cookies costs CPU on every request.
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        if total_timeout <= 0:
            raise TransportError("total", "no time left for this attempt")
        cap = None if math.isinf(total_timeout) else total_timeout
        timeout = _timeout(min(connect_timeout, total_timeout))
        body = request.body_bytes()
        headers = dict(request.headers)
        if request.json is not None:
            headers.setdefault("content-type", "application/json")
        headers.setdefault("accept-encoding", "gzip, deflate")  # what BoundedDecoder decodes
        session = self.session
        try:
            async with asyncio.timeout(cap):
                resp = await session.request(
                    request.method,
                    URL(request.url, encoded=True),  # as built: a SigV4 signature covers the path
                    data=body or None,
                    headers=headers,
                    timeout=timeout,
                    allow_redirects=False,  # a provider must not redirect our credentials elsewhere
                    auto_decompress=False,  # decoded below, within the limits
                )
                try:
                    content = await _read(resp, self._max_body, self._ratio)
                except BaseException:
                    resp.close()  # drop the connection (cancelled, timed out or broken): never pool it
                    raise
                resp.release()
        except aiohttp.ServerTimeoutError as exc:  # only the connect is bounded by aiohttp
            raise TransportError("connect_timeout", f"connect timed out after {connect_timeout:.3f}s") from exc
        except TimeoutError as exc:
            raise TransportError("total", f"no complete response within {total_timeout:.3f}s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise TransportError("connect", f"could not connect: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise TransportError("read", f"connection broke: {type(exc).__name__}: {exc}") from exc
        return HttpResponse(status=resp.status, headers=_headers(resp.headers), body=content)

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[StreamingResponse]:
        """Open a streaming exchange; leaving the block closes the connection at once.

        Only the connect timeout is set here; the router bounds the wait for the headers and
        every chunk on the loop clock (first event, idle, total).
        """
        headers = dict(request.headers)
        if request.json is not None:
            headers.setdefault("content-type", "application/json")
        headers.setdefault("accept-encoding", "gzip, deflate")  # what BoundedDecoder decodes
        headers.setdefault("accept", "text/event-stream")
        try:
            resp = await self.session.request(
                request.method,
                URL(request.url, encoded=True),  # as built: a SigV4 signature covers the path
                data=request.body_bytes() or None,
                headers=headers,
                timeout=_timeout(connect_timeout),
                allow_redirects=False,
                auto_decompress=False,  # decoded by the stream, within the ratio
            )
        except aiohttp.ServerTimeoutError as exc:
            raise TransportError("connect_timeout", f"connect timed out after {connect_timeout:.3f}s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise TransportError("connect", f"could not connect: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise TransportError("read", f"{type(exc).__name__}: {exc}") from exc
        stream = _AiohttpStream(resp, self._max_body, self._ratio)
        try:
            yield stream
        finally:
            if stream.done:
                resp.release()  # the body was read to its end: the connection may be reused
            else:
                resp.close()  # left early: drop the connection so the server sees us go

    async def aclose(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()
            self._session = None


def _decoder(resp: aiohttp.ClientResponse, cap: int | None, ratio: int) -> BoundedDecoder | None:
    enc = resp.headers.get("content-encoding")
    return None if enc is None else decoder_for(enc, cap, ratio)


async def _read(resp: aiohttp.ClientResponse, cap: int, ratio: int) -> bytes:
    """The whole body, decoded, at most ``cap`` bytes (raises ``TransportError("too_large")``)."""
    return await read_bounded(resp.content.iter_any(), resp.headers, cap, ratio)


class _AiohttpStream:
    __slots__ = ("_decoder", "_max_body", "_ratio", "_resp", "done", "headers", "status")

    def __init__(self, resp: aiohttp.ClientResponse, max_body: int, ratio: int) -> None:
        self._resp = resp
        self._max_body = max_body
        self._ratio = ratio
        self._decoder = _decoder(resp, None, ratio)
        self.done = False
        self.status: int = resp.status
        self.headers: Mapping[str, str] = _headers(resp.headers)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        decoder = self._decoder
        try:
            async for raw in self._resp.content.iter_any():  # decoded here, within the ratio
                chunk = raw if decoder is None else decoder.feed(raw)
                if chunk:
                    yield chunk
            if decoder is not None and (tail := decoder.flush()):
                yield tail
        except zlib.error as exc:
            raise TransportError("read", f"the stream does not decode as declared: {exc}") from None
        except aiohttp.ClientError as exc:
            raise TransportError("read", f"connection broke mid-stream: {type(exc).__name__}: {exc}") from exc
        self.done = True

    async def aread(self) -> bytes:
        try:
            body = await _read(self._resp, self._max_body, self._ratio)
        except aiohttp.ClientError as exc:
            raise TransportError("read", f"{type(exc).__name__}: {exc}") from exc
        self.done = True
        return body
