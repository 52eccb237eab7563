"""``POST /v1/chat/completions``: the OpenAI Chat Completions dialect of the endpoint lifecycle
(:class:`~failover.gateway._endpoint.Endpoint`), the gateway's hot path."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..inbound import CHAT, SchemaField, answered_by, record_headers
from ..inbound.openai import ChunkRenderer
from ..inbound.openai import error_body as openai_error_body
from ..inbound.openai import schema_fields as openai_schema_fields
from ..model import Completed, Envelope, PartialOutput, Request, RouteRecord, new_id
from ..model import Response as Answer
from ..model import dumps as _dumps
from ._endpoint import Endpoint, honourable
from ._gateway import Gateway
from ._openai import ChatCompletionBody, completion_body, parse_body, to_request
from ._stream_reply import SseWire


def _new_completion_id() -> str:
    return new_id("chatcmpl-")


class ChatCompletions(Endpoint[ChatCompletionBody]):
    """``POST /v1/chat/completions``: the OpenAI dialect of :class:`Endpoint`."""

    path = "/v1/chat/completions"

    def parse(self, raw: bytes) -> ChatCompletionBody:
        return self.gw.chat_body(raw)

    def from_json(self, data: Any) -> ChatCompletionBody:
        return parse_body(data)

    def to_request(self, body: ChatCompletionBody) -> Request:
        req = to_request(body, limits=self.gw.settings.schema_limits)
        honourable(self.gw.router, body.model, req)
        return req

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
        model = answered_by(record, route)  # the model that answered; the route is in x-failover-route
        out = completion_body(resp, completion_id=_new_completion_id(), created=int(time.time()), model=model)
        return _dumps(out), record_headers(request_id, record)


def _sse_data(chunks: list[dict[str, Any]]) -> bytes:
    if len(chunks) == 1:  # the common case: one chunk per event
        return b"data: " + _dumps(chunks[0]) + b"\n\n"
    return b"".join(b"data: " + _dumps(c) + b"\n\n" for c in chunks)


class _ChatWire:
    """``chat.completion.chunk`` events (:class:`~failover.inbound.openai.ChunkRenderer`), then
    ``data: [DONE]``; a failure after the first byte is one ``data: {"error": ...}`` event."""

    headers: Mapping[str, str] = {}
    shape = CHAT

    def __init__(self, gw: Gateway, renderer: ChunkRenderer) -> None:
        self.gw = gw
        self.renderer = renderer

    def start(self, model: str) -> bytes:
        self.renderer.model = model
        return _sse_data(self.renderer.start())

    def render(self, event: object) -> bytes:
        return _sse_data(self.renderer.render(event))

    def end(self, done: Completed) -> bytes:
        return _sse_data(self.renderer.end(done)) + b"data: [DONE]\n\n"

    def failure(self, code: str, message: str) -> bytes:
        return _sse_data([openai_error_body(500, message, type="server_error", code=code)])

    def partial(self, event: PartialOutput, message: str) -> bytes:
        return self.failure("partial_output", message)


__all__ = ["ChatCompletions"]
