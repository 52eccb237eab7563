"""Small HTTP pieces every endpoint shares: the request's headers as a dict, and a JSON
answer, either as a Starlette ``Response`` or sent straight to the ASGI server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.types import Scope, Send

from ..inbound import WireError
from ..model import dumps as _dumps
from ._errors import error_response


def json_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(_dumps(body), status_code=status, headers=dict(headers or {}), media_type="application/json")


async def send_json(send: Send, status: int, body: bytes | Sequence[bytes], headers: Mapping[str, str]) -> None:
    """A JSON answer straight to the ASGI server: what a Starlette ``Response`` sends, without
    building one (the hot path sends one per request). ``body`` may be a sequence of slices
    (a large answer, never joined): one ``content-length`` for all, one ASGI message each."""
    size = len(body) if isinstance(body, bytes) else sum(len(p) for p in body)
    raw = [(b"content-length", str(size).encode()), (b"content-type", b"application/json")]
    raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    if isinstance(body, bytes):
        await send({"type": "http.response.body", "body": body})
        return
    *head, last = body
    for part in head:
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": last})


def header_map(scope: Scope) -> dict[str, str]:
    """The request headers as a plain dict (ASGI names are lower-case; the first of a repeated
    header wins, as with Starlette's ``Headers.get``), built once per request."""
    out: dict[str, str] = {}
    for k, v in reversed(scope["headers"]):
        out[k.decode("latin-1")] = v.decode("latin-1")
    return out


def answers_errors(fn: Callable[[HttpRequest], Awaitable[Response]]) -> Callable[[HttpRequest], Awaitable[Response]]:
    """A Starlette handler whose refusal (an ApiError or WireError) becomes its JSON answer."""

    async def run(request: HttpRequest) -> Response:
        try:
            return await fn(request)
        except WireError as err:
            return error_response(err)

    return run


__all__ = ["answers_errors", "header_map", "json_response", "send_json"]
