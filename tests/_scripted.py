"""A scripted upstream for the client-side tests: each attempt answers with the stream events (and
the finished Response) a test gives, so a test can drive the router, the gateway and the SDK
drop-in with any sequence of events a dialect may emit (reasoning blocks, interleaved tool calls,
a final call that differs from its fragments) before the dialect parsers that emit them exist.

Below the router only: a Transport that streams one SSE event per scripted event, and a dialect
whose parser hands back the scripted event for each (the wire format is failover's own events,
which is the point: the router, the gateway and the official SDK clients above it are the real
ones). Each target has its own queue of answers; every request a target was built is kept, so a
test sees the history it was sent (reasoning stripped or kept).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from failover import Price, Route, Router, Secret, Target, Timeouts
from failover.model import Dialect, Failure, FailureKind, Request, Response, StreamEvent
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.providers._base import SSEEvent, StreamFailed
from failover.transport._types import HttpRequest, HttpResponse
from tests._sdk import ALL


@dataclass(frozen=True, slots=True)
class Answer:
    """One attempt's answer: ``events`` streamed in order, then ``response`` (the finished answer
    the dialect records) or, when ``fail`` is given, that failure after the events."""

    events: Sequence[StreamEvent] = ()
    response: Response | None = None
    fail: Failure | None = None
    gap: float = 0.0  # seconds between events (on the loop clock)


CUT = Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message="stream cut by the scripted upstream")


@dataclass
class Upstream:
    """Answers per target name (first in, first out) and the requests each target was built."""

    scripts: dict[str, list[Answer]] = field(default_factory=dict)
    requests: dict[str, list[Request]] = field(default_factory=dict)
    _parked: dict[int, Answer] = field(default_factory=dict)

    def load(self, target: str, *answers: Answer) -> None:
        self.scripts[target] = list(answers)
        self.requests[target] = []

    def _take(self, target: str, request: Request) -> int:
        self.requests.setdefault(target, []).append(request)
        queue = self.scripts.get(target) or [Answer(fail=CUT)]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        token = len(self._parked)
        self._parked[token] = answer
        return token

    def answer(self, token: str) -> Answer:
        return self._parked[int(token)]

    # -- Transport ---------------------------------------------------------------------------------

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        token = request.url.rsplit("/", 1)[1]
        return HttpResponse(status=200, headers={"content-type": "application/json"}, body=token.encode())

    @asynccontextmanager
    async def stream(self, request: HttpRequest, *, connect_timeout: float) -> AsyncIterator[_Body]:
        token = request.url.rsplit("/", 1)[1]
        yield _Body(token, self.answer(token))

    async def aclose(self) -> None:
        return None


class _Body:
    status = 200
    headers: Mapping[str, str] = {"content-type": "text/event-stream"}

    def __init__(self, token: str, answer: Answer) -> None:
        self.token = token
        self.answer = answer

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for i in range(len(self.answer.events)):
            if self.answer.gap:
                await asyncio.sleep(self.answer.gap)
            yield f"data: {self.token}:{i}\n\n".encode()
        yield f"data: {self.token}:end\n\n".encode()

    async def aread(self) -> bytes:
        return b""


class ScriptedDialect:
    """A dialect whose wire is the scripted events; ``reasoning_source`` is the format the target
    reads (what the router's history rule compares a client's reasoning with)."""

    def __init__(self, upstream: Upstream, source: str) -> None:
        self.upstream = upstream
        self.name = source
        self.reasoning_source = source

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        token = self.upstream._take(target.name, request)
        return HttpRequest(method="POST", url=f"{target.base_url}/{token}", headers={}, json={"stream": stream})

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        answer = self.upstream.answer(response.body.decode())
        if answer.fail is not None:
            return answer.fail
        assert answer.response is not None
        return answer.response

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> _Parser:
        return _Parser(self.upstream)


class _Parser:
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.answer: Answer | None = None

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        token, at = event.data.split(":")
        self.answer = answer = self.upstream.answer(token)
        if at == "end":
            if answer.fail is not None:
                raise StreamFailed(answer.fail)
            return ()
        return (answer.events[int(at)],)

    def finish(self) -> Response | Failure:
        assert self.answer is not None and self.answer.response is not None
        return self.answer.response


def scripted_target(name: str, dialect: Dialect | str, model: str | None = None) -> Target:
    return Target(
        name=name,
        dialect=Dialect(dialect),
        model=model or f"{name}-model",
        base_url=f"http://{name}.scripted",
        api_key=Secret(f"sk-scripted-{name}"),
        capabilities=ALL,
        timeouts=Timeouts(connect=2, first_event=5, idle=5, total=10, min_useful=0.05),
        max_attempts=2,
        price=Price(input_per_mtok=1.0, output_per_mtok=2.0),
        tokenizer="estimate",
    )


def scripted_router(upstream: Upstream, routes: Sequence[Route], **kw: Any) -> Router:
    """A router over ``upstream`` whose policies stay out of the way (as tests/_sdk.quiet_router)."""
    dialects = {d.value: ScriptedDialect(upstream, d.value) for d in Dialect}
    return Router(
        routes,
        transport=upstream,
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.01, cap=0.05),
        rng=random.Random(1),
        breakers=NoBreakers(),
        dialects=dialects,
        **kw,
    )
