"""Helpers the dialects share: decoding bodies, building Failures, status fallbacks, tool arguments.

Nothing here knows a provider's error vocabulary; each dialect maps its own codes and
falls back to :func:`kind_from_status` for shapes it does not recognise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from ..model import Failure, FailureKind, NonFiniteNumber, Response, Target, ToolCall, loads_strict
from ..transport import HttpResponse
from ._headers import HeaderMeta
from ._window import WindowNumbers, window_numbers

DETAIL_LIMIT = 2_000  # Failure.detail keeps this much of the raw body
_MESSAGE_LIMIT = 600  # the provider message inside Failure.message
_REDACTED = "[REDACTED]"

# Context-window overflow, as each provider words it on a 400 (matched case-insensitively
# against the error code and message together):
#   OpenAI            code context_length_exceeded; "This model's maximum context length is ..."
#   DeepSeek / vLLM   "This model's maximum context length is 1048565 tokens. However, ..."
#   Anthropic         "prompt is too long: 3333404 tokens > 200000 maximum",
#                     "input length and `max_tokens` exceed context limit: ..."
#   Gemini            "The input token count (N) exceeds the maximum number of tokens allowed (M)."
#   OpenAI Responses  "Your input exceeds the context window of this model."
#   llama.cpp         code exceed_context_size_error, "... exceeds the available context size"
CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|prompt is too long|exceed context limit"
    r"|exceeds the maximum number of tokens|input token count|context window|exceed_context_size"
    r"|available context size",
    re.IGNORECASE,
)


def decode_json(body: bytes) -> Any:
    """The decoded body, or None when it is not JSON.

    Called regardless of Content-Type: DeepSeek sends JSON errors as
    ``application/octet-stream``, proxies send JSON as ``text/plain``. Leading whitespace is
    fine (DeepSeek writes blank lines while a request is queued); a UTF-8 BOM is accepted.
    Strict JSON: a body with NaN or Infinity in it is a :class:`NonFinite` (see
    :func:`non_finite`), never numbers to forward.
    """
    if not body:
        return None
    try:
        return loads_strict(body)
    except NonFiniteNumber as exc:
        return NonFinite(exc.token)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


class NonFinite:
    """What :func:`decode_json` returns for a body holding NaN, Infinity, -Infinity or a
    number no float holds: not JSON, so nothing in it is read (``as_dict`` gives ``{}``)."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token


def non_finite(provider: str, target: Target, response: HttpResponse, meta: HeaderMeta, data: Any) -> Failure | None:
    """The Failure for a 2xx whose body :func:`decode_json` read as :class:`NonFinite`: a
    provider_server_error naming the number (replayed elsewhere, never forwarded); else None.
    An error status with such a body is classified by its status as any unreadable one is."""
    if not isinstance(data, NonFinite) or not 200 <= response.status < 300:
        return None
    return server_fault(provider, target, response, meta, f"the body holds {data.token}, which is not a JSON number")


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: lets parsers chain ``.get``."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int:
    """A token count: ints (and integral floats, which some compatible servers send) or 0."""
    if type(value) is int:  # the usual count, read with one check (a bool's type is bool)
        return value if value > 0 else 0
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value.is_integer():
        return max(0, int(value))
    return 0


def redact(text: str, target: Target) -> str:
    """``text`` without the target's API key: providers echo a bad key back in the message."""
    if target.api_key:
        key = target.api_key.reveal()
        if key and key in text:
            text = text.replace(key, _REDACTED)
    return text


def body_detail(body: bytes, target: Target) -> str | None:
    """The raw body for the trace: decoded leniently, key redacted, then trimmed."""
    if not body:
        return None
    text = redact(body.decode("utf-8", errors="replace"), target)
    return text if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT] + "…"


def snippet(body: bytes, limit: int = 200, target: Target | None = None) -> str:
    """A one-line excerpt of a non-JSON body (an HTML error page from a proxy).

    With ``target``, its key is redacted in the whole body *before* the cut: cut first, a key
    straddling the limit would survive in part, where nothing matches it any more."""
    text = body.decode("utf-8", errors="replace")
    if target is not None:
        text = redact(text, target)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def kind_from_status(status: int) -> FailureKind:
    """The kind an error status implies when the body says nothing more specific."""
    if status in (401, 403):
        return FailureKind.AUTHENTICATION_OR_PERMISSION
    if status == 402:
        return FailureKind.QUOTA_EXHAUSTED
    if status == 404:
        return FailureKind.MODEL_NOT_FOUND
    if status in (408, 409):
        # The official SDKs replay both: 408 is the server's own timeout, 409 a lock
        # conflict that clears (Anthropic documents conflict_error as retryable).
        return FailureKind.TRANSPORT_TRANSIENT
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status in (503, 529):
        return FailureKind.PROVIDER_OVERLOADED
    if 400 <= status < 500:
        return FailureKind.INVALID_REQUEST
    # Other 5xx; also a 1xx/3xx that reached us, or a 2xx that could not be read: the
    # endpoint is not answering as a provider should, so count it against the target.
    return FailureKind.PROVIDER_SERVER_ERROR


def unreadable(provider: str, target: Target, response: HttpResponse, meta: HeaderMeta, what: str) -> Failure:
    """A 2xx whose body is not ``what`` (a proxy's page, a truncated body): the provider's fault."""
    return server_fault(provider, target, response, meta, f"the body is not {what}")


def server_fault(provider: str, target: Target, response: HttpResponse, meta: HeaderMeta, message: str) -> Failure:
    """A 2xx that cannot be the answer it claims (``message`` says why): a provider_server_error,
    replayed or failed over, never forwarded."""
    return error_failure(
        provider=provider,
        kind=FailureKind.PROVIDER_SERVER_ERROR,
        target=target,
        response=response,
        meta=meta,
        code=None,
        message=message,
    )


def error_failure(
    *,
    provider: str,
    kind: FailureKind,
    target: Target,
    response: HttpResponse,
    meta: HeaderMeta,
    code: str | None,
    message: str | None,
    request_id: str | None = None,
    retry_after: float | None = None,
    numbers: WindowNumbers | None = None,
) -> Failure:
    """A Failure for an error response; ``message`` is the provider's own words when known.

    A context overflow carries the window and count the provider stated: ``numbers`` when the
    dialect read them from fields of its own, else what :func:`window_numbers` reads in
    ``message``."""
    text = redact(message.strip(), target) if message else ""  # redacted whole, then cut
    if not text:
        text = snippet(response.body, target=target) if response.body else "empty body"
    if len(text) > _MESSAGE_LIMIT:
        text = text[:_MESSAGE_LIMIT] + "…"
    label = f"{provider} {response.status}" + (f" {code}" if code else "")
    said = WindowNumbers()
    if kind is FailureKind.CONTEXT_OVERFLOW:
        said = window_numbers(message)
        if numbers is not None:  # the dialect's own fields win where they say something
            said = WindowNumbers(
                numbers.limit if numbers.limit is not None else said.limit,
                numbers.used if numbers.used is not None else said.used,
                numbers.includes_output if numbers.used is not None else said.includes_output,
            )
    return Failure(
        kind=kind,
        message=f"{label}: {text}",
        status=response.status,
        provider_code=code,
        retry_after=meta.retry_after if meta.retry_after is not None else retry_after,
        should_retry=meta.should_retry,
        provider_request_id=meta.request_id or request_id,
        rate_limits=meta.rate_limits,
        detail=body_detail(response.body, target),
        window_limit=said.limit,
        window_used=said.used,
        window_includes_output=said.includes_output,
    )


def outcome_failure(
    *,
    provider: str,
    kind: FailureKind,
    why: str,
    result: Response,
    status: int,
    meta: HeaderMeta,
    code: str | None,
) -> Failure:
    """A Failure for a readable 2xx answer that is still not acceptable (truncated, refused...).

    The Response and its usage are kept: the call was paid for and the trace reports it.
    """
    return Failure(
        kind=kind,
        message=f"{provider} {status}" + (f" {code}" if code else "") + f": {why}",
        status=status,
        provider_code=code,
        retry_after=meta.retry_after,
        should_retry=meta.should_retry,
        provider_request_id=result.provider_request_id,
        rate_limits=meta.rate_limits,
        usage=result.usage,
        response=result,
    )


def tool_arguments(raw: Any) -> tuple[str, Mapping[str, Any] | None]:
    """``(arguments text, parsed object or None)`` for a tool call's arguments.

    OpenAI sends a JSON string; some compatible servers send the object itself. Blank text
    is read as ``{}``: servers emit it for tools without parameters, and it is not a
    half-written object.
    """
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":")), raw
    if raw is None:
        return "{}", {}
    if not isinstance(raw, str):
        return json.dumps(raw), None
    if not raw.strip():
        return raw, {}
    try:
        parsed = loads_strict(raw)  # NaN in arguments: not JSON, as for a schema check
    except (ValueError, RecursionError):
        return raw, None
    return raw, parsed if isinstance(parsed, dict) else None


def with_query(url: str, pairs: tuple[tuple[str, str], ...]) -> str:
    """``url`` with ``pairs`` appended as query parameters (after any already present)."""
    if not pairs:
        return url
    return url + ("&" if "?" in url else "?") + urlencode(pairs)


def tool_input(tc: ToolCall) -> dict[str, Any]:
    """A tool call's arguments as the object a dialect replays (Anthropic's and Bedrock's
    ``input``, Gemini's ``args``): what the model sent when it was one, else ``{}``."""
    if tc.parsed is not None:
        return dict(tc.parsed)
    try:
        parsed = json.loads(tc.arguments) if tc.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}
