"""Gemini in the fault kit: ``.../models/{model}:generateContent`` as the real API answers it.

Bodies carry ``candidates`` / ``usageMetadata`` / ``modelVersion`` / ``responseId``;
``:streamGenerateContent`` is SSE with ``alt=sse`` (CRLF framing, ``": "`` spacing) or else one
JSON array written an element at a time; errors are the ``google.rpc.Status`` envelope with
``details`` (``RetryInfo``, ``QuotaFailure``, ``ErrorInfo``), and a mid-stream error an
``{"error": {...}}`` chunk. Reasoning is ``thought: true`` parts, with a ``thoughtSignature`` on
the first function-call part (else the last text part); a refusal is ``finishReason: SAFETY``,
a filter a ``promptFeedback.blockReason`` with no candidates, broken tool arguments
``MALFORMED_FUNCTION_CALL``. ``:countTokens`` answers the estimate. The same fake answers
Gemini on Vertex AI (``_fake_vertex``: its paths, its token, Google's front-end errors).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from . import _wire
from ._exchange import Credentials, Endpoint, Exchange, Rendered
from ._kinds import ReplyKind
from ._parts import Answer, Call, pieces
from ._reply import Reply

# No __all__: this module is a FakeDialect (see ``_exchange``), whose members are its public
# names. ``_dialects`` also uses its count_tokens.

DEFAULT_MODEL: Final = "gemini-2.5-flash"
CALL_PREFIX: Final = "call_"
RESPONSE_ID: Final = "{name}-{serial}"  # str.format: the fake's name, the answer's serial


# -- reading the request -------------------------------------------------------------------------


def endpoint(path: str) -> Endpoint | None:
    slash = path.rfind("/models/")
    if slash < 0:
        return None
    model, sep, method = path[slash + 8 :].partition(":")
    if not sep or not model or "/" in model:
        return None
    if method == "generateContent":
        return Endpoint("generate", model=model)
    if method == "streamGenerateContent":
        return Endpoint("generate", stream_path=True, model=model)
    if method == "countTokens":
        return Endpoint("count_tokens", model=model)
    return None


# What the API says to a request that carries no key.
NO_KEY: Final = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)


def _presented_key(headers: Mapping[str, str], query: str) -> str | None:
    """The key a request carries: ``x-goog-api-key``, ``?key=``, or ``Authorization: Bearer``."""
    if headers.get("x-goog-api-key"):
        return headers["x-goog-api-key"]
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "key" and value:
            return value
    return _wire.bearer_token(headers)


def credentials(given: Credentials) -> Reply | None:
    return _wire.key_refusal(_presented_key(given.headers, given.query), given.api_key, NO_KEY)


def check(endpoint: Endpoint, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Reply | None:
    if endpoint.operation == "generate" and not body.get("contents"):
        return Reply.invalid("* GenerateContentRequest.contents: contents is not specified\n")
    return None


def tools(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    declared = _wire.listed(body.get("tools"))
    groups = [tool.get("functionDeclarations") or tool.get("function_declarations") or () for tool in declared]
    named = [d for group in groups for d in group if isinstance(d, Mapping) and isinstance(d.get("name"), str)]
    return [(d["name"], d.get("parametersJsonSchema") or d.get("parameters")) for d in named]


def forced(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    config = body.get("toolConfig") or body.get("tool_config")
    fcc = config.get("functionCallingConfig") if isinstance(config, Mapping) else None
    if isinstance(fcc, Mapping) and str(fcc.get("mode", "")).upper() == "ANY":
        allowed = fcc.get("allowedFunctionNames")
        if isinstance(allowed, list) and allowed:
            return allowed[0], False
        return None, True
    return None, False


def structured(body: Mapping[str, Any]) -> tuple[bool, Any]:
    gc = body.get("generationConfig") or body.get("generation_config")
    if not isinstance(gc, Mapping):
        return False, None
    schema = gc.get("responseJsonSchema") or gc.get("response_json_schema") or gc.get("responseSchema")
    wants = schema is not None or gc.get("responseMimeType") == "application/json"
    return wants, schema


def max_tokens(body: Mapping[str, Any]) -> int | None:
    gc = body.get("generationConfig")
    value = gc.get("maxOutputTokens") if isinstance(gc, Mapping) else None
    return value if isinstance(value, int) and value > 0 else None


def prompt_chars(body: Mapping[str, Any]) -> int:
    inner = body.get("generateContentRequest")  # countTokens may wrap the whole request
    if isinstance(inner, Mapping):
        body = inner
    system = body.get("systemInstruction") or body.get("system_instruction")
    return _wire.chars(body.get("contents")) + _wire.chars(system)


# -- answers -------------------------------------------------------------------------------------

_FINISH = {
    "end": "STOP",
    "tool": "STOP",
    "length": "MAX_TOKENS",
    "refusal": "SAFETY",
    "malformed": "MALFORMED_FUNCTION_CALL",
}

_SAFETY_RATINGS = [
    {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
]


def _usage(answer: Answer, *, output: bool = True) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": answer.input_tokens}
    if output:
        usage["candidatesTokenCount"] = answer.output_tokens - answer.reasoning_tokens  # thoughts are counted apart
    usage["totalTokenCount"] = answer.input_tokens + (answer.output_tokens if output else 0)
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": answer.input_tokens}]
    if output and answer.reasoning_tokens:
        usage["thoughtsTokenCount"] = answer.reasoning_tokens
    if answer.cached_tokens:  # part of promptTokenCount; Gemini leaves the field out when nothing was cached
        usage["cachedContentTokenCount"] = answer.cached_tokens
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": answer.cached_tokens}]
    return usage


def _answer_parts(answer: Answer, text: str | None, calls: Sequence[Call], *, signed: bool) -> list[dict[str, Any]]:
    """The answer's parts: ``text``, then ``calls``. ``signed``: these are the last parts of
    the answer, so the thought signature goes on the first function call, else on the text
    (an empty text part when there is neither), as Gemini sends it."""
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    parts.extend({"functionCall": {"name": c.name, "args": c.args}} for c in calls)
    if signed and answer.reasoning is not None:
        if not parts:
            parts.append({"text": ""})
        carrier = next((part for part in parts if "functionCall" in part), parts[-1])
        carrier["thoughtSignature"] = answer.signature
    return parts


def _thought(text: str) -> dict[str, Any]:
    return {"text": text, "thought": True}


def _candidate(answer: Answer, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    if answer.stop == "refusal":
        return {"finishReason": "SAFETY", "index": 0, "safetyRatings": _SAFETY_RATINGS}
    if answer.stop == "malformed":
        call = answer.calls[0]
        return {
            "content": {},
            "finishReason": "MALFORMED_FUNCTION_CALL",
            "index": 0,
            "finishMessage": f"Malformed function call: print(default_api.{call.name}({call.text}",
        }
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    return candidate


def ok(answer: Answer, ex: Exchange) -> Rendered:
    if answer.stop == "filter":
        body: dict[str, Any] = {
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": _usage(answer, output=False),
            "modelVersion": ex.model,
            "responseId": ex.response_id,
        }
        chunks = [body]
    elif ex.stream and answer.stop not in ("refusal", "malformed"):
        words = pieces(answer.text) if answer.text else []
        chunks = [
            {"candidates": [_candidate(answer, [_thought(piece)], None)]}
            for piece in (pieces(answer.reasoning) if answer.reasoning else ())
        ]
        for i, piece in enumerate(words):
            last = i == len(words) - 1 and not answer.calls
            parts = _answer_parts(answer, piece, (), signed=last)
            chunk: dict[str, Any] = {"candidates": [_candidate(answer, parts, _FINISH[answer.stop] if last else None)]}
            chunks.append(chunk)
        if answer.calls or not words:
            parts = _answer_parts(answer, None, answer.calls, signed=True)
            chunks.append({"candidates": [_candidate(answer, parts, _FINISH[answer.stop])]})
        for chunk in chunks:
            chunk["modelVersion"] = ex.model
            chunk["responseId"] = ex.response_id
        chunks[-1]["usageMetadata"] = _usage(answer)
    else:
        thought = [_thought(answer.reasoning)] if answer.reasoning else []
        parts = [*thought, *_answer_parts(answer, answer.text, answer.calls, signed=True)]
        body = {
            "candidates": [_candidate(answer, parts, _FINISH[answer.stop])],
            "usageMetadata": _usage(answer),
            "modelVersion": ex.model,
            "responseId": ex.response_id,
        }
        chunks = [body]
    if not ex.stream:
        return _wire.json_answer(200, chunks[0], (), content_type=_wire.GOOGLE_JSON)
    if ex.sse:
        return _wire.stream_answer([_sse(c) for c in chunks], (("content-type", _wire.SSE),))
    # Without alt=sse the stream is one JSON array, written an element at a time.
    elements = [(b"[" if i == 0 else b",\r\n") + _dumps(c) for i, c in enumerate(chunks)]
    elements[-1] += b"]"
    return _wire.stream_answer(elements, (("content-type", _wire.GOOGLE_JSON),))


def _dumps(obj: Any) -> bytes:
    """Gemini's stream spacing: ``{"candidates": [{"content": ...},"index": 0}]}``."""
    return json.dumps(obj, separators=(",", ": "), ensure_ascii=False).encode()


def _sse(obj: Any) -> bytes:
    return b"data: " + _dumps(obj) + b"\r\n\r\n"


WINDOW: Final = 1_048_576  # the context window a context_overflow reports by default


def error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    details: list[dict[str, Any]] = []
    model = ex.model
    if kind in (ReplyKind.RATE_LIMIT, ReplyKind.QUOTA):
        status, code = 429, "RESOURCE_EXHAUSTED"
        wait = _wire.wait_hint(reply) if kind is ReplyKind.RATE_LIMIT else None
        if kind is ReplyKind.RATE_LIMIT:
            metric, quota_id, limit = (
                "generate_content_paid_tier_requests",
                "GenerateRequestsPerMinutePerProjectPerModel",
                1000,
            )
        else:
            metric, quota_id, limit = (
                "generate_content_free_tier_requests",
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                250,
            )
        again = f"\nPlease retry in {_wire.num(wait)}s." if wait is not None else ""
        message = reply.message or (
            "You exceeded your current quota, please check your plan and billing details. For more information "
            "on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current "
            f"usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: "
            f"generativelanguage.googleapis.com/{metric}, limit: {limit}, model: {model}{again}"
        )
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {
                        "description": "Learn more about Gemini API quotas",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                    }
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": f"generativelanguage.googleapis.com/{metric}",
                        "quotaId": quota_id,
                        "quotaDimensions": {"model": model, "location": "global"},
                        "quotaValue": str(limit),
                    }
                ],
            },
        ]
        if wait is not None:
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{_wire.num(wait)}s"})
    elif kind is ReplyKind.OVERLOADED:
        status, code = 503, "UNAVAILABLE"
        message = reply.message or "The model is overloaded. Please try again later."
    elif kind is ReplyKind.SERVER_ERROR:
        status, code = 500, "INTERNAL"
        message = reply.message or (
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting"
        )
    elif kind is ReplyKind.UNAUTHORIZED:
        status, code = 400, "INVALID_ARGUMENT"
        message = reply.message or "API key not valid. Please pass a valid API key."
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": message},
        ]
    elif kind is ReplyKind.NOT_FOUND:
        status, code = 404, "NOT_FOUND"
        message = reply.message or (
            f"models/{model} is not found for API version v1beta, or is not supported for generateContent. "
            "Call ListModels to see the list of available models and their supported methods."
        )
    elif kind is ReplyKind.CONTEXT_OVERFLOW:
        status, code = 400, "INVALID_ARGUMENT"
        tokens, limit = _wire.overflow_numbers(reply, ex, WINDOW)
        message = reply.message or (
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit})."
        )
    else:  # INVALID
        status, code = 400, "INVALID_ARGUMENT"
        message = reply.message or "* GenerationConfig.temperature: must be between 0 and 2\n"
    error: dict[str, Any] = {"code": status, "message": message, "status": code}
    if details:
        error["details"] = details
    return _wire.json_answer(status, {"error": error}, (), content_type=_wire.GOOGLE_JSON)


_STREAM_ERRORS = {
    ReplyKind.OVERLOADED: (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    ReplyKind.RATE_LIMIT: (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    ReplyKind.SERVER_ERROR: (
        500,
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
}


def error_event(reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
    status, code, default = _STREAM_ERRORS[reply.cause or ReplyKind.OVERLOADED]
    error = {"error": {"code": status, "message": reply.message or default, "status": code}}
    if ex.sse:
        return _sse(error)
    return (b"[" if first else b",\r\n") + _dumps(error) + b"]"


def count_tokens(ex: Exchange) -> Rendered:
    body = {
        "totalTokens": ex.input_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": ex.input_tokens}],
    }
    return _wire.json_answer(200, body, (), content_type=_wire.GOOGLE_JSON)


def unknown_path(method: str, path: str, request_id: str) -> Rendered:
    body = {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}
    return _wire.json_answer(404, body, (), content_type=_wire.GOOGLE_JSON)


def heartbeat(ex: Exchange, chunked: bool) -> bytes:
    """The ``: keep-alive`` comment in Gemini's CRLF framing; a body that is not SSE (a JSON
    answer, the stream as a JSON array) gets blank lines instead."""
    return b": keep-alive\r\n\r\n" if chunked and ex.stream and ex.sse else b"\n"


malformed = _wire.cut_data
