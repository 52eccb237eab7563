"""What one run is made of: the call it serves, and the work that varies.

    Call       one request through the router: its route, envelope, clock, deadline, the
               RouteRecord being built and the Output a streaming caller is shown
    Work       what is asked and how one attempt exchanges it: a generation, plain or
               streamed (:mod:`._generate`), or an embedding (:mod:`._embed`)
    Exchanged  what one exchange did, as the attempt books it (:mod:`._attempt`)

The loop (:class:`~._run.Run`) holds a Call, a Work and the engine's state; it never knows
which work it carries out. A work never decides what happens next: it counts, plans and
exchanges.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..model import Capability, Embeddings, EmbedRequest, Envelope, Failure, Request, Response, Route, Target, Usage
from ..model import Validation as Checked
from ..policy import Deadline, Plan
from ._parts import RouterParts
from ._record import Recorder
from ._stream import Output

# What a run answers: a Response, or the vectors of an embedding request.
Answer = TypeVar("Answer", Response, Embeddings)
Answer_co = TypeVar("Answer_co", Response, Embeddings, covariant=True)


class Call:
    """One request through the router: what every part of its run reads."""

    __slots__ = ("deadline", "env", "loop", "output", "rec", "route", "router", "t0")

    def __init__(self, router: RouterParts, route: Route, envelope: Envelope) -> None:
        self.router = router
        self.route = route
        self.env = envelope
        self.loop = asyncio.get_running_loop()
        self.t0 = self.loop.time()
        self.deadline = Deadline.after(now=self.t0, budget=envelope.budget)
        self.rec = Recorder(envelope.request_id, route.name, self.t0, listing=route)
        self.output = Output(None)
        self.output.hold(
            route.hold_tokens if envelope.hold_tokens is None else envelope.hold_tokens,
            route.hold_seconds if envelope.hold_seconds is None else envelope.hold_seconds,
            self.loop.time,
        )


@dataclass(slots=True, kw_only=True)
class Exchanged:
    """What one exchange did: its outcome and what the record says of it."""

    outcome: Response | Embeddings | Failure
    connect: float  # the attempt's connect and total timeouts
    total: float
    status: int | None = None
    usage: Usage | None = None
    cost: float = 0.0
    estimated: bool = False  # the cost is an estimate (no usage came back)
    connected: float | None = None
    streamed: bool = False
    first_event: float | None = None
    quiet: float = math.inf
    committed: float | None = None
    contract_ok: bool | None = None
    task_ok: bool | None = None
    stripped: int = 0
    dropped: tuple[str, ...] = ()
    capped_to: int | None = None
    checked: Checked | None = None  # an answer's validation, for the record
    paused: float = 0.0  # seconds a stream was held back for its caller: the caller's, not the provider's


class Work(Protocol[Answer_co]):
    """What a run asks, and how one attempt sends it (see the module docstring)."""

    @property
    def request(self) -> Request | EmbedRequest:
        """The request as it stands (shorter after a compaction)."""
        ...

    @property
    def compactable(self) -> bool:
        """The route's compaction hook may shorten the request once."""
        ...

    def input_tokens(self, target: Target) -> int:
        """The request's input tokens on ``target``: the provider's own count where one was
        asked for, else the target's local count."""
        ...

    def local_tokens(self, target: Target) -> int:
        """The target's local count of the request's input tokens."""
        ...

    def output_reserve(self, target: Target, request: Request | EmbedRequest) -> int:
        """The output tokens a limiter holds for an attempt until its usage is known."""
        ...

    def request_for(self, target: Target) -> Request | EmbedRequest:
        """The request as ``target`` is sent it."""
        ...

    def capped_to(self, sent: int | None) -> int | None:
        """``sent``, an attempt's max_tokens, when it is less than the caller asked for."""
        ...

    async def plan(self) -> Plan:
        """The route's candidates for this request now."""
        ...

    def overflows(self, required: frozenset[Capability]) -> list[tuple[Target, int]]:
        """The candidates only their window keeps out, and by how many tokens."""
        ...

    async def compact(self, over: list[tuple[Target, int]]) -> bool:
        """Shorten the request once with the route's compaction hook; True when it did."""
        ...

    async def exchange(
        self, target: Target, request: Request | EmbedRequest, start: float, until: float, quiet: float
    ) -> Exchanged:
        """One attempt's exchange, checked; it must end by ``until`` unless its output is
        committed, and a stream may stay silent ``quiet`` seconds until then."""
        ...

    def answer(self, outcome: Response | Embeddings) -> Answer_co:
        """The run's answer type of an exchange's outcome."""
        ...


__all__ = ["Answer", "Call", "Exchanged", "Work"]
