"""One gateway request from its first byte to its access line (:class:`Exchange`): what the
endpoint, the stream relay and the end of the request (``Gateway.finish``) know of it, in one
object instead of a list of keywords passed from each to the next."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..model import Envelope, RouteRecord
from ..router import Router
from ._settings import Tenant


@dataclass(slots=True)
class Exchange:
    """One request: filled in as it goes (tenant after auth, route after the body, envelope,
    request id and drain signal once admitted), and how it ended, by ``Gateway.finish``."""

    router: Router  # the router it started on: a reload swaps the gateway's, this request keeps its own
    started: float  # time.perf_counter() when it came in
    tenant: Tenant | None = None
    route: str | None = None  # the body's ``model``, once read
    envelope: Envelope | None = None
    request_id: str | None = None  # what the access line and the client's retry marks name
    stop: asyncio.Future[None] | None = None  # resolved when the drain cuts it (``Gateway.enter``)
    stream: bool = False
    # how it ended (``Gateway.finish``)
    status: int = 0
    record: RouteRecord | None = None
    note: str = ""  # why it stopped, when not with an answer: a failure kind, a disconnect, the drain
    code: str | None = None

    def admitted(self) -> tuple[str, Envelope, asyncio.Future[None]]:
        """The route, envelope and drain signal of a request past admission."""
        if self.route is None or self.envelope is None or self.stop is None:
            raise RuntimeError("the request has not been admitted")
        return self.route, self.envelope, self.stop


__all__ = ["Exchange"]
