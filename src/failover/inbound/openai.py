"""The OpenAI Chat Completions wire format as a server speaks it.

Bodies are validated with pydantic (fields the gateway cannot honour, such as ``n > 1`` or
``logprobs``, are refused with a 400 naming the field), then turned into a
:class:`~failover.model.Request`. A top-level field it does not read, such as ``user`` or
``metadata``, is passed through (:mod:`~failover.inbound._passthrough`): verbatim to a Chat
Completions target; a target of another dialect drops it when it is a hint, or is left out.
A :class:`~failover.model.Response` goes back as a
``chat.completion`` body, and stream events as ``chat.completion.chunk`` bodies
(:class:`ChunkRenderer`).

Reasoning travels as DeepSeek sends it, the field most Chat Completions clients read: an
assistant ``message.reasoning_content`` (the text of every reasoning block, joined) and a
``delta.reasoning_content`` per reasoning delta in a stream. Only that one field: the OpenAI
Agents SDK reads ``reasoning_content`` and ``reasoning`` both, so sending the same text in both
would show it twice there (pydantic-ai and LangChain's DeepSeek model read ``reasoning_content``
too). Signatures and redacted blocks have no Chat Completions shape and are not sent. An
assistant message a client sends back with ``reasoning_content`` (or ``reasoning``, as vLLM and
OpenRouter name it) becomes that message's :class:`~failover.model.Reasoning` of source
``"openai"``: the router sends it on only to Chat Completions targets.

No HTTP server here: a refused body raises
:class:`~failover.inbound.WireError`, which the gateway (or an in-process client) answers
in its own way.

>>> body = parse_body({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]})
>>> request = to_request(body)
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..model import REASONING_OPENAI as _OPENAI_SOURCE
from ..model import (
    Completed,
    Dialect,
    ImagePart,
    Message,
    Part,
    Reasoning,
    ReasoningDelta,
    Request,
    Response,
    ResponseFormat,
    StopReason,
    StreamEvent,
    TextDelta,
    TextPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    Usage,
)
from ..validation import DEFAULT_LIMITS, SchemaLimits
from ._passthrough import passthrough
from ._relay import Relay, RelayMismatch
from ._wire import SchemaField, WireError, check_schemas, image_url, record_summary, validation_error


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TextContent(_Edge):
    type: Literal["text"]
    text: str


class ImageURL(_Edge):
    url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] | None = None

    @field_validator("url")
    @classmethod
    def _scheme(cls, url: str) -> str:
        return image_url(url)


class ImageContent(_Edge):
    type: Literal["image_url"]
    image_url: ImageURL


UserPart = Annotated[TextContent | ImageContent, Field(discriminator="type")]


class FunctionCallIn(_Edge):
    name: str = Field(min_length=1)
    arguments: str


class ToolCallIn(_Edge):
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCallIn


class SystemMessage(_Edge):
    role: Literal["system", "developer"]
    content: str | list[TextContent]
    name: str | None = None


class UserMessage(_Edge):
    role: Literal["user"]
    content: str | list[UserPart]
    name: str | None = None


class AssistantMessage(_Edge):
    role: Literal["assistant"]
    content: str | list[TextContent] | None = None
    tool_calls: list[ToolCallIn] | None = None
    refusal: str | None = None
    name: str | None = None
    # what the model thought, as DeepSeek (and older vLLM) name it, or as vLLM and OpenRouter do
    reasoning_content: str | None = None
    reasoning: str | None = None


class ToolMessage(_Edge):
    role: Literal["tool"]
    content: str | list[TextContent]
    tool_call_id: str = Field(min_length=1)


ChatMessage = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]

_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class FunctionDef(_Edge):
    name: str = Field(pattern=_NAME)
    description: str = ""
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(_Edge):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Edge):
    name: str


class NamedToolChoice(_Edge):
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaSpec(_Edge):
    name: str = Field(pattern=_NAME)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class TextFormat(_Edge):
    type: Literal["text"]


class JsonObjectFormat(_Edge):
    type: Literal["json_object"]


class JsonSchemaFormat(_Edge):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


FormatSpec = Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]


class StreamOptions(_Edge):
    include_usage: bool = False


class ChatCompletionBody(_Edge):
    """The fields of a Chat Completions request the gateway reads; the others are kept in
    ``model_extra``, to be passed through to a Chat Completions target."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDef] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    response_format: FormatSpec | None = None
    # strict numbers: the API refuses true or "300" here, so coercing them would change the request
    max_tokens: int | None = Field(None, ge=1, strict=True)
    max_completion_tokens: int | None = Field(None, ge=1, strict=True)
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    top_p: float | None = Field(None, ge=0, le=1, strict=True)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, strict=True)
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1, le=1, strict=True, description="only one choice is supported")
    logprobs: bool | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, stop: str | list[str] | None) -> str | list[str] | None:
        if isinstance(stop, list) and len(stop) > 4:
            raise ValueError("at most 4 stop sequences")
        return stop

    @field_validator("logprobs")
    @classmethod
    def _logprobs(cls, logprobs: bool | None) -> bool | None:
        if logprobs:
            raise ValueError("logprobs are not supported by the gateway (the answer may come from any approved model)")
        return logprobs


_UNION_FIELDS = frozenset({"response_format", "tool_choice", "content", "stop"})
_UNION_TAGS = frozenset(
    {
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "text",
        "image_url",
        "json_object",
        "json_schema",
        "str",
        "NamedToolChoice",
    }
)


def parse_body(data: Any) -> ChatCompletionBody:
    """Validate a decoded body; a problem is a 400 :class:`WireError` naming the field."""
    if not isinstance(data, dict):
        raise WireError(400, "the request body must be a JSON object", code="invalid_body")
    try:
        return ChatCompletionBody.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, tags=_UNION_TAGS, unions=_UNION_FIELDS) from None


def _text(content: str | list[TextContent] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content)


def _user_parts(content: str | list[TextContent | ImageContent]) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),)
    parts: list[Part] = []
    for p in content:
        if isinstance(p, TextContent):
            parts.append(TextPart(text=p.text))
        else:
            parts.append(ImagePart(url=p.image_url.url, detail=p.image_url.detail))
    return tuple(parts)


def _parsed_args(arguments: str) -> dict[str, Any] | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def schema_fields(body: ChatCompletionBody) -> list[SchemaField]:
    """Every client JSON Schema in ``body`` with its field path (tool parameters, response format)."""
    out: list[SchemaField] = [
        (f"tools[{i}].function.parameters", t.function.parameters)
        for i, t in enumerate(body.tools or ())
        if t.function.parameters is not None
    ]
    rf = body.response_format
    if isinstance(rf, JsonSchemaFormat) and rf.json_schema.schema_ is not None:
        out.append(("response_format.json_schema.schema", rf.json_schema.schema_))
    return out


def _call(call: ToolCallIn) -> ToolCall:
    args = call.function.arguments
    return ToolCall(id=call.id, name=call.function.name, arguments=args, parsed=_parsed_args(args))


def _message(message: ChatMessage, at: str) -> Message:
    """One message; ``at`` is its field path. Refuses the shapes no provider takes (an empty
    parts array, an assistant turn with nothing in it) here, naming them, rather than upstream."""
    if not message.content and isinstance(message.content, list):
        problem = f"{at}.content: an empty array; give a string or at least one content part"
        raise WireError(400, problem, param=f"{at}.content")
    if isinstance(message, SystemMessage):
        return Message(role="system", content=(TextPart(text=_text(message.content)),), name=message.name)
    if isinstance(message, UserMessage):
        return Message(role="user", content=_user_parts(message.content), name=message.name)
    if isinstance(message, ToolMessage):
        return Message.tool(message.tool_call_id, _text(message.content))
    if message.content is None and not message.tool_calls and message.refusal is None:
        problem = f"{at}.content: an assistant message needs content or tool_calls"
        raise WireError(400, problem, param=f"{at}.content")
    calls = tuple(_call(c) for c in message.tool_calls or ())
    text = _text(message.content)
    # vLLM sends the same text in both fields: one block, from the first that has any
    thought = message.reasoning_content or message.reasoning
    reasoning = (Reasoning(text=thought, source=_OPENAI_SOURCE),) if thought else ()
    return Message(
        role="assistant",
        content=(TextPart(text=text),) if text else (),
        tool_calls=calls,
        name=message.name,
        reasoning=reasoning,
    )


def _tools(defs: list[ToolDef]) -> tuple[Tool, ...]:
    """The tools, each name once and each ``parameters`` a valid schema (a provider refuses both)."""
    tools: dict[str, Tool] = {}
    for i, t in enumerate(defs):
        fn = t.function
        if fn.name in tools:
            at = f"tools[{i}].function.name"
            raise WireError(400, f"{at}: tool {fn.name!r} is defined twice; give each tool once", param=at)
        tools[fn.name] = Tool(
            name=fn.name,
            description=fn.description,
            parameters=fn.parameters or {"type": "object", "properties": {}},
            strict=bool(fn.strict),
        )
    return tuple(tools.values())


def to_request(body: ChatCompletionBody, *, limits: SchemaLimits = DEFAULT_LIMITS, schemas: bool = True) -> Request:
    """The provider-neutral Request for a validated body.

    Its JSON Schemas are checked (``limits``, meta-validation, compilation; see
    :func:`~failover.inbound.check_schemas`) unless ``schemas=False``: a server that admits
    the request first does that, then checks :func:`schema_fields` itself, off its event loop,
    before any upstream call."""
    if schemas:
        check_schemas(schema_fields(body), limits)
    messages = [_message(m, f"messages[{i}]") for i, m in enumerate(body.messages)]
    tools = _tools(body.tools or [])
    choice: ToolChoice | None = None
    if isinstance(body.tool_choice, NamedToolChoice):
        name = body.tool_choice.function.name
        if name not in {t.name for t in tools}:
            raise WireError(400, f"tool_choice names {name!r}, which is not in tools", param="tool_choice")
        choice = ToolChoice(mode="tool", name=name)
    elif body.tool_choice is not None:
        if body.tool_choice == "required" and not tools:
            raise WireError(400, "tool_choice 'required' needs at least one tool in tools", param="tool_choice")
        choice = ToolChoice(mode=body.tool_choice)
    fmt: ResponseFormat | None = None
    rf = body.response_format
    if isinstance(rf, JsonSchemaFormat):
        if rf.json_schema.schema_ is None:
            raise WireError(
                400,
                "response_format.json_schema.schema is required: give the JSON Schema the answer must match",
                param="response_format.json_schema.schema",
            )
        fmt = ResponseFormat(
            kind="json_schema",
            schema=rf.json_schema.schema_,
            name=rf.json_schema.name,
            strict=bool(rf.json_schema.strict),
        )
    elif isinstance(rf, JsonObjectFormat):
        fmt = ResponseFormat(kind="json_object")
    both = body.max_tokens is not None and body.max_completion_tokens is not None
    if both and body.max_tokens != body.max_completion_tokens:
        raise WireError(
            400, "max_tokens and max_completion_tokens disagree; send only max_completion_tokens", param="max_tokens"
        )
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    return Request(
        messages=tuple(messages),
        tools=tools,
        tool_choice=choice,
        response_format=fmt,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        stop=stop,
        seed=body.seed,
        reasoning_effort=body.reasoning_effort,
        passthrough=passthrough(Dialect.OPENAI, body.model_extra or {}),
    )


_FINISH = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.TOOL_USE: "tool_calls",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTENT_FILTER: "content_filter",
    StopReason.REFUSAL: "content_filter",
    StopReason.OTHER: "stop",
}


def finish_reason(reason: StopReason) -> str:
    return _FINISH.get(reason, "stop")


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def _content(resp: Response) -> str | None:
    if resp.text:
        return resp.text
    if resp.parsed is not None and not resp.tool_calls:
        return json.dumps(resp.parsed, separators=(",", ":"))
    return None if resp.tool_calls or resp.refusal else ""


def assistant_message(resp: Response, content: str | None) -> dict[str, Any]:
    """The Chat Completions assistant ``message`` of a Response, ``content`` as the caller renders it.

    Shared with the Agents SDK adapter, whose ``content`` rules differ (the SDK's converter, not
    a wire client, reads it); the tool-call shape is the same for both.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": resp.refusal}
    thought = resp.reasoning_text
    if thought:  # DeepSeek's field; see the module docstring
        message["reasoning_content"] = thought
    if resp.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in resp.tool_calls
        ]
    return message


def completion_body(resp: Response, *, completion_id: str, created: int, model: str) -> dict[str, Any]:
    """A ``chat.completion`` body for a Response; ``model`` is the model that answered."""
    message = assistant_message(resp, _content(resp))
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason(resp.stop_reason), "logprobs": None}
        ],
        "usage": usage_body(resp.usage),
        "system_fingerprint": None,
    }


def error_body(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """OpenAI's error envelope, ``{"error": {"message", "type", "code", "param"}}``.

    The SDKs pick their exception class from the HTTP status, not from this body, so
    ``status`` is only taken to keep the signature alike across dialects.
    """
    del status
    return {"error": {"message": message, "type": type, "code": code, "param": param}}


class ChunkRenderer:
    """``chat.completion.chunk`` bodies for one streamed answer, from failover's stream events.

    The events pass through a :class:`~failover.inbound._relay.Relay` first, so a dialect that
    sends a call whole (Gemini) or completes it at the end still gives every client the OpenAI
    shape (id and name on the first delta of a call, then argument fragments, calls started in
    index order), and what the client assembles always equals the answer failover records: an
    answer that no longer matches what was sent raises :class:`~failover.inbound.RelayMismatch`
    (the server ends the stream with an error event). Use: ``start()`` once, ``render(event)``
    per event, ``end(completed)`` for the terminal :class:`~failover.model.Completed`; the
    server writes each dict as ``data: <json>`` and then ``data: [DONE]``.

    >>> r = ChunkRenderer("chatcmpl-1", 1700000000, "chat", include_usage=True)
    >>> [c["choices"][0]["delta"] for c in r.start() + r.render(TextDelta(text="Hi"))]
    [{'role': 'assistant', 'content': ''}, {'content': 'Hi'}]
    """

    __slots__ = ("completion_id", "created", "include_usage", "model", "relay", "request_id")

    def __init__(
        self,
        completion_id: str,
        created: int,
        model: str,
        include_usage: bool = False,
        *,
        request_id: str | None = None,
    ) -> None:
        self.completion_id = completion_id
        self.created = created
        self.model = model
        self.include_usage = include_usage
        self.request_id = request_id  # shown in x_failover when the response has no record
        self.relay = Relay()

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if self.include_usage:
            obj["usage"] = None
        obj.update(extra)
        return obj

    def start(self) -> list[dict[str, Any]]:
        """The first chunk: the assistant role with empty content."""
        return [self.chunk({"role": "assistant", "content": ""})]

    def render(self, event: object) -> list[dict[str, Any]]:
        """The chunks for one stream event (none for usage, stop and restarts: they arrive
        again, complete, with the terminal event)."""
        if type(event) is TextDelta:  # the hot path: one chunk per text delta
            return [self.chunk({"content": event.text})] if self.relay.sent_text(event.text) else []
        out: list[dict[str, Any]] = []
        for e in self.relay.feed(event):
            out += self._chunks(e)
        return out

    def _chunks(self, event: StreamEvent) -> list[dict[str, Any]]:
        if isinstance(event, TextDelta):
            return [self.chunk({"content": event.text})]
        if isinstance(event, ReasoningDelta):
            return [self.chunk({"reasoning_content": event.text})]  # DeepSeek's field: see the module docstring
        if isinstance(event, ToolCallStart):
            fn = {"name": event.name, "arguments": ""}
            call = {"index": event.index, "id": event.id, "type": "function", "function": fn}
            return [self.chunk({"tool_calls": [call]})]
        if isinstance(event, ToolCallDelta):
            return [self.chunk({"tool_calls": [{"index": event.index, "function": {"arguments": event.arguments}}]})]
        return []

    def end(self, completed: Completed) -> list[dict[str, Any]]:
        """What the client was not sent yet (see the class docstring), the finish chunk (with
        the ``x_failover`` summary), then the usage chunk if asked for."""
        resp = completed.response
        out: list[dict[str, Any]] = []
        for e in self.relay.end(resp):
            out += self._chunks(e)
        if not self.relay.text_sent and (content := _content(resp)):  # structured output without text
            out.append(self.chunk({"content": content}))
        out.append(self.chunk({}, finish_reason(resp.stop_reason), x_failover=record_summary(resp, self.request_id)))
        if self.include_usage:
            out.append(
                {
                    "id": self.completion_id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": usage_body(resp.usage),
                }
            )
        return out


__all__ = [
    "ChatCompletionBody",
    "ChunkRenderer",
    "RelayMismatch",
    "completion_body",
    "error_body",
    "finish_reason",
    "parse_body",
    "record_summary",
    "to_request",
    "usage_body",
]
