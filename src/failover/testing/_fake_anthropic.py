"""Anthropic Messages in the fault kit: ``POST .../messages`` as the real API answers it.

Bodies are ``message`` objects; a stream is the ``message_start ... message_stop`` event
stream, its JSON padded with spaces before the final ``}`` as the real API pads it, with an
``event: ping`` after the first block starts (also the keep-alive); errors are the
``{"type": "error", "error": {type, message}, "request_id"}`` envelope with ``request-id``,
``x-should-retry``, ``retry-after`` and ``anthropic-ratelimit-*`` headers, and a mid-stream
error is an ``event: error``. Reasoning is a ``thinking`` block (``thinking_delta`` pieces,
then a ``signature_delta``), then a ``redacted_thinking`` block when scripted.
``.../messages/count_tokens`` answers the estimate. The same fake answers Claude on Vertex AI
(``_fake_vertex``: its paths, its token, Google's front-end errors).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from . import _wire
from ._exchange import Credentials, Endpoint, Exchange, Headers, Rendered
from ._kinds import ReplyKind
from ._parts import Answer, dumps, pieces, split_args
from ._reply import Reply

# No __all__: this module is a FakeDialect (see ``_exchange``), whose members are its public
# names. ``_dialects`` also uses its PING and count_tokens.

DEFAULT_MODEL: Final = "claude-haiku-4-5"
CALL_PREFIX: Final = "toolu_"
RESPONSE_ID: Final = "msg_{name}_{serial}"  # str.format: the fake's name, the answer's serial


# -- reading the request -------------------------------------------------------------------------


def endpoint(path: str) -> Endpoint | None:
    if path.endswith("/messages"):
        return Endpoint("generate")
    if path.endswith("/messages/count_tokens"):
        return Endpoint("count_tokens")
    return None


# What the API says to a request that carries no key.
NO_KEY: Final = "x-api-key header is required"


def _presented_key(headers: Mapping[str, str], query: str) -> str | None:
    """The key a request carries: ``x-api-key``, or ``Authorization: Bearer``."""
    return headers.get("x-api-key") or _wire.bearer_token(headers)


def credentials(given: Credentials) -> Reply | None:
    return _wire.key_refusal(_presented_key(given.headers, given.query), given.api_key, NO_KEY)


def check(endpoint: Endpoint, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Reply | None:
    if not headers.get("anthropic-version"):
        return Reply.invalid("anthropic-version: header is required")
    for name in ("model", "messages") + (("max_tokens",) if endpoint.operation == "generate" else ()):
        if name not in body:
            return Reply.invalid(f"{name}: Field required")
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return Reply.invalid("messages: at least one message is required")
    return None


def tools(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    declared = _wire.listed(body.get("tools"))
    return [(tool["name"], tool.get("input_schema")) for tool in declared if isinstance(tool.get("name"), str)]


def forced(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        if choice.get("type") == "tool":
            return choice.get("name"), False
        if choice.get("type") == "any":
            return None, True
    return None, False


def structured(body: Mapping[str, Any]) -> tuple[bool, Any]:
    fmt = body.get("output_format")
    config = body.get("output_config")
    if fmt is None and isinstance(config, Mapping):
        fmt = config.get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        return True, fmt.get("schema")
    return False, None


def max_tokens(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


def prompt_chars(body: Mapping[str, Any]) -> int:
    return _wire.chars(body.get("system")) + _wire.chars(body.get("messages"))


# -- answers -------------------------------------------------------------------------------------

_STOP = {
    "end": "end_turn",
    "tool": "tool_use",
    "length": "max_tokens",
    "refusal": "refusal",
    "filter": "refusal",
    "malformed": "tool_use",
}


def headers_of(ex: Exchange) -> Headers:
    return (("request-id", ex.request_id),)


def _content(answer: Answer) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if answer.reasoning is not None:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": answer.signature})
    if answer.redacted is not None:
        content.append({"type": "redacted_thinking", "data": answer.redacted})
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    for c in answer.calls:
        content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args})
    return content


def _stop_details(answer: Answer) -> dict[str, Any] | None:
    if answer.stop == "refusal":
        return {
            "type": "refusal",
            "category": "cyber",
            "explanation": answer.refusal or "This request was refused due to policy.",
        }
    if answer.stop == "filter":
        return {"type": "refusal", "category": "cyber", "explanation": "This request triggered content filtering."}
    return None


def ok(answer: Answer, ex: Exchange) -> Rendered:
    if ex.stream:
        return _stream(answer, ex)
    body: dict[str, Any] = {
        "model": ex.model,
        "id": ex.response_id,
        "type": "message",
        "role": "assistant",
        "content": _content(answer),
        "stop_reason": _STOP[answer.stop],
        "stop_sequence": None,
        "usage": {
            # Anthropic's input_tokens leaves out the cache reads (and writes): they are their own fields.
            "input_tokens": answer.input_tokens - answer.cached_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": answer.cached_tokens,
            "output_tokens": answer.output_tokens,
            "service_tier": "standard",
        },
    }
    details = _stop_details(answer)
    if details is not None:
        body["stop_details"] = details
    return _wire.json_answer(200, body, headers_of(ex))


# Real Anthropic streams pad the JSON of most events with spaces before the final "}"; these
# are the widths of a 2026 capture (shared/wire anthropic/02). Pings read {"type": "ping"}.
_PAD = {
    "message_start": 5,
    "content_block_start": 2,
    "content_block_delta": 4,
    "content_block_stop": 4,
    "message_delta": 11,
}
PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def _stream(answer: Answer, ex: Exchange) -> Rendered:
    def event(name: str, data: Mapping[str, Any]) -> bytes:
        if name == "ping":
            return PING
        body = dumps(data)
        pad = _PAD.get(name, 0)
        if pad:
            body = body[:-1] + b" " * pad + b"}"
        return b"event: " + name.encode() + b"\ndata: " + body + b"\n\n"

    start = {
        "type": "message_start",
        "message": {
            "model": ex.model,
            "id": ex.response_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": answer.input_tokens - answer.cached_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": answer.cached_tokens,
                "output_tokens": 1,
                "service_tier": "standard",
            },
        },
    }
    chunks = [event("message_start", start)]
    index = 0

    def block(content_block: dict[str, Any], deltas: Sequence[dict[str, Any]]) -> None:
        nonlocal index
        start = {"type": "content_block_start", "index": index, "content_block": content_block}
        chunks.append(event("content_block_start", start))
        if index == 0 and content_block["type"] != "tool_use":
            chunks.append(event("ping", {"type": "ping"}))  # where the real API sends it: after the first start
        for delta in deltas:
            body = {"type": "content_block_delta", "index": index, "delta": delta}
            chunks.append(event("content_block_delta", body))
        chunks.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if answer.reasoning is not None:
        thinking = [{"type": "thinking_delta", "thinking": piece} for piece in pieces(answer.reasoning) if piece]
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [*thinking, {"type": "signature_delta", "signature": answer.signature}],
        )
    if answer.redacted is not None:
        block({"type": "redacted_thinking", "data": answer.redacted}, ())  # arrives whole, no deltas
    if answer.text is not None or answer.stop in ("refusal", "filter"):
        text = [{"type": "text_delta", "text": piece} for piece in pieces(answer.text)] if answer.text else []
        block({"type": "text", "text": ""}, text)
    for c in answer.calls:
        block(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": piece} for piece in ["", *split_args(c.text)]],
        )
    delta_body: dict[str, Any] = {"stop_reason": _STOP[answer.stop], "stop_sequence": None}
    details = _stop_details(answer)
    if details is not None:
        delta_body["stop_details"] = details
    chunks.append(
        event(
            "message_delta",
            {"type": "message_delta", "delta": delta_body, "usage": {"output_tokens": answer.output_tokens}},
        )
    )
    chunks.append(event("message_stop", {"type": "message_stop"}))
    return _wire.stream_answer(chunks, (("content-type", _wire.SSE), *headers_of(ex)))


def envelope(type_: str, message: str, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": request_id}


WINDOW: Final = 200_000  # the context window a context_overflow reports by default


def error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    retry = "true"
    extra: tuple[tuple[str, str], ...] = ()
    if kind is ReplyKind.RATE_LIMIT:
        status, type_ = 429, "rate_limit_error"
        message = reply.message or (
            "This request would exceed the rate limit for your organization (org-fake) of 50 requests per "
            "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response "
            "headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try "
            "again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your "
            "options for a rate limit increase."
        )
        extra = (
            *_wire.retry_headers(reply),
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-input-tokens-limit", "30000"),
            ("anthropic-ratelimit-input-tokens-remaining", "30000"),
            ("anthropic-ratelimit-output-tokens-limit", "8000"),
            ("anthropic-ratelimit-output-tokens-remaining", "8000"),
        )
    elif kind is ReplyKind.QUOTA:
        status, type_, retry = 400, "invalid_request_error", "false"
        message = reply.message or (
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits."
        )
    elif kind is ReplyKind.OVERLOADED:
        status, type_ = 529, "overloaded_error"
        message = reply.message or "Overloaded"
        extra = _wire.retry_headers(reply)
    elif kind is ReplyKind.SERVER_ERROR:
        status, type_ = 500, "api_error"
        message = reply.message or "Internal server error"
    elif kind is ReplyKind.UNAUTHORIZED:
        status, type_, retry = 401, "authentication_error", "false"
        message = reply.message or "invalid x-api-key"
    elif kind is ReplyKind.NOT_FOUND:
        status, type_, retry = 404, "not_found_error", "false"
        message = reply.message or f"model: {ex.model}"
    elif kind is ReplyKind.CONTEXT_OVERFLOW:
        status, type_, retry = 400, "invalid_request_error", "false"
        tokens, limit = _wire.overflow_numbers(reply, ex, WINDOW)
        message = reply.message or f"prompt is too long: {tokens} tokens > {limit} maximum"
    else:  # INVALID
        status, type_, retry = 400, "invalid_request_error", "false"
        message = reply.message or "messages.0.content: text content blocks must be non-empty"
    headers = (*headers_of(ex), ("x-should-retry", retry), *extra)
    return _wire.json_answer(status, envelope(type_, message, ex.request_id), headers)


_STREAM_ERRORS = {
    ReplyKind.OVERLOADED: ("overloaded_error", "Overloaded"),
    ReplyKind.RATE_LIMIT: (
        "rate_limit_error",
        "This request would exceed your organization's rate limit of 8,000 output tokens per minute.",
    ),
    ReplyKind.SERVER_ERROR: ("api_error", "Internal server error"),
}


def error_event(reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
    # The documented form (streaming docs, "Error events"), with its spacing.
    type_, default = _STREAM_ERRORS[reply.cause or ReplyKind.OVERLOADED]
    data = {"type": "error", "error": {"type": type_, "message": reply.message or default}}
    return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


def count_tokens(ex: Exchange) -> Rendered:
    return _wire.json_answer(200, {"input_tokens": ex.input_tokens}, headers_of(ex))


def unknown_path(method: str, path: str, request_id: str) -> Rendered:
    body = envelope("not_found_error", "Not Found", request_id)
    return _wire.json_answer(404, body, (("request-id", request_id), ("x-should-retry", "false")))


def heartbeat(ex: Exchange, chunked: bool) -> bytes:
    """The ``ping`` event in a stream; a body that is not SSE gets blank lines instead."""
    return PING if chunked and ex.stream else b"\n"


malformed = _wire.cut_data
