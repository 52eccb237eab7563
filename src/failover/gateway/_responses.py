"""``POST /v1/responses``: the OpenAI Responses API over the same router, tenants and limits.

The body is translated by :mod:`failover.inbound.responses`; everything else is the chat
endpoint's (the same lifecycle, :class:`~failover.gateway._endpoint.Endpoint`): ``model`` names a
route, the envelope comes from the ``x-failover-*`` headers, tenant keys, quotas, drain,
metrics, access log, ``x-failover-*`` response headers, and errors in OpenAI's envelope with
the chat endpoint's statuses and retry headers.

Stateless only: failover keeps no responses. ``previous_response_id``, ``conversation``,
``prompt`` and ``background: true`` are refused when a request names them, and
``GET`` / ``DELETE /v1/responses/{id}`` (and the other routes under it) answer 404 saying so
(:func:`stored_response`).

Streaming keeps the chat endpoint's guarantees: nothing is sent before the commit point, a
client disconnect closes the upstream stream at once, and after the first byte a failure ends
the stream with an ``error`` event and ``response.failed`` (or ``response.incomplete`` when the
output limit or a filter cut it), never a splice.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from ..inbound import RESPONSES, SchemaField, answered_by, record_headers, responses
from ..inbound import ResponsesEvent as Event
from ..model import REASONING_OPENAI_RESPONSES as OPENAI_RESPONSES
from ..model import Completed, Dialect, Envelope, PartialOutput, Request, Route, RouteRecord, new_id
from ..model import Response as Answer
from ..model import dumps as _dumps
from ._auth import authenticate
from ._endpoint import Endpoint, honourable
from ._errors import ApiError, error_response
from ._gateway import Gateway
from ._stream_reply import SseWire

log = logging.getLogger("failover.gateway")


def _sse(events: list[Event]) -> bytes:
    return b"".join(b"event: " + name.encode() + b"\ndata: " + _dumps(data) + b"\n\n" for name, data in events)


class _ResponsesWire:
    """The Responses API's named SSE events (:class:`~failover.inbound.responses.EventRenderer`)."""

    headers: Mapping[str, str] = {}
    shape = RESPONSES

    def __init__(self, gw: Gateway, renderer: responses.EventRenderer) -> None:
        self.gw = gw
        self.renderer = renderer

    def start(self, model: str) -> bytes:
        self.renderer.model = model
        return _sse(self.renderer.start())

    def render(self, event: object) -> bytes:
        return _sse(self.renderer.render(event))

    def end(self, done: Completed) -> bytes:
        return _sse(self.renderer.end(done, now=int(time.time())))

    def failure(self, code: str, message: str) -> bytes:
        return _sse(self.renderer.failure(code, message))

    def partial(self, event: PartialOutput, message: str) -> bytes:
        return _sse(self.renderer.partial(event, message))


class Responses(Endpoint[responses.ResponsesBody]):
    """``POST /v1/responses``: the OpenAI Responses dialect of :class:`~failover.gateway._endpoint.Endpoint`."""

    path = "/v1/responses"
    shape = RESPONSES
    raw_reasoning = OPENAI_RESPONSES  # reasoning items keep their own encrypted_content

    def from_json(self, data: Any) -> responses.ResponsesBody:
        return responses.parse_body(data)

    def to_request(self, body: responses.ResponsesBody) -> Request:
        req = responses.to_request(body, limits=self.gw.settings.schema_limits, schemas=False)
        if req.hosted_tools or req.freeform_calls:
            req = _hosted_for(self.gw.router.routes.get(body.model), body, req)
        honourable(self.gw.router, body.model, req)
        return req

    def schema_fields(self, body: responses.ResponsesBody) -> list[SchemaField]:
        return responses.schema_fields(body)

    def wire(self, body: responses.ResponsesBody, route: str, envelope: Envelope) -> SseWire:
        renderer = responses.EventRenderer(
            new_id("resp_"),
            int(time.time()),
            route,
            responses.echo(body),
            request_id=envelope.request_id,
            names=responses.tool_names(body),
        )
        return _ResponsesWire(self.gw, renderer)

    def answer(
        self, resp: Answer, route: str, request_id: str, record: RouteRecord | None, body: responses.ResponsesBody
    ) -> tuple[bytes, Mapping[str, str]]:
        now = int(time.time())
        model = answered_by(record, route)  # the model that answered; the route is in x-failover-route
        out = responses.response_body(resp, response_id=new_id("resp_"), created=now, model=model, body=body, now=now)
        return _dumps(out), record_headers(request_id, record)


def _hosted_for(route: Route | None, body: responses.ResponsesBody, req: Request) -> Request:
    """The request as the route can take its hosted tools (web_search...), which only an OpenAI
    Responses target runs. A route with one is routed as usual: the router leaves out every
    other target, the route record saying why. A route with none answers without them: they
    are offered to the model, not asked of it (Codex offers web_search on every turn), so the
    model answers with the client's own tools; only a request that leaves the model nothing
    but them to call (``tool_choice: required``) is a 400 naming the first, as is one whose
    history holds a freeform tool's call (``custom_tool_call``), which no other dialect can take."""
    if route is None or any(t.dialect is Dialect.OPENAI_RESPONSES for t in (*route.primary, *route.fallbacks)):
        return req
    if req.freeform_calls:
        i = next(i for i, item in enumerate(body.input) if isinstance(item, responses.CustomToolCallItem))
        raise ApiError(
            400,
            f"input[{i}].type: 'custom_tool_call' is the call of a freeform tool, which only an OpenAI Responses "
            f"target can be given back, and route {route.name!r} has none (its free-form input has no function-call "
            "form that round-trips exactly); use a route with an openai-responses target, or function tools",
            code="unsupported_parameter",
            param=f"input[{i}].type",
        )
    if body.tool_choice != "required" or req.tools:
        kinds = ", ".join(sorted({str(t.get("type")) for t in req.hosted_tools}))
        log.info("request to route %s: hosted tools (%s) left out: no target of the route runs them", route.name, kinds)
        return dataclasses.replace(req, hosted_tools=())
    i, kind = next((i, t.type) for i, t in enumerate(body.tools or ()) if isinstance(t, responses.HostedTool))
    raise ApiError(
        400,
        f"tools[{i}].type: {kind!r} is a hosted tool, which only an OpenAI Responses target runs, and route "
        f"{route.name!r} has none, while tool_choice 'required' leaves the model nothing else to call; define a "
        "function tool (type 'function') and run it yourself, or use a route with an openai-responses target",
        code="unsupported_parameter",
        param=f"tools[{i}].type",
    )


_NOT_OFFERED = frozenset({"input_tokens", "compact"})


def stored_response(gw: Gateway) -> Callable[[HttpRequest], Awaitable[Response]]:
    """Every route under ``/v1/responses/`` (``GET`` / ``DELETE /v1/responses/{id}``, its
    ``input_items``, ``cancel``): a 404 that says failover keeps no responses, after the caller's
    key is checked like any other request's."""

    async def run(request: HttpRequest) -> Response:
        try:
            authenticate(gw.settings, request.scope, request.headers)
            rest = request.path_params["id"]
            first = rest.split("/", 1)[0]
            shown = f"{request.method} /v1/responses/{rest[:80]}"
            if first in _NOT_OFFERED:
                message = f"{shown} is not offered by the gateway; only POST /v1/responses is"
            else:
                message = (
                    f"{shown}: failover keeps no responses (it stores nothing, whatever `store` says), so none can "
                    "be retrieved, listed, cancelled or deleted: a request it retries or fails over cannot depend on "
                    "one provider's server-side state. Keep the output you received, and send the whole "
                    "conversation as `input` with each request"
                )
            raise ApiError(404, message, code="response_not_stored")
        except ApiError as err:
            return error_response(err, RESPONSES)

    return run


__all__ = ["Responses", "stored_response"]
