"""Helpers for the token-count tests: a transport that answers one canned response."""

from __future__ import annotations

import json
from typing import Any

from failover.transport._types import HttpRequest, HttpResponse


class Canned:
    """A Transport that answers every request with one response, and keeps the requests.

    The fault kit's fake providers answer every token-count call with a 200 (counts are
    outside their scripts), so error statuses on the count endpoints are played from here.
    """

    enforces_total = False

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.response = HttpResponse(status=status, headers=headers or {"content-type": "application/json"}, body=raw)
        self.requests: list[HttpRequest] = []
        self.timeouts: list[tuple[float, float]] = []

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        self.requests.append(request)
        self.timeouts.append((connect_timeout, total_timeout))
        return self.response

    async def aclose(self) -> None:
        pass


class Raising:
    """A Transport whose send raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        raise self.exc

    async def aclose(self) -> None:
        pass
