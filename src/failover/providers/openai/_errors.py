"""OpenAI's error vocabulary, shared by the Chat Completions and the Responses dialects.

Both APIs answer errors in the same envelope (``{"error": {message, type, param, code}}``), with
the same codes and statuses, and report a failure inside a 200 (a Chat Completions error chunk,
a Responses ``error`` event or a ``failed`` response) with the same codes; so one table and one
classifier read them for both, and a code added here is read the same way by each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...model import Failure, FailureKind, Target
from ...transport import HttpResponse
from .._common import CONTEXT_OVERFLOW, as_dict, as_str, error_failure, kind_from_status
from .._headers import HeaderMeta
from .._window import numbers_of

__all__ = ["CODE_KINDS", "FILTER_CODES", "TYPE_KINDS", "classify", "openai_error", "status_code"]

_K = FailureKind
# What an error's ``code`` (or ``type``) says, whatever the HTTP status: 200 for an error in a
# stream or a proxy's 200 envelope, or a status the code refines (insufficient_quota comes as
# a 429 but waiting will not help; server_is_overloaded is capacity, not this key's rate).
# Sources: OpenAI's error-codes guide, the codes of the API's own error objects
# (openai-python types: Responses ResponseError, sessions' SessionTurnError), and what
# compatible servers send (llama.cpp, DeepSeek, proxies).
CODE_KINDS: Final[Mapping[str, FailureKind]] = {
    # money, not flow: waiting will not help ("You exceeded your current quota")
    "insufficient_quota": _K.QUOTA_EXHAUSTED,
    "billing_hard_limit_reached": _K.QUOTA_EXHAUSTED,
    "billing_not_active": _K.QUOTA_EXHAUSTED,
    "credit_balance_exhausted": _K.QUOTA_EXHAUSTED,
    "usage_limit_exceeded": _K.QUOTA_EXHAUSTED,
    "project_spend_limit_exceeded": _K.QUOTA_EXHAUSTED,
    "organization_spend_limit_exceeded": _K.QUOTA_EXHAUSTED,
    "organization_usage_limit_exceeded": _K.QUOTA_EXHAUSTED,
    # this key's rate: requests or tokens per minute, or traffic that grew too fast ("slow_down",
    # a 503 before it was a 429: the cure is a lower rate from this key, not another replica)
    "rate_limit_exceeded": _K.RATE_LIMITED,
    "slow_down": _K.RATE_LIMITED,
    # the provider's capacity
    "server_is_overloaded": _K.PROVIDER_OVERLOADED,
    "server_overloaded": _K.PROVIDER_OVERLOADED,
    "context_length_exceeded": _K.CONTEXT_OVERFLOW,
    "exceed_context_size_error": _K.CONTEXT_OVERFLOW,  # llama.cpp
    "invalid_api_key": _K.AUTHENTICATION_OR_PERMISSION,
    "invalid_organization": _K.AUTHENTICATION_OR_PERMISSION,
    "unsupported_country_region_territory": _K.AUTHENTICATION_OR_PERMISSION,
    "model_not_found": _K.MODEL_NOT_FOUND,
    # the Responses API's ResponseError codes (a failed response): the project may not be
    # served here (another region or provider may), or an input image the request carries is bad
    "data_residency_mismatch": _K.AUTHENTICATION_OR_PERMISSION,
    **dict.fromkeys(
        (
            "invalid_image",
            "invalid_image_format",
            "invalid_base64_image",
            "invalid_image_url",
            "image_too_large",
            "image_too_small",
            "image_parse_error",
            "invalid_image_mode",
            "image_file_too_large",
            "unsupported_image_media_type",
            "empty_image_file",
            "failed_to_download_image",
            "image_file_not_found",
        ),
        _K.INVALID_REQUEST,
    ),
}
# The prompt (or an image in it) was refused: Azure's prompt filter ("content_filter"), image
# policy, o-series "invalid_prompt" ("flagged as potentially violating"), the Responses API's
# policy codes. Read as a filter below 500 only: a 5xx is the provider's failure whatever it says.
FILTER_CODES = frozenset(
    {
        "content_filter",
        "content_policy_violation",
        "invalid_prompt",
        "image_content_policy_violation",
        "bio_policy",
        "cyber_policy",
        "misalignment_policy_violation",
    }
)
# Generic types and codes, which only name the failure when the status does not (a 2xx): on an
# error status they say less than it does (OpenAI's 401 for a missing key has type
# invalid_request_error, and DeepSeek's context overflow is code invalid_request_error too).
TYPE_KINDS: Final[Mapping[str, FailureKind]] = {
    "invalid_request_error": _K.INVALID_REQUEST,
    "invalid_request": _K.INVALID_REQUEST,
    "authentication_error": _K.AUTHENTICATION_OR_PERMISSION,
    "permission_error": _K.AUTHENTICATION_OR_PERMISSION,
    "not_found_error": _K.MODEL_NOT_FOUND,
    "resource_not_found": _K.MODEL_NOT_FOUND,
    "rate_limit_error": _K.RATE_LIMITED,
    "tokens": _K.RATE_LIMITED,  # OpenAI's 429 type: tokens (or requests) per minute
    "requests": _K.RATE_LIMITED,
    "service_unavailable_error": _K.PROVIDER_OVERLOADED,
    "overloaded_error": _K.PROVIDER_OVERLOADED,
    "server_error": _K.PROVIDER_SERVER_ERROR,
    "internal_error": _K.PROVIDER_SERVER_ERROR,
    "api_error": _K.PROVIDER_SERVER_ERROR,
    "request_timeout": _K.TRANSPORT_TRANSIENT,
    "connection_failed": _K.TRANSPORT_TRANSIENT,
}


def openai_error(provider: str, target: Target, response: HttpResponse, meta: HeaderMeta, data: Any) -> Failure:
    """The Failure for an error in OpenAI's envelope (``{"error": {message, type, param, code}}`` and
    the variants compatible servers send), from a response body or a stream event."""
    body = as_dict(data)
    err = body.get("error")
    if isinstance(err, str):  # {"error": "message"}: vLLM and llama.cpp variants
        err = {"message": err}
    err = as_dict(err)
    if not err and "message" in body:  # a bare {"message": ..., "type": ...} envelope
        err = body
    message = as_str(err.get("message")) or as_str(body.get("detail"))
    err_type = as_str(err.get("type"))
    if err_type == "None":  # LiteLLM stringifies a missing type
        err_type = None
    raw_code = err.get("code")
    code = raw_code if isinstance(raw_code, str) and raw_code else None
    status = response.status
    number = status_code(raw_code)
    if not 400 <= status < 600 and number is not None:
        # the upstream status, in a 200 error envelope or a mid-stream error event
        # (OpenRouter, vLLM and LiteLLM send it as the code, LiteLLM as a string)
        status, code = number, None
    kind = classify(status, code, err_type, message)
    return error_failure(
        provider=provider,
        kind=kind,
        target=target,
        response=response,
        meta=meta,
        code=code or err_type or (str(raw_code) if number is not None else None),
        message=message,
        # llama.cpp's exceed_context_size_error says its numbers in fields of their own
        numbers=numbers_of(err.get("n_ctx"), err.get("n_prompt_tokens")) if "n_ctx" in err else None,
    )


def status_code(raw: Any) -> int | None:
    """An error ``code`` that is an HTTP status (``503`` or ``"503"``), else None."""
    if isinstance(raw, str) and len(raw) == 3 and raw.isdigit():
        raw = int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool) and 400 <= raw < 600:
        return raw
    return None


def classify(status: int, code: str | None, err_type: str | None, message: str | None) -> FailureKind:
    """One kind from status, code, type and message: the code when it is specific, then the
    message's known wordings, then the status (or, for an error inside a 200, the type)."""
    answered = not 400 <= status < 600  # an error inside a 200: the status says nothing
    for c in (code, err_type):
        if c:
            kind = CODE_KINDS.get(c)
            if kind is not None:
                return kind
            if c in FILTER_CODES and status < 500:
                return FailureKind.CONTENT_FILTERED
    text = f"{code or ''} {err_type or ''} {message or ''}"
    if (answered or status in (400, 413, 422)) and CONTEXT_OVERFLOW.search(text):
        return FailureKind.CONTEXT_OVERFLOW
    if (answered or status == 429 or status >= 500) and "overloaded" in text.lower():
        # the older "The engine is currently overloaded" (type server_error, as a 429 or 500):
        # capacity, not this key's rate
        return FailureKind.PROVIDER_OVERLOADED
    if answered:
        for c in (code, err_type):
            kind = TYPE_KINDS.get(c) if c else None
            if kind is not None:
                return kind
    return kind_from_status(status)
