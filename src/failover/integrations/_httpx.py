"""The official SDKs over failover, in-process: an httpx client whose transport is the Router.

>>> client = openai.AsyncOpenAI(api_key="unused", max_retries=0,
...                             http_client=failover.httpx_client(router, route="chat"))
>>> resp = await client.chat.completions.create(model="chat", messages=[...])

The SDK builds its HTTP request as usual; instead of going to the network it reaches
the transport made here (``_AsyncTransportBase`` / ``_SyncTransportBase`` mixed into the
httpx module's base class), which reads the body with the same validated converters the gateway
uses (``failover.inbound``), runs ``Router.complete`` / ``Router.stream`` on the route, and
answers in the SDK's own wire format: a JSON body, an SSE byte stream, or an error body with
the status that makes the SDK raise its own exception class. A fallback to a target of another
dialect needs no extra step: the Router's Response is dialect-neutral and is rendered in the
dialect of the path the SDK called.

What it intercepts: ``POST .../chat/completions`` (OpenAI) and ``POST .../v1/messages``
(Anthropic). Any other path (``/models``, ``/embeddings``, ``/v1/messages/count_tokens`` ...)
is answered 404 in the SDK's dialect naming what is supported, or handed to the ``fallthrough``
transport when one is given (a real ``httpx2.AsyncHTTPTransport`` for example).

The client is an ``httpx2`` client when ``httpx2`` is installed (the current openai and
anthropic SDKs are built on it, and anthropic refuses an ``httpx`` client), else an ``httpx``
one; ``http_module=`` picks one explicitly.

Every error answer carries ``x-should-retry: false``: the Router already retried, failed over
and fell back within the deadline, and the SDKs honour that header, so their own retries never
nest on top of ours even when ``max_retries`` was left on. ``max_retries=0`` is still the
documented setting (it also stops retries of the SDK's own timeouts); a request that arrives
as an SDK retry (``x-stainless-retry-count`` > 0) is logged once as a warning.

Sync SDK clients (``openai.OpenAI``, ``anthropic.Anthropic``) use :func:`sync_httpx_client`
over a :class:`~failover.SyncRouter`: each call runs on the SyncRouter's event loop and
blocks only the calling thread.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import importlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from ..model import Envelope, SideEffectMode
from ..router import Router, SyncRouter
from ._sdk_core import (
    LAST_RECORD,
    Core,
    Options,
    Plain,
    RecordHook,
    Streamed,
    envelope_template,
    last_record,
    status_for,
)
from ._sdk_wire import dialect_of

if TYPE_CHECKING:
    import httpx
    import httpx2

T = TypeVar("T")
HttpModule = Literal["httpx", "httpx2"]


# -- httpx / httpx2 glue ------------------------------------------------------------------------------


def _http_module(name: HttpModule | None) -> ModuleType:
    """httpx2 when installed (the current openai and anthropic SDKs use it), else httpx."""
    if name is not None:
        if name not in ("httpx", "httpx2"):
            raise ValueError(f"http_module: {name!r} is neither 'httpx' nor 'httpx2'")
        return importlib.import_module(name)
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


class _AsyncBody:
    """The response stream of an SSE answer; closing it closes the router stream and upstream."""

    def __init__(self, answer: Streamed) -> None:
        self.answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.answer.chunks:
                yield chunk
        finally:
            await self.answer.aclose()

    async def aclose(self) -> None:
        await self.answer.aclose()


class _AsyncTransportBase:
    """``handle_async_request``: the SDK's request, answered by the Router on the caller's loop."""

    def __init__(self, core: Core, mod: ModuleType, fallthrough: Any) -> None:
        self._core = core
        self._mod = mod
        self._fallthrough = fallthrough

    async def handle_async_request(self, request: Any) -> Any:
        path = request.url.path
        if self._fallthrough is not None and dialect_of(path) is None:
            return await self._fallthrough.handle_async_request(request)
        body = await request.aread()
        answer = await self._core.answer(request.method, path, request.headers, body)
        mod = self._mod
        if isinstance(answer, Plain):
            return mod.Response(answer.status, headers=answer.headers, content=answer.body, request=request)
        stream = _body_class(mod, "async")(answer)
        return mod.Response(200, headers=answer.headers, stream=stream, request=request)

    async def aclose(self) -> None:
        if self._fallthrough is not None:
            await self._fallthrough.aclose()


class _SyncBody:
    """The sync side of an SSE answer: each chunk is fetched from the router's loop thread."""

    def __init__(self, answer: Streamed, run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self.answer = answer
        self.run = run
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        chunks = self.answer.chunks
        try:
            while True:
                chunk = self.run(anext(chunks, None))
                if chunk is None:
                    return
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.run(self.answer.aclose())


class _SyncTransportBase:
    """``handle_request``: the SDK's request, answered on the SyncRouter's loop thread."""

    def __init__(self, core: Core, sync_router: SyncRouter, mod: ModuleType, fallthrough: Any) -> None:
        self._core = core
        self._sync = sync_router
        self._mod = mod
        self._fallthrough = fallthrough

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the router's loop, blocking this thread; the record set there is copied back."""

        async def in_context() -> tuple[T, contextvars.Context]:
            result = await coro
            return result, contextvars.copy_context()

        fut: concurrent.futures.Future[tuple[T, contextvars.Context]] = self._sync.submit(in_context())
        try:
            result, after = fut.result()
        except BaseException:
            fut.cancel()  # KeyboardInterrupt in the caller: stop the router call too
            raise
        record = after.get(LAST_RECORD)
        if record is not None:  # set on the loop thread by this call: show it to the calling thread
            LAST_RECORD.set(record)
        return result

    def handle_request(self, request: Any) -> Any:
        path = request.url.path
        if self._fallthrough is not None and dialect_of(path) is None:
            return self._fallthrough.handle_request(request)
        body = request.read()
        answer = self._run(self._core.answer(request.method, path, request.headers, body))
        mod = self._mod
        if isinstance(answer, Plain):
            return mod.Response(answer.status, headers=answer.headers, content=answer.body, request=request)
        stream = _body_class(mod, "sync")(answer, self._run)
        return mod.Response(200, headers=answer.headers, stream=stream, request=request)

    def close(self) -> None:
        if self._fallthrough is not None:
            self._fallthrough.close()


@cache
def _body_class(mod: ModuleType, kind: Literal["sync", "async"]) -> type[Any]:
    """Our byte stream as a subclass of the module's stream base (httpx checks it with isinstance)."""
    if kind == "async":
        return type("FailoverAsyncStream", (_AsyncBody, mod.AsyncByteStream), {})
    return type("FailoverSyncStream", (_SyncBody, mod.SyncByteStream), {})


@cache
def _transport_class(mod: ModuleType, kind: Literal["sync", "async"]) -> type[Any]:
    if kind == "async":
        return type("FailoverAsyncTransport", (_AsyncTransportBase, mod.AsyncBaseTransport), {})
    return type("FailoverTransport", (_SyncTransportBase, mod.BaseTransport), {})


# -- the public constructors ------------------------------------------------------------------------


def _client(
    router: Router,
    sync_router: SyncRouter | None,
    /,
    *,
    route: str | None = None,
    envelope: Envelope | None = None,
    deadline: float | None = None,
    max_attempts: int | None = None,
    max_cost: float | None = None,
    allow_failover: bool | None = None,
    allow_fallback: bool | None = None,
    side_effects: SideEffectMode | str | None = None,
    tenant: str | None = None,
    on_record: RecordHook | None = None,
    fallthrough: Any = None,
    max_deadline: float = 600.0,
    max_attempts_limit: int = 20,
    http_module: HttpModule | None = None,
    **client_kwargs: Any,
) -> Any:
    """The one body of :func:`httpx_client` and :func:`sync_httpx_client`.

    The public functions keep their typed overloads (the client class follows ``http_module``)
    and pass their keywords through to here, so the defaults and the checks live in one place.
    ``sync_router``: ``None`` for an ``AsyncClient`` on the caller's loop; else a sync ``Client``
    whose calls run on that SyncRouter's loop thread.
    """
    if route is not None:
        router.route(route)  # UnknownRoute now, naming the configured routes, not on the first call
    opts = Options(
        route=route,
        envelope=envelope_template(
            envelope,
            deadline=deadline,
            max_attempts=max_attempts,
            max_cost=max_cost,
            allow_failover=allow_failover,
            allow_fallback=allow_fallback,
            side_effects=side_effects,
            tenant=tenant,
        ),
        max_deadline_ms=int(max_deadline * 1000),
        max_attempts_limit=max_attempts_limit,
        on_record=on_record,
    )
    mod = _http_module(http_module)
    core = Core(router, opts)
    if sync_router is None:
        return mod.AsyncClient(transport=_transport_class(mod, "async")(core, mod, fallthrough), **client_kwargs)
    transport = _transport_class(mod, "sync")(core, sync_router, mod, fallthrough)
    return mod.Client(transport=transport, **client_kwargs)


@overload
def httpx_client(
    router: Router,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx2"] | None = ...,
    **client_kwargs: Any,
) -> httpx2.AsyncClient: ...


@overload
def httpx_client(
    router: Router,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx"],
    **client_kwargs: Any,
) -> httpx.AsyncClient: ...


def httpx_client(router: Router, **kwargs: Any) -> Any:
    """An ``AsyncClient`` for ``openai.AsyncOpenAI`` / ``anthropic.AsyncAnthropic(http_client=...)``.

    >>> client = openai.AsyncOpenAI(api_key="unused", max_retries=0,
    ...                             http_client=failover.httpx_client(router, route="chat", deadline=20))

    ``route``: the route every call takes; ``None``: the body's ``model`` must name a route.
    ``envelope`` and the keywords after it (``deadline`` in seconds, ``max_attempts`` ...) make
    the envelope each call starts from (with a new request id per call); a call may change it
    with the gateway's ``x-failover-*`` headers (``extra_headers={"x-failover-deadline-ms":
    "5000"}``), up to ``max_deadline`` seconds and ``max_attempts_limit`` attempts.
    ``on_record(record)`` is called with the RouteRecord of every call (also see
    :func:`last_record`). ``fallthrough``: an ``AsyncBaseTransport`` for paths failover does
    not serve (default: a 404 naming what is served). ``http_module``: ``"httpx2"`` (the
    default when installed; what the current SDKs use) or ``"httpx"`` (older SDKs).
    Other keywords go to the ``AsyncClient``.
    """
    return _client(router, None, **kwargs)


@overload
def sync_httpx_client(
    router: SyncRouter,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx2"] | None = ...,
    **client_kwargs: Any,
) -> httpx2.Client: ...


@overload
def sync_httpx_client(
    router: SyncRouter,
    *,
    route: str | None = ...,
    envelope: Envelope | None = ...,
    deadline: float | None = ...,
    max_attempts: int | None = ...,
    max_cost: float | None = ...,
    allow_failover: bool | None = ...,
    allow_fallback: bool | None = ...,
    side_effects: SideEffectMode | str | None = ...,
    tenant: str | None = ...,
    on_record: RecordHook | None = ...,
    fallthrough: Any = ...,
    max_deadline: float = ...,
    max_attempts_limit: int = ...,
    http_module: Literal["httpx"],
    **client_kwargs: Any,
) -> httpx.Client: ...


def sync_httpx_client(router: SyncRouter, **kwargs: Any) -> Any:
    """A sync ``Client`` for ``openai.OpenAI`` / ``anthropic.Anthropic(http_client=...)``.

    >>> with SyncRouter(lambda: Router.from_config("failover.yaml")) as router:
    ...     client = openai.OpenAI(api_key="unused", max_retries=0,
    ...                            http_client=failover.sync_httpx_client(router, route="chat"))

    The router runs on the :class:`~failover.SyncRouter`'s own loop thread (its HTTP pool
    and limiters live there); each SDK call blocks only the calling thread, and a stream is
    pulled one chunk at a time. The keywords are those of :func:`httpx_client`.
    """
    if not isinstance(router, SyncRouter):
        raise TypeError(
            f"sync_httpx_client needs a SyncRouter, not {type(router).__name__}: the sync SDK clients call "
            "from threads without an event loop. Wrap the router: SyncRouter(lambda: Router(...)); "
            "or use httpx_client() with the async SDK client"
        )
    return _client(router.router, router, **kwargs)


__all__ = ["httpx_client", "last_record", "status_for", "sync_httpx_client"]
