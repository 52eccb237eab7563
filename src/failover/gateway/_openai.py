"""The OpenAI Chat Completions wire format at the gateway's edge.

Bodies are validated with pydantic (unknown fields that change nothing for the answer, such
as ``user`` or ``metadata``, are ignored; ones the gateway cannot honour, such as ``n > 1``
or ``logprobs``, are refused with a 400 naming the field), then turned into a
:class:`~failover.model.Request`. A :class:`~failover.model.Response` goes back as a
``chat.completion`` body, and stream events as ``chat.completion.chunk`` bodies.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..model import (
    ImagePart,
    Message,
    Part,
    Request,
    Response,
    ResponseFormat,
    StopReason,
    TextPart,
    Tool,
    ToolCall,
    ToolChoice,
    Usage,
)
from ._errors import ApiError


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
    def _scheme(cls, v: str) -> str:
        if not v.startswith(("https://", "http://", "data:image/")):
            raise ValueError("must be an http(s) URL or a data:image/...;base64 URL")
        return v


class ImageContent(_Edge):
    type: Literal["image_url"]
    image_url: ImageURL


UserPart = Annotated[TextContent | ImageContent, Field(discriminator="type")]


class FunctionCallIn(_Edge):
    name: str
    arguments: str


class ToolCallIn(_Edge):
    id: str
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
    """The fields of a Chat Completions request the gateway reads."""

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDef] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    response_format: FormatSpec | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1, le=1, description="only one choice is supported")
    logprobs: bool | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and len(v) > 4:
            raise ValueError("at most 4 stop sequences")
        return v

    @field_validator("logprobs")
    @classmethod
    def _logprobs(cls, v: bool | None) -> bool | None:
        if v:
            raise ValueError("logprobs are not supported by the gateway (the answer may come from any approved model)")
        return v


def _loc(loc: tuple[int | str, ...]) -> str:
    """A dotted field path without pydantic's union branch names (``messages[0].content[1].image_url``)."""
    out = ""
    after_union = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            after_union = True
            continue
        if "[" in part or (after_union and part in _UNION_TAGS):
            after_union = False
            continue
        out += f".{part}" if out else part
        after_union = part in {"response_format", "tool_choice", "content", "stop"}
    return out


_UNION_TAGS = {
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


def parse_body(data: Any) -> ChatCompletionBody:
    """Validate a decoded body; a problem is a 400 naming the field."""
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_body")
    try:
        return ChatCompletionBody.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        first = max(errs, key=lambda e: len(e["loc"]))
        param = _loc(tuple(first["loc"])) or None
        more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
        where = f"{param}: " if param else ""
        raise ApiError(400, f"invalid request body: {where}{first['msg']}{more}", param=param) from None


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


def to_request(body: ChatCompletionBody) -> Request:
    """The provider-neutral Request for a validated body."""
    messages: list[Message] = []
    for m in body.messages:
        if isinstance(m, SystemMessage):
            messages.append(Message.system(_text(m.content)))
        elif isinstance(m, UserMessage):
            messages.append(Message(role="user", content=_user_parts(m.content), name=m.name))
        elif isinstance(m, AssistantMessage):
            calls = tuple(
                ToolCall(
                    id=c.id,
                    name=c.function.name,
                    arguments=c.function.arguments,
                    parsed=_parsed_args(c.function.arguments),
                )
                for c in m.tool_calls or ()
            )
            messages.append(Message.assistant(_text(m.content), tool_calls=calls))
        else:
            messages.append(Message.tool(m.tool_call_id, _text(m.content)))
    tools = tuple(
        Tool(
            name=t.function.name,
            description=t.function.description,
            parameters=t.function.parameters or {"type": "object", "properties": {}},
            strict=bool(t.function.strict),
        )
        for t in body.tools or ()
    )
    choice: ToolChoice | None = None
    if isinstance(body.tool_choice, NamedToolChoice):
        name = body.tool_choice.function.name
        if name not in {t.name for t in tools}:
            raise ApiError(400, f"tool_choice names {name!r}, which is not in tools", param="tool_choice")
        choice = ToolChoice(mode="tool", name=name)
    elif body.tool_choice is not None:
        if body.tool_choice == "required" and not tools:
            raise ApiError(400, "tool_choice 'required' needs at least one tool in tools", param="tool_choice")
        choice = ToolChoice(mode=body.tool_choice)
    fmt: ResponseFormat | None = None
    rf = body.response_format
    if isinstance(rf, JsonSchemaFormat):
        if rf.json_schema.schema_ is None:
            raise ApiError(
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
        raise ApiError(
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


def completion_body(resp: Response, *, completion_id: str, created: int, model: str) -> dict[str, Any]:
    """A ``chat.completion`` body for a Response; ``model`` is the route the caller named."""
    message: dict[str, Any] = {"role": "assistant", "content": _content(resp), "refusal": resp.refusal}
    if resp.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in resp.tool_calls
        ]
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
