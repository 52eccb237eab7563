"""The SDKs' wire formats, one per dialect: which paths are whose, how a body becomes a call, and
how an answer, an error and a stream go back (OpenAI Chat Completions chunks, Anthropic Messages
events), rendered by :mod:`failover.inbound`'s converters, the gateway's own."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..inbound import SDK_CHAT, SDK_MESSAGES, Shape
from ..inbound import anthropic as ant
from ..inbound import openai as oai
from ..model import REASONING_ANTHROPIC as ANTHROPIC
from ..model import Completed, Request, Response, StreamEvent, new_id
from ..model import dumps as _dumps

WireDialect = Literal["openai", "anthropic"]

SUPPORTED = "POST /chat/completions (OpenAI SDK) and POST /v1/messages (Anthropic SDK)"


def dialect_of(path: str) -> WireDialect | None:
    """The SDK dialect a path belongs to, or None for a path we do not serve."""
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/v1/messages") or path == "/messages":
        return "anthropic"
    return None


def error_dialect(path: str, headers: Mapping[str, str]) -> WireDialect:
    """Which error shape an unsupported path gets: the Anthropic SDK always sends anthropic-version."""
    if "anthropic-version" in headers or path.rstrip("/").startswith("/v1/messages"):
        return "anthropic"
    return "openai"


# -- one dialect's wire format --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """A parsed SDK request."""

    request: Request
    model: str
    stream: bool
    include_usage: bool = False


class _Renderer(Protocol):
    def start(self) -> bytes: ...
    def event(self, event: StreamEvent) -> bytes: ...
    def end(self, done: Completed) -> bytes: ...
    def error(self, code: str, message: str) -> bytes: ...


class Wire(Protocol):
    name: WireDialect
    shape: Shape  # how its SDK is told of a failure (see failover.inbound._failures)
    raw_reasoning: str | None  # the reasoning format handed to the SDK raw (see failover.inbound._origins)

    def parse(self, data: Any, headers: Mapping[str, str] | None = None) -> Call: ...
    def body(self, resp: Response, model: str) -> dict[str, Any]: ...
    def renderer(self, call: Call, request_id: str, model: str) -> _Renderer: ...


class _OpenAIWire:
    name: WireDialect = "openai"
    shape = SDK_CHAT
    raw_reasoning: str | None = None  # reasoning_content text only

    def parse(self, data: Any, headers: Mapping[str, str] | None = None) -> Call:
        body = oai.parse_body(data)
        usage = body.stream_options is not None and body.stream_options.include_usage
        return Call(oai.to_request(body), body.model, bool(body.stream), usage)

    def body(self, resp: Response, model: str) -> dict[str, Any]:
        cid = new_id("chatcmpl-")
        return oai.completion_body(resp, completion_id=cid, created=int(time.time()), model=model)

    def renderer(self, call: Call, request_id: str, model: str) -> _Renderer:
        return _OpenAIChunks(self, call, request_id, model)


class _OpenAIChunks:
    """``chat.completion.chunk`` events as ``data: {...}`` lines, then ``data: [DONE]``."""

    def __init__(self, wire: _OpenAIWire, call: Call, request_id: str, model: str) -> None:
        self.wire = wire
        cid = new_id("chatcmpl-")
        self.chunks = oai.ChunkRenderer(cid, int(time.time()), model, call.include_usage, request_id=request_id)

    @staticmethod
    def _sse(items: list[dict[str, Any]]) -> bytes:
        return b"".join(b"data: " + _dumps(d) + b"\n\n" for d in items)

    def start(self) -> bytes:
        return self._sse(self.chunks.start())

    def event(self, event: StreamEvent) -> bytes:
        return self._sse(self.chunks.render(event))

    def end(self, done: Completed) -> bytes:
        return self._sse(self.chunks.end(done)) + b"data: [DONE]\n\n"

    def error(self, code: str, message: str) -> bytes:
        # The openai SDK raises APIError for a data line whose object has an "error" key.
        return self._sse([oai.error_body(500, message, type="server_error", code=code)])


class _AnthropicWire:
    name: WireDialect = "anthropic"
    shape = SDK_MESSAGES
    raw_reasoning: str | None = ANTHROPIC  # thinking blocks keep their own signature

    def parse(self, data: Any, headers: Mapping[str, str] | None = None) -> Call:
        """``headers``: the SDK's request headers; its ``anthropic-beta`` goes on to an Anthropic
        target as the gateway passes it (``extra_headers``, ``beta.messages.create(betas=...)``)."""
        body = ant.parse_body(data)
        beta = headers.get(ant.BETA_HEADER) if headers is not None else None
        request = ant.to_request(body, headers={ant.BETA_HEADER: beta} if beta else None)
        return Call(request, body.model, bool(body.stream))

    def body(self, resp: Response, model: str) -> dict[str, Any]:
        return ant.message_body(resp, message_id=new_id("msg_"), model=model)

    def renderer(self, call: Call, request_id: str, model: str) -> _Renderer:
        return _AnthropicEvents(request_id, model)


class _AnthropicEvents:
    """Messages stream events as ``event: name`` / ``data: {...}`` pairs."""

    def __init__(self, request_id: str, model: str) -> None:
        self.events = ant.EventRenderer(new_id("msg_"), model, request_id=request_id)

    @staticmethod
    def _sse(pairs: list[tuple[str, dict[str, Any]]]) -> bytes:
        return b"".join(b"event: " + name.encode() + b"\ndata: " + _dumps(d) + b"\n\n" for name, d in pairs)

    def start(self) -> bytes:
        return self._sse(self.events.start())

    def event(self, event: StreamEvent) -> bytes:
        return self._sse(self.events.render(event))

    def end(self, done: Completed) -> bytes:
        return self._sse(self.events.end(done))

    def error(self, code: str, message: str) -> bytes:
        # The anthropic SDK raises an APIStatusError for an ``event: error``.
        return self._sse(self.events.error(message, code=code))


WIRES: dict[WireDialect, Wire] = {"openai": _OpenAIWire(), "anthropic": _AnthropicWire()}
