"""The request lifecycle every dialect's ``POST`` endpoint shares (:class:`Endpoint`).

The endpoint is a plain ASGI callable rather than a Starlette request handler, so that it can
watch ``http.disconnect`` for the whole exchange: a client that goes away cancels the router at
once (the upstream HTTP request or stream is closed), for plain calls and streams.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Generic, Protocol, cast

from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from typing_extensions import TypeVar

from ..inbound import (
    CHAT,
    SchemaField,
    Shape,
    WireError,
    check_schema_limits,
    live_reasoning,
    unavailable,
    with_affinity,
)
from ..model import Envelope, Request, RouteRecord, Unavailable
from ..model import Response as Answer
from ..router import Router, Vetted
from ._auth import authenticate
from ._body import HEAVY_JSON_BYTES, ClientGone, decode_json, read_body
from ._disconnect import Interrupted, interruptible
from ._envelope import caller_of, envelope_from, unmarked
from ._errors import ApiError, error_response, shutting_down
from ._exchange import Exchange
from ._gateway import Gateway
from ._http import header_map, send_json
from ._logs import internal_error
from ._settings import Tenant
from ._sizes import check_counts, vet
from ._stream_reply import SseWire, StreamReply

log = logging.getLogger("failover.gateway")


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


_DIALECT_NAMES = {
    "anthropic": "an Anthropic",
    "openai": "an OpenAI Chat Completions",
    "openai-responses": "an OpenAI Responses",
}


def honourable(router: Router, route_name: str, req: Request) -> None:
    """A 400 naming the field when the request carries one only a target of its own dialect can
    honour (``Passthrough.opaque``) and the route has none that takes it (the router leaves out
    each target of another dialect or with ``passthrough: false``, saying why; see
    :class:`~failover.model.Passthrough`)."""
    passed = req.passthrough
    if passed is None or not passed.opaque:
        return
    route = router.routes.get(route_name)
    if route is None or any(passed.receives(t.dialect, takes=t.passthrough) for t in route.targets):
        return
    names = sorted(passed.opaque)
    which = _DIALECT_NAMES.get(passed.dialect, f"a {passed.dialect}")
    # its targets of that dialect, if any, declare they take no pass-through fields
    none = "none that takes pass-through fields" if any(t.dialect == passed.dialect for t in route.targets) else "none"
    raise ApiError(
        400,
        f"{', '.join(names)}: failover passes this field only to {which} target, and route "
        f"{route_name!r} has {none}; remove it, or use a route with {which} model",
        code="unsupported_parameter",
        param=names[0],
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
    shape: Shape = CHAT  # how its client is told of a failure (see inbound._failures)
    raw_reasoning: str | None = None  # the reasoning format handed to this dialect's client raw (see inbound._origins)

    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway

    # -- what a dialect gives -------------------------------------------------------------------

    def credentials(self, headers: dict[str, str]) -> Mapping[str, str]:
        """The headers :func:`~failover.gateway._auth.authenticate` reads (by default the request's own)."""
        return headers

    def parse(self, raw: bytes) -> _B:
        """The body decoded and validated; a WireError (400 naming the field) if it is not."""
        return self.from_json(decode_json(raw, self.gw.settings.max_json_depth))

    def from_json(self, data: Any) -> _B:
        """The decoded body validated; a WireError (400 naming the field) if it is not."""
        raise NotImplementedError

    def parse_heavy(self, raw: bytes) -> _B:
        """:meth:`parse` for a large body, in a worker thread: its counts
        (:meth:`check_counts`, on the decoded JSON, before it is validated) and its schemas'
        limits are checked there too, so an oversized one is refused before the loop spends any
        time on it (translating it, counting its tokens). Meta-validation still waits for admission."""
        data = decode_json(raw, self.gw.settings.max_json_depth)  # the pure-Python scanner for a body of many values
        try:
            self.check_counts(data)
        except ApiError:
            del data  # as below: freed here, not by the loop
            raise
        body = self.from_json(data)
        del data
        try:
            check_schema_limits(self.schema_fields(body), self.gw.settings.schema_limits)
        except WireError as exc:
            problem = exc
        else:
            return body
        del body  # its hundreds of thousands of objects are freed here, not by the loop (~30 ms)
        raise problem from None

    def check_counts(self, body: Any) -> None:
        """A 400 when ``body`` (the decoded JSON, or the parsed body) holds more tools, messages
        or content blocks than ``gateway.limits`` allow (see :mod:`~failover.gateway._sizes`);
        before any work on them."""
        check_counts(self.gw.settings, body)

    def heavy_answer(self, resp: _A) -> bool:
        """Whether writing ``resp`` as JSON takes long enough to be done in a worker thread (by
        default never: a chat answer is bounded by its max_tokens)."""
        del resp
        return False

    def to_request(self, body: _B) -> _Q:
        """The body as the router's Request; a WireError if it cannot be translated. Its JSON
        Schemas are not looked at here (before the tenant is admitted): :meth:`Gateway.check_schemas`
        checks their limits and compiles them once it is."""
        raise NotImplementedError

    def request_for(self, body: _B, headers: Mapping[str, str]) -> _Q:
        """:meth:`to_request` for a dialect that also reads request headers (lower-case names)."""
        del headers
        return self.to_request(body)

    def schema_fields(self, body: _B) -> list[SchemaField]:
        """The client JSON Schemas in ``body``, each with its field path."""
        raise NotImplementedError

    def wire(self, body: _B, route: str, envelope: Envelope) -> SseWire:
        """How this dialect writes an SSE answer for ``body``."""
        raise NotImplementedError

    def answer(
        self, resp: _A, route: str, request_id: str, record: RouteRecord | None, body: _B
    ) -> tuple[bytes | Sequence[bytes], Mapping[str, str]]:
        """A plain answer's JSON body and headers (``body``: the request, for a dialect whose
        answer repeats its settings)."""
        raise NotImplementedError

    def call(self, router: Router, route: str, req: _Q, envelope: Envelope) -> Coroutine[Any, Any, _A]:
        """The router call of a plain answer: ``complete`` for a chat dialect."""
        return cast("Coroutine[Any, Any, _A]", router.complete(route, cast(Request, req), envelope))

    # -- the lifecycle --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gw = self.gw
        # a reload swaps gw.router; this request finishes on the one it started with
        ex = Exchange(gw.router, time.perf_counter())
        router = ex.router
        if scope["method"] != "POST":
            err = ApiError(405, f"use POST for {self.path}", code="method_not_allowed", headers={"allow": "POST"})
            await error_response(err, self.shape)(scope, receive, send)
            return
        headers = header_map(scope)
        try:
            if gw.draining:
                raise shutting_down()
            ex.tenant = tenant = authenticate(gw.settings, scope, self.credentials(headers))
            raw = await read_body(gw.settings, receive, headers, scope)
            # A body over 64 KiB is decoded, counted and validated in a worker thread: even its
            # scans (for many values, surrogates, numbers no float holds) took ~45 ms of the loop
            # for 8 MiB. One of many JSON values takes the pure-Python scanner there (a C decoder
            # holds the GIL for its whole length: 7 MiB of small objects, ~0.3 s).
            big = len(raw) > HEAVY_JSON_BYTES
            if big:
                try:
                    body = await asyncio.to_thread(self.parse_heavy, raw)
                finally:  # once decoded: what it leaves is reclaimed a moment after the request ends
                    gw.reclaim_soon()
            else:
                body = self.parse(raw)
                self.check_counts(body)
            # ... and translated, checked and counted once, in a worker thread (see _sizes)
            ex.route = route = body.model
            _check_route(router, route, tenant)
            tenant_name = tenant.name if tenant is not None else None
            # a client with no Idempotency-Key of its own: a repeat of a body that failed is its retry
            caller = caller_of(headers)
            digest = (
                await asyncio.to_thread(gw.recent.digest, tenant_name, self.path, raw, caller)
                if big
                else gw.recent.digest(tenant_name, self.path, raw, caller)
            )
            repeat = unmarked(headers) and gw.recent.failed_before(digest)
            envelope = envelope_from(headers, gw.settings.envelope, tenant=tenant_name, recent=gw.recent, repeat=repeat)
            live = live_reasoning(headers)  # x-failover-live-reasoning: a stream's reasoning as it comes
            if envelope.client_retry:  # charged to the retry budget: counted apart from new requests
                gw.metrics.client_retries.labels(route).inc()
            asked = await asyncio.to_thread(self.request_for, body, headers) if big else self.request_for(body, headers)
            req = gw.origins.known(asked)  # raw reasoning we handed out: its origin
            envelope = with_affinity(envelope, headers, req)  # x-failover-session, else the body's own key
            quotas = gw.quotas  # last: a refused request takes nothing; shared quotas await the store
            max_cost = (
                quotas.admit(tenant, envelope.max_cost)
                if quotas.local
                else await quotas.admit_shared(tenant, envelope.max_cost)
            )
            if max_cost != envelope.max_cost:
                envelope = dataclasses.replace(envelope, max_cost=max_cost)
            # after admission (the tenant pays for the work), before any upstream call
            vetted: Vetted | None = None
            if isinstance(req, Request):
                vetted = await vet(
                    router.routes.get(route) if big else None,
                    req,
                    self.schema_fields(body),
                    gw.settings.schema_limits,
                    big=big,
                )
            else:
                await gw.check_schemas(self.schema_fields(body))
        except ClientGone:
            gw.finish(ex, 499, note="client disconnected while sending the body")
            return
        except WireError as err:  # a refusal (an ApiError is one): the one place it is answered
            response = error_response(err, self.shape)
            gw.finish(ex, response.status_code, code=err.code)
            await response(scope, receive, send)
            return
        ex.envelope, ex.request_id = envelope, envelope.request_id
        ex.stop = stop = gw.enter(router)
        gw.recent.started(envelope.request_id, digest, envelope.budget, retry=repeat)  # gw.finish: how it ended
        try:
            if body.stream:
                ex.stream = True
                wire = self.wire(body, route, envelope)
                reply = StreamReply(gw, ex, cast(Request, req), wire, live)  # only chat dialects stream
                reply.raw_reasoning = self.raw_reasoning
                reply.vetted = vetted
                await reply(scope, receive, send)
            else:
                await self._complete(ex, scope, receive, send, req, body, vetted)
        finally:
            gw.leave(stop)

    async def _complete(
        self, ex: Exchange, scope: Scope, receive: Receive, send: Send, req: _Q, body: _B, vetted: Vetted | None
    ) -> None:
        """One plain answer; a client that leaves (or the drain) cancels the upstream call."""
        gw, router = self.gw, ex.router
        route, envelope, stop = ex.admitted()
        response: Response
        if vetted is not None:  # a chat request the gateway checked: the router need not again
            call = cast("Coroutine[Any, Any, _A]", router.complete(route, vetted.request, envelope, vetted=vetted))
        else:
            call = self.call(router, route, req, envelope)
        try:
            outcome = await interruptible(call, scope, receive, stop)
        except Unavailable as exc:
            err = unavailable(exc, self.shape, gw.scrub)
            response = error_response(err, self.shape, request_id=exc.request_id, record=exc.record)
            ex.request_id = exc.request_id
            gw.finish(ex, response.status_code, record=exc.record, note=exc.reason.value, code=err.code)
        except Exception as exc:
            log.error(
                "internal error on route %s request %s: %s", route, envelope.request_id, internal_error(exc, gw.scrub)
            )
            err = ApiError(500, f"internal gateway error (request id {envelope.request_id})", type="server_error")
            gw.finish(ex, 500, note=f"internal error {type(exc).__name__}")
            response = error_response(err, self.shape, request_id=envelope.request_id)
        else:
            if isinstance(outcome, Interrupted):  # the client left or the drain cut us: upstream cancelled
                cut = outcome.reason == "drain"
                gw.finish(
                    ex,
                    503 if cut else 499,
                    code="shutting_down" if cut else None,
                    note="cut by shutdown drain; upstream cancelled"
                    if cut
                    else "client disconnected; upstream cancelled",
                )
                if outcome.outer is not None:
                    raise outcome.outer
                if not cut:
                    return
                response = error_response(shutting_down(), self.shape, request_id=envelope.request_id)
            else:
                record = outcome.record
                request_id = record.request_id if record is not None else envelope.request_id
                if self.heavy_answer(outcome):  # a large answer is written in a worker thread, in slices
                    out, out_headers = await asyncio.to_thread(self.answer, outcome, route, request_id, record, body)
                    gw.reclaim_soon()  # its many small objects leave holes the allocator would keep
                else:
                    out, out_headers = self.answer(outcome, route, request_id, record, body)
                gw.origins.remember(outcome, self.raw_reasoning)
                try:
                    await send_json(send, 200, out, out_headers)
                finally:  # the access line, metrics and the tenant's charge after the answer left, not before
                    ex.request_id = request_id
                    gw.finish(ex, 200, record=record)
                return
        await response(scope, receive, send)


__all__ = ["Endpoint"]
