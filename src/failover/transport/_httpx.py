"""An alternative transport: one pooled httpx.AsyncClient shared by every attempt."""

from __future__ import annotations

import asyncio
import contextlib
import math
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from .._extras import missing

try:
    import httpx
except ModuleNotFoundError as exc:  # an extra: say which
    raise missing("HttpxTransport", exc) from exc

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


async def _on_trace(name: str, info: Mapping[str, Any]) -> None:
    """httpcore's trace hook: the request's headers start going out once a connection (new
    or pooled) is ready, which is when ``Attempt.connected`` is marked."""
    if name.endswith("send_request_headers.started"):
        mark_connected(asyncio.get_running_loop().time())


_TRACE: dict[str, Any] = {"trace": _on_trace}


class HttpxTransport:
    """Sends attempts over one shared, pooled ``httpx.AsyncClient``.

    Per attempt it sets the connect timeout, and bounds the whole exchange by the total
    timeout on the event loop's clock. When the total expires, or the caller is cancelled
    (the request's deadline), the in-flight exchange is cancelled: httpcore closes that
    connection, so the server sees it go away instead of generating for nobody.

    httpx's own read/write/pool timeouts are set to the total too: the loop-clock bound is
    the one that decides, they only stop a wedged socket from outliving it.

    Bodies are read undecoded and decoded here within ``max_response_bytes`` and
    ``max_decoded_ratio`` (as ``Http1Transport``; transport/_limits.py), so only gzip and
    deflate are asked for. ``keepalive_s`` (an owned client only) is httpx's keep-alive expiry:
    httpx closes an expired idle connection on the pool's next use, not on a timer.
    """

    enforces_total = True  # send() is bounded by asyncio.timeout(total) below

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        max_connections: int = 200,
        keepalive_s: float = 15.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_decoded_ratio: int = DEFAULT_MAX_DECODED_RATIO,
    ) -> None:
        self._own = client is None
        self._max_body, self._ratio = check_limits(max_response_bytes, max_decoded_ratio)
        self._client = client or httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections // 2,
                keepalive_expiry=keepalive_s,
            ),
            follow_redirects=False,  # a provider must not redirect our credentials elsewhere
            trust_env=False,  # base URLs come only from config, not from ambient proxies
        )

    @property
    def max_response_bytes(self) -> int:
        """The most one answer may take: a plain body, an error body, one stream event."""
        return self._max_body

    @property
    def client(self) -> httpx.AsyncClient:
        return self._client

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        if total_timeout <= 0:
            raise TransportError("total", "no time left for this attempt")
        cap = None if math.isinf(total_timeout) else total_timeout
        timeout = httpx.Timeout(cap, connect=min(connect_timeout, total_timeout))
        body = request.body_bytes()
        headers = dict(request.headers)
        if request.json is not None:
            headers.setdefault("content-type", "application/json")
        headers.setdefault("accept-encoding", _ACCEPT_ENCODING)
        req = self._client.build_request(
            request.method, request.url, content=body or None, headers=headers, timeout=timeout, extensions=_TRACE
        )
        try:
            async with asyncio.timeout(cap):
                resp = await self._client.send(req, stream=True)
                try:
                    content = await _read(resp, self._max_body, self._ratio)
                finally:
                    await resp.aclose()  # before the end of the body: httpcore closes that connection
        except TimeoutError as exc:
            raise TransportError("total", f"no complete response within {total_timeout:.3f}s") from exc
        except httpx.ConnectTimeout as exc:
            raise TransportError("connect_timeout", f"connect timed out after {connect_timeout:.3f}s") from exc
        except httpx.ConnectError as exc:
            raise TransportError("connect", f"could not connect: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise TransportError("total", f"timed out: {type(exc).__name__}") from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise TransportError("read", f"connection broke: {type(exc).__name__}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise TransportError("read", f"{type(exc).__name__}: {exc}") from exc
        return HttpResponse(
            status=resp.status_code,
            headers={k.lower(): v for k, v in resp.headers.items()},
            body=content,
        )

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[StreamingResponse]:
        """Open a streaming exchange; leaving the block closes the connection at once.

        Only the connect timeout is set here; the router bounds the wait for the headers and
        every chunk on the loop clock (first event, idle, total).
        """
        timeout = httpx.Timeout(None, connect=connect_timeout)
        headers = dict(request.headers)
        if request.json is not None:
            headers.setdefault("content-type", "application/json")
        headers.setdefault("accept", "text/event-stream")
        headers.setdefault("accept-encoding", _ACCEPT_ENCODING)
        req = self._client.build_request(
            request.method,
            request.url,
            content=request.body_bytes() or None,
            headers=headers,
            timeout=timeout,
            extensions=_TRACE,
        )
        try:
            resp = await self._client.send(req, stream=True)
        except httpx.ConnectTimeout as exc:
            raise TransportError("connect_timeout", f"connect timed out after {connect_timeout:.3f}s") from exc
        except httpx.ConnectError as exc:
            raise TransportError("connect", f"could not connect: {exc}") from exc
        except httpx.HTTPError as exc:
            raise TransportError("read", f"{type(exc).__name__}: {exc}") from exc
        try:
            yield _HttpxStream(resp, self._max_body, self._ratio)
        finally:
            await resp.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()


_ACCEPT_ENCODING = "gzip, deflate"  # what BoundedDecoder decodes (httpx would add br / zstd when installed)


def _decoder(resp: httpx.Response, cap: int | None, ratio: int) -> BoundedDecoder | None:
    enc = resp.headers.get("content-encoding")
    return None if enc is None else decoder_for(enc, cap, ratio)


async def _read(resp: httpx.Response, cap: int, ratio: int) -> bytes:
    """The whole body, decoded, at most ``cap`` bytes (raises ``TransportError("too_large")``)."""
    return await read_bounded(resp.aiter_raw(), resp.headers, cap, ratio)


class _HttpxStream:
    __slots__ = ("_decoder", "_max_body", "_ratio", "_resp", "headers", "status")

    def __init__(self, resp: httpx.Response, max_body: int, ratio: int) -> None:
        self._resp = resp
        self._max_body = max_body
        self._ratio = ratio
        self._decoder = _decoder(resp, None, ratio)
        self.status: int = resp.status_code
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in resp.headers.items()}

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        decoder = self._decoder
        try:
            async for raw in self._resp.aiter_raw():  # decoded here, within the ratio
                chunk = raw if decoder is None else decoder.feed(raw)
                if chunk:
                    yield chunk
            if decoder is not None and (tail := decoder.flush()):
                yield tail
        except zlib.error as exc:
            raise TransportError("read", f"the stream does not decode as declared: {exc}") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise TransportError("read", f"connection broke mid-stream: {type(exc).__name__}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise TransportError("read", f"{type(exc).__name__}: {exc}") from exc

    async def aread(self) -> bytes:
        try:
            return await _read(self._resp, self._max_body, self._ratio)
        except httpx.HTTPError as exc:
            raise TransportError("read", f"{type(exc).__name__}: {exc}") from exc
