"""What every fake dialect writes its answers with: the content types, a JSON answer, a stream
of events, the wait hints of a 429 or 503 (``retry-after`` in seconds, in milliseconds, as an
HTTP-date), the numbers of a context overflow, the key a request presents, and an event cut
so that its data is not JSON.

Pure: no I/O, no clock other than the wall-clock ``date`` of a ``retry-after`` HTTP-date.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from email.utils import formatdate
from typing import Any

from ._exchange import Exchange, Headers, Key, Rendered
from ._parts import dumps
from ._reply import Reply

__all__ = [
    "GOOGLE_JSON",
    "JSON",
    "SSE",
    "bearer_token",
    "chars",
    "cut_data",
    "json_answer",
    "key_refusal",
    "listed",
    "num",
    "overflow_numbers",
    "retry_headers",
    "stream_answer",
    "wait_hint",
]

JSON = "application/json"
GOOGLE_JSON = "application/json; charset=UTF-8"
SSE = "text/event-stream; charset=utf-8"


def json_answer(status: int, body: Any, headers: Headers, *, content_type: str = JSON) -> Rendered:
    return Rendered(status, (("content-type", content_type), *headers), dumps(body))


def stream_answer(chunks: Sequence[bytes], headers: Headers) -> Rendered:
    return Rendered(200, headers, b"".join(chunks), tuple(chunks))


def num(value: float) -> str:
    """``2`` for 2.0, ``0.5`` for 0.5: how the header value is written."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def retry_headers(reply: Reply) -> Headers:
    out: list[tuple[str, str]] = []
    if reply.retry_after is not None:
        out.append(("retry-after", num(reply.retry_after)))
    if reply.retry_after_ms is not None:
        out.append(("retry-after-ms", num(reply.retry_after_ms)))
    if reply.retry_after_date is not None:
        # an absolute time, read against the response's own date (RFC 9110 10.2.3): both whole
        # seconds of the same wall clock, so the wait survives clock skew and virtual time
        now = math.floor(time.time())
        out.append(("date", formatdate(now, usegmt=True)))
        out.append(("retry-after", formatdate(now + math.ceil(reply.retry_after_date), usegmt=True)))
    return tuple(out)


def wait_hint(reply: Reply) -> float | None:
    if reply.retry_after_ms is not None:
        return reply.retry_after_ms / 1000
    if reply.retry_after is None and reply.retry_after_date is not None:
        return reply.retry_after_date
    return reply.retry_after


def overflow_numbers(reply: Reply, ex: Exchange, window: int) -> tuple[int, int]:
    """(prompt tokens, limit) of a context overflow; ``window``: the dialect's usual limit."""
    limit = reply.limit if reply.limit is not None else window
    tokens = reply.prompt_tokens if reply.prompt_tokens is not None else max(ex.input_tokens, limit + 1)
    return tokens, limit


def chars(value: Any) -> int:
    """The characters of the text in a request's JSON value (``role`` and ``type`` left out)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(chars(v) for k, v in value.items() if k not in ("role", "type"))
    if isinstance(value, list):
        return sum(chars(v) for v in value)
    return 0


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer`` header."""
    bearer = headers.get("authorization", "")
    return bearer[7:].strip() if bearer[:7].lower() == "bearer " else None


def key_refusal(key: str | None, api_key: Key | None, no_key: str) -> Reply | None:
    """The answer to a request that presents ``key`` where ``api_key`` is wanted (None: any):
    the API's ``no_key`` message without one, its plain unauthorized answer for a wrong one."""
    if api_key is None:
        return None
    if not key:
        return Reply.unauthorized(message=no_key)
    if not (api_key(key) if callable(api_key) else key == api_key):
        return Reply.unauthorized()
    return None


def cut_data(event: bytes) -> bytes:
    """``event`` with its JSON cut in half: the ``data:`` line of an SSE event, else the text."""
    text = event.decode()
    start = text.find("data: ")
    if start < 0:
        return text[: max(1, len(text) // 2)].encode()
    start += 6
    newline = text.find("\n", start)
    end = len(text) if newline < 0 else newline
    if end > start and text[end - 1] == "\r":
        end -= 1
    payload = text[start:end]
    return (text[:start] + payload[: max(1, len(payload) // 2)] + text[end:]).encode()


def listed(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a JSON list (none when ``value`` is not a list)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
