"""The OpenAI-compatible ASGI app: ``create_app(router, settings)``.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/messages`` and ``POST /v1/responses``
(plain and SSE), ``POST /v1/embeddings``, ``GET /v1/models`` (the routes),
``GET /v1/models/{route}``, ``GET /admin/health`` (admin key), ``GET /healthz``.

The chat endpoint is a plain ASGI callable rather than a Starlette request handler, so that
it can watch ``http.disconnect`` for the whole exchange: a client that goes away cancels the
router at once (the upstream HTTP request or stream is closed), for plain calls and streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import Mount
from starlette.routing import Route as HttpRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from typing_extensions import TypeVar

from ..inbound import RelayMismatch, SchemaField, WireError, check_schema_limits
from ..inbound._headers import record_headers  # shared with failover.httpx_client
from ..inbound._relay import mismatch_message
from ..inbound.openai import ChunkRenderer
from ..inbound.openai import error_body as openai_error_body
from ..inbound.openai import schema_fields as openai_schema_fields
from ..model import (
    Completed,
    Envelope,
    PartialOutput,
    Request,
    RouteRecord,
    Unavailable,
)
from ..model import Response as Answer
from ..model._ids import new_id
from ..model._json import dumps as _dumps
from ..policy import BreakerSnapshot
from ..router import Router, RouteStream
from ._body import ClientGone, heavy_json
from ._disconnect import Disconnect, Interrupted, gone_note, interruptible
from ._envelope import envelope_from, live_reasoning_from
from ._errors import ApiError, from_wire, shutting_down, unavailable_error
from ._gateway import Gateway
from ._http import answers_errors, header_map, json_response, send_json
from ._metrics import CONTENT_TYPE
from ._openai import ChatCompletionBody, completion_body, to_request
from ._openapi import openapi_schema
from ._settings import GatewaySettings, Tenant

log = logging.getLogger("failover.gateway")


def _new_completion_id() -> str:
    return new_id("chatcmpl-")


class _DialectBody(Protocol):
    """What the lifecycle reads of a parsed body, whatever its dialect."""

    @property
    def model(self) -> str: ...

    @property
    def stream(self) -> bool | None: ...


class _Answered(Protocol):
    """What the lifecycle reads of a plain answer, whatever the endpoint: its record."""

    @property
    def record(self) -> RouteRecord | None: ...


_B = TypeVar("_B", bound=_DialectBody)
_Q = TypeVar("_Q", default=Request)  # what the router is asked (a chat Request unless said)
_A = TypeVar("_A", bound=_Answered, default=Answer)  # what it answers


def _check_route(router: Router, route: str, tenant: Tenant | None) -> None:
    """404 for a ``model`` that names no route, 403 for a route the tenant may not use."""
    if route not in router.routes:
        raise ApiError(
            404,
            f"the model {route!r} does not exist: it must name a route of this gateway (GET /v1/models)",
            code="model_not_found",
            param="model",
        )
    if tenant is not None and not tenant.allows(route):
        raise ApiError(
            403,
            f"this API key may not use route {route!r}",
            type="permission_error",
            code="route_not_allowed",
            param="model",
        )


class Endpoint(Generic[_B, _Q, _A]):
    """One dialect's ``POST`` endpoint as an ASGI app: the request lifecycle every dialect
    shares (drain check, auth, body, route, envelope, quotas, in-flight registration, the
    interruptible call, error mapping, accounting), written once so the dialects cannot
    drift apart. A subclass gives only what its wire format changes: how to read the key and
    the body, how to render the answer, the stream and the errors (see the methods below).

    The chat endpoint is the hot path: each hook is one plain method call, and the answer is
    sent straight to the server (:func:`~failover.gateway._http.send_json`), not through a Starlette ``Response``."""

    path: str  # for the 405 message

    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway

    # -- what a dialect gives -------------------------------------------------------------------

    def credentials(self, headers: dict[str, str]) -> Mapping[str, str]:
        """The headers :meth:`Gateway.authenticate` reads (by default the request's own)."""
        return headers

    def parse(self, raw: bytes) -> _B:
        """The body decoded and validated; an ApiError (400 naming the field) if it is not."""
        raise NotImplementedError

    def parse_heavy(self, raw: bytes) -> _B:
        """:meth:`parse` for a body of many values, in a worker thread: its schemas' limits are
        walked there too, so an oversized one is refused before the loop spends any time on it
        (translating it, counting its tokens). Meta-validation still waits for admission."""
        body = self.parse(raw)
        try:
            check_schema_limits(self.schema_fields(body), self.gw.settings.schema_limits)
        except WireError as exc:
            problem = exc
        else:
            return body
        del body  # its hundreds of thousands of objects are freed here, not by the loop (~30 ms)
        raise from_wire(problem) from None

    def to_request(self, body: _B) -> _Q:
        """The body as the router's Request; an ApiError if it cannot be translated. Its JSON
        Schemas are not looked at here (before the tenant is admitted): :meth:`Gateway.check_schemas`
        checks their limits and compiles them once it is."""
        raise NotImplementedError

    def schema_fields(self, body: _B) -> list[SchemaField]:
        """The client JSON Schemas in ``body``, each with its field path."""
        raise NotImplementedError

    def wire(self, body: _B, route: str, envelope: Envelope) -> SseWire:
        """How this dialect writes an SSE answer for ``body``."""
        raise NotImplementedError

    def answer(
        self, resp: _A, route: str, request_id: str, record: RouteRecord | None, body: _B
    ) -> tuple[bytes, Mapping[str, str]]:
        """A plain answer's JSON body and headers (``body``: the request, for a dialect whose
        answer repeats its settings)."""
        raise NotImplementedError

    def call(self, router: Router, route: str, req: _Q, envelope: Envelope) -> Coroutine[Any, Any, _A]:
        """The router call of a plain answer: ``complete`` for a chat dialect."""
        return cast("Coroutine[Any, Any, _A]", router.complete(route, cast(Request, req), envelope))

    def error_response(
        self, err: ApiError, *, request_id: str | None = None, record: RouteRecord | None = None
    ) -> Response:
        """An ApiError in this dialect's error format."""
        raise NotImplementedError

    def status(self, err: ApiError) -> int:
        """The HTTP status this dialect answers ``err`` with (and counts it under)."""
        return err.status

    # -- the lifecycle --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gw = self.gw
        router = gw.router  # a reload swaps gw.router; this request finishes on the one it started with
        started = time.perf_counter()
        if scope["method"] != "POST":
            err = ApiError(405, f"use POST for {self.path}", code="method_not_allowed", headers={"allow": "POST"})
            await self.error_response(err)(scope, receive, send)
            return
        headers = header_map(scope)
        tenant: Tenant | None = None
        route: str | None = None
        try:
            if gw.draining:
                raise shutting_down()
            tenant = gw.authenticate(scope, self.credentials(headers))
            raw = await gw.read_body(receive, headers)
            # A body of many JSON values takes a C decoder that holds the GIL for its whole length
            # (7 MiB of small objects: ~0.3 s): it is decoded off the loop by the pure-Python
            # scanner instead, which lets every other request run between its steps.
            if heavy_json(raw):
                try:
                    body = await asyncio.to_thread(self.parse_heavy, raw)
                finally:  # once decoded: what it leaves is reclaimed a moment after the request ends
                    gw.reclaim_soon()
            else:
                body = self.parse(raw)
            route = body.model
            _check_route(router, route, tenant)
            envelope = envelope_from(
                headers,
                gw.settings.envelope,
                tenant=tenant.name if tenant is not None else None,
                recent=gw.recent_keys,
            )
            live = live_reasoning_from(headers)  # x-failover-live-reasoning: a stream's reasoning as it comes
            if envelope.client_retry:  # charged to the retry budget: counted apart from new requests
                gw.metrics.client_retries.labels(route).inc()
            req = self.to_request(body)
            quotas = gw.quotas  # last: a refused request takes nothing; shared quotas await the store
            max_cost = (
                quotas.admit(tenant, envelope.max_cost)
                if quotas.local
                else await quotas.admit_shared(tenant, envelope.max_cost)
            )
            if max_cost != envelope.max_cost:
                envelope = dataclasses.replace(envelope, max_cost=max_cost)
            # after admission (the tenant pays for the work), before any upstream call
            await gw.check_schemas(self.schema_fields(body))
        except ClientGone:
            gw.finish(
                status=499,
                route=route,
                tenant=tenant,
                request_id=None,
                record=None,
                started=started,
                note="client disconnected while sending the body",
            )
            return
        except ApiError as err:
            gw.finish(
                status=self.status(err),
                route=route,
                tenant=tenant,
                request_id=None,
                record=None,
                started=started,
                code=err.code,
            )
            await self.error_response(err)(scope, receive, send)
            return
        stop = gw.enter(router)
        try:
            if body.stream:
                wire = self.wire(body, route, envelope)
                chat = cast(Request, req)  # only chat dialects stream
                reply = _StreamReply(gw, router, route, chat, envelope, tenant, started, stop, wire, live)
                await reply(scope, receive, send)
            else:
                await self._complete(scope, receive, send, router, route, req, envelope, tenant, started, stop, body)
        finally:
            gw.leave(stop)

    async def _complete(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        router: Router,
        route: str,
        req: _Q,
        envelope: Envelope,
        tenant: Tenant | None,
        started: float,
        stop: asyncio.Future[None],
        body: _B,
    ) -> None:
        """One plain answer; a client that leaves (or the drain) cancels the upstream call."""
        gw = self.gw
        response: Response
        try:
            outcome = await interruptible(self.call(router, route, req, envelope), scope, receive, stop)
        except Unavailable as exc:
            err = unavailable_error(exc, gw.scrub)
            gw.finish(
                status=self.status(err),
                route=route,
                tenant=tenant,
                request_id=exc.request_id,
                record=exc.record,
                started=started,
                note=exc.reason.value,
                code=err.code,
            )
            response = self.error_response(err, request_id=exc.request_id, record=exc.record)
        except Exception as exc:
            log.error("internal error on route %s request %s: %s", route, envelope.request_id, type(exc).__name__)
            err = ApiError(500, f"internal gateway error (request id {envelope.request_id})", type="server_error")
            gw.finish(
                status=500,
                route=route,
                tenant=tenant,
                request_id=envelope.request_id,
                record=None,
                started=started,
                note=f"internal error {type(exc).__name__}",
            )
            response = self.error_response(err, request_id=envelope.request_id)
        else:
            if isinstance(outcome, Interrupted):  # the client left or the drain cut us: upstream cancelled
                cut = outcome.reason == "drain"
                gw.finish(
                    status=503 if cut else 499,
                    route=route,
                    tenant=tenant,
                    request_id=envelope.request_id,
                    record=None,
                    started=started,
                    code="shutting_down" if cut else None,
                    note="cut by shutdown drain; upstream cancelled"
                    if cut
                    else "client disconnected; upstream cancelled",
                )
                if outcome.outer is not None:
                    raise outcome.outer
                if not cut:
                    return
                response = self.error_response(shutting_down(), request_id=envelope.request_id)
            else:
                record = outcome.record
                request_id = record.request_id if record is not None else envelope.request_id
                out, out_headers = self.answer(outcome, route, request_id, record, body)
                try:
                    await send_json(send, 200, out, out_headers)
                finally:  # the access line, metrics and the tenant's charge after the answer left, not before
                    gw.finish(
                        status=200, route=route, tenant=tenant, request_id=request_id, record=record, started=started
                    )
                return
        await response(scope, receive, send)


class ChatCompletions(Endpoint[ChatCompletionBody]):
    """``POST /v1/chat/completions``: the OpenAI dialect of :class:`Endpoint`."""

    path = "/v1/chat/completions"

    def parse(self, raw: bytes) -> ChatCompletionBody:
        return self.gw.chat_body(raw)

    def to_request(self, body: ChatCompletionBody) -> Request:
        return to_request(body, limits=self.gw.settings.schema_limits)

    def schema_fields(self, body: ChatCompletionBody) -> list[SchemaField]:
        return openai_schema_fields(body)

    def wire(self, body: ChatCompletionBody, route: str, envelope: Envelope) -> SseWire:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        renderer = ChunkRenderer(
            _new_completion_id(), int(time.time()), route, include_usage, request_id=envelope.request_id
        )
        return _ChatWire(self.gw, renderer)

    def answer(
        self, resp: Answer, route: str, request_id: str, record: RouteRecord | None, body: ChatCompletionBody
    ) -> tuple[bytes, Mapping[str, str]]:
        out = completion_body(resp, completion_id=_new_completion_id(), created=int(time.time()), model=route)
        return _dumps(out), record_headers(request_id, record)

    def error_response(
        self, err: ApiError, *, request_id: str | None = None, record: RouteRecord | None = None
    ) -> Response:
        return self.gw.error_response(err, request_id=request_id, record=record)


class SseWire(Protocol):
    """What one dialect writes on an SSE answer: bytes for the start, each stream event, the
    end, a failure after the first byte (``partial`` for a cut answer, ``failure`` for anything
    else), and its error answer before the first byte."""

    headers: Mapping[str, str]  # extra response headers for the stream

    def start(self) -> bytes: ...

    def render(self, event: object) -> bytes: ...

    def end(self, done: Completed) -> bytes: ...

    def failure(self, code: str, message: str) -> bytes: ...

    def partial(self, event: PartialOutput, message: str) -> bytes: ...

    def error_response(
        self, err: ApiError, *, request_id: str | None = None, record: RouteRecord | None = None
    ) -> Response: ...


def _sse_data(chunks: list[dict[str, Any]]) -> bytes:
    if len(chunks) == 1:  # the common case: one chunk per event
        return b"data: " + _dumps(chunks[0]) + b"\n\n"
    return b"".join(b"data: " + _dumps(c) + b"\n\n" for c in chunks)


class _ChatWire:
    """``chat.completion.chunk`` events (:class:`~failover.inbound.openai.ChunkRenderer`), then
    ``data: [DONE]``; a failure after the first byte is one ``data: {"error": ...}`` event."""

    headers: Mapping[str, str] = {}

    def __init__(self, gw: Gateway, renderer: ChunkRenderer) -> None:
        self.gw = gw
        self.renderer = renderer

    def start(self) -> bytes:
        return _sse_data(self.renderer.start())

    def render(self, event: object) -> bytes:
        return _sse_data(self.renderer.render(event))

    def end(self, done: Completed) -> bytes:
        return _sse_data(self.renderer.end(done)) + b"data: [DONE]\n\n"

    def failure(self, code: str, message: str) -> bytes:
        return _sse_data([openai_error_body(500, message, type="server_error", code=code)])

    def partial(self, event: PartialOutput, message: str) -> bytes:
        return self.failure("partial_output", message)

    def error_response(
        self, err: ApiError, *, request_id: str | None = None, record: RouteRecord | None = None
    ) -> Response:
        return self.gw.error_response(err, request_id=request_id, record=record)


class _StreamReply:
    """One SSE answer fed by ``Router.stream``, in the format of its :class:`SseWire`.

    Nothing is sent until the router passes its commit point (the first content event): a
    failure before it is an ordinary error response with its status. After it, a failure ends
    the stream with one error event, never a splice. A client disconnect at any moment closes
    the RouteStream, which closes the upstream stream at once.
    """

    def __init__(
        self,
        gw: Gateway,
        router: Router,
        route: str,
        request: Request,
        envelope: Envelope,
        tenant: Tenant | None,
        started: float,
        stop: asyncio.Future[None],
        wire: SseWire,
        live_reasoning: bool = False,
    ) -> None:
        self.gw = gw
        self.live_reasoning = live_reasoning
        self.router = router
        self.stop = stop
        self.route = route
        self.request = request
        self.envelope = envelope
        self.tenant = tenant
        self.started = started
        self.sent_headers = False
        self.wire = wire
        self.gone: asyncio.Future[None] | None = None  # resolves when the client is gone

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the client has every delta already: the router need not keep the text for PartialOutput
        rs = self.router.stream(
            self.route, self.request, self.envelope, keep_text=False, live_reasoning=self.live_reasoning
        )
        await rs.__aenter__()
        gone = Disconnect(scope, receive)
        watch = self.gone = gone.future
        pump = asyncio.ensure_future(self._pump(rs, scope, receive, send))
        try:
            waiters: set[asyncio.Future[Any]] = {pump, watch, self.stop}
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.close()
            left = not pump.done()
            cut = left and self.stop.done() and not watch.done()
            if left:
                pump.cancel()
            await rs.aclose()  # closes the upstream stream now, whatever state it is in
            with contextlib.suppress(asyncio.CancelledError, OSError):  # OSError: a send to a closed socket
                await pump
            await gone.aclose()
            if cut:
                await self._cut(scope, receive, send)
            elif left:
                self.gw.finish(
                    status=499,
                    route=self.route,
                    tenant=self.tenant,
                    request_id=self.envelope.request_id,
                    record=rs.record,  # outcome "cancelled": the stream was cut when the client left
                    started=self.started,
                    stream=True,
                    note=gone_note(scope),
                )

    async def _cut(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The drain timed out on this stream: end it cleanly (an error event, or a 503 before any byte)."""
        gw = self.gw
        gw.finish(
            status=503,
            route=self.route,
            tenant=self.tenant,
            request_id=self.envelope.request_id,
            record=None,
            started=self.started,
            stream=True,
            code="shutting_down",
            note="cut by shutdown drain; upstream stream closed",
        )
        with contextlib.suppress(OSError, RuntimeError):
            if self.sent_headers:
                event = self.wire.failure(
                    "shutting_down",
                    f"the gateway shut down before the stream ended (request id {self.envelope.request_id})",
                )
                await send({"type": "http.response.body", "body": event, "more_body": False})
            else:
                response = self.wire.error_response(shutting_down(), request_id=self.envelope.request_id)
                await response(scope, receive, send)

    async def _start(self, send: Send) -> None:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
            **record_headers(self.envelope.request_id, None),
            "x-failover-route": self.route,
            **self.wire.headers,
        }
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        self.sent_headers = True

    async def _pump(self, rs: RouteStream, scope: Scope, receive: Receive, send: Send) -> None:
        gw = self.gw
        events: AsyncIterator[object] = aiter(rs)
        try:
            first = await anext(events)
        except StopAsyncIteration:
            first = None
        except Unavailable as exc:
            err = unavailable_error(exc, gw.scrub)
            response = self.wire.error_response(err, request_id=exc.request_id, record=exc.record)
            gw.finish(
                status=response.status_code,  # the wire's: Anthropic's overload is 529
                route=self.route,
                tenant=self.tenant,
                request_id=exc.request_id,
                record=exc.record,
                started=self.started,
                stream=True,
                note=exc.reason.value,
                code=err.code,
            )
            await response(scope, receive, send)
            return
        except Exception as exc:
            log.error("internal error on stream %s: %s", self.envelope.request_id, type(exc).__name__)
            err = ApiError(500, f"internal gateway error (request id {self.envelope.request_id})", type="server_error")
            gw.finish(
                status=500,
                route=self.route,
                tenant=self.tenant,
                request_id=self.envelope.request_id,
                record=None,
                started=self.started,
                stream=True,
                note=f"internal error {type(exc).__name__}",
            )
            await self.wire.error_response(err, request_id=self.envelope.request_id)(scope, receive, send)
            return
        await self._start(send)
        wire = self.wire
        body = wire.start()
        status_note = ""
        record: RouteRecord | None = None
        try:
            event: object = first
            while event is not None:
                if isinstance(event, Completed):
                    record = event.response.record
                    body += wire.end(event)
                    break
                if isinstance(event, PartialOutput):
                    record = event.record
                    status_note = f"partial_output after output began: {event.failure.label}"
                    body += wire.partial(
                        event,
                        f"partial_output: the stream was cut after output began ({event.failure.label}); "
                        f"nothing was spliced on (request id {self.envelope.request_id})",
                    )
                    break
                body += wire.render(event)
                if body:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    body = b""
                event = await anext(events, None)
        except Unavailable as exc:  # not expected after the commit point; still never a splice
            record = exc.record
            status_note = exc.reason.value
            body += wire.failure(exc.reason.value, gw.scrub(f"{exc.reason.value}: {exc.message}"))
        except RelayMismatch as exc:  # a dialect's answer changed under what was sent: say so, never hide it
            status_note = f"stream_mismatch: {exc}"
            log.error("stream %s: %s", self.envelope.request_id, status_note)
            body += wire.failure("stream_mismatch", mismatch_message(exc, self.envelope.request_id))
        except Exception as exc:
            status_note = f"internal error {type(exc).__name__}"
            log.error("internal error on stream %s: %s", self.envelope.request_id, type(exc).__name__)
            body += wire.failure("internal_error", f"internal gateway error (request id {self.envelope.request_id})")
        await send({"type": "http.response.body", "body": body, "more_body": False})
        status = 200
        gone = self.gone
        if gone is not None and gone.done():  # the sends since the client left went nowhere
            status, status_note = 499, gone_note(scope)
        gw.finish(
            status=status,
            route=self.route,
            tenant=self.tenant,
            request_id=self.envelope.request_id,
            record=record,
            started=self.started,
            stream=True,
            note=status_note,
        )


Reloader = Callable[[], tuple[Router, GatewaySettings]]


class GatewayApp(Starlette):
    """Starlette, with the hot endpoints dispatched before its middleware stack and router.

    Every route registered as a raw ASGI app on a fixed path (``/v1/chat/completions``, and
    the same way any other inbound format such as ``/v1/messages``) is called directly when
    the method matches: Starlette's error and exception middleware, its router's path
    matching and its per-request ``Request`` objects cost about a tenth of the gateway's CPU
    per request. These endpoints answer their own errors (JSON bodies), so nothing is lost;
    an exception that escapes still reaches the server, which logs it and answers 500.
    Everything else (and every route, when CORS middleware is configured) goes through
    Starlette as usual.
    """

    def __init__(self, *, fast_dispatch: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fast_routes: dict[str, tuple[ASGIApp, frozenset[str]]] = {}
        if not fast_dispatch:
            return
        for r in self.routes:
            if isinstance(r, HttpRoute) and not r.param_convertors and r.app is r.endpoint and r.methods:
                self.fast_routes[r.path] = (r.app, frozenset(r.methods))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            hit = self.fast_routes.get(scope["path"])
            if hit is not None and scope["method"] in hit[1]:
                scope["app"] = self
                await hit[0](scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _reload_on_sighup(gw: Gateway, reload: Reloader) -> None:
    """On SIGHUP: build a new router and settings (in a thread: it reads files) and swap them
    in. A configuration error keeps the old one serving and is logged."""
    loop = asyncio.get_running_loop()

    async def run() -> None:
        try:
            router, settings = await asyncio.to_thread(reload)
        except Exception as exc:
            log.error("reload failed, still serving the previous configuration: %s", gw.scrub(str(exc)))
            return
        gw.swap(router, settings)
        log.info("configuration reloaded: %d route(s), %d tenant(s)", len(router.routes), len(settings.tenants))

    def handle() -> None:
        gw._reload_task = loop.create_task(run())

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, AttributeError):
        loop.add_signal_handler(signal.SIGHUP, handle)


def _drain_on_signals(gw: Gateway) -> None:
    """On SIGTERM / SIGINT: drain first (readyz 503, new requests 503, in-flight ones finish or
    are cut after ``drain_seconds``), then hand the signal to the server's own handler (uvicorn
    then closes its sockets and exits). A second signal skips the wait."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def handle(sig: signal.Signals = sig, previous: Callable[[int, Any], Any] = previous) -> None:
            async def drain_then_exit() -> None:
                try:
                    await gw.drain(gw.settings.drain_seconds)
                finally:
                    previous(sig, None)

            if gw.draining:
                previous(sig, None)
            else:
                gw._drain_task = loop.create_task(drain_then_exit())

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, handle)


def _breaker_entry(snap: BreakerSnapshot, now: float) -> dict[str, Any]:
    """A breaker for /admin/health: ``retry_at`` as a UTC wall-clock time (the snapshot's is
    the event loop's clock, which means nothing outside the process), ``retry_in_s`` as seconds
    from now."""
    entry = dataclasses.asdict(snap)
    if snap.retry_at is None:
        entry["retry_in_s"] = None
        return entry
    left = max(0.0, snap.retry_at - now)
    entry["retry_in_s"] = round(left, 3)
    when = datetime.fromtimestamp(time.time() + left, UTC)
    entry["retry_at"] = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return entry


def _lab_app(gw: Gateway) -> ASGIApp:
    from ..lab._seed import LabPolicies
    from ..lab._web import lab_app  # imported only when the lab is switched on

    # the simulator runs with the served config's policies (a fresh budget with its parameters)
    policies = LabPolicies.of(gw.router.backoff, gw.router.retry_budget, "this gateway's config")
    keep = gw.settings.lab_live_keep
    if keep is None:
        return lab_app(policies=policies)
    from ..lab._live import LiveRecords
    from ..lab._web import LiveView

    def candidates(route: str) -> list[str]:
        r = gw.router.routes.get(route)
        return [t.name for t in r.targets] if r is not None else []

    records = LiveRecords(keep, scrub=lambda text: gw.scrub(text), candidates=candidates)
    gw.records = records

    async def authorize(request: HttpRequest) -> Response | None:
        try:
            gw.authenticate_admin(request.scope, request.headers)
        except ApiError as err:
            return json_response(err.status, err.body(), err.headers)
        return None

    return lab_app(
        policies=policies,
        live=LiveView(
            records=records,
            authorize=authorize,
            routes=lambda: list(gw.router.routes),
            closing=lambda: gw.draining,
        ),
    )


def create_app(
    router: Router,
    settings: GatewaySettings | None = None,
    *,
    close_router: bool = False,
    drain_on_signals: bool = False,
    reload: Reloader | None = None,
) -> Starlette:
    """The gateway as an ASGI app. ``close_router``: ``aclose()`` the router at shutdown.
    ``drain_on_signals`` (``failover serve`` sets it): SIGTERM / SIGINT drain in-flight
    requests before the server's own shutdown begins. ``reload``: on SIGHUP, call it (in a
    thread) for a new router and settings and swap them in without dropping requests."""
    gw = Gateway(router, settings or GatewaySettings())
    s = gw.settings
    if s.open:
        log.warning(
            "gateway is OPEN: no tenants are configured, so no API key is checked; it answers loopback clients only"
        )

    def listing(request: HttpRequest) -> tuple[Tenant | None, bool]:
        """The caller's tenant, and whether it speaks Anthropic (its SDK always sends
        ``anthropic-version`` and may send its key as ``x-api-key``)."""
        headers = request.headers
        anthropic_client = "anthropic-version" in headers
        key = headers.get("x-api-key") if anthropic_client else None
        creds: Mapping[str, str] = {"authorization": f"Bearer {key.strip()}"} if key else headers
        return gw.authenticate(request.scope, creds), anthropic_client

    def model_entry(name: str, anthropic_client: bool) -> dict[str, Any]:
        if not anthropic_client:
            return {"id": name, "object": "model", "created": gw.started, "owned_by": "failover"}
        route = gw.router.routes[name]
        entry: dict[str, Any] = {
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": datetime.fromtimestamp(gw.started, UTC).isoformat().replace("+00:00", "Z"),
            "lifecycle": "active",
        }
        if route.primary:  # what the route's first target takes and gives
            entry["max_input_tokens"] = route.primary[0].context_window
            entry["max_tokens"] = route.primary[0].max_output_tokens
        return entry

    @answers_errors
    async def models(request: HttpRequest) -> Response:
        tenant, anthropic_client = listing(request)
        names = [name for name in gw.router.routes if tenant is None or tenant.allows(name)]
        data = [model_entry(name, anthropic_client) for name in names]
        if anthropic_client:  # Anthropic's page: one page with everything
            page = {"data": data, "has_more": False, "first_id": names[0] if names else None}
            return json_response(200, {**page, "last_id": names[-1] if names else None})
        return json_response(200, {"object": "list", "data": data})

    @answers_errors
    async def model(request: HttpRequest) -> Response:
        tenant, anthropic_client = listing(request)
        name = request.path_params["name"]
        if name not in gw.router.routes or (tenant is not None and not tenant.allows(name)):
            raise ApiError(404, f"the model {name!r} does not exist", code="model_not_found", param="model")
        return json_response(200, model_entry(name, anthropic_client))

    @answers_errors
    async def admin_health(request: HttpRequest) -> Response:
        gw.authenticate_admin(request.scope, request.headers)
        now = asyncio.get_running_loop().time()
        breakers = [_breaker_entry(b, now) for b in gw.router.breakers.snapshots(now)]
        limiters: dict[str, Any] = {}
        if gw.router.limiters is not None:
            # with a `state:` store, the fleet's buckets (each snapshot's `view` says whose)
            for snap in (await gw.router.limiters.shared_snapshot(now)).values():
                limiters[snap.name] = dataclasses.asdict(snap)
        body = {
            "status": "ok",
            "open": s.open,
            "routes": {
                name: {"primary": [t.name for t in r.primary], "fallbacks": [t.name for t in r.fallbacks]}
                for name, r in gw.router.routes.items()
            },
            "breakers": breakers,
            "limiters": limiters,
            "tenants": gw.quotas.snapshot() if gw.quotas.local else await gw.quotas.shared_snapshot(),
            "in_flight": len(gw.in_flight),
            "draining": gw.draining,
        }
        return json_response(200, body)

    async def healthz(request: HttpRequest) -> Response:
        return json_response(200, {"status": "ok"})

    async def readyz(request: HttpRequest) -> Response:
        if gw.draining:
            return json_response(503, {"status": "draining"}, {"retry-after": "1"})
        return json_response(200, {"status": "ready"})

    schema = _dumps(openapi_schema(metrics=s.metrics_enabled))

    async def openapi(request: HttpRequest) -> Response:
        return Response(schema, status_code=200, media_type="application/json")

    @answers_errors
    async def metrics(request: HttpRequest) -> Response:
        if s.metrics_require_admin_key:
            gw.authenticate_admin(request.scope, request.headers)
        return Response(gw.metrics.render(), status_code=200, media_type=CONTENT_TYPE)

    async def http_error(request: HttpRequest, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
        message = f"{request.method} {request.url.path}: " + (
            exc.detail if isinstance(exc, HTTPException) else "internal gateway error"
        )
        err = ApiError(status, message, code=code)
        headers = dict(err.headers)
        if isinstance(exc, HTTPException) and exc.headers:  # a 405's Allow
            headers.update(exc.headers)
        return json_response(status, err.body(), headers)

    middleware = []
    if s.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(s.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=list(s.cors_headers),
                expose_headers=["x-request-id", "x-failover-request-id", "x-failover-target", "x-failover-attempts"],
            )
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gw.draining = False  # a (re)started server serves again
        if drain_on_signals:
            _drain_on_signals(gw)
        if reload is not None:
            _reload_on_sighup(gw, reload)
        try:
            yield
            await gw.drain(s.drain_seconds)  # a no-op when the server already drained (failover serve)
        finally:
            if close_router:
                await gw.router.aclose()

    from ._embeddings import EmbeddingsEndpoint  # here, not at the top: they build on this module
    from ._messages import Messages, count_tokens
    from ._responses import Responses, stored_response

    app = GatewayApp(
        fast_dispatch=not middleware,  # CORS must see every request
        routes=[
            HttpRoute("/v1/chat/completions", ChatCompletions(gw), methods=["POST"]),
            HttpRoute("/v1/messages", Messages(gw), methods=["POST"]),
            HttpRoute("/v1/messages/count_tokens", count_tokens(gw), methods=["POST"]),
            HttpRoute("/v1/responses", Responses(gw), methods=["POST"]),
            HttpRoute("/v1/responses/{id:path}", stored_response(gw), methods=["GET", "POST", "DELETE"]),
            HttpRoute("/v1/embeddings", EmbeddingsEndpoint(gw), methods=["POST"]),
            HttpRoute("/v1/models", models, methods=["GET"]),
            HttpRoute("/v1/models/{name:path}", model, methods=["GET"]),
            HttpRoute("/admin/health", admin_health, methods=["GET"]),
            HttpRoute("/healthz", healthz, methods=["GET"]),
            HttpRoute("/readyz", readyz, methods=["GET"]),
            HttpRoute("/openapi.json", openapi, methods=["GET"]),
            *([HttpRoute("/metrics", metrics, methods=["GET"])] if s.metrics_enabled else []),
            *([Mount("/lab", app=_lab_app(gw))] if s.lab_enabled else []),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    # No redirect from /path/ to /path: Starlette would build it from the Host header (any
    # host a client names); a path with a trailing slash is a 404 like any unknown path.
    app.router.redirect_slashes = False
    app.state.gateway = gw
    return app


__all__ = ["ChatCompletions", "Endpoint", "Gateway", "GatewayApp", "create_app", "record_headers"]
