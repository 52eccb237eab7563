"""The pieces of an OpenAI Responses object both renderings share (the plain body and the
stream's events): output items, usage, the response envelope, and the reasoning token.

Wire reference: openai-python ``types/responses`` (``Response``, ``ResponseOutputMessage``,
``ResponseFunctionToolCall``, ``ResponseReasoningItem``, ``ResponseUsage``).

**The reasoning token.** A reasoning item's ``encrypted_content`` is the opaque part a client
sends back unread. A block from an OpenAI Responses model keeps its own. A block from any other
provider gets one failover issues, as the Messages endpoint does for thinking signatures:
``failover.v1.`` and the base64url of a JSON object naming the block's ``source`` format, its
``origin`` (the equivalence key of the target that wrote it), that provider's ``signature``
and, for an Anthropic ``redacted_thinking`` block, its ``redacted`` data. Sent back in
``input``, failover reads the block out of it again, so the router gives it only to the model
that wrote it (see :func:`failover.model.readable_by`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ..model import REASONING_OPENAI_RESPONSES as RESPONSES_SOURCE  # reasoning items: summary, encrypted_content
from ..model import REASONING_SOURCES as _SOURCES
from ..model import Reasoning, Response, StopReason, Usage
from ._wire import WireError

TOKEN_MARK: Final = "failover.v1."  # never in OpenAI's own encrypted_content (Fernet tokens: base64url, no ".")

# What the answer's stop reason makes of the whole response: (status, incomplete_details.reason).
_INCOMPLETE = {StopReason.MAX_TOKENS: "max_output_tokens", StopReason.CONTENT_FILTER: "content_filter"}


def status_of(reason: StopReason) -> tuple[str, str | None]:
    """``("completed", None)``, or ``("incomplete", why)`` for an answer cut by the output limit
    (``max_output_tokens``) or withheld by a filter (``content_filter``)."""
    why = _INCOMPLETE.get(reason)
    return ("completed", None) if why is None else ("incomplete", why)


# ------------------------------------------------------------------------------ the reasoning token


def client_token(block: Reasoning) -> str | None:
    """The ``encrypted_content`` a client is given for ``block`` (see the module docstring):
    its own for a block of an OpenAI Responses model (None when it has none), else a token."""
    if block.source == RESPONSES_SOURCE:
        return block.signature
    payload: dict[str, Any] = {"source": block.source, "origin": block.origin, "signature": block.signature}
    if block.redacted is not None:
        payload["redacted"] = block.redacted
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return TOKEN_MARK + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def history_reasoning(text: str, encrypted: str | None, at: str) -> Reasoning:
    """A reasoning item of a client's ``input`` as failover's Reasoning: a token failover issued
    gives the block back as it was; anything else is a Responses block of unknown origin.
    ``at`` is the item's field path (for a token that does not decode)."""
    if encrypted is None or not encrypted.startswith(TOKEN_MARK):
        return Reasoning(text=text, signature=encrypted or None, source=RESPONSES_SOURCE)
    token = encrypted[len(TOKEN_MARK) :]
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        payload = None
    fields = payload if isinstance(payload, dict) else {}
    source, origin = fields.get("source"), fields.get("origin")
    signature, redacted = fields.get("signature"), fields.get("redacted")
    if (
        source not in _SOURCES
        or source == RESPONSES_SOURCE  # never issued for a Responses block: it keeps its own
        or not all(isinstance(v, str | None) for v in (origin, signature, redacted))
    ):
        raise WireError(
            400,
            f"{at}.encrypted_content: starts with {TOKEN_MARK!r} but is not one failover issued; send the "
            "reasoning item back exactly as it was received, or leave the item out",
            param=f"{at}.encrypted_content",
        )
    assert isinstance(source, str)
    if redacted is not None:
        return Reasoning(redacted=redacted, source=source, origin=origin)
    return Reasoning(text=text, signature=signature, source=source, origin=origin)


# ------------------------------------------------------------------------------ output items


def reasoning_item(item_id: str, block: Reasoning) -> dict[str, Any]:
    """A ``reasoning`` output item: the block's readable text as one summary part."""
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    if block.text:
        item["summary"] = [{"type": "summary_text", "text": block.text}]
    token = client_token(block)
    if token is not None:
        item["encrypted_content"] = token
    return item


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def refusal_part(refusal: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": refusal}


def message_item(item_id: str, content: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "status": status, "content": content, "role": "assistant"}


Names = Mapping[str, tuple[str, str]]  # a flattened tool name -> (namespace, name) as the client defined it
NO_NAMES: Final[Names] = MappingProxyType({})


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed", *, names: Names = NO_NAMES
) -> dict[str, Any]:
    """A ``function_call`` item; a call of a namespace's function gets the client's ``name`` and
    its ``namespace`` back (``names``: :func:`failover.inbound.responses.tool_names`)."""
    item = {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }
    if name in names:
        item["namespace"], item["name"] = names[name]
    return item


def answer_text(resp: Response) -> str:
    """The ``output_text`` of an answer: its text, or its structured output as JSON when a
    dialect gave only the parsed object."""
    if resp.text:
        return resp.text
    if resp.parsed is not None and not resp.tool_calls:
        return json.dumps(resp.parsed, separators=(",", ":"), ensure_ascii=False)
    return ""


def has_message(resp: Response) -> bool:
    """Whether the answer has a ``message`` item: text, a refusal, or nothing else to show (an
    answer with no tool call still has one, as OpenAI's does)."""
    return bool(answer_text(resp) or resp.refusal or not resp.tool_calls)


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def envelope(
    echo: Mapping[str, Any],
    *,
    response_id: str,
    created: int,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None = None,
    incomplete: str | None = None,
    error: Mapping[str, Any] | None = None,
    completed_at: int | None = None,
) -> dict[str, Any]:
    """A ``response`` object. ``echo``: the request's settings a response repeats (see
    :func:`failover.inbound.responses.echo`); ``model`` is the model that answered."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "completed_at": completed_at,
        "error": dict(error) if error is not None else None,
        "incomplete_details": {"reason": incomplete} if incomplete is not None else None,
        **echo,
        "model": model,
        "output": output,
        "previous_response_id": None,
        "store": False,  # failover stores nothing, whatever the request said
        "truncation": "disabled",
        "usage": usage_body(usage) if usage is not None else None,
    }


__all__ = [
    "NO_NAMES",
    "Names",
    "RESPONSES_SOURCE",
    "TOKEN_MARK",
    "answer_text",
    "call_item",
    "client_token",
    "envelope",
    "has_message",
    "history_reasoning",
    "message_item",
    "reasoning_item",
    "refusal_part",
    "status_of",
    "text_part",
    "usage_body",
]
