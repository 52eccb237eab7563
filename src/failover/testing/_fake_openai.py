"""OpenAI Chat Completions in the fault kit: ``POST .../chat/completions`` as the real API answers it.

Bodies are ``chat.completion`` objects; a stream is ``chat.completion.chunk`` SSE events (the
usage chunk with ``choices: []`` when ``stream_options.include_usage`` asks for it) ending
with ``data: [DONE]``; errors are the ``{"error": {message, type, param, code}}`` envelope,
with ``x-request-id``, ``retry-after`` / ``retry-after-ms`` and ``x-ratelimit-*`` headers;
a mid-stream error is a ``data: {"error": ...}`` payload with no ``[DONE]`` after it.
Reasoning is DeepSeek's ``reasoning_content``, and a keep-alive the ``: keep-alive`` comment
DeepSeek sends while a request is queued. Any path prefix works (``/v1``, Azure's
``/openai/deployments/x``...).

The Responses API shares the envelope, the headers and the stream errors (``_fake_responses``).
Pure: no I/O, no clock other than the wall-clock ``created`` stamp of the bodies.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from . import _wire
from ._exchange import Credentials, Endpoint, Exchange, Headers, Rendered
from ._kinds import ReplyKind
from ._parts import Answer, dumps, in_turn, interleaved, pieces, split_args
from ._reply import Reply

# No __all__: this module is a FakeDialect (see ``_exchange``), whose members are its public
# names. The Responses API's module also uses its envelope, headers and stream errors.

DEFAULT_MODEL: Final = "gpt-4o-mini"
CALL_PREFIX: Final = "call_"
RESPONSE_ID: Final = "chatcmpl-{name}-{serial}"  # str.format: the fake's name, the answer's serial


# -- reading the request -------------------------------------------------------------------------


def endpoint(path: str) -> Endpoint | None:
    return Endpoint("generate") if path.endswith("/chat/completions") else None


# What the API says to a request that carries no key.
NO_KEY: Final = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if "
    "you're accessing the API from your browser and are prompted for a username and password. You can obtain an "
    "API key from https://platform.openai.com/account/api-keys."
)


def _presented_key(headers: Mapping[str, str], query: str) -> str | None:
    """The key a request carries: ``Authorization: Bearer``, or Azure's ``api-key``."""
    return _wire.bearer_token(headers) or headers.get("api-key")


def credentials(given: Credentials) -> Reply | None:
    return _wire.key_refusal(_presented_key(given.headers, given.query), given.api_key, NO_KEY)


def check(endpoint: Endpoint, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Reply | None:
    if not isinstance(body.get("model"), str) and "/deployments/" not in path:
        return Reply.invalid("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list):
        return Reply.invalid("Missing required parameter: 'messages'.")
    if not messages:
        return Reply.invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
        )
    return None


def tools(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    functions = _wire.listed([tool.get("function") for tool in _wire.listed(body.get("tools"))])
    return [(fn["name"], fn.get("parameters")) for fn in functions if isinstance(fn.get("name"), str)]


def forced(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    choice = body.get("tool_choice")  # "required", or {"type": "function", "function": {"name": ...}}
    named = choice.get("function") if isinstance(choice, Mapping) else None
    return (named.get("name") if isinstance(named, Mapping) else None), choice == "required"


def structured(body: Mapping[str, Any]) -> tuple[bool, Any]:
    rf = body.get("response_format")
    if isinstance(rf, Mapping):
        if rf.get("type") == "json_schema":
            js = rf.get("json_schema")
            return True, js.get("schema") if isinstance(js, Mapping) else None
        if rf.get("type") == "json_object":
            return True, None
    return False, None


def max_tokens(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    return value if isinstance(value, int) and value > 0 else None


def prompt_chars(body: Mapping[str, Any]) -> int:
    return _wire.chars(body.get("messages"))


# -- answers -------------------------------------------------------------------------------------

_FINISH = {
    "end": "stop",
    "tool": "tool_calls",
    "length": "length",
    "refusal": "stop",
    "filter": "content_filter",
    "malformed": "tool_calls",
}


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
        "prompt_tokens_details": {"cached_tokens": answer.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": answer.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def headers_of(ex: Exchange) -> Headers:
    return (
        ("x-request-id", ex.request_id),
        ("openai-version", "2020-10-01"),
        ("openai-processing-ms", "1"),
    )


def ok(answer: Answer, ex: Exchange) -> Rendered:
    created = int(time.time())
    finish = _FINISH[answer.stop]
    choice = ex.body.get("tool_choice")
    if answer.stop == "tool" and isinstance(choice, Mapping) and choice.get("type") == "function":
        finish = "stop"  # a named tool_choice ends with "stop", as the real API does
    if ex.stream:
        return _stream(answer, ex, created, finish)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text,
        "refusal": answer.refusal,
        "annotations": [],
    }
    if answer.reasoning is not None:
        message["reasoning_content"] = answer.reasoning  # DeepSeek's field, beside the answer
    if answer.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.text}} for c in answer.calls
        ]
    body = {
        "id": ex.response_id,
        "object": "chat.completion",
        "created": created,
        "model": ex.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": _usage(answer),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    return _wire.json_answer(200, body, headers_of(ex))


def _stream(answer: Answer, ex: Exchange, created: int, finish: str) -> Rendered:
    options = ex.body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    head = {"id": ex.response_id, "object": "chat.completion.chunk", "created": created, "model": ex.model}
    head["system_fingerprint"] = "fp_fake"

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        obj: dict[str, Any] = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            obj["usage"] = None
        return b"data: " + dumps(obj) + b"\n\n"

    first: dict[str, Any] = {"role": "assistant", "content": "" if answer.refusal is None else None, "refusal": None}
    if answer.refusal is not None:
        first["refusal"] = ""
    chunks = [chunk(first)]
    for piece in pieces(answer.reasoning) if answer.reasoning else ():
        # DeepSeek's shape: the reasoning deltas come first, with a null content
        chunks.append(chunk({"content": None, "reasoning_content": piece}))
    for piece in pieces(answer.text) if answer.text else ():
        chunks.append(chunk({"content": piece}))
    for piece in pieces(answer.refusal) if answer.refusal else ():
        chunks.append(chunk({"refusal": piece}))
    calls: list[list[dict[str, Any]]] = []
    for i, c in enumerate(answer.calls):
        start = {"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        calls.append([start, *({"index": i, "function": {"arguments": p}} for p in split_args(c.text))])
    chunks.extend(chunk({"tool_calls": [d]}) for d in (interleaved(calls) if answer.interleave else in_turn(calls)))
    chunks.append(chunk({}, finish))
    if include_usage:
        chunks.append(b"data: " + dumps({**head, "choices": [], "usage": _usage(answer)}) + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return _wire.stream_answer(chunks, (("content-type", _wire.SSE), *headers_of(ex)))


def envelope(message: str, type_: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


WINDOW: Final = 128_000  # the context window a context_overflow reports by default


def error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    headers = headers_of(ex)
    model = ex.model
    if kind is ReplyKind.RATE_LIMIT:
        wait = _wire.wait_hint(reply)
        again = f" Please try again in {_wire.num(wait)}s." if wait is not None else ""
        message = reply.message or (
            f"Rate limit reached for {model} in organization org-fake on requests per min (RPM): "
            f"Limit 60, Used 60, Requested 1.{again} "
            "Visit https://platform.openai.com/account/rate-limits to learn more."
        )
        reset = f"{_wire.num(wait)}s" if wait is not None else "1s"
        headers = (
            *headers,
            *_wire.retry_headers(reply),
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", reset),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "149000"),
            ("x-ratelimit-reset-tokens", "400ms"),
        )
        return _wire.json_answer(429, envelope(message, "requests", None, "rate_limit_exceeded"), headers)
    if kind is ReplyKind.QUOTA:
        message = reply.message or (
            "You exceeded your current quota, please check your plan and billing details. For more information "
            "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
        )
        return _wire.json_answer(429, envelope(message, "insufficient_quota", None, "insufficient_quota"), headers)
    if kind is ReplyKind.OVERLOADED:
        message = reply.message or "The requested model is temporarily overloaded."
        body = envelope(message, "service_unavailable_error", None, "server_is_overloaded")
        return _wire.json_answer(503, body, (*headers, *_wire.retry_headers(reply)))
    if kind is ReplyKind.SERVER_ERROR:
        message = reply.message or (
            "The server had an error processing your request. Sorry about that! You can retry your request, "
            "or contact us through our help center at help.openai.com if you keep seeing this error. "
            f"(Please include the request ID {ex.request_id} in your email.)"
        )
        return _wire.json_answer(500, envelope(message, "server_error", None, None), headers)
    if kind is ReplyKind.UNAUTHORIZED:
        message = reply.message or (
            "Incorrect API key provided: sk-fake****. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        code = None if reply.message == NO_KEY else "invalid_api_key"
        body = envelope(message, "invalid_request_error", None, code)
        return _wire.json_answer(401, body, (*headers, ("www-authenticate", 'Bearer realm="OpenAI API"')))
    if kind is ReplyKind.NOT_FOUND:
        message = reply.message or f"The model `{model}` does not exist or you do not have access to it."
        return _wire.json_answer(404, envelope(message, "invalid_request_error", None, "model_not_found"), headers)
    if kind is ReplyKind.CONTEXT_OVERFLOW:
        tokens, limit = _wire.overflow_numbers(reply, ex, WINDOW)
        message = reply.message or (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{tokens} tokens. Please reduce the length of the messages."
        )
        body = envelope(message, "invalid_request_error", "messages", "context_length_exceeded")
        return _wire.json_answer(400, body, headers)
    # INVALID
    message = reply.message or "Invalid value for 'temperature': expected a number between 0 and 2."
    return _wire.json_answer(400, envelope(message, "invalid_request_error", None, None), headers)


STREAM_ERRORS = {
    ReplyKind.OVERLOADED: ("service_unavailable_error", "server_is_overloaded"),
    ReplyKind.RATE_LIMIT: ("tokens", "rate_limit_exceeded"),
    ReplyKind.SERVER_ERROR: ("server_error", "server_error"),
}
STREAM_MESSAGES = {
    ReplyKind.OVERLOADED: "The requested model is temporarily overloaded.",
    ReplyKind.RATE_LIMIT: "Rate limit reached for {model} in organization org-fake on tokens per min (TPM): "
    "Limit 30000, Used 30000, Requested 500. Please try again in 1s.",
    ReplyKind.SERVER_ERROR: "The server had an error while processing your request. Sorry about that!",
}


def error_event(reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
    cause = reply.cause or ReplyKind.OVERLOADED
    type_, code = STREAM_ERRORS[cause]
    message = reply.message or STREAM_MESSAGES[cause].format(model=ex.model)
    return b"data: " + dumps(envelope(message, type_, None, code)) + b"\n\n"


def unknown_path(method: str, path: str, request_id: str) -> Rendered:
    body = envelope(f"Invalid URL ({method} {path})", "invalid_request_error", None, None)
    return _wire.json_answer(404, body, (("x-request-id", request_id),))


def heartbeat(ex: Exchange, chunked: bool) -> bytes:
    """The ``: keep-alive`` comment DeepSeek sends while a request waits; a body that is not
    SSE gets blank lines instead, as DeepSeek sends before a JSON answer."""
    return b": keep-alive\n\n" if chunked and ex.stream else b"\n"


malformed = _wire.cut_data
