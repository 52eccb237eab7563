"""Set-up for the recovery tests: fake upstreams over real loopback HTTP, the router with its
default policies, and the gateway served in the test's own loop (so virtual time covers the
fakes, the router, the gateway and the official SDKs alike).

Targets as the recovery measurements had them: A may try 3 times, 2 s per attempt; B and C
try once; A2 serves A's model on another endpoint (an equivalent). Only set-up lives here;
every assertion stays in the test that makes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai
import uvicorn

from failover import Capability, Envelope, Price, Request, Route, Router, RouteRecord, Target, Timeouts, Unavailable
from failover.gateway import EnvelopeDefaults, GatewaySettings, create_app
from failover.gateway._serve import http_protocol
from failover.policy import Backoff, BreakerBoard, RetryBudget, StatsBoard
from failover.testing import FakeProvider, FakeServer, Reply, Script
from failover.testing._script import ScriptSpec
from failover.transport import Http1Transport

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
BUDGET = 5.0

# route shape -> (primary targets, fallback targets)
SHAPES: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "solo": (("a",), ()),
    "a->b": (("a",), ("b",)),
    "a->b->c": (("a",), ("b", "c")),
    "a+equivalent": (("a", "a2"), ()),
}

# fault name -> A's reply, every call
FAULTS: Mapping[str, Reply] = {
    "503": Reply.overloaded(),  # OpenAI's overloaded 503
    "529": Reply.overloaded(),  # the same fault from an Anthropic upstream (A speaks anthropic there)
    "500": Reply.server_error(),
    "429 s": Reply.rate_limit(retry_after=1),
    "429 ms": Reply.rate_limit(retry_after_ms=800),
    "429 date": Reply.rate_limit(retry_after_date=2),
    "hang": Reply.hang(),
    "drop": Reply.reset(),  # the connection closes before the first byte
    "json to a stream": Reply.ok("whole answer", plain=True),
}
RECOVERED_BY_A = {"json to a stream"}  # A answers: the fault is only an odd wire form


def dialect_of(fault: str) -> str:
    return "anthropic" if fault == "529" else "openai"


class Records(StatsBoard):
    """The router's stats board, keeping every request's RouteRecord."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[RouteRecord] = []

    def observe(self, record: RouteRecord) -> None:
        self.records.append(record)
        super().observe(record)


@dataclass
class Upstreams:
    """The fake providers behind one FakeServer, and the targets and routes over them."""

    srv: FakeServer
    providers: dict[str, FakeProvider]
    targets: dict[str, Target] = field(default_factory=dict)

    def route(self, shape: str, **kw: Any) -> Route:
        prim, fb = SHAPES[shape]
        kw.setdefault("balance", "order")  # the faulty target first: its recovery is what is checked
        return Route(
            name="r",
            primary=tuple(self.targets[n] for n in prim),
            fallbacks=tuple(self.targets[n] for n in fb),
            **kw,
        )

    def calls(self, name: str) -> int:
        return len(self.providers[name].calls)

    def request_calls(self, name: str) -> int:
        """Generation requests only (a token-count call is not an attempt)."""
        return sum(1 for c in self.providers[name].calls if c.kind is not None)


@contextlib.asynccontextmanager
async def upstreams(
    a: ScriptSpec, *, dialect: str = "openai", healthy_latency: float = 0.2, attempts_a: int = 3
) -> AsyncIterator[Upstreams]:
    """A fails with ``a``; B, C and A2 answer after ``healthy_latency``."""
    ok = Reply.ok(latency=healthy_latency)
    providers = {
        "a": FakeProvider("a", dialect, a),
        "b": FakeProvider("b", "openai", Script.always(ok)),
        "c": FakeProvider("c", "anthropic", Script.always(ok)),
        "a2": FakeProvider("a2", dialect, Script.always(ok)),
    }
    async with FakeServer(*providers.values()) as srv:
        up = Upstreams(srv, providers)
        for name, p in providers.items():
            up.targets[name] = srv.target_for(
                p,
                model=f"model-{name}" if name != "a2" else "model-a",
                equivalence_key="A" if name in ("a", "a2") else None,
                timeouts=Timeouts(connect=2.0, first_event=2.0, idle=2.0, total=2.0, min_useful=0.05),
                max_attempts=attempts_a if name == "a" else 1,
                capabilities=CAPS,
                price=Price(input_per_mtok=1.0, output_per_mtok=2.0),
                tokenizer="estimate",
            )
        yield up


def make_router(route: Route, **kw: Any) -> Router:
    """The router as a user gets it: default retry budget, breakers and backoff (seeded jitter)."""
    return Router(
        [route],
        transport=Http1Transport(),
        retry_budget=kw.pop("retry_budget", RetryBudget()),
        breakers=kw.pop("breakers", BreakerBoard()),
        backoff=kw.pop("backoff", Backoff()),
        rng=random.Random(kw.pop("seed", 1)),
        **kw,
    )


async def call(router: Router, envelope: Envelope, *, stream: bool = False) -> RouteRecord | Unavailable:
    """One request through the library; its record, or the Unavailable (record attached)."""
    try:
        if stream:
            async with router.stream("r", Request.simple("hi"), envelope) as s:
                async for _ in s:
                    pass
            result = s.result
            assert result is not None
            if hasattr(result, "response"):
                rec = result.response.record
                assert rec is not None
                return rec
            return result.record  # type: ignore[union-attr,return-value]
        resp = await router.complete("r", Request.simple("hi"), envelope)
    except Unavailable as exc:
        return exc
    assert resp.record is not None
    return resp.record


def record_of(outcome: RouteRecord | Unavailable) -> RouteRecord:
    return outcome.record if isinstance(outcome, Unavailable) else outcome


def waits_end_in_attempts(rec: RouteRecord) -> bool:
    """No wait was slept before a refusal: every wait is followed by an attempt it waited for."""
    return all(any(a.start >= w.end - 1e-6 and a.target == w.target for a in rec.attempts) for w in rec.waits)


@dataclass
class Gateway:
    """The gateway app served by uvicorn on a loopback port, in the test's own event loop."""

    router: Router
    port: int
    server: uvicorn.Server
    task: asyncio.Task[None]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def openai(self, **kw: Any) -> openai.AsyncOpenAI:
        """The official client at its DEFAULT settings (max_retries=2, its own timeout)."""
        return openai.AsyncOpenAI(base_url=self.base_url, api_key="unused-on-an-open-gateway", **kw)


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` in a /metrics page whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@contextlib.asynccontextmanager
async def gateway(router: Router, *, deadline_ms: int = int(BUDGET * 1000), **settings: Any) -> AsyncIterator[Gateway]:
    gs = GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=deadline_ms), **settings)
    app = create_app(router, gs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="error", lifespan="on", http=http_protocol(gs), access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield Gateway(router, port, server, task)
    finally:
        server.should_exit = True
        await task
        sock.close()
