"""The OpenAI Responses API as a server speaks it (``POST /v1/responses``), stateless.

Wire reference: openai-python ``types/responses`` (``ResponseCreateParams``, ``Response``,
``ResponseStreamEvent``) and its ``lib/streaming/responses`` (how ``responses.stream()``
accumulates).

A body is validated with pydantic and turned into a provider-neutral
:class:`~failover.model.Request`; a :class:`~failover.model.Response` goes back as a
``response`` object (:func:`response_body`), stream events as named SSE events
(:class:`EventRenderer`), errors in OpenAI's envelope (:func:`error_body`).

What is translated:

* ``instructions`` -> the first system message; ``input`` as a string -> one user message, or
  as items: ``message`` items (``user`` with ``input_text`` / ``input_image``, ``system`` and
  ``developer`` with text, ``assistant`` with ``output_text`` / ``refusal``), ``function_call``
  items (grouped with the assistant message and reasoning items before them into one turn),
  ``function_call_output`` items (text), ``custom_tool_call`` / ``custom_tool_call_output``
  items (a freeform tool's call and result: for a Responses target only, see
  :mod:`~failover.inbound._responses_tools`), ``reasoning`` items (the turn's reasoning: its
  summary text and ``encrypted_content``; the token: :mod:`failover.inbound._responses_items`),
  ``web_search_call`` items (taken and left out: they hold a query, not what was found).
* ``tools``: function tools; ``namespace`` tools (a group of function tools, as Codex sends
  them), flattened into function tools named ``<namespace>__<name>`` for every target, and the
  model's calls of them given back as ``function_call`` items with the client's ``name`` and
  ``namespace`` (a ``function_call`` input item with a ``namespace`` is flattened the same way);
  hosted and freeform tools (``web_search``, ``custom``, any other type) sent verbatim to a
  Responses target only: another dialect's candidate is left out (the record says why). Their
  output items (``web_search_call``, ``custom_tool_call``...) reach the client verbatim.
* ``include`` and ``reasoning.summary`` go verbatim to an OpenAI Responses target; other dialects
  ignore them (a reasoning item always carries ``encrypted_content``, and its summary is the
  readable reasoning the model gave, if any).
* ``tool_choice`` (``auto``, ``none``, ``required``, a function),
  ``text.format`` (``text``, ``json_object``, ``json_schema``), ``max_output_tokens``,
  ``temperature``, ``top_p``, ``reasoning.effort`` (``none`` becomes ``minimal``, ``xhigh``
  and ``max`` become ``high``).
* Passed through (:mod:`~failover.inbound._passthrough`): ``metadata`` (also echoed back),
  ``store`` (never over failover's own ``false``), ``parallel_tool_calls`` (echoed), ``user``
  and every top-level field not named here go verbatim to a Responses target; a target of
  another dialect drops the hints among them or is left out. ``text.verbosity``: not sent.
  ``service_tier``, ``max_tool_calls``, ``truncation``: checked, then passed through.

What is refused, each a 400 naming the field and saying why:

* stateful fields: ``previous_response_id``, ``conversation``, ``prompt`` (a stored
  template), ``background: true``, and ``item_reference`` input items. A retried or
  failed-over request cannot continue another provider's server-side state: send the whole
  conversation in ``input``.
* a ``tool_choice`` naming a hosted tool (or ``allowed_tools``), input items of hosted tools
  but ``web_search_call``, a namespaced name over 64 characters or equal to another tool's,
  ``input_file`` and ``input_audio`` parts, images by ``file_id`` or in a tool's output, logprobs
  (``top_logprobs`` > 0, ``include`` of ``message.output_text.logprobs``),
  ``context_management``.

>>> body = parse_body({"model": "chat", "input": "Hi"})
>>> request = to_request(body)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..model import (
    Dialect,
    ImagePart,
    Message,
    Part,
    Reasoning,
    ReasoningEffort,
    Request,
    Response,
    ResponseFormat,
    TextPart,
    Tool,
    ToolCall,
    ToolChoice,
    new_id,
)
from ..validation import DEFAULT_LIMITS, SchemaLimits
from ._passthrough import check_responses_settings, passthrough
from ._relay import RelayMismatch
from ._responses_items import (
    NO_NAMES,
    Names,
    answer_text,
    call_item,
    envelope,
    has_message,
    history_reasoning,
    message_item,
    reasoning_item,
    refusal_part,
    status_of,
    text_part,
)
from ._responses_stream import EventRenderer
from ._responses_tools import (
    NAME,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionTool,
    HostedTool,
    NamespaceTool,
    ToolSpec,
    flat_name,
    freeform_call,
    function_tools,
)
from ._responses_tools import tool_names as _tool_names
from ._wire import SchemaField, WireError, check_schemas, image_url, validation_error
from .openai import error_body


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# ------------------------------------------------------------------------------ the request body


class InputText(_Edge):
    type: Literal["input_text"]
    text: str


class InputImage(_Edge):
    type: Literal["input_image"]
    image_url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] | None = None

    @field_validator("image_url")
    @classmethod
    def _scheme(cls, url: str) -> str:
        return image_url(url)


class OutputText(_Edge):
    type: Literal["output_text"]
    text: str


class RefusalContent(_Edge):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[InputText | InputImage | OutputText | RefusalContent, Field(discriminator="type")]


class MessageItem(_Edge):
    """A message; ``type`` may be left out (OpenAI's "easy" input message)."""

    type: Literal["message"]
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]


class FunctionCallItem(_Edge):
    type: Literal["function_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str
    namespace: str | None = None  # a call of a function of a namespace tool


class FunctionCallOutputItem(_Edge):
    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1)
    output: str | list[InputText]


class SummaryText(_Edge):
    type: Literal["summary_text"]
    text: str


class ReasoningText(_Edge):
    type: Literal["reasoning_text"]
    text: str


class ReasoningItem(_Edge):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None


class WebSearchCallItem(_Edge):
    """A search the model made in an earlier turn (Codex sends them back): taken, and left out of
    the conversation (it holds the query, not what was found; the answer after it says that)."""

    type: Literal["web_search_call"]


InputItem = Annotated[
    MessageItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | CustomToolCallItem
    | CustomToolCallOutputItem
    | ReasoningItem
    | WebSearchCallItem,
    Field(discriminator="type"),
]


class FunctionChoice(_Edge):
    type: Literal["function"]
    name: str = Field(min_length=1)
    namespace: str | None = None


class TextFormat(_Edge):
    type: Literal["text"]


class JsonObjectFormat(_Edge):
    type: Literal["json_object"]


class JsonSchemaFormat(_Edge):
    type: Literal["json_schema"]
    name: str = Field(pattern=NAME)
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


FormatSpec = Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]


class TextConfig(_Edge):
    format: FormatSpec | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


_Summary = Literal["auto", "concise", "detailed"]


class ReasoningConfig(_Edge):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: _Summary | None = None
    generate_summary: _Summary | None = None


_STATELESS = (
    "failover keeps no server-side state: a request it retries or fails over cannot continue another provider's"
)


class ResponsesBody(_Edge):
    """The fields of a Responses request the gateway reads (others are kept in ``model_extra``
    and passed through, or refused when they would need server-side state or change the answer:
    see the module docstring)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: str = Field(min_length=1)
    input: str | Annotated[list[InputItem], Field(min_length=1)]
    instructions: str | None = None
    tools: list[ToolSpec] | None = None
    include: list[str] | None = None
    tool_choice: Literal["auto", "none", "required"] | FunctionChoice | None = None
    text: TextConfig | None = None
    # strict numbers: the API refuses true or "300" here, so coercing them would change the request
    max_output_tokens: int | None = Field(None, ge=1, strict=True)
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    top_p: float | None = Field(None, ge=0, le=1, strict=True)
    reasoning: ReasoningConfig | None = None
    metadata: dict[str, str] | None = Field(None, max_length=16)
    stream: bool | None = False
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None
    top_logprobs: int | None = Field(None, ge=0, le=0, description="logprobs are not supported")
    # stateful: accepted only absent (or null / false); see the module docstring
    previous_response_id: None = Field(None, description=f"not supported: {_STATELESS}")
    conversation: None = Field(None, description=f"not supported: {_STATELESS}")
    prompt: None = Field(None, description=f"stored prompts are not supported: {_STATELESS}")
    background: Literal[False] | None = Field(None, description=f"background responses are not supported: {_STATELESS}")

    @field_validator("input", mode="before")
    @classmethod
    def _easy_messages(cls, raw: Any) -> Any:
        """An item with a ``role`` and no ``type`` is a message (OpenAI's "easy" input message)."""
        if not isinstance(raw, list):
            return raw
        return [{**i, "type": "message"} if isinstance(i, dict) and "type" not in i and "role" in i else i for i in raw]


_UNION_FIELDS = frozenset({"input", "content", "output", "tool_choice", "format"})
_CALLS = ("function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output")
_ITEMS = frozenset({"message", *_CALLS, "reasoning", "web_search_call"})
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_UNION_TAGS = frozenset(
    {"str", "function", "namespace", "hosted", *_ITEMS, "input_text", "input_image", "output_text", "refusal"}
    | {"text", "json_object", "json_schema", "FunctionChoice"}
)

# ------------------------------------------------------------------------------ what is refused, and why

_STATEFUL = {
    "previous_response_id": "it continues a response stored at the provider",
    "conversation": "it continues a conversation stored at the provider",
    "prompt": "it names a prompt template stored at the provider",
}
_SEND_INPUT = "send the whole conversation in input (and the system prompt in instructions) instead"
_BUILT_IN = (
    "names a hosted tool: tool_choice may force a function only here (the answer may come from a model that "
    "cannot run hosted tools); use 'auto' or 'required'"
)


def _refuse(at: str, message: str, code: str = "unsupported_parameter") -> WireError:
    return WireError(400, f"{at}: {message}", param=at, code=code)


def _check_stateless(data: dict[str, Any]) -> None:
    for name, what in _STATEFUL.items():
        if data.get(name) is not None:
            raise _refuse(name, f"not supported: {what}, and {_STATELESS}; {_SEND_INPUT}")
    if data.get("background") is True:
        raise _refuse(
            "background",
            "background responses are not supported: failover answers on the open connection and keeps no "
            f"responses to poll, and {_STATELESS}; leave background out, and raise x-failover-deadline-ms "
            "for a long task",
        )


def _check_tools(data: dict[str, Any]) -> None:
    choice = data.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "allowed_tools":
        raise _refuse(
            "tool_choice.type",
            "'allowed_tools' is not supported: send only the tools the model may call in tools, with tool_choice "
            "'auto' or 'required'",
        )
    if isinstance(kind, str) and kind != "function":
        raise _refuse("tool_choice.type", f"{kind!r} {_BUILT_IN}")


def _check_other(data: dict[str, Any]) -> None:
    top = data.get("top_logprobs")
    include = data.get("include")
    asked = "top_logprobs" if isinstance(top, int) and not isinstance(top, bool) and top > 0 else None
    if asked is None and isinstance(include, list) and "message.output_text.logprobs" in include:
        asked = "include"
    if asked is not None:
        raise _refuse(asked, "logprobs are not supported by the gateway (the answer may come from any approved model)")
    if data.get("context_management") is not None:
        raise _refuse(
            "context_management",
            "not supported: the gateway does not compact conversations server-side; remove it",
        )


def _check_part(part: Any, at: str, *, in_output: bool) -> None:
    kind = part.get("type") if isinstance(part, dict) else None
    if in_output and kind in ("input_image", "input_file"):
        raise _refuse(
            f"{at}.type",
            f"{kind!r}: a function_call_output may hold text only here (send images in a user message after it)",
        )
    if kind in ("input_file", "input_audio"):
        raise _refuse(f"{at}.type", f"{kind!r} is not supported: send text as input_text and images as input_image")
    if kind == "input_image" and isinstance(part, dict) and part.get("image_url") is None:
        raise _refuse(
            f"{at}.file_id",
            "images stored at the provider are not supported: send image_url (an https:// or "
            "data:image/...;base64, URL) instead",
        )


def _check_items(data: dict[str, Any]) -> None:
    items = data.get("input")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        if not isinstance(item, dict):
            continue
        at = f"input[{i}]"
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "item_reference":
            raise _refuse(
                f"{at}.type",
                f"'item_reference' points at an item stored at the provider, and {_STATELESS}; send the item itself",
            )
        if isinstance(kind, str) and kind not in _ITEMS:
            raise _refuse(
                f"{at}.type",
                f"{kind!r} is not supported: the gateway carries message, {', '.join(_CALLS)}, "
                "reasoning and web_search_call items",
            )
        name = "output" if kind in _OUTPUTS else "content"
        parts = item.get(name)
        for j, part in enumerate(parts if isinstance(parts, list) else ()):
            _check_part(part, f"{at}.{name}[{j}]", in_output=kind in _OUTPUTS)


def parse_body(data: Any) -> ResponsesBody:
    """Validate a decoded body; a problem is a 400 :class:`WireError` naming the field."""
    if not isinstance(data, dict):
        raise WireError(400, "the request body must be a JSON object", code="invalid_body")
    _check_stateless(data)
    _check_tools(data)
    _check_items(data)
    _check_other(data)
    check_responses_settings(data)
    try:
        return ResponsesBody.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, tags=_UNION_TAGS, unions=_UNION_FIELDS, explain_tags=True) from None


# ------------------------------------------------------------------------------ body -> Request


def schema_fields(body: ResponsesBody) -> list[SchemaField]:
    """Every client JSON Schema in ``body`` with its field path (tool parameters, text format)."""
    out: list[SchemaField] = []
    for i, t in enumerate(body.tools or ()):
        if isinstance(t, FunctionTool) and t.parameters is not None:
            out.append((f"tools[{i}].parameters", t.parameters))
        elif isinstance(t, NamespaceTool):
            out += [(f"tools[{i}].tools[{j}].parameters", f.parameters) for j, f in enumerate(t.tools) if f.parameters]
    fmt = body.text.format if body.text is not None else None
    if isinstance(fmt, JsonSchemaFormat):
        out.append(("text.format.schema", fmt.schema_))
    return out


def _parts(item: MessageItem, at: str) -> tuple[Part, ...]:
    if isinstance(item.content, str):
        return (TextPart(text=item.content),)
    if not item.content:
        raise WireError(
            400, f"{at}.content: an empty array; give a string or at least one content part", param=f"{at}.content"
        )
    parts: list[Part] = []
    for j, p in enumerate(item.content):
        if isinstance(p, InputImage):
            if item.role != "user":
                where = f"{at}.content[{j}]"
                raise WireError(400, f"{where}: images are taken in user messages only", param=where)
            parts.append(ImagePart(url=p.image_url, detail=p.detail))
        else:
            parts.append(TextPart(text=p.refusal if isinstance(p, RefusalContent) else p.text))
    return tuple(parts)


def _parsed_args(arguments: str) -> dict[str, Any] | None:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(slots=True)
class _Turn:
    """The assistant turn being gathered: reasoning, message and function_call items in a row."""

    reasoning: list[Reasoning] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)

    def flush(self) -> list[Message]:
        """The turn as one assistant message (none for reasoning alone: nothing in it is an
        answer another turn can build on), and a new empty turn."""
        text, calls, reasoning = "".join(self.text), tuple(self.calls), tuple(self.reasoning)
        self.reasoning, self.text, self.calls = [], [], []
        if not text and not calls:
            return []
        return [Message.assistant(text, tool_calls=calls, reasoning=reasoning)]


def _reasoning(item: ReasoningItem, at: str) -> Reasoning:
    text = "\n\n".join(s.text for s in item.summary) or "".join(c.text for c in item.content or ())
    return history_reasoning(text, item.encrypted_content, at)


def _messages(body: ResponsesBody) -> tuple[Message, ...]:
    out = [Message.system(body.instructions)] if body.instructions else []
    if isinstance(body.input, str):
        return (*out, Message.user(body.input))
    turn = _Turn()
    for i, item in enumerate(body.input):
        at = f"input[{i}]"
        if isinstance(item, WebSearchCallItem):
            continue
        if isinstance(item, ReasoningItem):
            turn.reasoning.append(_reasoning(item, at))
        elif isinstance(item, FunctionCallItem):
            args, name = item.arguments, flat_name(item.namespace, item.name)
            turn.calls.append(ToolCall(id=item.call_id, name=name, arguments=args, parsed=_parsed_args(args)))
        elif isinstance(item, CustomToolCallItem):
            turn.calls.append(freeform_call(item))
        elif isinstance(item, MessageItem) and item.role == "assistant":
            if turn.calls:  # a message after calls begins another turn
                out += turn.flush()
            turn.text.append("".join(p.text for p in _parts(item, at) if isinstance(p, TextPart)))
        else:
            out += turn.flush()
            if isinstance(item, CustomToolCallOutputItem):
                out.append(Message.tool(item.call_id, item.text))
            elif isinstance(item, FunctionCallOutputItem):
                text = item.output if isinstance(item.output, str) else "".join(p.text for p in item.output)
                out.append(Message.tool(item.call_id, text))
            else:
                out.append(Message(role="user" if item.role == "user" else "system", content=_parts(item, at)))
    return (*out, *turn.flush())


def tool_names(body: ResponsesBody) -> dict[str, tuple[str, str]]:
    """Each flattened name of a namespace's function: ``(namespace, name)`` as the client knows it."""
    return _tool_names(body.tools)


def _tool_choice(body: ResponsesBody, tools: tuple[Tool, ...]) -> ToolChoice | None:
    choice = body.tool_choice
    if isinstance(choice, FunctionChoice):
        name = flat_name(choice.namespace, choice.name)
        if name not in {t.name for t in tools}:
            raise WireError(
                400, f"tool_choice.name is {choice.name!r}, which is not in tools", param="tool_choice.name"
            )
        return ToolChoice(mode="tool", name=name)
    if choice == "required" and not tools and not any(isinstance(t, HostedTool) for t in body.tools or ()):
        raise WireError(400, "tool_choice 'required' needs at least one tool in tools", param="tool_choice")
    return ToolChoice(mode=choice) if choice is not None else None


def _format(body: ResponsesBody) -> ResponseFormat | None:
    fmt = body.text.format if body.text is not None else None
    if isinstance(fmt, JsonSchemaFormat):
        return ResponseFormat(kind="json_schema", schema=fmt.schema_, name=fmt.name, strict=bool(fmt.strict))
    if isinstance(fmt, JsonObjectFormat):
        return ResponseFormat(kind="json_object")
    return None


_EFFORTS: dict[str, ReasoningEffort] = {
    "none": "minimal",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}


def to_request(body: ResponsesBody, *, limits: SchemaLimits = DEFAULT_LIMITS, schemas: bool = True) -> Request:
    """The provider-neutral Request for a validated body.

    Its JSON Schemas are checked (``limits``, meta-validation, compilation; see
    :func:`~failover.inbound.check_schemas`) unless ``schemas=False``: a server that admits
    the request first does that, then checks :func:`schema_fields` itself, off its event loop,
    before any upstream call."""
    if schemas:
        check_schemas(schema_fields(body), limits)
    tools = function_tools(body.tools or [])
    reasoning = body.reasoning
    effort = reasoning.effort if reasoning is not None else None
    return Request(
        messages=_messages(body),
        tools=tools,
        tool_choice=_tool_choice(body, tools),
        response_format=_format(body),
        max_tokens=body.max_output_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        reasoning_effort=_EFFORTS[effort] if effort is not None else None,
        hosted_tools=tuple(t.model_dump() for t in body.tools or () if isinstance(t, HostedTool)),
        include=tuple(body.include or ()),
        reasoning_summary=(reasoning.summary or reasoning.generate_summary) if reasoning is not None else None,
        passthrough=passthrough(Dialect.OPENAI_RESPONSES, _unread(body)),
    )


def _unread(body: ResponsesBody) -> dict[str, Any]:
    """The top-level fields failover takes but does not translate, as the client sent them."""
    kept = {k: getattr(body, k) for k in ("metadata", "store", "parallel_tool_calls", "user")}
    return {**{k: v for k, v in kept.items() if v is not None}, **(body.model_extra or {})}


# ------------------------------------------------------------------------------ Response -> body


def echo(body: ResponsesBody) -> dict[str, Any]:
    """The request's settings a ``response`` object repeats, as OpenAI's does."""
    tools = [
        t.model_dump()
        if isinstance(t, HostedTool)
        else t.model_dump(exclude_none=True)
        if isinstance(t, NamespaceTool)
        else _function_echo(t)
        for t in body.tools or ()
    ]
    choice = body.tool_choice
    text: dict[str, Any] = {"format": {"type": "text"}}
    if body.text is not None:
        if body.text.format is not None:
            text["format"] = body.text.format.model_dump(by_alias=True, exclude_none=True)
        if body.text.verbosity is not None:
            text["verbosity"] = body.text.verbosity
    reasoning = body.reasoning
    return {
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "metadata": dict(body.metadata or {}),
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "reasoning": {
            "effort": reasoning.effort if reasoning is not None else None,
            "summary": (reasoning.summary or reasoning.generate_summary) if reasoning is not None else None,
        },
        "temperature": body.temperature,
        "text": text,
        "tool_choice": choice.model_dump() if isinstance(choice, FunctionChoice) else (choice or "auto"),
        "tools": tools,
        "top_p": body.top_p,
        "user": body.user,
    }


def _function_echo(tool: FunctionTool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": tool.strict,
    }


def output_items(
    resp: Response, item_id: Callable[[str], str] = new_id, names: Names = NO_NAMES
) -> list[dict[str, Any]]:
    """The ``output`` of an answer: its reasoning items, its hosted tools' items (verbatim), its
    message (text and refusal), then one ``function_call`` item per call, named as the client
    defined it (``names``: :func:`tool_names`). ``item_id(prefix)`` makes each item's id."""
    status, _ = status_of(resp.stop_reason)
    out = [reasoning_item(item_id("rs_"), block) for block in resp.reasoning]
    out.extend(dict(item) for item in resp.hosted_items)
    if has_message(resp):
        text = answer_text(resp)
        content = [text_part(text)] if text or not resp.refusal else []
        if resp.refusal:
            content.append(refusal_part(resp.refusal))
        out.append(message_item(item_id("msg_"), content, status))
    out.extend(call_item(item_id("fc_"), c.id, c.name, c.arguments, names=names) for c in resp.tool_calls)
    return out


def response_body(
    resp: Response, *, response_id: str, created: int, model: str, body: ResponsesBody, now: int
) -> dict[str, Any]:
    """A ``response`` object for a Response; ``model`` is the model that answered, ``now``
    the time it completed (Unix seconds)."""
    status, incomplete = status_of(resp.stop_reason)
    return envelope(
        echo(body),
        response_id=response_id,
        created=created,
        model=model,
        status=status,
        output=output_items(resp, names=tool_names(body)),
        usage=resp.usage,
        incomplete=incomplete,
        completed_at=now if status == "completed" else None,
    )


__all__ = [
    "CustomToolCallItem",
    "EventRenderer",
    "HostedTool",
    "NamespaceTool",
    "RelayMismatch",
    "ResponsesBody",
    "echo",
    "error_body",
    "output_items",
    "parse_body",
    "response_body",
    "flat_name",
    "schema_fields",
    "to_request",
    "tool_names",
]
