"""Gemini ``generateContent``: ``POST {base_url}/models/{model}:generateContent``.

``base_url`` ends in ``/v1beta`` (generativelanguage.googleapis.com). Wire reference:
ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/troubleshooting,
the google.rpc error details (ErrorInfo, QuotaFailure, RetryInfo), and google-genai's
``types.py``.
"""

from __future__ import annotations

import json
import mimetypes
import re
import uuid
from typing import Any
from urllib.parse import quote, urlsplit

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
from ._headers import HeaderMeta, parse_duration, read_meta

__all__ = ["GeminiDialect"]

_REQUEST_ID_HEADERS = ("x-goog-request-id", "x-request-id")

# The candidate's finishReason. Everything that means "withheld by a policy" is a content
# filter: safety, recitation (copyright), term blocklists, prohibited content, personal data.
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "LANGUAGE",  # "flagged for using an unsupported language"
    }
)
# The model produced a call that is not a valid call (or one to a tool it was not given).
_BAD_CALL = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})

# Gemini 3 models reject a replayed functionCall without its thoughtSignature (400
# "Function call is missing a thought_signature"). ToolCall does not carry the signature,
# so replays use Google's documented sentinel that skips the check
# (ai.google.dev/gemini-api/docs/thought-signatures). Earlier models ignore signatures.
_SKIP_SIGNATURE = "skip_thought_signature_validator"
_GEMINI_MAJOR = re.compile(r"gemini-(\d+)")

# ErrorInfo reasons that mean this credential (or its project) cannot call the API.
_AUTH_REASONS = frozenset(
    {
        "API_KEY_INVALID",
        "API_KEY_EXPIRED",
        "API_KEY_SERVICE_BLOCKED",
        "API_KEY_HTTP_REFERRER_BLOCKED",
        "API_KEY_IP_ADDRESS_BLOCKED",
        "SERVICE_DISABLED",
        "CONSUMER_SUSPENDED",
        "ACCESS_TOKEN_EXPIRED",
        "ACCESS_TOKEN_TYPE_UNSUPPORTED",
    }
)

_GRPC_KIND = {
    "UNAUTHENTICATED": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "PERMISSION_DENIED": FailureKind.AUTHENTICATION_OR_PERMISSION,
    # "User location is not supported", "free tier is not available in your country":
    # this credential cannot be served from here; another target may be.
    "FAILED_PRECONDITION": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "NOT_FOUND": FailureKind.MODEL_NOT_FOUND,
    "UNAVAILABLE": FailureKind.PROVIDER_OVERLOADED,  # "The model is overloaded."
    "INTERNAL": FailureKind.PROVIDER_SERVER_ERROR,
    "DEADLINE_EXCEEDED": FailureKind.PROVIDER_SERVER_ERROR,  # the server's deadline, not ours
    "CANCELLED": FailureKind.TRANSPORT_TRANSIENT,
}


class GeminiDialect:
    """Gemini API (AI Studio). Vertex AI serves the same body under a different URL scheme."""

    name: str = "gemini"

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        model = target.model.removeprefix("models/")
        method = "streamGenerateContent" if stream else "generateContent"
        url = f"{target.base_url.rstrip('/')}/models/{quote(model, safe='')}:{method}"
        query = ((("alt", "sse"),) if stream else ()) + target.query
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        if target.api_key:
            headers["x-goog-api-key"] = target.api_key.reveal()  # a header keeps the key out of URLs and logs
        headers.update(target.headers)

        body: dict[str, Any] = {"contents": _contents(request.messages, _needs_signature(model))}
        system = request.system_text
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
            if request.tool_choice is not None:
                body["toolConfig"] = {"functionCallingConfig": _calling_config(request.tool_choice)}
        config = _generation_config(request)
        if config:
            body["generationConfig"] = config
        return HttpRequest(method="POST", url=with_query(url, query), headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS)
        data = decode_json(response.body)
        if isinstance(data, list) and data:  # streamGenerateContent without alt=sse answers a list
            data = data[0]
        body = as_dict(data)
        if 200 <= response.status < 300:
            if "candidates" in body or "promptFeedback" in body or "usageMetadata" in body:
                return _parse_generation(body, response.status, meta)
            if isinstance(body.get("error"), dict):
                return _error(target, response, meta, body)
            return error_failure(
                provider=self.name,
                kind=FailureKind.PROVIDER_SERVER_ERROR,
                target=target,
                response=response,
                meta=meta,
                code=None,
                message="the body is not a GenerateContentResponse",
            )
        return _error(target, response, meta, body)


# -------------------------------------------------------------------- build helpers


def _needs_signature(model: str) -> bool:
    match = _GEMINI_MAJOR.search(model)
    return match is not None and int(match.group(1)) >= 3


def _contents(messages: tuple[Message, ...], signature: bool) -> list[dict[str, Any]]:
    # functionResponse is matched to its call by function name, so remember which call id
    # had which name; Gemini (unlike OpenAI and Anthropic) does not need our ids.
    names = {tc.id: tc.name for m in messages for tc in m.tool_calls}
    out: list[dict[str, Any]] = []
    pending_results = False
    for m in messages:
        if m.role == "system":
            continue  # systemInstruction
        if m.role == "tool":
            name = names.get(m.tool_call_id or "") or m.name or m.tool_call_id or ""
            part = {"functionResponse": {"name": name, "response": {"output": m.text}}}
            # All responses to one turn of parallel calls go in ONE content, in call order.
            if pending_results:
                out[-1]["parts"].append(part)
            else:
                out.append({"role": "user", "parts": [part]})
                pending_results = True
            continue
        pending_results = False
        if m.role == "assistant":
            parts: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
            for i, tc in enumerate(m.tool_calls):
                call_part: dict[str, Any] = {"functionCall": {"name": tc.name, "args": _args(tc)}}
                if signature and i == 0:  # parallel calls: only the first part carries one
                    call_part["thoughtSignature"] = _SKIP_SIGNATURE
                parts.append(call_part)
            if parts:
                out.append({"role": "model", "parts": parts})
            continue
        user_parts = [_part(p) for p in m.content if not (isinstance(p, TextPart) and not p.text)]
        if user_parts:  # the API rejects a content without parts
            out.append({"role": "user", "parts": user_parts})
    return out


def _part(p: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"text": p.text}
    if p.is_data:
        media_type, data = p.data()
        return {"inlineData": {"mimeType": media_type, "data": data}}
    file_data: dict[str, Any] = {"fileUri": p.url}
    guessed, _ = mimetypes.guess_type(urlsplit(p.url).path)
    if guessed:  # optional in FileData; sent when the URL's extension says it
        file_data["mimeType"] = guessed
    return {"fileData": file_data}


def _args(tc: ToolCall) -> dict[str, Any]:
    if tc.parsed is not None:
        return dict(tc.parsed)
    try:
        parsed = json.loads(tc.arguments) if tc.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _declaration(t: Tool) -> dict[str, Any]:
    # parametersJsonSchema takes standard JSON Schema (additionalProperties, $defs, anyOf);
    # the older "parameters" takes an OpenAPI subset that rejects common schemas.
    out: dict[str, Any] = {"name": t.name, "parametersJsonSchema": dict(t.parameters)}
    if t.description:
        out["description"] = t.description
    return out


def _calling_config(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "tool" and choice.name:
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    if choice.mode in ("required", "tool"):
        return {"mode": "ANY"}
    return {"mode": choice.mode.upper()}  # AUTO | NONE


def _generation_config(request: Request) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.stop:
        config["stopSequences"] = list(request.stop)
    if request.seed is not None:
        config["seed"] = request.seed
    fmt = request.response_format
    if fmt is not None and fmt.kind in ("json_object", "json_schema"):
        config["responseMimeType"] = "application/json"
        if fmt.kind == "json_schema" and fmt.schema is not None:
            # responseJsonSchema takes JSON Schema as written; responseSchema would need the
            # OpenAPI subset (upper-case types, no additionalProperties).
            config["responseJsonSchema"] = dict(fmt.schema)
    return config


# -------------------------------------------------------------------- parse helpers


def _parse_generation(body: dict[str, Any], status: int, meta: HeaderMeta) -> Response | Failure:
    response_id = as_str(body.get("responseId"))

    def make(stop: StopReason, raw_stop: str | None, text: str = "", calls: tuple[ToolCall, ...] = ()) -> Response:
        return Response(
            text=text,
            tool_calls=calls,
            usage=_usage(as_dict(body.get("usageMetadata"))),
            stop_reason=stop,
            raw_stop_reason=raw_stop,
            model=as_str(body.get("modelVersion")),
            provider_request_id=meta.request_id or response_id,
            response_id=response_id,
        )

    candidates = as_list(body.get("candidates"))
    if not candidates:
        block = as_str(as_dict(body.get("promptFeedback")).get("blockReason"))
        if block:
            return outcome_failure(
                provider="gemini",
                kind=FailureKind.CONTENT_FILTERED,
                why=f"the prompt was blocked ({block})",
                result=make(StopReason.CONTENT_FILTER, block),
                status=status,
                meta=meta,
                code=block,
            )
        return outcome_failure(
            provider="gemini",
            kind=FailureKind.PROVIDER_SERVER_ERROR,
            why="the response has no candidates",
            result=make(StopReason.OTHER, None),
            status=status,
            meta=meta,
            code=None,
        )

    candidate = as_dict(candidates[0])
    texts: list[str] = []
    calls: list[ToolCall] = []
    malformed: list[str] = []
    for raw in as_list(as_dict(candidate.get("content")).get("parts")):
        part = as_dict(raw)
        if part.get("thought") is True:
            continue  # a thought summary, not the answer
        text = as_str(part.get("text"))
        if text is not None:
            texts.append(text)
        call = part.get("functionCall")
        if isinstance(call, dict):
            name = as_str(call.get("name")) or ""
            args = call.get("args", {})  # absent for a call without parameters
            parsed = args if isinstance(args, dict) else None
            call_id = as_str(call.get("id")) or _call_id(response_id, len(calls))
            arguments = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments, parsed=parsed))
            if parsed is None:
                malformed.append(name or "?")

    raw_finish = as_str(candidate.get("finishReason"))
    if raw_finish == "STOP":
        stop = StopReason.TOOL_USE if calls else StopReason.END_TURN
    elif raw_finish == "MAX_TOKENS":
        stop = StopReason.MAX_TOKENS
    elif raw_finish in _FILTERED:
        stop = StopReason.CONTENT_FILTER
    elif raw_finish is None and calls:
        stop = StopReason.TOOL_USE
    else:
        stop = StopReason.OTHER if raw_finish else StopReason.END_TURN
    result = make(stop, raw_finish, "".join(texts), tuple(calls))

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="gemini", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_finish
        )

    if stop is StopReason.CONTENT_FILTER:
        return fail(FailureKind.CONTENT_FILTERED, f"the candidate was withheld ({raw_finish})")
    if raw_finish == "MAX_TOKENS":
        # Also when content has no parts at all: thinking spent the whole budget.
        return fail(FailureKind.TRUNCATED, "the output hit maxOutputTokens")
    if raw_finish in _BAD_CALL:
        message = as_str(candidate.get("finishMessage")) or raw_finish
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"the model produced an invalid function call: {message}")
    if raw_finish == "MISSING_THOUGHT_SIGNATURE":
        return fail(FailureKind.INVALID_REQUEST, "a replayed function call lacks its thought signature")
    if malformed:
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"functionCall args are not a JSON object: {', '.join(malformed)}")
    return result


def _call_id(response_id: str | None, index: int) -> str:
    # The Gemini API rarely sends call ids; ours must be unique across turns because the
    # tool-execution ledger keys on them. responseId is unique per response.
    return f"call_{response_id}_{index}" if response_id else f"call_{uuid.uuid4().hex[:24]}"


def _usage(u: dict[str, Any]) -> Usage:
    thoughts = as_int(u.get("thoughtsTokenCount"))
    return Usage(
        # toolUsePromptTokenCount (results of built-in tools fed back in) is billed as input.
        input_tokens=as_int(u.get("promptTokenCount")) + as_int(u.get("toolUsePromptTokenCount")),
        # candidatesTokenCount excludes thinking, which is billed as output.
        output_tokens=as_int(u.get("candidatesTokenCount")) + thoughts,
        cached_input_tokens=as_int(u.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def _error(target: Target, response: HttpResponse, meta: HeaderMeta, body: dict[str, Any]) -> Failure:
    err = as_dict(body.get("error"))
    grpc = as_str(err.get("status"))
    message = as_str(err.get("message"))
    details = [as_dict(d) for d in as_list(err.get("details"))]
    reason: str | None = None
    retry_delay: float | None = None
    quota_ids: list[str] = []
    quota_values: list[str] = []
    for d in details:
        kind = as_str(d.get("@type")) or ""
        if kind.endswith("google.rpc.ErrorInfo"):
            reason = reason or as_str(d.get("reason"))
        elif kind.endswith("google.rpc.RetryInfo"):
            retry_delay = parse_duration(as_str(d.get("retryDelay")))
        elif kind.endswith("google.rpc.QuotaFailure"):
            for v in as_list(d.get("violations")):
                violation = as_dict(v)
                quota_ids.append(as_str(violation.get("quotaId")) or "")
                quota_values.append(str(violation.get("quotaValue", "")))
    return error_failure(
        provider="gemini",
        kind=_classify(response.status, grpc, reason, message, quota_ids, quota_values),
        target=target,
        response=response,
        meta=meta,
        code=reason or grpc,
        message=message,
        retry_after=retry_delay,
    )


def _classify(
    status: int,
    grpc: str | None,
    reason: str | None,
    message: str | None,
    quota_ids: list[str],
    quota_values: list[str],
) -> FailureKind:
    if reason is not None and (reason in _AUTH_REASONS or reason.startswith("API_KEY_")):
        return FailureKind.AUTHENTICATION_OR_PERMISSION  # a bad key is a 400 INVALID_ARGUMENT here
    if reason == "BILLING_DISABLED":
        return FailureKind.QUOTA_EXHAUSTED
    if grpc == "RESOURCE_EXHAUSTED" or status == 429:
        # Gemini reports every quota as a 429 RESOURCE_EXHAUSTED, with the message "You
        # exceeded your current quota, please check your plan and billing details" even for
        # a per-minute limit, so the text cannot tell them apart. QuotaFailure can: a
        # per-minute quotaId (…PerModelPerMinute) refills within RetryInfo's delay, which
        # is a rate limit; a per-day quotaId (…PerDay…) will not refill for hours, and a
        # quota whose value is 0 (a model the free tier does not serve) never will, which
        # is money, not flow. Without QuotaFailure details we assume the common case, a rate.
        if any("perday" in q.lower() for q in quota_ids) or "0" in quota_values or _limit_zero(message):
            return FailureKind.QUOTA_EXHAUSTED
        return FailureKind.RATE_LIMITED
    if grpc in _GRPC_KIND:
        return _GRPC_KIND[grpc]
    if status in (400, 413, 422) and CONTEXT_OVERFLOW.search(message or ""):
        return FailureKind.CONTEXT_OVERFLOW
    return kind_from_status(status)


_LIMIT_ZERO = re.compile(r"\blimit: 0\b")


def _limit_zero(message: str | None) -> bool:
    return bool(message) and _LIMIT_ZERO.search(message or "") is not None
