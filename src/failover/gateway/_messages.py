"""``POST /v1/messages``: the Anthropic Messages API over the same router, tenants and limits.

The body is translated by :mod:`failover.inbound.anthropic`; everything else is the chat
endpoint's: ``model`` names a route, the envelope comes from the ``x-failover-*`` headers,
tenant keys (as ``x-api-key``, what the anthropic SDK sends, or ``Authorization: Bearer``),
quotas, drain, metrics, access log and ``x-failover-*`` response headers. ``anthropic-version``
is accepted and ignored (there is one Messages API version).

Errors are Anthropic's ``{"type": "error", "error": {"type", "message", "details"}}`` with
the gateway's statuses (see docs/gateway.md): a retryable failure is 503 with Retry-After,
except one whose last cause was provider overload, which is Anthropic's 529
``overloaded_error``; an exhausted deadline is 504 ``timeout_error``. failover's failure
kind or gateway code is in ``error.details.error_code`` (the SDK's ``error_code``).

Streaming keeps the chat endpoint's guarantees (it is the same :class:`_StreamReply`):
nothing is sent before the commit point, a client disconnect closes the upstream stream at
once, and after the first byte a failure ends the stream with an ``error`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..inbound import WireError, anthropic
from ..model import Completed, Envelope, Request, RouteRecord, Unavailable
from ..router import Router
from ._app import Gateway, _shutting_down, _StreamReply, _wait_disconnect, record_headers
from ._envelope import envelope_from
from ._errors import ApiError, from_wire, unavailable_error
from ._settings import Tenant

log = logging.getLogger("failover.gateway")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _new_message_id() -> str:
    return "msg_" + os.urandom(12).hex()


def _status(err: ApiError) -> int:
    """Anthropic clients know overload as 529; every other status is the chat endpoint's."""
    return 529 if err.status == 503 and err.code == "provider_overloaded" else err.status


def error_response(err: ApiError, *, request_id: str | None = None, record: RouteRecord | None = None) -> Response:
    """An ApiError in Anthropic's error format, with the ``x-failover-*`` headers when the
    request got as far as an id (and ``request-id``, which the anthropic SDK reads)."""
    status = _status(err)
    headers = dict(err.headers)
    if request_id is not None:
        headers.update(record_headers(request_id, record))
        headers["request-id"] = request_id
    body = anthropic.error_body(status, err.message, code=err.code, request_id=request_id)
    return Response(_dumps(body), status_code=status, headers=headers, media_type="application/json")


def _credentials(settings_open: bool, headers: Mapping[str, str]) -> Mapping[str, str]:
    """The headers ``Gateway.authenticate`` reads: ``x-api-key`` becomes a bearer key."""
    key = headers.get("x-api-key")
    if key is not None:
        return {"authorization": f"Bearer {key.strip()}"}
    if not settings_open and headers.get("authorization") is None:
        raise ApiError(
            401,
            "missing API key: send 'x-api-key: <your gateway key>' (or 'Authorization: Bearer <your gateway key>')",
            code="invalid_api_key",
        )
    return headers


def _sse(events: list[anthropic.Event]) -> bytes:
    return b"".join(b"event: " + name.encode() + b"\ndata: " + _dumps(data) + b"\n\n" for name, data in events)


class _MessagesWire:
    """Anthropic's named SSE events (:class:`~failover.inbound.anthropic.EventRenderer`)."""

    def __init__(self, renderer: anthropic.EventRenderer, request_id: str) -> None:
        self.renderer = renderer
        self.headers: Mapping[str, str] = {"request-id": request_id}

    def start(self) -> bytes:
        return _sse(self.renderer.start())

    def render(self, event: object) -> bytes:
        return _sse(self.renderer.render(event))

    def end(self, done: Completed) -> bytes:
        return _sse(self.renderer.end(done))

    def failure(self, code: str, message: str) -> bytes:
        kind = "overloaded_error" if code == "shutting_down" else "api_error"
        return _sse(self.renderer.error(message, type=kind, code=code))

    def error_response(
        self, err: ApiError, *, request_id: str | None = None, record: RouteRecord | None = None
    ) -> Response:
        return error_response(err, request_id=request_id, record=record)


def _parse(data: Any) -> tuple[anthropic.MessagesBody, Request]:
    try:
        body = anthropic.parse_body(data)
        return body, anthropic.to_request(body)
    except WireError as exc:
        raise from_wire(exc) from None


class Messages:
    """``POST /v1/messages`` as an ASGI app."""

    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gw = self.gw
        router = gw.router  # a reload swaps gw.router; this request finishes on the one it started with
        started = time.perf_counter()
        if scope["method"] != "POST":
            err = ApiError(405, "use POST for /v1/messages", code="method_not_allowed")
            await error_response(err)(scope, receive, send)
            return
        headers = Headers(scope=scope)
        tenant: Tenant | None = None
        route: str | None = None
        try:
            if gw.draining:
                raise _shutting_down()
            tenant = gw.authenticate(scope, _credentials(gw.settings.open, headers))
            body, req = _parse(await gw.read_json(HttpRequest(scope, receive)))
            route = body.model
            self._check_route(router, route, tenant)
            envelope = envelope_from(headers, gw.settings.envelope, tenant=tenant.name if tenant is not None else None)
            quotas = gw.quotas  # last: a refused request takes nothing; shared quotas await the store
            max_cost = (
                quotas.admit(tenant, envelope.max_cost)
                if quotas.local
                else await quotas.admit_shared(tenant, envelope.max_cost)
            )
            if max_cost != envelope.max_cost:
                envelope = dataclasses.replace(envelope, max_cost=max_cost)
        except ClientDisconnect:
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
                status=err.status,
                route=route,
                tenant=tenant,
                request_id=None,
                record=None,
                started=started,
                code=err.code,
            )
            await error_response(err)(scope, receive, send)
            return
        stop = gw.enter(router)
        try:
            if body.stream:
                wire = _MessagesWire(
                    anthropic.EventRenderer(_new_message_id(), route, request_id=envelope.request_id),
                    envelope.request_id,
                )
                reply = _StreamReply(gw, router, route, req, envelope, False, tenant, started, stop, wire=wire)
                await reply(scope, receive, send)
            else:
                await self._complete(scope, receive, send, router, route, req, envelope, tenant, started, stop)
        finally:
            gw.leave(stop)

    @staticmethod
    def _check_route(router: Router, route: str, tenant: Tenant | None) -> None:
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

    async def _complete(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        router: Router,
        route: str,
        req: Request,
        envelope: Envelope,
        tenant: Tenant | None,
        started: float,
        stop: asyncio.Future[None],
    ) -> None:
        """One plain answer; a client that leaves (or the drain) cancels the upstream call."""
        gw = self.gw
        call = asyncio.ensure_future(router.complete(route, req, envelope))
        watch = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            waiters: set[asyncio.Future[Any]] = {call, watch, stop}
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not call.done():
                call.cancel()  # the client left or the drain cut us: stop the upstream request now
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await call
                cut = stop.done()
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
                if cut:
                    await error_response(_shutting_down(), request_id=envelope.request_id)(scope, receive, send)
        if call.cancelled():
            return
        await self._answer(call, route, envelope, tenant, started)(scope, receive, send)

    def _answer(
        self,
        call: asyncio.Future[Any],
        route: str,
        envelope: Envelope,
        tenant: Tenant | None,
        started: float,
    ) -> Response:
        gw = self.gw
        try:
            resp = call.result()
        except Unavailable as exc:
            err = unavailable_error(exc, gw.scrub)
            gw.finish(
                status=_status(err),
                route=route,
                tenant=tenant,
                request_id=exc.request_id,
                record=exc.record,
                started=started,
                note=exc.reason.value,
                code=err.code,
            )
            return error_response(err, request_id=exc.request_id, record=exc.record)
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
            return error_response(err, request_id=envelope.request_id)
        record = resp.record
        request_id = record.request_id if record is not None else envelope.request_id
        body = anthropic.message_body(resp, message_id=_new_message_id(), model=route)
        gw.finish(status=200, route=route, tenant=tenant, request_id=request_id, record=record, started=started)
        headers = {**record_headers(request_id, record), "request-id": request_id}
        return Response(_dumps(body), status_code=200, headers=headers, media_type="application/json")


__all__ = ["Messages", "error_response"]
