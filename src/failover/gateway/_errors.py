"""The gateway's error answers: :class:`ApiError` (a refusal the gateway raises), the drain's
503, and :func:`error_response`, the one place an error becomes a Starlette response.

Which status, type, body and headers a failure gets, for each client shape, is decided by
:mod:`failover.inbound._failures` (one table for the gateway and the in-process drop-in). Every
endpoint catches :class:`~failover.inbound.WireError` (of which ApiError is one) once and
answers with :func:`error_response` in its own shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from ..inbound import CHAT, Shape, WireError, render
from ..model import RouteRecord
from ..model import dumps as _dumps


class ApiError(WireError):
    """An error answer: status, OpenAI-style body fields, extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        # One layer owns retries: no answer of the gateway invites a client's own retry (the
        # SDKs would otherwise retry a 408, 409 or 5xx by themselves)
        super().__init__(
            status, message, type=type, code=code, param=param, headers={"x-should-retry": "false", **(headers or {})}
        )

    def body(self) -> dict[str, Any]:
        """The OpenAI-style body the gateway's Chat Completions clients receive."""
        return render(self, CHAT).body


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


def error_response(
    err: WireError, shape: Shape = CHAT, *, request_id: str | None = None, record: RouteRecord | None = None
) -> Response:
    """``err`` in ``shape``'s error format, with the ``x-failover-*`` headers when the request
    got as far as an id."""
    out = render(err, shape, request_id=request_id, record=record)
    return Response(_dumps(out.body), status_code=out.status, headers=out.headers, media_type="application/json")
