"""The Anthropic Messages wire format as a server speaks it (``POST /v1/messages``).

Wire reference: platform.claude.com/docs/en/api/messages, .../build-with-claude/streaming,
.../api/errors, and anthropic-sdk-python's ``types`` (``MessageCreateParams``, ``Message``,
``RawMessageStreamEvent``) and ``lib/streaming`` (how ``messages.stream()`` accumulates).

A body is validated with pydantic and turned into a provider-neutral
:class:`~failover.model.Request`; a :class:`~failover.model.Response` goes back as a
``message`` body (:func:`message_body`), stream events as ``(event name, data)`` pairs
(:class:`EventRenderer`), errors as ``{"type": "error", "error": {"type", "message"}}``.

What is translated and what is refused (a refusal is a 400 naming the field):

* ``system`` (string or text blocks; also ``role: "system"`` messages) -> system messages.
* user content: text, image (``base64`` and ``url`` sources), tool_result (string or text
  blocks; ``is_error: true`` is carried as the text prefix ``"Error: "`` because no other
  dialect has the flag). Images inside a tool_result and other block types (document,
  search_result, server tool blocks, container_upload) are refused.
* assistant content: text, tool_use, ``thinking`` and ``redacted_thinking`` blocks. Thinking
  becomes the message's :class:`~failover.model.Reasoning`, and the router sends each block on
  only to a target that can read it (see "Reasoning" below). An assistant turn of thinking only
  is left out (nothing in it is an answer another turn can build on).
* ``tools``: custom tools only (name, description, input_schema, strict); server tools
  (``web_search_*``, ``bash_*``, ...) are refused. ``tool_choice``: auto / any / tool / none;
  ``disable_parallel_tool_use: true`` is refused (no other dialect can promise it).
* ``temperature``, ``top_p``, ``stop_sequences``, ``max_tokens`` (required, >= 1) map as is;
  ``top_k`` is refused: failover's Request has no top_k and the answer may come from an
  OpenAI-dialect model that has none either.
* ``thinking``: ``enabled`` maps its budget to a reasoning effort (>= 24576 high, >= 8192
  medium, >= 2048 low, else minimal, the inverse of the Anthropic dialect's budgets);
  ``adaptive`` and ``disabled`` leave the effort to the model. ``output_config.effort``
  (low/medium/high; xhigh and max become high) wins over ``thinking``.
* ``output_config.format`` (and the older ``output_format``) of type ``json_schema`` ->
  structured output, validated before it counts.
* ``metadata``, ``cache_control``, ``service_tier``, ``speed``, ``diagnostics``,
  ``user_profile_id``, ``workspace_id``: ignored (they do not change the answer);
  ``container``, ``mcp_servers``, ``context_management``, ``inference_geo``: refused.

Reasoning goes back as Anthropic sends it: ``thinking`` blocks (``thinking_delta`` events, then
one ``signature_delta``) and ``redacted_thinking`` blocks, in their order, before the answer's
text and tool_use blocks (in a stream, in the order the model produced them). A block from an
Anthropic model keeps its own signature, untouched. A block from another provider has no
Anthropic signature, and the anthropic SDK needs one; it is given a signature failover issues
(:func:`client_signature`): ``failover.v1.`` and the base64url of a JSON object naming the
block's ``source`` format, its ``origin`` (the equivalence key of the target that wrote it) and
that provider's own ``signature`` (a Gemini thought signature; null for Chat Completions
reasoning). Anthropic signatures are base64, which has no ``.``, so the two can never be
confused. When a client sends such a block back in its history, failover reads its source,
origin and signature out of it again, so the router sends the block only to the model that
wrote it and a real Anthropic target never receives a signature failover made up. Any other
signature is an Anthropic one (source ``anthropic``, origin unknown); a ``failover.v1.``
signature that does not decode is a 400 naming the field.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..model import (
    Completed,
    ImagePart,
    Message,
    Part,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
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
    ToolCallDone,
    ToolCallStart,
    ToolChoice,
    Usage,
    UsageUpdate,
)
from ..model._reasoning import ANTHROPIC as _ANTHROPIC_SOURCE
from ..model._reasoning import REASONING_SOURCES
from ..model._request import ReasoningEffort
from ..validation import DEFAULT_LIMITS, SchemaLimits
from ._relay import Relay, RelayMismatch
from ._wire import SchemaField, WireError, check_schemas, record_summary, validation_error

Event = tuple[str, dict[str, Any]]


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# ------------------------------------------------------------------------------ the request body


class TextBlock(_Edge):
    type: Literal["text"]
    text: str


class Base64Source(_Edge):
    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str = Field(min_length=1)


class UrlSource(_Edge):
    type: Literal["url"]
    url: str = Field(min_length=1)

    @field_validator("url")
    @classmethod
    def _scheme(cls, v: str) -> str:
        if not v.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL (send other images as a base64 source)")
        return v


ImageSource = Annotated[Base64Source | UrlSource, Field(discriminator="type")]


class ImageBlock(_Edge):
    type: Literal["image"]
    source: ImageSource


class ToolUseBlock(_Edge):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any]


class ToolResultBlock(_Edge):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: str | list[TextBlock] = ""
    is_error: bool = False

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        content = data.get("content") if isinstance(data, dict) else None
        if isinstance(content, list):
            for i, block in enumerate(content):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind != "text":
                    raise ValueError(
                        f"content[{i}] is a {kind!r} block; a tool_result may hold text only here "
                        "(send images in a user text/image block after the tool results)"
                    )
        return data


class ThinkingBlock(_Edge):
    type: Literal["thinking"]
    thinking: str = ""
    signature: str = ""


class RedactedThinkingBlock(_Edge):
    type: Literal["redacted_thinking"]
    data: str = ""


UserBlock = Annotated[TextBlock | ImageBlock | ToolResultBlock, Field(discriminator="type")]
AssistantBlock = Annotated[
    TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")
]


class UserMessage(_Edge):
    role: Literal["user"]
    content: str | list[UserBlock]


class AssistantMessage(_Edge):
    role: Literal["assistant"]
    content: str | list[AssistantBlock]


class SystemMessage(_Edge):
    role: Literal["system"]
    content: str | list[TextBlock]


InputMessage = Annotated[UserMessage | AssistantMessage | SystemMessage, Field(discriminator="role")]

_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class ToolDef(_Edge):
    name: str = Field(pattern=_NAME)
    description: str = ""
    input_schema: dict[str, Any]
    strict: bool | None = None
    type: Literal["custom"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _custom_only(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind not in (None, "custom"):
            raise ValueError(
                f"server tool {kind!r} is not supported by the gateway: the answer may come from any approved "
                "model; define a custom tool (name, description, input_schema) and run it yourself"
            )
        return data


_PARALLEL = (
    "disable_parallel_tool_use is not supported: the answer may come from a model that cannot promise one tool "
    "call; remove it and use the first tool_use block"
)


class _ChoiceBase(_Edge):
    disable_parallel_tool_use: bool | None = None

    @field_validator("disable_parallel_tool_use")
    @classmethod
    def _parallel(cls, v: bool | None) -> bool | None:
        if v:
            raise ValueError(_PARALLEL)
        return v


class ChoiceAuto(_ChoiceBase):
    type: Literal["auto"]


class ChoiceAny(_ChoiceBase):
    type: Literal["any"]


class ChoiceTool(_ChoiceBase):
    type: Literal["tool"]
    name: str = Field(min_length=1)


class ChoiceNone(_Edge):
    type: Literal["none"]


ToolChoiceIn = Annotated[ChoiceAuto | ChoiceAny | ChoiceTool | ChoiceNone, Field(discriminator="type")]


class ThinkingEnabled(_Edge):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1024)


class ThinkingAdaptive(_Edge):
    type: Literal["adaptive"]


class ThinkingDisabled(_Edge):
    type: Literal["disabled"]


ThinkingIn = Annotated[ThinkingEnabled | ThinkingAdaptive | ThinkingDisabled, Field(discriminator="type")]


class JsonOutputFormat(_Edge):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Edge):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JsonOutputFormat | None = None


# Fields that would change the answer and that failover's Request cannot carry.
_REFUSED = {
    "top_k": "top_k is not supported: the answer may come from any approved model and not all have it; "
    "remove it (temperature and top_p are carried)",
    "container": "container is not supported: server-side code execution is not offered by the gateway",
    "mcp_servers": "mcp_servers is not supported: the gateway does not call MCP servers; define custom tools",
    "context_management": "context_management is not supported by the gateway; remove it",
    "inference_geo": "inference_geo is not supported: the route's contract decides data regions; remove it",
}


class MessagesBody(_Edge):
    """The fields of a Messages request the gateway reads (others are ignored, or refused
    when they would change the answer: see the module docstring)."""

    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[InputMessage] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: ToolChoiceIn | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, ge=0, le=1)
    stop_sequences: list[str] | None = None
    stream: bool | None = False
    metadata: dict[str, Any] | None = None
    thinking: ThinkingIn | None = None
    output_config: OutputConfig | None = None
    output_format: JsonOutputFormat | None = None
    top_k: Any = None
    container: Any = None
    mcp_servers: Any = None
    context_management: Any = None
    inference_geo: Any = None

    @field_validator("top_k", "container", "mcp_servers", "context_management", "inference_geo")
    @classmethod
    def _refused(cls, v: Any, info: Any) -> Any:
        if v is not None:
            raise ValueError(_REFUSED[info.field_name])
        return v


_UNION_FIELDS = frozenset({"content", "system", "source", "tool_choice", "thinking"})
_UNION_TAGS = frozenset(
    {
        "user",
        "assistant",
        "system",
        "text",
        "image",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "base64",
        "url",
        "auto",
        "any",
        "tool",
        "none",
        "enabled",
        "adaptive",
        "disabled",
        "str",
    }
)


def parse_body(data: Any) -> MessagesBody:
    """Validate a decoded body; a problem is a 400 :class:`WireError` naming the field."""
    if not isinstance(data, dict):
        raise WireError(400, "the request body must be a JSON object", code="invalid_body")
    try:
        return MessagesBody.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, tags=_UNION_TAGS, unions=_UNION_FIELDS, explain_tags=True) from None


# ------------------------------------------------------------------------------ body -> Request


def _system_texts(content: str | list[TextBlock] | None) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content] if content else []
    return [b.text for b in content if b.text]


def _image(block: ImageBlock) -> ImagePart:
    src = block.source
    if isinstance(src, Base64Source):
        return ImagePart(url=f"data:{src.media_type};base64,{src.data}")
    return ImagePart(url=src.url)


def _tool_result_text(block: ToolResultBlock) -> str:
    text = block.content if isinstance(block.content, str) else "".join(b.text for b in block.content)
    if block.is_error:
        return f"Error: {text}" if text else "Error"
    return text


def _user(m: UserMessage) -> list[Message]:
    """Tool results first (one tool message each), then the user's own text and images."""
    if isinstance(m.content, str):
        return [Message.user(m.content)]
    results = [Message.tool(b.tool_use_id, _tool_result_text(b)) for b in m.content if isinstance(b, ToolResultBlock)]
    parts: list[Part] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append(TextPart(text=b.text))
        elif isinstance(b, ImageBlock):
            parts.append(_image(b))
    user = [Message(role="user", content=tuple(parts))] if parts else []
    return results + user


def _assistant(m: AssistantMessage, at: str) -> Message | None:
    """One assistant turn; ``at`` is its field path (for a refused signature)."""
    if isinstance(m.content, str):
        return Message.assistant(m.content) if m.content else None
    text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
    calls = tuple(
        ToolCall(id=b.id, name=b.name, arguments=json.dumps(b.input, ensure_ascii=False), parsed=b.input)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    )
    if not text and not calls:
        return None  # only thinking blocks: no answer in it
    reasoning = tuple(
        _history_reasoning(b, f"{at}.content[{i}]")
        for i, b in enumerate(m.content)
        if isinstance(b, ThinkingBlock | RedactedThinkingBlock)
    )
    return Message.assistant(text, tool_calls=calls, reasoning=reasoning)


# ------------------------------------------------------------------------------ reasoning

# The mark of a signature failover issued for a block of another provider (see the module
# docstring). Anthropic signatures are base64: never a ".", so never this prefix.
SIGNATURE_MARK: Final = "failover.v1."


def client_signature(block: Reasoning) -> str:
    """The ``signature`` an Anthropic client is given for ``block``: its own for a block of an
    Anthropic model, else one failover issues that names the block's source, origin and
    signature (see the module docstring)."""
    if block.source == _ANTHROPIC_SOURCE:
        return block.signature or ""
    payload = {"source": block.source, "origin": block.origin, "signature": block.signature}
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return SIGNATURE_MARK + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _issued(signature: str, text: str, at: str) -> Reasoning:
    """A block whose signature failover issued, as it was before it went to the client."""
    token = signature[len(SIGNATURE_MARK) :]
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        payload = None
    source = payload.get("source") if isinstance(payload, dict) else None
    origin = payload.get("origin") if isinstance(payload, dict) else None
    theirs = payload.get("signature") if isinstance(payload, dict) else None
    if (
        source not in REASONING_SOURCES
        or source == _ANTHROPIC_SOURCE  # never issued for an Anthropic block: it keeps its own
        or not isinstance(origin, str | None)
        or not isinstance(theirs, str | None)
    ):
        raise WireError(
            400,
            f"{at}.signature: starts with {SIGNATURE_MARK!r} but is not a signature failover issued; send the "
            "thinking block back exactly as it was received, or leave the block out",
            param=f"{at}.signature",
        )
    assert isinstance(source, str)
    return Reasoning(text=text, signature=theirs, source=source, origin=origin)


def _history_reasoning(block: ThinkingBlock | RedactedThinkingBlock, at: str) -> Reasoning:
    """A thinking block of a client's history as failover's Reasoning (origin unknown unless
    failover issued its signature)."""
    if isinstance(block, RedactedThinkingBlock):
        return Reasoning(redacted=block.data, source=_ANTHROPIC_SOURCE)
    if block.signature.startswith(SIGNATURE_MARK):
        return _issued(block.signature, block.thinking, at)
    return Reasoning(text=block.thinking, signature=block.signature or None, source=_ANTHROPIC_SOURCE)


def _messages(body: MessagesBody) -> tuple[Message, ...]:
    out = [Message.system(t) for t in _system_texts(body.system)]
    for i, m in enumerate(body.messages):
        if isinstance(m, SystemMessage):
            out.extend(Message.system(t) for t in _system_texts(m.content))
        elif isinstance(m, UserMessage):
            out.extend(_user(m))
        else:
            msg = _assistant(m, f"messages[{i}]")
            if msg is not None:
                out.append(msg)
    return tuple(out)


def _tool_choice(body: MessagesBody, tools: tuple[Tool, ...]) -> ToolChoice | None:
    choice = body.tool_choice
    if choice is None:
        return None
    if isinstance(choice, ChoiceTool):
        if choice.name not in {t.name for t in tools}:
            raise WireError(
                400,
                f"tool_choice.name is {choice.name!r}, which is not in tools; name one of the tools",
                param="tool_choice.name",
            )
        return ToolChoice(mode="tool", name=choice.name)
    if isinstance(choice, ChoiceAny):
        if not tools:
            raise WireError(400, "tool_choice 'any' needs at least one tool in tools", param="tool_choice")
        return ToolChoice(mode="required")
    return ToolChoice(mode=choice.type)


# budget_tokens -> effort: the inverse of the Anthropic dialect's budgets per effort.
_BUDGETS: tuple[tuple[int, ReasoningEffort], ...] = ((24576, "high"), (8192, "medium"), (2048, "low"))
_EFFORTS: dict[str, ReasoningEffort] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}


def _effort(body: MessagesBody) -> ReasoningEffort | None:
    if body.output_config is not None and body.output_config.effort is not None:
        return _EFFORTS[body.output_config.effort]
    thinking = body.thinking
    if not isinstance(thinking, ThinkingEnabled):
        return None  # adaptive / disabled / absent: the model's own default
    if thinking.budget_tokens >= body.max_tokens:
        raise WireError(
            400,
            f"thinking.budget_tokens ({thinking.budget_tokens}) must be less than max_tokens ({body.max_tokens})",
            param="thinking.budget_tokens",
        )
    return next((effort for floor, effort in _BUDGETS if thinking.budget_tokens >= floor), "minimal")


def _format(body: MessagesBody) -> ResponseFormat | None:
    config = body.output_config.format if body.output_config is not None else None
    if config is not None and body.output_format is not None:
        raise WireError(
            400,
            "send output_config.format or output_format, not both (output_format is the older name)",
            param="output_format",
        )
    fmt = config or body.output_format
    return None if fmt is None else ResponseFormat(kind="json_schema", schema=fmt.schema_, strict=True)


def schema_fields(body: MessagesBody) -> list[SchemaField]:
    """Every client JSON Schema in ``body`` with its field path (tool input schemas, output format)."""
    out: list[SchemaField] = [(f"tools[{i}].input_schema", t.input_schema) for i, t in enumerate(body.tools or ())]
    config = body.output_config.format if body.output_config is not None else None
    if config is not None:
        out.append(("output_config.format.schema", config.schema_))
    if body.output_format is not None:
        out.append(("output_format.schema", body.output_format.schema_))
    return out


def to_request(body: MessagesBody, *, limits: SchemaLimits = DEFAULT_LIMITS, schemas: bool = True) -> Request:
    """The provider-neutral Request for a validated body.

    Its JSON Schemas are checked (``limits``, meta-validation, compilation; see
    :func:`~failover.inbound.check_schemas`) unless ``schemas=False``: a server that admits
    the request first does that, then checks :func:`schema_fields` itself, off its event loop,
    before any upstream call."""
    if schemas:
        check_schemas(schema_fields(body), limits)
    tools = tuple(
        Tool(name=t.name, description=t.description, parameters=t.input_schema, strict=bool(t.strict))
        for t in body.tools or ()
    )
    return Request(
        messages=_messages(body),
        tools=tools,
        tool_choice=_tool_choice(body, tools),
        response_format=_format(body),
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        stop=tuple(body.stop_sequences or ()),
        reasoning_effort=_effort(body),
    )


# ------------------------------------------------------------------------------ Response -> body

_STOP = {
    StopReason.END_TURN: "end_turn",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.TOOL_USE: "tool_use",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.CONTENT_FILTER: "refusal",
    StopReason.REFUSAL: "refusal",
    StopReason.OTHER: "end_turn",
}


def stop_reason(resp: Response) -> str:
    """Anthropic's stop_reason; ``tool_use`` whenever the answer holds tool calls (some
    dialects say "stop" there, and Anthropic clients loop on ``tool_use``)."""
    if resp.tool_calls and resp.stop_reason in (StopReason.END_TURN, StopReason.OTHER):
        return "tool_use"
    return _STOP.get(resp.stop_reason, "end_turn")


def usage_body(usage: Usage) -> dict[str, Any]:
    """Anthropic's usage: ``input_tokens`` counts only the uncached part, cache reads apart."""
    out: dict[str, Any] = {
        "input_tokens": max(0, usage.input_tokens - usage.cached_input_tokens),
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_input_tokens,
    }
    if usage.reasoning_tokens:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out


def _text(resp: Response) -> str:
    if resp.text:
        return resp.text
    if resp.parsed is not None and not resp.tool_calls:
        return json.dumps(resp.parsed, separators=(",", ":"), ensure_ascii=False)
    return resp.refusal or ""


def _tool_input(call: ToolCall) -> dict[str, Any]:
    if call.parsed is not None:
        return dict(call.parsed)
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _reasoning_block(block: Reasoning) -> dict[str, Any]:
    if block.redacted is not None:
        return {"type": "redacted_thinking", "data": block.redacted}
    return {"type": "thinking", "thinking": block.text, "signature": client_signature(block)}


def _stop_details(resp: Response) -> dict[str, Any] | None:
    if stop_reason(resp) != "refusal":
        return None
    return {"type": "refusal", "category": None, "explanation": resp.refusal}


def message_body(resp: Response, *, message_id: str, model: str) -> dict[str, Any]:
    """A ``message`` body for a Response; ``model`` is the route the caller named."""
    content: list[dict[str, Any]] = [_reasoning_block(b) for b in resp.reasoning]
    text = _text(resp)
    if text or not resp.tool_calls:
        content.append({"type": "text", "text": text})
    content.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c)} for c in resp.tool_calls)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(resp),
        "stop_sequence": None,
        "stop_details": _stop_details(resp),
        "usage": usage_body(resp.usage),
    }


# ------------------------------------------------------------------------------ errors

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type_for(status: int) -> str:
    """Anthropic's error ``type`` for a status: other 4xx are ``invalid_request_error`` (as the
    API docs say), other 5xx ``api_error``; 503 (every candidate failing for now, or a drain)
    is ``overloaded_error``, the type Anthropic clients treat as "retry later"."""
    known = _TYPES.get(status)
    if known is not None:
        return known
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``.

    ``code`` (failover's failure kind or gateway code, e.g. ``deadline_exhausted``) goes in
    ``error.details.error_code``, where the anthropic SDK reads a stable cause
    (``APIStatusError.error_code``).
    """
    error: dict[str, Any] = {"type": type or error_type_for(status), "message": message}
    if code:
        error["details"] = {"error_code": code}
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return body


# ------------------------------------------------------------------------------ streaming


class _Block:
    """The content block now open: a text, a tool_use (``key`` = the call's index) or a thinking
    block (``key`` = the reasoning block's index). A tool_use or thinking block is never
    interrupted: events of other blocks wait until it is finished."""

    __slots__ = ("index", "key", "kind")

    def __init__(self, index: int, kind: Literal["text", "tool", "thinking"], key: int = -1) -> None:
        self.index = index
        self.kind = kind
        self.key = key


class EventRenderer:
    """Server-sent events of one streamed message, as ``(event name, data)`` pairs.

    ``start()`` gives ``message_start`` and a ``ping``; ``render(event)`` turns failover's
    stream events into ``content_block_start`` / ``content_block_delta`` (``text_delta``,
    ``thinking_delta`` and ``signature_delta``, ``input_json_delta``) / ``content_block_stop``;
    ``end(completed)`` closes the open block and gives ``message_delta`` (stop_reason, usage) and
    ``message_stop``; ``error(...)`` is the ``error`` event that ends a stream cut after output
    began.

    Content blocks are sequential, as Anthropic's are: a tool_use or thinking block that has not
    finished is never interrupted. A dialect that interleaves parallel calls (OpenAI), or text
    with a reasoning block it has not finished, has the other blocks' events held until the
    open one finishes; a dialect that gives a call whole (Gemini) becomes one block with one
    ``input_json_delta``. A reasoning block is a ``thinking`` block (its signature as
    :func:`client_signature` gives it, in one ``signature_delta`` before it stops) or a
    ``redacted_thinking`` block.

    The events pass through a :class:`~failover.inbound._relay.Relay` first, so what the client
    assembles always equals the answer failover records: an answer that no longer matches what
    was sent raises :class:`~failover.inbound.RelayMismatch` (the server ends the stream with an
    error event).

    >>> r = EventRenderer("msg_1", "chat")
    >>> [name for name, _ in r.start() + r.render(TextDelta(text="Hi"))]
    ['message_start', 'ping', 'content_block_start', 'content_block_delta']
    """

    def __init__(self, message_id: str, model: str, *, request_id: str | None = None) -> None:
        self.message_id = message_id
        self.model = model
        self.request_id = request_id  # shown in x_failover when the response has no record
        self.relay = Relay()
        self._blocks = 0  # blocks started so far: the next block's index
        self._open: _Block | None = None
        self._answer_blocks = 0  # text and tool_use blocks started (not thinking)
        self._held: list[StreamEvent] = []  # events waiting for the open tool_use / thinking block
        self._usage = Usage()

    # -- the frame ----------------------------------------------------------------------------

    def start(self) -> list[Event]:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_body(self._usage),
        }
        return [("message_start", {"type": "message_start", "message": message}), ("ping", {"type": "ping"})]

    def end(self, completed: Completed) -> list[Event]:
        resp = completed.response
        out: list[Event] = []
        for e in self.relay.end(resp):  # every block finished: nothing waits after this
            out += self._place(e)
        out.extend(self._close())
        if not self.relay.text_sent:
            text = "" if resp.tool_calls else _text(resp)  # structured output or a refusal without text
            # an answer with no text or tool_use block still has one (empty) text block, as Anthropic's does
            if text or not self._answer_blocks:
                out.extend(self._open_text())
                if text:
                    out.append(self._text_delta(text))
                out.extend(self._close())
        delta: dict[str, Any] = {"stop_reason": stop_reason(resp), "stop_sequence": None}
        details = _stop_details(resp)
        if details is not None:
            delta["stop_details"] = details
        message_delta = {
            "type": "message_delta",
            "delta": delta,
            "usage": usage_body(resp.usage),
            "x_failover": record_summary(resp, self.request_id),
        }
        out.append(("message_delta", message_delta))
        out.append(("message_stop", {"type": "message_stop"}))
        return out

    def error(self, message: str, *, type: str = "api_error", code: str | None = None) -> list[Event]:
        """The ``error`` event that ends a stream after output began (never a splice)."""
        return [("error", error_body(500, message, type=type, code=code, request_id=self.request_id))]

    # -- events -------------------------------------------------------------------------------

    def render(self, event: object) -> list[Event]:
        open_block = self._open
        if type(event) is TextDelta and (open_block is None or open_block.kind == "text"):
            # the hot path: a text delta with no tool_use or thinking block open
            if not self.relay.sent_text(event.text):
                return []
            return (
                [self._text_delta(event.text)]
                if open_block is not None
                else [*self._open_text(), self._text_delta(event.text)]
            )
        out: list[Event] = []
        for e in self.relay.feed(event):
            out += self._place(e)
        return out

    def _place(self, event: StreamEvent) -> list[Event]:
        if isinstance(event, UsageUpdate):
            self._usage = event.usage
            return []
        block = self._open
        if block is not None and block.kind != "text" and not self._belongs(event, block):
            self._held.append(event)  # another block's: after the open one finishes
            return []
        return self._event(event)

    @staticmethod
    def _belongs(event: StreamEvent, block: _Block) -> bool:
        if isinstance(event, ReasoningDelta | ReasoningDone):
            return block.kind == "thinking" and event.index == block.key
        if isinstance(event, ToolCallStart | ToolCallDelta | ToolCallDone):
            return block.kind == "tool" and event.index == block.key
        return not isinstance(event, TextDelta)  # Stop, Restarted: nothing to show

    def _event(self, event: StreamEvent) -> list[Event]:
        if isinstance(event, TextDelta):
            out = [] if self._open is not None else self._open_text()
            return [*out, self._text_delta(event.text)]
        if isinstance(event, ReasoningDelta):
            out = [] if self._open is not None and self._open.kind == "thinking" else self._open_thinking(event.index)
            return [*out, self._delta({"type": "thinking_delta", "thinking": event.text})]
        if isinstance(event, ReasoningDone):
            block = event.block
            if block.redacted is not None:  # never had deltas: a block of its own, start and stop
                closed = self._close()
                start = self._start("thinking", {"type": "redacted_thinking", "data": block.redacted}, event.index)
                return [*closed, start, *self._released()]
            out = [] if self._open is not None and self._open.kind == "thinking" else self._open_thinking(event.index)
            signature = {"type": "signature_delta", "signature": client_signature(block)}
            return [*out, self._delta(signature), *self._released()]
        if isinstance(event, ToolCallStart):
            closed = self._close()
            tool_use = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            return [*closed, self._start("tool", tool_use, event.index)]
        if isinstance(event, ToolCallDelta):
            return [self._delta({"type": "input_json_delta", "partial_json": event.arguments})]
        if isinstance(event, ToolCallDone):
            return self._released()
        return []

    # -- blocks -------------------------------------------------------------------------------

    def _start(self, kind: Literal["text", "tool", "thinking"], content_block: dict[str, Any], key: int = -1) -> Event:
        index = self._blocks
        self._blocks += 1
        self._open = _Block(index, kind, key)
        if kind != "thinking":
            self._answer_blocks += 1
        return ("content_block_start", {"type": "content_block_start", "index": index, "content_block": content_block})

    def _delta(self, delta: dict[str, Any]) -> Event:
        assert self._open is not None
        return ("content_block_delta", {"type": "content_block_delta", "index": self._open.index, "delta": delta})

    def _open_text(self) -> list[Event]:
        closed = self._close()
        return [*closed, self._start("text", {"type": "text", "text": ""})]

    def _open_thinking(self, index: int) -> list[Event]:
        closed = self._close()
        return [*closed, self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""}, index)]

    def _text_delta(self, text: str) -> Event:
        return self._delta({"type": "text_delta", "text": text})

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        index, self._open = self._open.index, None
        return [("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _released(self) -> list[Event]:
        """The open tool_use / thinking block finished: it stops, and the events that waited go out."""
        out = self._close()
        held, self._held = self._held, []
        for waiting in held:
            out += self._place(waiting)
        return out


__all__ = [
    "SIGNATURE_MARK",
    "EventRenderer",
    "MessagesBody",
    "RelayMismatch",
    "client_signature",
    "error_body",
    "error_type_for",
    "message_body",
    "parse_body",
    "stop_reason",
    "to_request",
    "usage_body",
]
