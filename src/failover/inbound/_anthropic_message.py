"""A Response as Anthropic Messages answers it in one piece: the ``message`` body
(:func:`message_body`, with :func:`stop_reason` and :func:`usage_body`), and the error body
(:func:`error_body`)."""

from __future__ import annotations

import json
from typing import Any

from ..model import Reasoning, Response, StopReason, ToolCall, Usage
from ._anthropic_signature import client_signature

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


def answer_text(resp: Response) -> str:
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


def stop_details(resp: Response) -> dict[str, Any] | None:
    if stop_reason(resp) != "refusal":
        return None
    return {"type": "refusal", "category": None, "explanation": resp.refusal}


def message_body(resp: Response, *, message_id: str, model: str) -> dict[str, Any]:
    """A ``message`` body for a Response; ``model`` is the model that answered."""
    content: list[dict[str, Any]] = [_reasoning_block(b) for b in resp.reasoning]
    text = answer_text(resp)
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
        "stop_details": stop_details(resp),
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
