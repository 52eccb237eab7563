"""OpenAI-style error bodies, and which HTTP status each failure kind becomes.

Every error the gateway answers has the body OpenAI clients know::

    {"error": {"message": "...", "type": "...", "code": "...", "param": null}}

so the official SDKs raise their usual exception classes (BadRequestError for 400,
AuthenticationError for 401, PermissionDeniedError for 403, NotFoundError for 404,
UnprocessableEntityError for 422, InternalServerError for 5xx...).

Provider messages are never passed through for credential problems (they may quote part
of OUR provider key), and every message is scrubbed of the configured provider secrets and
of anything shaped like an API key before it leaves the gateway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..inbound import WireError, retry_headers
from ..model import KEYLIKE, FailureKind, Unavailable


class ApiError(Exception):
    """An error answer: status, OpenAI-style body fields, extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        # One layer owns retries: no answer of the gateway invites a client's own retry (the
        # SDKs would otherwise retry a 408, 409 or 5xx by themselves)
        self.headers = {"x-should-retry": "false", **(headers or {})}

    def body(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, "param": self.param}}


def shutting_down() -> ApiError:
    """The answer to a request the drain turned away or cut."""
    return ApiError(
        503,
        "the gateway is shutting down; retry (another instance will answer)",
        type="service_unavailable",
        code="shutting_down",
        # another instance can take the request: Retry-After says so to a load balancer or a
        # client's own retry policy, but the SDKs are still told not to retry on their own
        headers={"retry-after": "1", "x-should-retry": "false", "connection": "close"},
    )


def from_wire(exc: WireError) -> ApiError:
    """The gateway's answer to a body a dialect refused (``failover.inbound``)."""
    return ApiError(exc.status, exc.message, type=exc.type, code=exc.code, param=exc.param)


@dataclass(frozen=True, slots=True)
class _Mapping:
    status: int
    type: str
    public: bool  # may the (scrubbed) router message be shown?


_UPSTREAM = "upstream_error"
# Failure kind -> status. Retryable kinds not listed here become 503, others 502.
_BY_KIND: dict[FailureKind, _Mapping] = {
    FailureKind.DEADLINE_EXHAUSTED: _Mapping(504, "timeout_error", True),
    FailureKind.INVALID_REQUEST: _Mapping(400, "invalid_request_error", True),
    FailureKind.CONTEXT_OVERFLOW: _Mapping(400, "invalid_request_error", True),
    FailureKind.CONTENT_FILTERED: _Mapping(400, "invalid_request_error", True),
    FailureKind.CONTRACT_FAILURE: _Mapping(422, "invalid_request_error", True),
    FailureKind.SCHEMA_INVALID: _Mapping(422, "invalid_request_error", True),
    FailureKind.TOOL_CALL_MALFORMED: _Mapping(422, "invalid_request_error", True),
    FailureKind.TRUNCATED: _Mapping(422, "invalid_request_error", True),
    FailureKind.SIDE_EFFECT_UNCERTAIN: _Mapping(409, "invalid_request_error", True),
    # Our side is misconfigured: the caller's key is fine, the gateway's provider credential,
    # model name or account is not. Nothing the provider said is shown.
    FailureKind.AUTHENTICATION_OR_PERMISSION: _Mapping(502, _UPSTREAM, False),
    FailureKind.MODEL_NOT_FOUND: _Mapping(502, _UPSTREAM, False),
    FailureKind.QUOTA_EXHAUSTED: _Mapping(502, _UPSTREAM, False),
}

_PRIVATE_MESSAGE = {
    FailureKind.AUTHENTICATION_OR_PERMISSION: "the gateway's provider credentials were rejected upstream; "
    "this is a gateway configuration problem, not your API key",
    FailureKind.MODEL_NOT_FOUND: "the upstream provider does not serve the model this route is configured with; "
    "this is a gateway configuration problem",
    FailureKind.QUOTA_EXHAUSTED: "the gateway's provider account is out of quota or credit; "
    "this is a gateway configuration problem",
}


class Scrubber:
    """Removes the configured provider secrets (and key-shaped strings) from text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, "***")
        return KEYLIKE.sub("***", text)


def _mapping(exc: Unavailable) -> _Mapping:
    m = _BY_KIND.get(exc.reason)
    if m is None:
        return _Mapping(503, "service_unavailable", True) if exc.retryable else _Mapping(502, _UPSTREAM, True)
    if exc.retryable and m.status == 502:
        # A circuit opened by this kind (say, rejected credentials) turned the request away for
        # now: the caller may come back after Retry-After, so 503, not a final 502.
        return _Mapping(503, "service_unavailable", m.public)
    return m


def status_for(exc: Unavailable) -> int:
    return _mapping(exc).status


def unavailable_error(exc: Unavailable, scrub: Scrubber) -> ApiError:
    """The error answer for a typed failure."""
    m = _mapping(exc)
    if m.public:
        message = scrub(f"{exc.reason.value}: {exc.message}")
    else:
        message = f"{exc.reason.value}: {_PRIVATE_MESSAGE.get(exc.reason, 'upstream failure')}"
    message += f" (request id {exc.request_id})"
    return ApiError(m.status, message, type=m.type, code=exc.reason.value, headers=retry_headers(exc))
