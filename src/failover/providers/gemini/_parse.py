"""Gemini answers and errors: what a GenerateContentResponse, an assembled stream and an
error body mean.

Shared by the plain parse (:mod:`failover.providers.gemini`) and the stream parser (:mod:`._stream`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from ...model import Failure, FailureKind, Response, StopReason, Target, Usage
from ...transport import HttpResponse
from .._common import as_dict, as_int, as_list, as_str, outcome_failure
from .._google import google_error
from .._headers import HeaderMeta
from ._parts import Parts

REQUEST_ID_HEADERS: Final = ("x-goog-request-id", "x-request-id")

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


def parse_generation(body: dict[str, Any], status: int, meta: HeaderMeta, origin: str) -> Response | Failure:
    response_id = as_str(body.get("responseId"))
    usage = usage_of(as_dict(body.get("usageMetadata")))
    model = as_str(body.get("modelVersion"))
    candidates = as_list(body.get("candidates"))
    if not candidates:
        block = as_str(as_dict(body.get("promptFeedback")).get("blockReason"))
        return no_candidates(block, usage, model, response_id, status, meta)
    candidate = as_dict(candidates[0])
    parts = Parts(origin)
    parts.read(candidate, response_id, [])
    parts.close()
    raw_finish = as_str(candidate.get("finishReason"))
    result = result_of(parts, raw_finish, usage, model, response_id, meta)
    return judge(result, as_str(candidate.get("finishMessage")), status, meta)


def usage_of(raw: dict[str, Any]) -> Usage:
    thoughts = as_int(raw.get("thoughtsTokenCount"))
    return Usage(
        # toolUsePromptTokenCount (results of built-in tools fed back in) is billed as input.
        input_tokens=as_int(raw.get("promptTokenCount")) + as_int(raw.get("toolUsePromptTokenCount")),
        # candidatesTokenCount excludes thinking, which is billed as output.
        output_tokens=as_int(raw.get("candidatesTokenCount")) + thoughts,
        cached_input_tokens=as_int(raw.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def stop_reason(raw_finish: str | None, has_calls: bool) -> StopReason:
    if raw_finish == "STOP":
        return StopReason.TOOL_USE if has_calls else StopReason.END_TURN
    if raw_finish == "MAX_TOKENS":
        return StopReason.MAX_TOKENS
    if raw_finish in _FILTERED:
        return StopReason.CONTENT_FILTER
    if raw_finish is None and has_calls:
        return StopReason.TOOL_USE
    return StopReason.OTHER if raw_finish else StopReason.END_TURN


def result_of(
    parts: Parts | None,
    raw_finish: str | None,
    usage: Usage,
    model: str | None,
    response_id: str | None,
    meta: HeaderMeta,
) -> Response:
    """The normalized answer, from a GenerateContentResponse or from an assembled stream."""
    calls = tuple(parts.calls) if parts is not None else ()
    return Response(
        text="".join(parts.texts) if parts is not None else "",
        tool_calls=calls,
        reasoning=parts.response_reasoning() if parts is not None else (),
        usage=usage,
        stop_reason=stop_reason(raw_finish, bool(calls)),
        raw_stop_reason=raw_finish,
        model=model,
        provider_request_id=meta.request_id or response_id,
        rate_limits=meta.rate_limits,
        response_id=response_id,
    )


def no_candidates(
    block: str | None, usage: Usage, model: str | None, response_id: str | None, status: int, meta: HeaderMeta
) -> Failure:
    """No candidate at all: a blocked prompt (promptFeedback.blockReason), else a broken answer."""
    if block:
        return outcome_failure(
            provider="gemini",
            kind=FailureKind.CONTENT_FILTERED,
            why=f"the prompt was blocked ({block})",
            result=replace(
                result_of(None, block, usage, model, response_id, meta), stop_reason=StopReason.CONTENT_FILTER
            ),
            status=status,
            meta=meta,
            code=block,
        )
    return outcome_failure(
        provider="gemini",
        kind=FailureKind.PROVIDER_SERVER_ERROR,
        why="the response has no candidates",
        result=replace(result_of(None, None, usage, model, response_id, meta), stop_reason=StopReason.OTHER),
        status=status,
        meta=meta,
        code=None,
    )


def judge(result: Response, finish_message: str | None, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    raw_finish = result.raw_stop_reason

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="gemini", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_finish
        )

    if result.stop_reason is StopReason.CONTENT_FILTER:
        return fail(FailureKind.CONTENT_FILTERED, f"the candidate was withheld ({raw_finish})")
    if raw_finish == "MAX_TOKENS":
        # Also when content has no parts at all: thinking spent the whole budget.
        return fail(FailureKind.TRUNCATED, "the output hit maxOutputTokens")
    if raw_finish in _BAD_CALL:
        message = finish_message or raw_finish
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"the model produced an invalid function call: {message}")
    if raw_finish == "MISSING_THOUGHT_SIGNATURE":
        return fail(FailureKind.INVALID_REQUEST, "a replayed function call lacks its thought signature")
    malformed = [c.name or "?" for c in result.tool_calls if c.parsed is None]
    if malformed:
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"functionCall args are not a JSON object: {', '.join(malformed)}")
    return result


def error(target: Target, response: HttpResponse, meta: HeaderMeta, body: dict[str, Any]) -> Failure:
    return google_error("gemini", target, response, meta, body)
