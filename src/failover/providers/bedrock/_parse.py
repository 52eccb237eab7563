"""Bedrock Converse answers and errors: what a body, a stream and an error mean.

Shared by the plain parse (:mod:`failover.providers.bedrock`) and the stream parser (:mod:`._stream`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ...model import Failure, FailureKind, Reasoning, Response, StopReason, Target, TimeoutPhase, ToolCall, Usage
from ...transport import HttpResponse
from .._common import (
    CONTEXT_OVERFLOW,
    as_dict,
    as_int,
    as_list,
    as_str,
    error_failure,
    kind_from_status,
    outcome_failure,
)
from .._headers import HeaderMeta

# Bedrock carries Claude's thinking as-is (text + signature, or redacted data): the format
# Anthropic's API reads, so Claude's blocks go back and forth between the two.
REASONING_SOURCE: Final = "anthropic"

REQUEST_ID_HEADERS: Final = ("x-amzn-requestid", "x-amz-request-id")

# The tool that carries structured output (see BedrockDialect): its input IS the answer.
JSON_TOOL: Final = "json_output"

STOP: Final = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "content_filtered": StopReason.CONTENT_FILTER,
    "guardrail_intervened": StopReason.CONTENT_FILTER,
    "malformed_tool_use": StopReason.TOOL_USE,
    "malformed_model_output": StopReason.OTHER,
}

# The error types of the Converse operations (botocore's service model, the API reference)
# and of AWS's request authentication, as x-amzn-errortype or __type name them.
_TYPE_KIND: Final = {
    "ThrottlingException": FailureKind.RATE_LIMITED,
    "ServiceQuotaExceededException": FailureKind.QUOTA_EXHAUSTED,
    "ServiceUnavailableException": FailureKind.PROVIDER_OVERLOADED,
    "InternalServerException": FailureKind.PROVIDER_SERVER_ERROR,
    "InternalFailure": FailureKind.PROVIDER_SERVER_ERROR,
    "ModelErrorException": FailureKind.PROVIDER_SERVER_ERROR,  # 424: the model failed on this request
    "ModelStreamErrorException": FailureKind.PROVIDER_SERVER_ERROR,  # 424, mid-stream
    # "The model specified in the request is not ready to serve inference requests" (429, not
    # throttling): it is loading; the AWS SDKs replay it, so do we
    "ModelNotReadyException": FailureKind.TRANSPORT_TRANSIENT,
    "ModelTimeoutException": FailureKind.TIMEOUT,  # 408: the model took longer than Bedrock waits
    "ValidationException": FailureKind.INVALID_REQUEST,
    "SerializationException": FailureKind.INVALID_REQUEST,
    "ResourceNotFoundException": FailureKind.MODEL_NOT_FOUND,
    "UnknownOperationException": FailureKind.MODEL_NOT_FOUND,  # a path the endpoint does not serve
    "AccessDeniedException": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "UnrecognizedClientException": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "InvalidSignatureException": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "IncompleteSignature": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "IncompleteSignatureException": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "MissingAuthenticationTokenException": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "ExpiredTokenException": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "InvalidClientTokenId": FailureKind.AUTHENTICATION_OR_PERMISSION,
}

# The status each error type is documented with: what a mid-stream exception (which has none)
# is classified as.
STATUS: Final = {
    "ThrottlingException": 429,
    "ServiceUnavailableException": 503,
    "InternalServerException": 500,
    "ModelStreamErrorException": 424,
    "ValidationException": 400,
    "ModelTimeoutException": 408,
}

# A prompt over the model's window, as Bedrock words it in a ValidationException: its own
# "Input is too long for requested model." and "too many input tokens", and the model's own
# text passed through ("The model returned the following errors: prompt is too long: ...",
# "input length and `max_tokens` exceed context limit", "too many total text bytes", an
# OpenAI-style "maximum context length" from OpenAI-compatible models).
_OVERFLOW_WORDS: Final = ("input is too long", "too many input tokens", "too many total text bytes")

# A ValidationException that says this target cannot serve the model (not that the request is
# bad): another target may serve it, so it is model_not_found, not a stop.
_NOT_SERVED: Final = (
    "on-demand throughput isn",  # "... with on-demand throughput isn't supported. Retry ... inference profile"
    "model identifier is invalid",
    "model is not supported in this region",
)


def parse_converse(
    data: dict[str, Any], message: dict[str, Any], target: Target, status: int, meta: HeaderMeta
) -> Response | Failure:
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for raw in as_list(message.get("content")):
        block = as_dict(raw)
        if "text" in block:
            texts.append(as_str(block.get("text")) or "")
        elif "toolUse" in block:
            use = as_dict(block.get("toolUse"))
            value = use.get("input")
            name = as_str(use.get("name")) or ""
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            if name == JSON_TOOL:
                texts.append(text)  # structured output: the call's input is the answer
                continue
            parsed = value if isinstance(value, dict) else None
            calls.append(ToolCall(id=as_str(use.get("toolUseId")) or "", name=name, arguments=text, parsed=parsed))
        elif "reasoningContent" in block:
            reasoning.append(reasoning_of(as_dict(block.get("reasoningContent")), target.key))
        # images, citations, guard content... are not carried
    result = result_of(
        text="".join(texts),
        calls=tuple(calls),
        reasoning=tuple(reasoning),
        raw_stop=as_str(data.get("stopReason")),
        usage=usage_of(as_dict(data.get("usage"))),
        target=target,
        meta=meta,
    )
    return judge(result, status, meta)


def reasoning_of(content: dict[str, Any], origin: str) -> Reasoning:
    source = REASONING_SOURCE
    if "redactedContent" in content:
        return Reasoning(redacted=as_str(content.get("redactedContent")) or "", source=source, origin=origin)
    text = as_dict(content.get("reasoningText"))
    return Reasoning(
        text=as_str(text.get("text")) or "",
        signature=as_str(text.get("signature")) or None,
        source=source,
        origin=origin,
    )


def result_of(
    *,
    text: str,
    calls: tuple[ToolCall, ...],
    reasoning: tuple[Reasoning, ...],
    raw_stop: str | None,
    usage: Usage,
    target: Target,
    meta: HeaderMeta,
) -> Response:
    """The normalized answer, from a Converse body or from an assembled stream."""
    stop = STOP.get(raw_stop or "", StopReason.OTHER)
    if raw_stop == "tool_use" and not calls:
        stop = StopReason.END_TURN  # only the structured-output tool was called: that is the answer
    return Response(
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
        usage=usage,
        stop_reason=stop,
        raw_stop_reason=raw_stop,
        model=target.model,  # Converse does not echo the model
        provider_request_id=meta.request_id,
        rate_limits=meta.rate_limits,
    )


def judge(result: Response, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    raw_stop = result.raw_stop_reason

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="bedrock", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_stop
        )

    if raw_stop == "max_tokens":
        return fail(FailureKind.TRUNCATED, "the output hit maxTokens")
    if raw_stop in ("content_filtered", "guardrail_intervened"):
        return fail(FailureKind.CONTENT_FILTERED, f"the answer was withheld ({raw_stop})")
    if raw_stop == "model_context_window_exceeded":
        return fail(FailureKind.CONTEXT_OVERFLOW, "the output filled the model's context window")
    if raw_stop == "malformed_model_output":
        return fail(FailureKind.PROVIDER_SERVER_ERROR, "Bedrock could not read the model's output")
    malformed = [c.name or "?" for c in result.tool_calls if c.parsed is None]
    if raw_stop == "malformed_tool_use" or malformed:
        names = ", ".join(malformed) or "?"
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"toolUse input is not a JSON object: {names}")
    return result


def usage_of(raw: dict[str, Any]) -> Usage:
    # inputTokens counts only the uncached part; cache reads and writes are billed input too.
    cache_read = as_int(raw.get("cacheReadInputTokens"))
    return Usage(
        input_tokens=as_int(raw.get("inputTokens")) + cache_read + as_int(raw.get("cacheWriteInputTokens")),
        output_tokens=as_int(raw.get("outputTokens")),
        cached_input_tokens=cache_read,
    )


def error_type(headers: Mapping[str, str], data: dict[str, Any]) -> str | None:
    """The error's type: ``x-amzn-errortype`` (``ThrottlingException:http://...``), else the
    body's ``__type`` (``com.amazon.coral.service#ThrottlingException``) or ``code``."""
    raw = headers.get("x-amzn-errortype") or as_str(data.get("__type")) or as_str(data.get("code"))
    if not raw:
        return None
    return raw.partition(":")[0].rpartition("#")[2].strip() or None


def error(target: Target, response: HttpResponse, meta: HeaderMeta, data: dict[str, Any]) -> Failure:
    err_type = error_type(response.headers, data)
    message = as_str(data.get("message")) or as_str(data.get("Message"))
    kind = classify(response.status, err_type, message)
    failure = error_failure(
        provider="bedrock",
        kind=kind,
        target=target,
        response=response,
        meta=meta,
        code=err_type,
        message=message,
    )
    if kind is FailureKind.TIMEOUT:  # the model's own time limit ran out, on Bedrock's side
        failure = replace(failure, phase=TimeoutPhase.TOTAL)
    return failure


def classify(status: int, err_type: str | None, message: str | None) -> FailureKind:
    lowered = (message or "").lower()
    if err_type in (None, "ValidationException") and status in (400, 413, 422):
        if CONTEXT_OVERFLOW.search(lowered) or any(w in lowered for w in _OVERFLOW_WORDS):
            return FailureKind.CONTEXT_OVERFLOW
        if any(w in lowered for w in _NOT_SERVED):
            return FailureKind.MODEL_NOT_FOUND
    if err_type == "ThrottlingException" and "per day" in lowered:
        # "Too many tokens per day, please wait before trying again.": the account's daily
        # quota for the model, not a rate a short wait restores
        return FailureKind.QUOTA_EXHAUSTED
    if err_type is not None:
        kind = _TYPE_KIND.get(err_type) or _TYPE_KIND.get(err_type[:1].upper() + err_type[1:])
        if kind is not None:
            return kind
    return kind_from_status(status)
