"""Anthropic Messages answers and errors: what a message body, an assembled stream and an
error body mean.

Shared by the plain parse (:mod:`failover.providers.anthropic`) and the stream parser (:mod:`._stream`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from ...model import REASONING_ANTHROPIC as REASONING_SOURCE
from ...model import Failure, FailureKind, Reasoning, Response, StopReason, Target, ToolCall, Usage
from ...transport import HttpResponse
from .._common import (
    CONTEXT_OVERFLOW,
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_json,
    error_failure,
    kind_from_status,
    outcome_failure,
)
from .._google import google_envelope, google_error
from .._headers import HeaderMeta

REQUEST_ID_HEADERS: Final = ("request-id", "x-request-id")

STOP = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
    "pause_turn": StopReason.OTHER,  # a server tool paused a long turn; the caller may continue it
}

_TYPE_KIND = {
    "authentication_error": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "permission_error": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "billing_error": FailureKind.QUOTA_EXHAUSTED,
    "not_found_error": FailureKind.MODEL_NOT_FOUND,
    "rate_limit_error": FailureKind.RATE_LIMITED,
    "overloaded_error": FailureKind.PROVIDER_OVERLOADED,
    "api_error": FailureKind.PROVIDER_SERVER_ERROR,
    "timeout_error": FailureKind.PROVIDER_SERVER_ERROR,  # the server's own deadline (504)
    "request_too_large": FailureKind.INVALID_REQUEST,  # 413 from Cloudflare: bytes, not tokens
}

# Out of credit or over the workspace spend limit: Anthropic says so with a 400
# invalid_request_error ("Your credit balance is too low to access the Anthropic API",
# "You have reached your specified API usage limits"), which must not read as our bad request.
_QUOTA_MESSAGES = ("credit balance", "usage limits", "spend limit")


def parse_message(data: dict[str, Any], status: int, meta: HeaderMeta, origin: str) -> Response | Failure:
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for raw in as_list(data.get("content")):
        block = as_dict(raw)
        kind = block.get("type")
        if kind == "text":
            texts.append(as_str(block.get("text")) or "")
        elif kind == "thinking":
            reasoning.append(
                Reasoning(
                    text=as_str(block.get("thinking")) or "",
                    signature=as_str(block.get("signature")) or None,
                    source=REASONING_SOURCE,
                    origin=origin,
                )
            )
        elif kind == "redacted_thinking":
            reasoning.append(redacted(block.get("data"), origin))
        elif kind == "tool_use":
            value = block.get("input")
            calls.append(
                ToolCall(
                    id=as_str(block.get("id")) or "",
                    name=as_str(block.get("name")) or "",
                    arguments=json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                    parsed=value if isinstance(value, dict) else None,
                )
            )
        # server tool blocks (server_tool_use, web_search_tool_result...) are not carried
    result = result_of(
        text="".join(texts),
        calls=tuple(calls),
        reasoning=tuple(reasoning),
        raw_stop=as_str(data.get("stop_reason")),
        stop_details=as_dict(data.get("stop_details")),
        usage=usage_of(as_dict(data.get("usage"))),
        model=as_str(data.get("model")),
        response_id=as_str(data.get("id")),
        meta=meta,
    )
    return judge(result, status, meta)


def redacted(data: Any, origin: str) -> Reasoning:
    """A ``redacted_thinking`` block: its encrypted ``data`` whole, no readable text."""
    return Reasoning(redacted=as_str(data) or "", source=REASONING_SOURCE, origin=origin)


def result_of(
    *,
    text: str,
    calls: tuple[ToolCall, ...],
    reasoning: tuple[Reasoning, ...],
    raw_stop: str | None,
    stop_details: dict[str, Any],
    usage: Usage,
    model: str | None,
    response_id: str | None,
    meta: HeaderMeta,
) -> Response:
    """The normalized answer, from a message body or from an assembled stream."""
    refusal: str | None = None
    if raw_stop == "refusal":
        refusal = as_str(stop_details.get("explanation")) or text or "the model declined to answer"
    return Response(
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
        usage=usage,
        stop_reason=STOP.get(raw_stop or "", StopReason.OTHER),
        raw_stop_reason=raw_stop,
        refusal=refusal,
        model=model,
        provider_request_id=meta.request_id,
        rate_limits=meta.rate_limits,
        response_id=response_id,
    )


def judge(result: Response, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    raw_stop = result.raw_stop_reason

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="anthropic", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_stop
        )

    if result.refusal is not None:
        return fail(FailureKind.CONTENT_FILTERED, f"the model refused: {result.refusal}")
    if raw_stop == "max_tokens":
        return fail(FailureKind.TRUNCATED, "the output hit max_tokens")
    if raw_stop == "model_context_window_exceeded":
        # Output ran into the context window, not into max_tokens: raising max_tokens
        # cannot help, only a larger window can.
        return fail(FailureKind.CONTEXT_OVERFLOW, "the output filled the model's context window")
    malformed = [c.name or "?" for c in result.tool_calls if c.parsed is None]
    if malformed:
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"tool_use input is not a JSON object: {', '.join(malformed)}")
    return result


def usage_of(raw: dict[str, Any]) -> Usage:
    # input_tokens counts only the uncached part; cache reads and writes are billed input too.
    cache_read = as_int(raw.get("cache_read_input_tokens"))
    return Usage(
        input_tokens=as_int(raw.get("input_tokens")) + cache_read + as_int(raw.get("cache_creation_input_tokens")),
        output_tokens=as_int(raw.get("output_tokens")),
        cached_input_tokens=cache_read,
        # thinking_tokens is newer than the samples; it is part of output_tokens.
        reasoning_tokens=as_int(as_dict(raw.get("output_tokens_details")).get("thinking_tokens")),
    )


def error(target: Target, response: HttpResponse, meta: HeaderMeta, data: dict[str, Any]) -> Failure:
    google = google_envelope(data if data else decode_json(response.body))
    if google is not None:  # Vertex AI's front end refused it (auth, IAM, quota) before Claude saw it
        return google_error("anthropic", target, response, meta, google)
    err = as_dict(data.get("error"))
    err_type = as_str(err.get("type"))
    message = as_str(err.get("message"))
    return error_failure(
        provider="anthropic",
        kind=_classify(response.status, err_type, message),
        target=target,
        response=response,
        meta=meta,
        code=err_type,
        message=message,
        request_id=as_str(data.get("request_id")),
    )


def _classify(status: int, err_type: str | None, message: str | None) -> FailureKind:
    lowered = (message or "").lower()
    # Not on a 429: rate-limit messages talk about "usage" too, and are the rate limit's.
    if status in (400, 402, 403) and any(m in lowered for m in _QUOTA_MESSAGES):
        return FailureKind.QUOTA_EXHAUSTED
    if err_type in _TYPE_KIND:
        return _TYPE_KIND[err_type]
    if status in (400, 413, 422) and CONTEXT_OVERFLOW.search(lowered):
        return FailureKind.CONTEXT_OVERFLOW
    return kind_from_status(status)
