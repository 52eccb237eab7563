"""Anthropic Messages: ``POST {base_url}/messages`` (``base_url`` ends in ``/v1``).

Wire reference: platform.claude.com/docs/en/api/messages, .../api/errors,
.../api/rate-limits, .../build-with-claude/structured-outputs, and anthropic-sdk-python's
``types``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..model import (
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Request,
    Response,
    StopReason,
    Target,
    TextPart,
    Tool,
    ToolCall,
    ToolChoice,
    Usage,
)
from ..transport._types import HttpRequest, HttpResponse
from ._common import (
    CONTEXT_OVERFLOW,
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_json,
    error_failure,
    kind_from_status,
    outcome_failure,
    with_query,
)
from ._headers import HeaderMeta, anthropic_rate_limits, read_meta

__all__ = ["AnthropicDialect"]

ANTHROPIC_VERSION = "2023-06-01"  # the only Messages API version; features are opt-in per field
_REQUEST_ID_HEADERS = ("request-id", "x-request-id")

_STOP = {
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


class AnthropicDialect:
    """Anthropic Messages API.

    ``max_tokens`` is required by the API: the request's, else the target's
    ``max_output_tokens``.

    JSON-schema output uses native structured outputs, ``output_config.format`` (GA; it
    replaced the beta ``output_format`` + ``structured-outputs-2025-11-13`` header). The
    JSON arrives as the text of the answer, like OpenAI's, so nothing special happens on
    parse and the validation module checks it. A forced tool would also work on older
    models, but it occupies ``tool_choice`` (so it cannot coexist with the caller's tools)
    and turns the answer into a tool call; targets that lack structured outputs should
    simply not declare the capability. ``json_object`` has no Anthropic equivalent and is
    left to validation.
    """

    name: str = "anthropic"

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if target.api_key:
            headers["x-api-key"] = target.api_key.reveal()
        headers.update(target.headers)  # e.g. anthropic-beta

        body: dict[str, Any] = {
            "model": target.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else target.max_output_tokens,
            "messages": _messages(request.messages),
        }
        system = request.system_text
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
            if request.tool_choice is not None:
                body["tool_choice"] = _tool_choice(request.tool_choice)
        fmt = request.response_format
        if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": dict(fmt.schema)}}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        # request.seed: the Messages API has no seed; sampling is not reproducible there.
        if stream:
            body["stream"] = True
        url = with_query(target.base_url.rstrip("/") + "/messages", target.query)
        return HttpRequest(method="POST", url=url, headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        data = as_dict(decode_json(response.body))
        if 200 <= response.status < 300:
            if data.get("type") == "message" or isinstance(data.get("content"), list):
                return _parse_message(data, response.status, meta)
            if data.get("type") == "error":
                return _error(target, response, meta, data)
            return error_failure(
                provider=self.name,
                kind=FailureKind.PROVIDER_SERVER_ERROR,
                target=target,
                response=response,
                meta=meta,
                code=None,
                message="the body is not a message",
            )
        return _error(target, response, meta, data)


# -------------------------------------------------------------------- build helpers


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue  # hoisted to the top-level "system"
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.text}
            # Results of parallel calls must share ONE user turn, right after the tool_use turn.
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and last.get("_tool_results"):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_tool_results": True})
            continue
        if m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.text:
                blocks.append({"type": "text", "text": m.text})
            blocks.extend(
                {"type": "tool_use", "id": tc.id, "name": tc.name, "input": _tool_input(tc)} for tc in m.tool_calls
            )
            if not blocks:
                continue  # the API rejects an empty assistant turn; dropping it changes nothing
            out.append({"role": "assistant", "content": blocks})
            continue
        if len(m.content) == 1 and isinstance(m.content[0], TextPart):
            out.append({"role": "user", "content": m.content[0].text})
        else:
            out.append({"role": "user", "content": [_part(p) for p in m.content]})
    for item in out:
        item.pop("_tool_results", None)
    return out


def _part(p: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if p.is_data:
        media_type, data = p.data()
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": p.url}}


def _tool_input(tc: ToolCall) -> Mapping[str, Any]:
    """tool_use.input must be an object; replay what the model sent when it was one."""
    if tc.parsed is not None:
        return dict(tc.parsed)
    try:
        parsed = json.loads(tc.arguments) if tc.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool(t: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": t.name, "input_schema": dict(t.parameters)}
    if t.description:
        out["description"] = t.description
    if t.strict:
        out["strict"] = True  # strict tool use (structured outputs); older models reject the key
    return out


def _tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "tool" and choice.name:
        return {"type": "tool", "name": choice.name}
    if choice.mode in ("required", "tool"):
        return {"type": "any"}
    return {"type": choice.mode}  # "auto" | "none"


# -------------------------------------------------------------------- parse helpers


def _parse_message(data: dict[str, Any], status: int, meta: HeaderMeta) -> Response | Failure:
    texts: list[str] = []
    calls: list[ToolCall] = []
    malformed: list[str] = []
    for raw in as_list(data.get("content")):
        block = as_dict(raw)
        kind = block.get("type")
        if kind == "text":
            texts.append(as_str(block.get("text")) or "")
        elif kind == "tool_use":
            name = as_str(block.get("name")) or ""
            value = block.get("input")
            parsed = value if isinstance(value, dict) else None
            calls.append(
                ToolCall(
                    id=as_str(block.get("id")) or "",
                    name=name,
                    arguments=json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                    parsed=parsed,
                )
            )
            if parsed is None:
                malformed.append(name or "?")
        # thinking / redacted_thinking / server tool blocks are not part of the answer

    raw_stop = as_str(data.get("stop_reason"))
    stop = _STOP.get(raw_stop or "", StopReason.OTHER)
    text = "".join(texts)
    refusal: str | None = None
    if raw_stop == "refusal":
        details = as_dict(data.get("stop_details"))
        refusal = as_str(details.get("explanation")) or text or "the model declined to answer"

    result = Response(
        text=text,
        tool_calls=tuple(calls),
        usage=_usage(as_dict(data.get("usage"))),
        stop_reason=stop,
        raw_stop_reason=raw_stop,
        refusal=refusal,
        model=as_str(data.get("model")),
        provider_request_id=meta.request_id,
        response_id=as_str(data.get("id")),
    )

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="anthropic", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_stop
        )

    if refusal is not None:
        return fail(FailureKind.CONTENT_FILTERED, f"the model refused: {refusal}")
    if raw_stop == "max_tokens":
        return fail(FailureKind.TRUNCATED, "the output hit max_tokens")
    if raw_stop == "model_context_window_exceeded":
        # Output ran into the context window, not into max_tokens: raising max_tokens
        # cannot help, only a larger window can.
        return fail(FailureKind.CONTEXT_OVERFLOW, "the output filled the model's context window")
    if malformed:
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"tool_use input is not a JSON object: {', '.join(malformed)}")
    return result


def _usage(u: dict[str, Any]) -> Usage:
    # input_tokens counts only the uncached part; cache reads and writes are billed input too.
    cache_read = as_int(u.get("cache_read_input_tokens"))
    return Usage(
        input_tokens=as_int(u.get("input_tokens")) + cache_read + as_int(u.get("cache_creation_input_tokens")),
        output_tokens=as_int(u.get("output_tokens")),
        cached_input_tokens=cache_read,
        # thinking_tokens is newer than the samples; it is part of output_tokens.
        reasoning_tokens=as_int(as_dict(u.get("output_tokens_details")).get("thinking_tokens")),
    )


def _error(target: Target, response: HttpResponse, meta: HeaderMeta, data: dict[str, Any]) -> Failure:
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
