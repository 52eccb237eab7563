"""Google's error envelope (``google.rpc.Status`` as JSON), as the Gemini API and Vertex AI send it.

``{"error": {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED", "details": [...]}}``,
sometimes wrapped in a list (``streamGenerateContent`` without ``alt=sse``, and Vertex's
front end in front of partner models). The details that decide a kind: ``ErrorInfo.reason``
(``API_KEY_INVALID``, ``BILLING_DISABLED``...), ``QuotaFailure`` violations (per minute or per
day) and ``RetryInfo.retryDelay``. Claude on Vertex answers in this envelope whenever Google's
side refuses a request before the model sees it (authentication, IAM, quota: ``429
RESOURCE_EXHAUSTED``), and in Anthropic's own envelope otherwise, so both dialects classify
with :func:`google_error`.

Reference: cloud.google.com/apis/design/errors, ai.google.dev/gemini-api/docs/troubleshooting,
cloud.google.com/vertex-ai/generative-ai/docs/error-code-429.
"""

from __future__ import annotations

import re
from typing import Any

from ..model import Failure, FailureKind, Target
from ..transport import HttpResponse
from ._common import CONTEXT_OVERFLOW, as_dict, as_list, as_str, error_failure, kind_from_status
from ._headers import HeaderMeta, parse_duration

__all__ = ["google_envelope", "google_error"]

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
        "CREDENTIALS_MISSING",  # Vertex: no bearer token
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


def google_envelope(data: Any) -> dict[str, Any] | None:
    """``data`` as Google's error envelope (unwrapped from a one-element list), else None.

    Google's ``error`` has a gRPC ``status`` name or an integer ``code``; Anthropic's has a
    ``type`` (and the body a top-level ``"type": "error"``), so the two never mix up.
    """
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict) or data.get("type") == "error":
        return None
    err = data.get("error")
    if not isinstance(err, dict) or "type" in err:
        return None
    code = err.get("code")
    if isinstance(err.get("status"), str) or (isinstance(code, int) and not isinstance(code, bool)):
        return data
    return None


def google_error(
    provider: str, target: Target, response: HttpResponse, meta: HeaderMeta, body: dict[str, Any]
) -> Failure:
    """The Failure for an error in Google's envelope, classified by its status, reason and quota."""
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
        provider=provider,
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
        # is money, not flow. Without QuotaFailure details we assume the common case, a rate:
        # Vertex's dynamic shared quota ("Resource exhausted. Please try again later.") and
        # its per-minute quotas ("Quota exceeded for aiplatform.googleapis.com/
        # online_prediction_requests_per_base_model") both are.
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
