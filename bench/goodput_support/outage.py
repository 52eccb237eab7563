"""Primary hard down, fallback healthy: is every caller answered during an outage, and at what cost?

    .venv/bin/python bench/goodput.py --outage                 # this tree
    .venv/bin/python bench/goodput.py --outage --outage-burst 500   # 500 callers at once instead
    PYTHONPATH=/tmp/old/src .venv/bin/python bench/goodput.py --outage   # an older tree, same scenario

Callers arrive (Poisson, ``--outage-rate`` per second, default 20) for 60 s at a route A -> B
(A may try 3 times, 2 s per attempt; B once; a 5 s deadline each). A answers in 0.3 s, except
from t = 10 s to t = 40 s, when it is hard down: every request gets a 503 ``server_is_overloaded``
after 20 ms. B answers in 0.3 s throughout. Everything is real: the fault kit's FakeServer over
loopback HTTP, failover's own HTTP client, the router with its default policies, and for the
gateway rows ``failover serve``'s app (uvicorn, in the same loop) called by the official
openai SDK at its DEFAULT max_retries. On virtual loop time: a minute of traffic takes seconds.

Measured per strategy: the share of callers answered within their deadline (all, and those
that arrived during the outage; target >= 99 %), upstream requests per caller (A, B), and the
time from the outage's start to the first answer from B. A last row sends the same traffic to
A alone through the gateway (no fallback): the outage then reaches the SDK, and the requests
per caller say whether its retries nest on ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import looptime
import openai
import uvicorn

from failover import Capability, Envelope, Request, Route, Router, Timeouts, Unavailable
from failover.gateway import EnvelopeDefaults, GatewaySettings, create_app
from failover.gateway._serve import http_protocol
from failover.lab._load import poisson_arrivals
from failover.policy import RetryBudget
from failover.testing import FakeProvider, FakeServer, Reply, Script
from failover.transport import Http1Transport

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})


@dataclass(frozen=True, slots=True, kw_only=True)
class OutageParams:
    rate: float = 20.0  # callers per second
    duration: float = 60.0
    down_from: float = 10.0
    down_to: float = 40.0
    latency: float = 0.3  # a healthy answer
    refuse_after: float = 0.02  # the 503, during the outage
    budget: float = 5.0
    attempts: int = 3  # A's max_attempts
    seed: int = 1
    burst: int = 0  # instead of Poisson arrivals: this many callers at once, 1 s into the outage


@dataclass(slots=True)
class Caller:
    arrival: float
    done: float = 0.0
    target: str | None = None  # who answered; None: a failure reached the caller


@dataclass(slots=True)
class OutageResult:
    label: str
    p: OutageParams
    callers: list[Caller]
    a_requests: list[float]  # arrival times at A
    b_requests: list[float]
    wall: float
    note: str = ""

    def answered(self, lo: float = 0.0, hi: float = float("inf")) -> float:
        picked = [c for c in self.callers if lo <= c.arrival < hi]
        won = [c for c in picked if c.target is not None and c.done - c.arrival <= self.p.budget + 0.05]
        return len(won) / max(1, len(picked))

    def per_caller(self, requests: list[float]) -> float:
        return len(requests) / max(1, len(self.callers))

    def first_fallback(self) -> float | None:
        done = [c.done for c in self.callers if c.target == "b" and c.done >= self.p.down_from]
        return min(done) - self.p.down_from if done else None


Call = Callable[[], Awaitable[str | None]]


@dataclass
class Strategy:
    label: str
    shape: str  # "a->b" or "a"
    via_gateway: bool = False
    budget_scope: str | None = None  # RetryBudget(scope=...); None: the router's default budget


def strategies() -> list[Strategy]:
    out = [Strategy("failover library, defaults", "a->b")]
    try:  # trees before per-upstream budgets had only the one global budget
        RetryBudget(scope="global")
    except TypeError:
        pass
    else:
        out.append(Strategy("failover library, one global retry budget", "a->b", budget_scope="global"))
    out += [
        Strategy("gateway + openai SDK (max_retries=2)", "a->b", via_gateway=True),
        Strategy("gateway + openai SDK, A alone (no fallback)", "a", via_gateway=True),
    ]
    return out


@contextlib.asynccontextmanager
async def _gateway(router: Router, budget_ms: int) -> AsyncIterator[str]:
    settings = GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=budget_ms))
    app = create_app(router, settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="error", lifespan="on", http=http_protocol(settings), access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def _run(s: Strategy, p: OutageParams, times: list[float]) -> OutageResult:
    loop = asyncio.get_running_loop()
    healthy = Script.always(Reply.ok(latency=p.latency))
    a = FakeProvider("a", "openai", healthy)
    b = FakeProvider("b", "openai", healthy)
    async with FakeServer(a, b) as srv:
        kw = {"timeouts": Timeouts(connect=2.0, total=2.0), "capabilities": CAPS, "tokenizer": "estimate"}
        ta = srv.target_for(a, model="model-a", max_attempts=p.attempts, **kw)
        tb = srv.target_for(b, model="model-b", max_attempts=1, **kw)
        route = Route(name="r", primary=(ta,), fallbacks=(tb,) if s.shape == "a->b" else ())
        budget_kw: dict[str, Any] = {}
        if s.budget_scope is not None:
            budget_kw["retry_budget"] = RetryBudget(scope=s.budget_scope)
        router = Router([route], transport=Http1Transport(), rng=random.Random(p.seed), **budget_kw)
        loop.call_at(p.down_from, a.load, Script.always(Reply.overloaded(latency=p.refuse_after)))
        loop.call_at(p.down_to, a.load, healthy)
        callers = [Caller(t) for t in times]
        w0 = time.perf_counter()
        async with contextlib.AsyncExitStack() as stack:
            one: Call
            if s.via_gateway:
                base = await stack.enter_async_context(_gateway(router, int(p.budget * 1000)))
                client = openai.AsyncOpenAI(base_url=base, api_key="unused")  # DEFAULT max_retries
                stack.push_async_callback(client.close)

                async def one() -> str | None:
                    try:
                        raw = await client.chat.completions.with_raw_response.create(
                            model="r", messages=[{"role": "user", "content": "Classify: my invoice is wrong."}]
                        )
                    except openai.APIError:
                        return None
                    return raw.headers.get("x-failover-target")

            else:

                async def one() -> str | None:
                    try:
                        resp = await router.complete("r", Request.simple("Classify."), Envelope(budget=p.budget))
                    except Unavailable:
                        return None
                    return resp.record.target_used if resp.record is not None else None

            async def caller(c: Caller) -> None:
                await asyncio.sleep(max(0.0, c.arrival - loop.time()))
                c.target = await one()
                c.done = loop.time()

            await asyncio.gather(*(caller(c) for c in callers))
        wall = time.perf_counter() - w0
        await router.aclose()
        a_log = [c.time for c in a.calls]
        b_log = [c.time for c in b.calls]
    return OutageResult(s.label, p, callers, a_log, b_log, wall)


def run_outage(p: OutageParams) -> list[OutageResult]:
    if p.burst:
        times = [p.down_from + 1.0] * p.burst
    else:
        times = poisson_arrivals(random.Random(p.seed), [(0.0, p.duration, p.rate)])
    out = []
    for s in strategies():
        loop = looptime.new_event_loop(start=0.0, noop_cycles=200)  # real sockets: let I/O land first
        try:
            out.append(loop.run_until_complete(_run(s, p, times)))
        finally:
            loop.close()
    return out


def report_outage(results: list[OutageResult], p: OutageParams) -> None:
    arrivals = f"{p.burst} callers at once at {p.down_from + 1:g} s" if p.burst else f"callers Poisson at {p.rate:g}/s"
    print(
        f"Route A -> B; A hard down (503 after {p.refuse_after * 1000:.0f} ms) from {p.down_from:g} s to "
        f"{p.down_to:g} s of {p.duration:g} s; {arrivals}; deadline {p.budget:g} s; "
        f"A {p.attempts} attempts of 2 s, B 1; answers take {p.latency:g} s; seed {p.seed}"
    )
    print()
    print(
        "| strategy | callers | answered: all / during the outage | A requests per caller "
        "| B requests per caller | outage start -> first answer from B | wall s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        first = r.first_fallback()
        print(
            f"| {r.label} | {len(r.callers):,} | {100 * r.answered():.1f}% / "
            f"{100 * r.answered(p.down_from, p.down_to):.1f}% | {r.per_caller(r.a_requests):.3f} "
            f"| {r.per_caller(r.b_requests):.3f} | {'-' if first is None else f'{first:.2f} s'} | {r.wall:.1f} |"
        )
