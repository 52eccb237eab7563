"""Failures as every client sees them: the one table from failure kind to HTTP status, for the
gateway and for the in-process SDK drop-in side by side; the error type, body and headers of
each client shape; the one scrubber of provider secrets.

A refused request and a failed one are the same thing here: a :class:`~failover.inbound.WireError`
(status, message, ``type``, ``code``, ``param``, headers). :func:`unavailable` turns the router's
:class:`~failover.model.Unavailable` into one, :func:`render` turns any of them into the status,
headers and body a client of one :class:`Shape` receives. The gateway and the drop-in only send
what :func:`render` gives; adding a failure kind is a row of :data:`TABLE`, adding a client
shape a :class:`Shape` here and its use where it is served.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..model import KEYLIKE, FailureKind, Route, RouteRecord, Unavailable
from ._anthropic_message import error_body as anthropic_error_body
from ._anthropic_message import error_type_for as anthropic_type
from ._headers import record_headers, retry_headers
from ._wire import WireError


@dataclass(frozen=True, slots=True)
class Shape:
    """One kind of client an error is rendered for: which error envelope it reads (Anthropic's or
    OpenAI's) and where it runs (the gateway's HTTP client, or the SDK drop-in in the caller's
    own process, which holds the provider keys itself)."""

    name: str
    anthropic: bool
    in_process: bool


# The gateway's endpoints: OpenAI's envelope for Chat Completions (and embeddings, the admin
# and ops routes), the Responses API, and Anthropic's for Messages.
CHAT = Shape("chat", anthropic=False, in_process=False)
RESPONSES = Shape("responses", anthropic=False, in_process=False)
MESSAGES = Shape("messages", anthropic=True, in_process=False)
# The in-process SDK drop-in (``failover.httpx_client``): the official openai and anthropic SDKs.
SDK_CHAT = Shape("sdk-chat", anthropic=False, in_process=True)
SDK_MESSAGES = Shape("sdk-messages", anthropic=True, in_process=True)


@dataclass(frozen=True, slots=True)
class Row:
    """What one failure kind becomes. ``gateway`` and ``in_process``: the status on each side
    (None: 503 when a retry later can succeed, else 502); ``private``: the gateway shows a fixed
    message instead of the provider's (the drop-in always shows it, scrubbed: its caller owns
    the key it may quote); ``why``: the reason, wherever the two sides differ."""

    gateway: int | None
    in_process: int | None
    private: bool = False
    why: str = ""


_OURS = (
    "the gateway's caller did not send the provider key, model name or account: an upstream "
    "refusal is the gateway's own configuration problem (502), never the caller's; in-process "
    "the caller owns them, so the SDK raises the class it raises for the provider's own answer"
)
_LATER = (
    "at the gateway the router already waited, retried and failed over: a client sees 503 "
    "(with Retry-After when known), one status for 'every candidate failing for now'; "
    "in-process the SDK raises the class its caller catches for the same answer from the provider"
)

# Failure kind -> status, per side. Statuses are chosen so that the official SDKs raise the
# exception class a caller would catch for the same problem.
TABLE: dict[FailureKind, Row] = {
    FailureKind.INVALID_REQUEST: Row(400, 400),
    FailureKind.CONTEXT_OVERFLOW: Row(400, 400),
    FailureKind.CONTENT_FILTERED: Row(400, 400),  # not 451: what OpenAI answers for a blocked prompt
    FailureKind.CONTRACT_FAILURE: Row(422, 422),
    FailureKind.SCHEMA_INVALID: Row(422, 422),
    FailureKind.TOOL_CALL_MALFORMED: Row(422, 422),
    FailureKind.TRUNCATED: Row(422, 422),
    FailureKind.SIDE_EFFECT_UNCERTAIN: Row(409, 409),
    FailureKind.DEADLINE_EXHAUSTED: Row(504, 504),
    FailureKind.AUTHENTICATION_OR_PERMISSION: Row(502, 401, private=True, why=_OURS),
    FailureKind.MODEL_NOT_FOUND: Row(502, 404, private=True, why=_OURS),
    FailureKind.QUOTA_EXHAUSTED: Row(502, 429, private=True, why=_OURS),
    FailureKind.RATE_LIMITED: Row(None, 429, why=_LATER),
    FailureKind.TIMEOUT: Row(None, 504, why=_LATER),
    FailureKind.PROVIDER_OVERLOADED: Row(None, 503, why=_LATER + " (503, or 529 for Anthropic, even when final)"),
    FailureKind.PROVIDER_SERVER_ERROR: Row(None, None),
    FailureKind.TRANSPORT_TRANSIENT: Row(None, None),
    FailureKind.PARTIAL_OUTPUT: Row(None, None),
}

# A status that tells a client to give up for good, turned into 503 when the failure is one a
# retry later can end (an open circuit tripped by rejected credentials or an unknown model
# turned the request away for now).
_FINAL = frozenset({401, 404, 502})

_PRIVATE_MESSAGE = {
    FailureKind.AUTHENTICATION_OR_PERMISSION: "the gateway's provider credentials were rejected upstream; "
    "this is a gateway configuration problem, not your API key",
    FailureKind.MODEL_NOT_FOUND: "the upstream provider does not serve the model this route is configured with; "
    "this is a gateway configuration problem",
    FailureKind.QUOTA_EXHAUSTED: "the gateway's provider account is out of quota or credit; "
    "this is a gateway configuration problem",
}

# OpenAI's error ``type`` by status. 502: the gateway's failure is upstream of it; the drop-in
# has no upstream of its own to name, so the SDK's generic server_error.
_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    503: "service_unavailable",
    504: "timeout_error",
}


def openai_type(status: int, shape: Shape) -> str:
    """OpenAI's error ``type`` for a status, as ``shape``'s client is told."""
    if status == 502:
        return "server_error" if shape.in_process else "upstream_error"
    return _OPENAI_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")


def _anthropic_type(err: WireError, status: int, shape: Shape) -> str:
    """Anthropic's error ``type``. At the gateway, ``overloaded_error`` only for an
    unavailability the client may come back from at a known moment (a ``Retry-After``): Claude
    Code retries every ``overloaded_error`` whatever ``x-should-retry`` says, sleeping the
    ``Retry-After``, and would otherwise run the whole routing again at once. In-process the
    caller is the anthropic SDK, which obeys ``x-should-retry``: the type follows the status."""
    if status in (503, 529) and not shape.in_process:
        return "overloaded_error" if "retry-after" in err.headers else "api_error"
    return anthropic_type(status)


def status_for(exc: Unavailable, shape: Shape) -> int:
    """The HTTP status ``exc`` is answered with for ``shape`` (the SDK picks its exception class by it)."""
    row = TABLE.get(exc.reason, Row(None, None))
    status = row.in_process if shape.in_process else row.gateway
    if status is None:
        status = 503 if exc.retryable else 502
    elif exc.retryable and status in _FINAL:
        status = 503
    return _status(status, exc.reason.value, shape)


def _status(status: int, code: str | None, shape: Shape) -> int:
    """Anthropic clients know overload as 529 (``anthropic.OverloadedError``)."""
    if shape.anthropic and status == 503 and code == FailureKind.PROVIDER_OVERLOADED.value:
        return 529
    return status


class Scrubber:
    """Removes the configured provider secrets (and key-shaped strings) from text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    @classmethod
    def of(cls, routes: Iterable[Route]) -> Scrubber:
        """The scrubber of every target key of ``routes``."""
        return cls(t.api_key.reveal() for r in routes for t in r.targets if t.api_key)

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            if s in text:
                text = text.replace(s, "***")
        return KEYLIKE.sub("***", text)


def unavailable(exc: Unavailable, shape: Shape, scrub: Scrubber) -> WireError:
    """The error answer for a typed failure: its status, the (scrubbed) message naming the
    request id, the failure kind as ``code``, and what the client may know of retrying it."""
    status = status_for(exc, shape)
    row = TABLE.get(exc.reason)
    if row is not None and row.private and not shape.in_process:
        message = f"{exc.reason.value}: {_PRIVATE_MESSAGE[exc.reason]}"
    else:
        message = scrub(f"{exc.reason.value}: {exc.message}")
    message += f" (request id {exc.request_id})"
    kind = openai_type(status if status != 529 else 503, shape)
    return WireError(status, message, type=kind, code=exc.reason.value, headers=retry_headers(exc))


def problem(status: int, message: str, shape: Shape, *, code: str | None, param: str | None = None) -> WireError:
    """An error of ``status`` with the type ``shape``'s client expects of it."""
    return WireError(status, message, type=openai_type(status, shape), code=code, param=param)


@dataclass(frozen=True, slots=True)
class Rendered:
    """An error answer as it goes out: status, headers, JSON body."""

    status: int
    headers: dict[str, str]
    body: dict[str, Any]


def render(
    err: WireError, shape: Shape, *, request_id: str | None = None, record: RouteRecord | None = None
) -> Rendered:
    """``err`` as ``shape``'s client receives it. Every error answer says ``x-should-retry:
    false``: one layer owns retries, and the SDKs would otherwise retry a 408, 409 or 5xx by
    themselves. With a ``request_id`` (the request got that far) the ``x-failover-*`` record
    headers go too; the gateway's Anthropic answers also name it in ``request-id`` and the body,
    where the anthropic SDK reads it."""
    status = _status(err.status, err.code, shape)
    headers = {"x-should-retry": "false", **err.headers}
    if request_id is not None:
        headers.update(record_headers(request_id, record))
    if not shape.anthropic:
        body = {"error": {"message": err.message, "type": err.type, "code": err.code, "param": err.param}}
        return Rendered(status, headers, body)
    named = request_id if not shape.in_process else None  # the drop-in never named it there
    if named is not None:
        headers["request-id"] = named
    kind = _anthropic_type(err, status, shape)
    return Rendered(
        status, headers, anthropic_error_body(status, err.message, type=kind, code=err.code, request_id=named)
    )


__all__ = [
    "CHAT",
    "MESSAGES",
    "RESPONSES",
    "SDK_CHAT",
    "SDK_MESSAGES",
    "TABLE",
    "Rendered",
    "Row",
    "Scrubber",
    "Shape",
    "openai_type",
    "problem",
    "render",
    "status_for",
    "unavailable",
]
