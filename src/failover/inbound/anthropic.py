"""The Anthropic Messages wire format as a server speaks it (``POST /v1/messages``).

Wire reference: platform.claude.com/docs/en/api/messages, .../build-with-claude/streaming,
.../api/errors, and anthropic-sdk-python's ``types`` (``MessageCreateParams``, ``Message``,
``RawMessageStreamEvent``) and ``lib/streaming`` (how ``messages.stream()`` accumulates).

A body is validated with pydantic and turned into a provider-neutral
:class:`~failover.model.Request`; a :class:`~failover.model.Response` goes back as a
``message`` body (:func:`message_body`), stream events as ``(event name, data)`` pairs
(:class:`EventRenderer`), errors as ``{"type": "error", "error": {"type", "message"}}``.

What is translated and what is refused (a refusal is a 400 naming the field):

* ``system`` (string or text blocks) -> system messages at the start. A ``role: "system"``
  message inside ``messages`` (Anthropic's mid-conversation system message) -> one system
  message in its place, with the client's JSON object (``Message.inline``): an Anthropic
  target (direct) gets that object back where it was, verbatim (blocks, ``cache_control``,
  a per-turn ``output_config``); Claude on Vertex AI, Gemini,
  Bedrock and Responses targets take it into their system prompt; a Chat Completions target
  gets a ``role: "system"`` message in the same place.
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
* ``container``, ``mcp_servers``, ``inference_geo``: refused.

Passed through (:class:`~failover.model.Passthrough`, docs/gateway.md "Fields passed through"):
every other top-level field (``metadata``, ``service_tier``, ``context_management``, a top-level
``cache_control``, fields failover does not know yet) and the ``anthropic-beta`` header go
verbatim to an Anthropic target (direct or Claude on Vertex); ``cache_control`` stays on the
system, text, image, tool_use, tool_result and tool blocks that carry it. A target of another
dialect goes without the *hints* (``metadata``, ``service_tier``, ``cache_control``, ``speed``,
``diagnostics``, ``user_profile_id``, ``workspace_id``, ``context_management`` whose edits only
clear thinking, ``anthropic-beta``), which change cost or bookkeeping, not the answer: the
attempt records the drop. Any other field makes targets of other dialects ineligible.

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

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..model import (
    ImagePart,
    Message,
    Part,
    Passthrough,
    ReasoningEffort,
    Request,
    ResponseFormat,
    TextPart,
    Tool,
    ToolCall,
    ToolChoice,
)
from ..validation import DEFAULT_LIMITS, SchemaLimits
from ._anthropic_body import (
    AssistantMessage,
    Base64Source,
    ChoiceAny,
    ChoiceTool,
    ImageBlock,
    MessagesBody,
    RedactedThinkingBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ThinkingEnabled,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    parse_body,
)
from ._anthropic_events import Event as Event
from ._anthropic_events import EventRenderer
from ._anthropic_message import error_body, error_type_for, message_body, stop_reason, usage_body
from ._anthropic_signature import SIGNATURE_MARK, client_signature, history_reasoning
from ._relay import RelayMismatch
from ._wire import SchemaField, WireError, check_schemas

# ------------------------------------------------------------------------------ body -> Request


def _system(content: str | list[TextBlock] | None) -> list[Message]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Message.system(content)] if content else []
    return [Message(role="system", content=(_text(b),)) for b in content if b.text]


def _inline_system(message: SystemMessage) -> Message:
    """A ``role: "system"`` message of ``messages``: one system message where the client put it,
    every block (and its ``cache_control``) kept, with the client's JSON object (``inline``)."""
    content = (
        (TextPart(text=message.content),)
        if isinstance(message.content, str)
        else tuple(_text(b) for b in message.content)
    )
    return Message(role="system", content=content, inline=MappingProxyType(message.raw))


def _text(block: TextBlock) -> TextPart:
    return TextPart(text=block.text, cache_control=block.cache_control)


def _image(block: ImageBlock) -> ImagePart:
    src = block.source
    if isinstance(src, Base64Source):
        return ImagePart(url=f"data:{src.media_type};base64,{src.data}", cache_control=block.cache_control)
    return ImagePart(url=src.url, cache_control=block.cache_control)


def _tool_result_text(block: ToolResultBlock) -> str:
    text = block.content if isinstance(block.content, str) else "".join(b.text for b in block.content)
    if block.is_error:
        return f"Error: {text}" if text else "Error"
    return text


def _user(message: UserMessage) -> list[Message]:
    """Tool results first (one tool message each), then the user's own text and images."""
    if isinstance(message.content, str):
        return [Message.user(message.content)]
    results = [
        Message(
            role="tool",
            content=(TextPart(text=_tool_result_text(b), cache_control=b.cache_control),),
            tool_call_id=b.tool_use_id,
        )
        for b in message.content
        if isinstance(b, ToolResultBlock)
    ]
    parts: list[Part] = []
    for b in message.content:
        if isinstance(b, TextBlock):
            parts.append(_text(b))
        elif isinstance(b, ImageBlock):
            parts.append(_image(b))
    user = [Message(role="user", content=tuple(parts))] if parts else []
    return results + user


def _assistant(message: AssistantMessage, at: str) -> Message | None:
    """One assistant turn; ``at`` is its field path (for a refused signature)."""
    if isinstance(message.content, str):
        return Message.assistant(message.content) if message.content else None
    texts = [b for b in message.content if isinstance(b, TextBlock)]
    text = "".join(b.text for b in texts)
    calls = tuple(
        ToolCall(
            id=b.id,
            name=b.name,
            arguments=json.dumps(b.input, ensure_ascii=False),
            parsed=b.input,
            cache_control=b.cache_control,
        )
        for b in message.content
        if isinstance(b, ToolUseBlock)
    )
    if not text and not calls:
        return None  # only thinking blocks: no answer in it
    reasoning = tuple(
        history_reasoning(b, f"{at}.content[{i}]")
        for i, b in enumerate(message.content)
        if isinstance(b, ThinkingBlock | RedactedThinkingBlock)
    )
    if any(b.cache_control is not None for b in texts):  # one part per block, to keep each marker
        parts = tuple(_text(b) for b in texts if b.text or b.cache_control is not None)
        return Message(role="assistant", content=parts, tool_calls=calls, reasoning=reasoning)
    return Message.assistant(text, tool_calls=calls, reasoning=reasoning)


def _messages(body: MessagesBody) -> tuple[Message, ...]:
    out = _system(body.system)
    for i, m in enumerate(body.messages):
        if isinstance(m, SystemMessage):
            out.append(_inline_system(m))
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


# Top-level fields that change cost or bookkeeping, never the answer: a target of another
# dialect goes without them (the attempt records it). Any other passed-through field is opaque.
HINTS = frozenset(
    {"metadata", "service_tier", "cache_control", "speed", "diagnostics", "user_profile_id", "workspace_id"}
)
BETA_HEADER = "anthropic-beta"


def _clears_thinking_only(value: Any) -> bool:
    """A ``context_management`` whose every edit only clears old thinking blocks (what Claude
    Code sends): other dialects never see Anthropic thinking anyway, so it is a hint there."""
    edits = value.get("edits") if isinstance(value, Mapping) else None
    if not isinstance(edits, list) or set(value) - {"edits"}:
        return False
    return all(isinstance(e, Mapping) and str(e.get("type", "")).startswith("clear_thinking_") for e in edits)


def _marked(messages: tuple[Message, ...], tools: tuple[Tool, ...]) -> bool:
    """Whether any block carries a cache_control marker."""
    return any(t.cache_control is not None for t in tools) or any(
        any(p.cache_control is not None for p in m.content) or any(c.cache_control is not None for c in m.tool_calls)
        for m in messages
    )


def passthrough(
    body: MessagesBody, messages: tuple[Message, ...], tools: tuple[Tool, ...], beta: str | None = None
) -> Passthrough | None:
    """What of ``body`` (and the ``anthropic-beta`` header, ``beta``) goes verbatim to an
    Anthropic target; None when there is nothing."""
    fields: dict[str, Any] = dict(body.model_extra or {})
    if body.metadata is not None:
        fields["metadata"] = body.metadata
    if body.context_management is not None:
        fields["context_management"] = body.context_management
    headers = {BETA_HEADER: beta} if beta else {}
    marked = _marked(messages, tools)
    if not fields and not headers and not marked:
        return None
    hints = {k for k in fields if k in HINTS}
    if "context_management" in fields and _clears_thinking_only(fields["context_management"]):
        hints.add("context_management")
    opaque = frozenset(fields) - hints
    if marked:
        hints.add("cache_control")
    if headers:
        hints.add(BETA_HEADER)
    return Passthrough(
        dialect="anthropic",
        fields=MappingProxyType(fields),
        headers=MappingProxyType(headers),
        hints=frozenset(hints),
        opaque=opaque,
    )


def to_request(
    body: MessagesBody,
    *,
    limits: SchemaLimits = DEFAULT_LIMITS,
    schemas: bool = True,
    headers: Mapping[str, str] | None = None,
) -> Request:
    """The provider-neutral Request for a validated body (``headers``: the HTTP request's, with
    lower-case names, for the ``anthropic-beta`` header it passes through).

    Its JSON Schemas are checked (``limits``, meta-validation, compilation; see
    :func:`~failover.inbound.check_schemas`) unless ``schemas=False``: a server that admits
    the request first does that, then checks :func:`schema_fields` itself, off its event loop,
    before any upstream call."""
    if schemas:
        check_schemas(schema_fields(body), limits)
    tools = tuple(
        Tool(
            name=t.name,
            description=t.description,
            parameters=t.input_schema,
            strict=bool(t.strict),
            cache_control=t.cache_control,
        )
        for t in body.tools or ()
    )
    messages = _messages(body)
    beta = headers.get(BETA_HEADER) if headers is not None else None
    return Request(
        messages=messages,
        tools=tools,
        tool_choice=_tool_choice(body, tools),
        response_format=_format(body),
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        stop=tuple(body.stop_sequences or ()),
        reasoning_effort=_effort(body),
        passthrough=passthrough(body, messages, tools, beta),
    )


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
    "passthrough",
    "stop_reason",
    "to_request",
    "usage_body",
]
