"""An in-process network to fake providers: a :class:`~failover.transport.Transport` without sockets.

:class:`FakeNetwork` hands each request to the :class:`~._provider.FakeProvider` its host names
(``<name>.fake``), so a router under test runs on virtual loop time (looptime) and thousands
of calls cost milliseconds::

    a = FakeProvider("a", "openai", ["rate_limit(retry_after=2)", "ok"])
    b = FakeProvider("b", "anthropic", Script.always("overloaded"))
    router = Router([route], transport=FakeNetwork(a, b))

It is also a :class:`~failover.transport.StreamingTransport`: ``stream()`` gives the status
and headers at once and the body event by event on the loop clock, as scripted
(``Reply.stall_after(3, 10)``, ``Reply.drop_after(2)``...).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from ..transport import HttpRequest, HttpResponse, StreamingResponse, TransportError
from ._exchange import Rendered
from ._provider import FakeProvider, _ConnectFailed, _events_in, _Reset
from ._records import Outcome, ReceivedCall, _Slot
from ._stream import Dropped, Playback

if TYPE_CHECKING:
    from ..transport import StreamingTransport

__all__ = ["FakeNetwork"]


def _split_url(url: str) -> tuple[str, str, str]:
    """(host, path, query) of an absolute http(s) URL, cheaply."""
    rest = url.partition("://")[2] or url
    authority, slash, tail = rest.partition("/")
    path, _, query = (slash + tail).partition("?")
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    else:
        host = host.partition(":")[0]
    return host.lower(), path or "/", query.partition("#")[0]


class FakeNetwork:
    """An in-process :class:`~failover.transport.Transport` to fake providers.

    >>> a, b = FakeProvider("a", "openai"), FakeProvider("b", "gemini", ["hang"])
    >>> net = FakeNetwork(a, b)
    >>> router = Router(routes, transport=net)        # targets use a.base_url, b.base_url

    Requests are routed by host (``<name>.fake``); the dialect endpoint is found from the
    END of the path, so any prefix works. ``total_timeout`` is enforced on the loop clock:
    when it fires the call is recorded ``client_disconnected`` at exactly that loop time
    and :class:`TransportError` ``("total")`` is raised. A ``reset`` reply raises
    ``TransportError("read")``, a ``connect_error`` ``TransportError("connect")`` (and an
    unknown host does too, as a DNS failure would). Cancelling the caller (a deadline)
    records ``client_disconnected`` and propagates the cancellation.

    ``send`` returns once the whole body has been delivered, on its schedule: a reply with a
    ``chunk_interval`` or a stall takes that long, and ``drop_after`` raises
    ``TransportError("read")``. :meth:`stream` hands the body over event by event instead.
    """

    enforces_total = True  # send() bounds the exchange by total_timeout on the loop clock

    def __init__(self, *providers: FakeProvider) -> None:
        self._by_host: dict[str, FakeProvider] = {}
        self._routes: dict[str, tuple[FakeProvider, str, str]] = {}
        self._log: list[_Slot] = []
        for p in providers:
            self.add(p)

    def add(self, provider: FakeProvider) -> None:
        if provider.host in self._by_host and self._by_host[provider.host] is not provider:
            raise ValueError(f"FakeNetwork already has a provider named {provider.name!r}")
        self._by_host[provider.host] = provider
        self._routes.clear()

    @property
    def providers(self) -> tuple[FakeProvider, ...]:
        return tuple(self._by_host.values())

    def __getitem__(self, name: str) -> FakeProvider:
        try:
            return self._by_host[f"{name}.fake"]
        except KeyError:
            raise KeyError(f"no fake provider {name!r} (have: {', '.join(self._names())})") from None

    @property
    def calls(self) -> list[ReceivedCall]:
        """Every call through this network, across providers, in arrival order."""
        return [s.record for s in self._log]

    def clear(self) -> None:
        """Forget the network's log and every provider's calls; restart every script."""
        self._log = []
        for p in self._by_host.values():
            p.clear()

    def _names(self) -> list[str]:
        return [p.name for p in self._by_host.values()]

    def _route(self, url: str) -> tuple[FakeProvider, str, str]:
        route = self._routes.get(url)
        if route is None:
            host, path, query = _split_url(url)
            provider = self._by_host.get(host)
            if provider is None:
                known = ", ".join(p.host for p in self._by_host.values()) or "none"
                raise TransportError("connect", f"fake network: no provider at host {host!r} (known: {known})")
            route = (provider, path, query)
            if len(self._routes) < 4096:
                self._routes[url] = route
        return route

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        provider, path, query = self._route(request.url)
        if not total_timeout > 0:
            raise TransportError("total", f"fake {provider.name}: no time left to send (total_timeout={total_timeout})")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + total_timeout if math.isfinite(total_timeout) else None
        try:
            async with asyncio.timeout_at(deadline):
                slot, rendered = await provider._respond(
                    request.method,
                    path,
                    query,
                    request.headers,
                    request.json,
                    connect_timeout=connect_timeout,
                    log=self._log,
                    wire=(request.method, request.url, request.body_bytes()),
                )
                body = rendered.body
                if rendered.timing is not None:  # the body takes time: read it all, on schedule
                    playback = Playback(slot, rendered.chunks, rendered.timing, start=loop.time())
                    body = await playback.read_all()
        except TimeoutError:
            raise TransportError(
                "total", f"fake {provider.name}: no complete response within {total_timeout:g}s"
            ) from None
        except _Reset:
            raise TransportError(
                "read", f"fake {provider.name}: server closed the connection without sending a response"
            ) from None
        except Dropped:
            raise TransportError(
                "read", f"fake {provider.name}: server closed the connection in the middle of the body"
            ) from None
        except _ConnectFailed as exc:
            raise _connect_error(provider, exc) from None
        if rendered.timing is None:
            FakeProvider._finish(slot, Outcome.COMPLETED, loop.time(), events=_events_in(rendered))
        return HttpResponse(status=rendered.status, headers=dict(rendered.headers), body=body)

    @contextlib.asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[StreamingResponse]:
        """The :class:`~failover.transport.StreamingTransport` side: open one streaming exchange.

        Entering waits for the status and headers (the reply's latency; a ``hang`` never gets
        there, so bound it with a timeout). The body is then delivered by
        ``aiter_bytes()`` on the loop clock, one event per chunk (or per ``split_bytes``
        piece): a 10 s stall costs nothing under looptime. A ``drop_after`` ends the
        iteration with ``TransportError("read")``. Leaving the block before the body ended
        records ``client_disconnected`` at that loop time, with ``events_sent`` so far. An
        answer that is not delivered over time (an error, a plain stream) is sent whole with
        the headers, as a server writes it in one go.
        """
        provider, path, query = self._route(request.url)
        loop = asyncio.get_running_loop()
        try:
            slot, rendered = await provider._respond(
                request.method,
                path,
                query,
                request.headers,
                request.json,
                connect_timeout=connect_timeout,
                log=self._log,
                wire=(request.method, request.url, request.body_bytes()),
            )
        except _Reset:
            raise TransportError(
                "read", f"fake {provider.name}: server closed the connection without sending a response"
            ) from None
        except _ConnectFailed as exc:
            raise _connect_error(provider, exc) from None
        playback: Playback | None = None
        if rendered.timing is None:
            FakeProvider._finish(slot, Outcome.COMPLETED, loop.time(), events=_events_in(rendered))
        else:
            playback = Playback(slot, rendered.chunks, rendered.timing, start=loop.time())
        try:
            yield _FakeStreamingResponse(provider.name, rendered, playback)
        finally:
            if playback is not None:
                playback.abandon(Outcome.CLIENT_DISCONNECTED)

    async def aclose(self) -> None:
        """Nothing to release; the network stays usable (a router may be re-created)."""

    def __repr__(self) -> str:
        return f"FakeNetwork({', '.join(repr(n) for n in self._names())}, calls={len(self._log)})"


def _connect_error(provider: FakeProvider, exc: _ConnectFailed) -> TransportError:
    what = f"connect timeout after {exc.after:g}s" if exc.timed_out else "connection refused"
    return TransportError("connect", f"fake {provider.name}: {what}")


class _FakeStreamingResponse:
    """One streaming answer of a FakeNetwork (a :class:`~failover.transport.StreamingResponse`)."""

    __slots__ = ("_pending", "_playback", "_provider", "headers", "status")

    def __init__(self, provider: str, rendered: Rendered, playback: Playback | None) -> None:
        self._provider = provider
        self.status: int = rendered.status
        self.headers: Mapping[str, str] = dict(rendered.headers)
        self._playback = playback
        self._pending: list[bytes] = [] if playback is not None else list(rendered.chunks or (rendered.body,))

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body chunks as they arrive; iterating again goes on where the last stopped."""
        playback = self._playback
        if playback is None:
            while self._pending:
                chunk = self._pending.pop(0)
                if chunk:
                    yield chunk
            return
        while True:
            try:
                piece = await playback.next()
            except Dropped:
                raise TransportError(
                    "read", f"fake {self._provider}: server closed the connection in the middle of the stream"
                ) from None
            if piece is None:
                return
            yield piece

    async def aread(self) -> bytes:
        """The rest of the body (waiting for it on schedule)."""
        return b"".join([piece async for piece in self.aiter_bytes()])


if TYPE_CHECKING:

    def _is_a_streaming_transport(net: FakeNetwork) -> StreamingTransport:
        return net
