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

Streaming keeps the chat endpoint's guarantees (it is the same lifecycle,
:class:`~failover.gateway._endpoint.Endpoint`): nothing is sent before the commit point, a
client disconnect closes the upstream stream at once, and after the first byte a failure ends
the stream with an ``error`` event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from ..inbound import MESSAGES, SchemaField, WireError, answered_by, anthropic, record_headers
from ..model import REASONING_ANTHROPIC as ANTHROPIC
from ..model import Completed, Envelope, PartialOutput, Request, RouteRecord, new_id
from ..model import Response as Answer
from ..model import dumps as _dumps
from ..tokens import counter_for
from ._auth import authenticate
from ._body import HEAVY_JSON_BYTES, ClientGone, decode_json, read_body
from ._endpoint import Endpoint, honourable
from ._errors import ApiError, error_response
from ._gateway import Gateway
from ._settings import Tenant
from ._sizes import check_counts
from ._stream_reply import SseWire


def _new_message_id() -> str:
    return new_id("msg_")


def _credentials(settings_open: bool, headers: Mapping[str, str]) -> Mapping[str, str]:
    """The headers :func:`~failover.gateway._auth.authenticate` reads: ``x-api-key`` becomes a bearer key."""
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

    shape = MESSAGES

    def __init__(self, renderer: anthropic.EventRenderer, request_id: str) -> None:
        self.renderer = renderer
        self.headers: Mapping[str, str] = {"request-id": request_id}

    def start(self, model: str) -> bytes:
        self.renderer.model = model
        return _sse(self.renderer.start())

    def render(self, event: object) -> bytes:
        return _sse(self.renderer.render(event))

    def end(self, done: Completed) -> bytes:
        return _sse(self.renderer.end(done))

    def failure(self, code: str, message: str) -> bytes:
        kind = "overloaded_error" if code == "shutting_down" else "api_error"
        return _sse(self.renderer.error(message, type=kind, code=code))

    def partial(self, event: PartialOutput, message: str) -> bytes:
        return self.failure("partial_output", message)


class Messages(Endpoint[anthropic.MessagesBody]):
    """``POST /v1/messages``: the Anthropic dialect of :class:`~failover.gateway._endpoint.Endpoint`."""

    path = "/v1/messages"
    shape = MESSAGES
    raw_reasoning = ANTHROPIC  # thinking blocks keep their own signature

    def credentials(self, headers: dict[str, str]) -> Mapping[str, str]:
        return _credentials(self.gw.settings.open, headers)

    def from_json(self, data: Any) -> anthropic.MessagesBody:
        return anthropic.parse_body(data)

    def to_request(self, body: anthropic.MessagesBody) -> Request:
        return self.request_for(body, {})

    def request_for(self, body: anthropic.MessagesBody, headers: Mapping[str, str]) -> Request:
        req = anthropic.to_request(body, limits=self.gw.settings.schema_limits, schemas=False, headers=headers)
        honourable(self.gw.router, body.model, req)
        return req

    def schema_fields(self, body: anthropic.MessagesBody) -> list[SchemaField]:
        return anthropic.schema_fields(body)

    def wire(self, body: anthropic.MessagesBody, route: str, envelope: Envelope) -> SseWire:
        renderer = anthropic.EventRenderer(_new_message_id(), route, request_id=envelope.request_id)
        return _MessagesWire(renderer, envelope.request_id)

    def answer(
        self, resp: Answer, route: str, request_id: str, record: RouteRecord | None, body: anthropic.MessagesBody
    ) -> tuple[bytes, Mapping[str, str]]:
        out = anthropic.message_body(resp, message_id=_new_message_id(), model=answered_by(record, route))
        return _dumps(out), {**record_headers(request_id, record), "request-id": request_id}


def count_tokens(gw: Gateway) -> Callable[[HttpRequest], Awaitable[Response]]:
    """``POST /v1/messages/count_tokens``: ``{"input_tokens": N}`` for a Messages body.

    N is what failover itself counts before sending (docs/tokens.md) for the route's first
    primary target, the count its preflight and the tenant's tpm use; it calls no provider
    and uses no quota. The body is a Messages body without ``max_tokens`` (as Anthropic's
    endpoint takes it); ``model`` names a route the key may use.
    """

    def counted(data: object, tenant: Tenant | None, headers: Mapping[str, str]) -> int:
        check_counts(gw.settings, data)  # before the body is validated, translated and counted
        if isinstance(data, dict):
            data = {**data, "max_tokens": 1, "stream": False}  # not part of a count request
        body = anthropic.parse_body(data)
        route = gw.router.routes.get(body.model)
        if route is None or (tenant is not None and not tenant.allows(body.model)):
            raise ApiError(404, f"the model {body.model!r} does not exist", code="model_not_found", param="model")
        if not route.primary:
            raise ApiError(404, f"the route {body.model!r} has no primary target", code="model_not_found")
        req = anthropic.to_request(body, limits=gw.settings.schema_limits, schemas=False, headers=headers)
        return counter_for(route.primary[0]).count(req)

    async def run(request: HttpRequest) -> Response:
        try:
            settings = gw.settings
            tenant = authenticate(settings, request.scope, _credentials(settings.open, request.headers))
            try:
                raw = await read_body(settings, request.receive, request.headers, request.scope)
            except ClientGone:
                raise ClientDisconnect() from None
            if len(raw) > HEAVY_JSON_BYTES:  # decoded, translated and counted in a worker thread
                try:
                    n = await asyncio.to_thread(
                        lambda: counted(decode_json(raw, settings.max_json_depth), tenant, request.headers)
                    )
                finally:
                    gw.reclaim_soon()
            else:
                n = counted(decode_json(raw, settings.max_json_depth), tenant, request.headers)
            return Response(_dumps({"input_tokens": n}), media_type="application/json")
        except WireError as err:
            return error_response(err, MESSAGES)

    return run


__all__ = ["Messages", "count_tokens"]
