"""The lab's load mode: N clients against a fault schedule, on minutes of virtual time.

The seed route (A, then fallbacks B and C) is run by the real :class:`~failover.Router` with
its real policy objects (a :class:`~failover.policy.BreakerBoard`, a
:class:`~failover.policy.RetryBudget`, a :class:`~failover.policy.LimiterBoard` with an rpm
quota per target, the default backoff) against fake providers whose answer depends on the
loop clock: ``a: [{from: 60, to: 120, reply: "rate_limit(retry_after=2)"}]`` makes A answer
429 during that minute and like the *healthy* scenario otherwise.

Everything runs on a looptime virtual clock (:func:`run_arrivals`, shared with
``bench/goodput.py``), so five virtual minutes of 50 clients take about a second of CPU and
the same seed gives the same series, number for number. :func:`run_load` returns per-second
series: requests reaching each provider, requests served within their deadline (count and
share), the state of each provider's two breakers (its target breaker, and the key + model
breaker a 429 or an exhausted quota opens), the retry budget's grants, refusals and headroom,
the requests that waited in a client-side limiter's queue, and the share of input tokens the
providers served from their prompt cache.

With ``deployments`` above 1, A's model runs on that many equivalent deployments (``a``,
``a2``, ``a3``: a primary tier the route's balancer shares by ``balance``). Each client sends
its own prompt (a shared system prompt and the client's ~1,000-token ticket), and each fake
provider keeps a prompt cache (:class:`~failover.lab._cache.PromptCache`): a client's request
is a cache hit where that client's earlier one went.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast
from urllib.parse import urlsplit

import looptime

from ..model import Balance, Envelope, Limits, Message, Request, Route, RouteRecord, Target, Timeouts, Unavailable
from ..policy import BALANCES, Backoff, BreakerBoard, BreakerEvent, LimiterBoard, RetryBudget
from ..router import Router
from ..testing import FakeNetwork, FakeProvider, Reply, Script
from ..transport import HttpRequest, HttpResponse
from ._cache import PromptCache
from ._custom import BadInput, _reply, load_text

# -- the shared engine (bench/goodput.py uses it too) --------------------------------------------

CALLER: contextvars.ContextVar[int] = contextvars.ContextVar("failover_lab_caller", default=-1)
"""The index of the caller whose task is running: a transport can charge each request to it."""

Call = Callable[[], Awaitable[bool]]


@dataclass(slots=True)
class CallerOutcome:
    """One caller: when it arrived, when its call returned (loop time) and whether it succeeded."""

    arrival: float
    done: float = math.nan
    ok: bool = False


def poisson_arrivals(rng: random.Random, segments: Sequence[tuple[float, float, float]]) -> list[float]:
    """Poisson arrival times for ``(start, stop, rate per second)`` segments, in order."""
    out: list[float] = []
    for start, stop, rate in segments:
        if rate <= 0:
            continue
        t = start
        while True:
            t += rng.expovariate(rate)
            if t >= stop:
                break
            out.append(t)
    return out


def run_arrivals(
    times: Sequence[float],
    make_call: Callable[[], Call],
    horizon: float,
    *,
    setup: Callable[[asyncio.AbstractEventLoop], None] | None = None,
) -> tuple[list[CallerOutcome], float]:
    """Start one call per arrival time on a fresh virtual-time loop; wait for all of them.

    ``make_call`` runs on the loop (routers are built there); ``setup`` may schedule more
    callbacks (samplers) before the first arrival. Returns the outcomes and the wall seconds.
    ``noop_cycles=0``: with nothing but asyncio timers on the loop, skipping looptime's idle
    cycles changes no number and saves most of the time.
    """
    loop = looptime.new_event_loop(start=0.0, noop_cycles=0)
    callers = [CallerOutcome(t) for t in times]
    w0 = time.perf_counter()

    async def main() -> None:
        call = make_call()
        tasks: list[asyncio.Future[None]] = []

        async def one(caller: int) -> None:
            CALLER.set(caller)  # this task's own context: the transport reads it
            ok = await call()
            c = callers[caller]
            c.done, c.ok = loop.time(), ok

        def spawn(caller: int) -> None:
            tasks.append(asyncio.ensure_future(one(caller)))

        for i, t in enumerate(times):
            loop.call_at(t, spawn, i)
        if setup is not None:
            setup(loop)
        await asyncio.sleep(horizon)
        await asyncio.gather(*tasks)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return callers, time.perf_counter() - w0


# -- the load mode -------------------------------------------------------------------------------

PROVIDERS = ("a", "b", "c")
DEPLOYMENTS = ("a", "a2", "a3")  # A's model on up to three deployments (its primary tier)
ALL_PROVIDERS = ("a", "a2", "a3", "b", "c")
DIALECTS = {"a": "openai", "a2": "openai", "a3": "openai", "b": "anthropic", "c": "gemini"}
HEALTHY = {
    "a": Reply.ok(latency=0.3),
    "a2": Reply.ok(latency=0.35),
    "a3": Reply.ok(latency=0.4),
    "b": Reply.ok(latency=0.4),
    "c": Reply.ok(latency=0.5),
}
SYSTEM = "You are the support desk of a shop: answer from the ticket, in two sentences. " * 8
TICKET = " The customer wrote about an invoice, a late parcel and a refund; the notes follow." * 50
MAX_CLIENTS = 200
MAX_DURATION = 600.0  # seconds of virtual time
MAX_RATE = 2.0  # requests per second per client
MAX_REQUESTS = 15_000  # clients x rate x duration: keeps one run to a few seconds of CPU
DEFAULT_SCHEDULE = """\
# Per provider: when it misbehaves (seconds of virtual time) and how. Outside these
# windows a provider answers like the healthy scenario.
a:
  - {from: 60, to: 120, reply: "rate_limit(retry_after=2, latency=0.05)"}
  - {from: 120, to: 180, reply: "connect_error"}
b:
  - {from: 150, to: 170, reply: "server_error(latency=0.1)"}
c:
  - {from: 150, to: 170, reply: "hang"}
"""


@dataclass(frozen=True, slots=True)
class Fault:
    """From ``start`` to ``end`` (loop seconds), the provider answers ``reply``."""

    start: float
    end: float
    reply: Reply


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadOptions:
    clients: int = 50
    duration: float = 300.0  # seconds of virtual time during which clients send
    rate: float = 0.5  # requests per second per client (Poisson)
    budget: float = 5.0  # each request's deadline, seconds
    a_extra_retries: int = 1
    rpm: int = 6000  # each target's rpm quota: the client-side limiter's
    deployments: int = 1  # A's model on this many equivalent deployments (1 to 3)
    balance: Balance = "order"  # how the route shares them
    seed: int = 0
    schedule: Mapping[str, tuple[Fault, ...]] = field(default_factory=dict)


def providers_of(deployments: int) -> tuple[str, ...]:
    """The route's providers: A's deployments, then the fallbacks B and C."""
    return (*DEPLOYMENTS[:deployments], "b", "c")


def parse_schedule(data: Any, deployments: int = 1) -> dict[str, tuple[Fault, ...]]:
    """``{provider: [{from, to, reply}, ...]}`` to Faults; BadInput names ``schedule.a[0].to``."""
    names = providers_of(deployments)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise BadInput("schedule", f"must map provider names ({', '.join(names)}) to lists of faults")
    out: dict[str, tuple[Fault, ...]] = {}
    for name, faults in data.items():
        where = f"schedule.{name}"
        if name not in names:
            raise BadInput(where, f"unknown provider; the route has {', '.join(names)}")
        if not isinstance(faults, list):
            raise BadInput(where, 'must be a list like [{from: 60, to: 120, reply: "server_error"}]')
        parsed: list[Fault] = []
        for i, f in enumerate(faults):
            at = f"{where}[{i}]"
            if not isinstance(f, Mapping):
                raise BadInput(at, 'must be a mapping like {from: 60, to: 120, reply: "server_error"}')
            unknown = sorted(set(map(str, f)) - {"from", "to", "reply"})
            if unknown:
                raise BadInput(f"{at}.{unknown[0]}", "unknown key; a fault has from, to and reply")
            lo, hi = _time(f"{at}.from", f.get("from")), _time(f"{at}.to", f.get("to"))
            if hi <= lo:
                raise BadInput(f"{at}.to", f"must be after from ({lo:g}), got {hi:g}")
            if "reply" not in f:
                raise BadInput(f"{at}.reply", 'is missing; e.g. reply: "server_error"')
            parsed.append(Fault(lo, hi, _reply(f"{at}.reply", f["reply"])))
        out[name] = tuple(sorted(parsed, key=lambda x: x.start))
    return out


def parse_load(body: Any) -> LoadOptions:
    """The page's load settings (a JSON object) as LoadOptions; BadInput names the bad field."""
    if not isinstance(body, Mapping):
        raise BadInput("body", "must be a JSON object")
    known = {"clients", "duration", "rate", "budget", "a_extra_retries", "rpm", "deployments", "balance", "seed"}
    known.add("schedule")
    unknown = sorted(set(map(str, body)) - known)
    if unknown:
        raise BadInput(unknown[0], f"unknown field; expected {', '.join(sorted(known))}")
    d = LoadOptions()
    clients = _int(body, "clients", d.clients, 1, MAX_CLIENTS)
    duration = _num(body, "duration", d.duration, 1.0, MAX_DURATION)
    rate = _num(body, "rate", d.rate, 0.001, MAX_RATE)
    expected = clients * rate * duration
    if expected > MAX_REQUESTS:
        raise BadInput(
            "clients",
            f"clients x rate x duration = {expected:,.0f} requests; keep it under {MAX_REQUESTS:,} "
            "(fewer clients, a lower rate or a shorter run)",
        )
    deployments = _int(body, "deployments", d.deployments, 1, len(DEPLOYMENTS))
    balance = body.get("balance", d.balance)
    if balance not in BALANCES:
        raise BadInput("balance", f"must be one of {', '.join(BALANCES)}, got {balance!r}")
    schedule = body.get("schedule", DEFAULT_SCHEDULE)
    if isinstance(schedule, str):
        try:
            schedule = load_text(schedule)
        except BadInput as exc:
            raise BadInput("schedule", exc.problem) from None
    return LoadOptions(
        clients=clients,
        duration=duration,
        rate=rate,
        budget=_num(body, "budget", d.budget, 0.1, 60.0),
        a_extra_retries=_int(body, "a_extra_retries", d.a_extra_retries, 0, 10),
        rpm=_int(body, "rpm", d.rpm, 1, 10**7),
        deployments=deployments,
        balance=cast(Balance, balance),
        seed=_int(body, "seed", d.seed, 0, 2**31),
        schedule=parse_schedule(schedule, deployments),
    )


def _time(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_DURATION:
        raise BadInput(where, f"must be a number of seconds from 0 to {MAX_DURATION:g}, got {value!r}")
    return float(value)


def _num(body: Mapping[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise BadInput(name, f"must be a number from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


def _int(body: Mapping[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadInput(name, f"must be a whole number from {lo} to {hi}, got {value!r}")
    return value


class ScheduledNetwork:
    """A Transport over a FakeNetwork whose providers answer by the fault schedule, by loop time.

    The reply is chosen when a request arrives and handed to the fake with no await in between,
    so each request gets the answer of its own moment. Every arrival is logged, and every answer
    with a body carries the usage of the provider's prompt cache (``tokens``: arrival, input
    tokens, cached input tokens).
    """

    enforces_total = True

    def __init__(self, schedule: Mapping[str, Sequence[Fault]]) -> None:
        self.providers = {
            n: FakeProvider(n, DIALECTS[n], model="a-model" if n in DEPLOYMENTS else None) for n in ALL_PROVIDERS
        }
        self.network = FakeNetwork(*self.providers.values())
        self.schedule = schedule
        self.log: list[tuple[float, str]] = []  # (arrival, provider)
        self.cache = PromptCache()
        self.tokens: list[tuple[float, int, int]] = []

    def _reply(self, name: str, now: float) -> Reply:
        for f in self.schedule.get(name, ()):
            if f.start <= now < f.end:
                return f.reply
        return HEALTHY[name]

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        now = asyncio.get_running_loop().time()
        name = (urlsplit(request.url).hostname or "").removesuffix(".fake")
        self.log.append((now, name))
        reply = self._reply(name, now)
        if reply.has_ok_body:
            inp, cached = self.cache.usage(name, request.json)
            self.tokens.append((now, inp, cached))
            reply = replace(reply, usage=(inp, 16, cached))
        self.providers[name].load(Script.always(reply))
        return await self.network.send(request, connect_timeout=connect_timeout, total_timeout=total_timeout)

    async def aclose(self) -> None:
        return None


class CountingBudget(RetryBudget):
    """The real RetryBudget, that also notes each withdrawal (granted or refused) for the series."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[float, bool]] = []

    def try_withdraw(self, now: float, pool: str = "default") -> bool:
        granted = super().try_withdraw(now, pool)
        self.log.append((now, granted))
        return granted


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadResult:
    options: LoadOptions
    series: dict[str, Any]
    summary: dict[str, Any]
    breaker_events: list[dict[str, Any]]
    wall: float  # wall seconds of the run itself (not the JSON)
    cpu: float  # CPU seconds of the thread that ran it

    def to_dict(self) -> dict[str, Any]:
        return {"series": self.series, "summary": self.summary, "breaker_events": self.breaker_events}


def _targets(net: ScheduledNetwork, opts: LoadOptions) -> dict[str, Target]:
    return {
        n: net.providers[n].target(
            timeouts=Timeouts(connect=1.0, total=2.0, min_useful=0.05),
            max_attempts=1 + opts.a_extra_retries if n in DEPLOYMENTS else 1,
            limits=Limits(rpm=opts.rpm),
            tokenizer="estimate",
            equivalence_key="a-model" if n in DEPLOYMENTS else None,
        )
        for n in providers_of(opts.deployments)
    }


def _prompts(opts: LoadOptions) -> list[Request]:
    """Each client's request: the shared system prompt, then its own ticket (~1,250 tokens in
    all, so a provider caches it, and the route's affinity keys it per client)."""
    return [
        Request(messages=(Message.system(SYSTEM), Message.user(f"Ticket of client {i}:{TICKET}")), max_tokens=64)
        for i in range(opts.clients)
    ]


def run_load(opts: LoadOptions) -> LoadResult:
    """Run the load on a fresh virtual-time loop and bucket what happened per second."""
    rng = random.Random(opts.seed)
    times = poisson_arrivals(rng, [(0.0, opts.duration, opts.clients * opts.rate)])
    net = ScheduledNetwork(opts.schedule)
    targets = _targets(net, opts)
    events: list[BreakerEvent] = []
    budget = CountingBudget()
    seconds = math.ceil(opts.duration)
    headroom: list[int] = [0] * seconds
    prompts = _prompts(opts)
    pick = random.Random(opts.seed + 2)
    client_of = [pick.randrange(opts.clients) for _ in times]  # which client sent each arrival
    queued = [False] * len(times)  # each arrival: it waited in a limiter's queue

    def make_call() -> Call:
        primary = tuple(targets[n] for n in DEPLOYMENTS[: opts.deployments])
        route = Route(name="seed", primary=primary, fallbacks=(targets["b"], targets["c"]), balance=opts.balance)
        router = Router(
            [route],
            transport=net,
            retry_budget=budget,
            breakers=BreakerBoard(hooks=[events.append]),
            limiters=LimiterBoard(),
            backoff=Backoff(),
            rng=random.Random(opts.seed + 1),
            balance_rng=random.Random(opts.seed + 3),
        )

        async def call() -> bool:
            i = CALLER.get()
            record: RouteRecord | None
            try:
                record = (await router.complete("seed", prompts[client_of[i]], Envelope(budget=opts.budget))).record
            except Unavailable as exc:
                record, ok = exc.record, False
            else:
                ok = True
            queued[i] = record is not None and any(w.reason == "rate_limit" for w in record.waits)
            return ok

        return call

    def setup(loop: asyncio.AbstractEventLoop) -> None:
        pool_a = budget.pool_of(targets["a"])  # the retries are A's: its upstream's budget

        def sample(second: int) -> None:
            headroom[second] = budget.available(loop.time(), pool_a)

        for s in range(seconds):
            loop.call_at(s + 1.0 - 1e-6, sample, s)  # the budget's headroom as each second ends

    cpu0 = time.thread_time()
    callers, wall = run_arrivals(times, make_call, opts.duration + opts.budget + 1.0, setup=setup)
    cpu = time.thread_time() - cpu0
    series = _series(opts, seconds, callers, net.log, events, budget.log, headroom)
    series.update(_balance_series(seconds, callers, queued, net.tokens))
    summary = _summary(opts, callers, net.log, events, budget.log, wall, cpu)
    inp, cached = sum(t[1] for t in net.tokens), sum(t[2] for t in net.tokens)
    summary["limiter_waits"] = sum(queued)
    summary["cache_hit"] = round(cached / inp, 4) if inp else None
    return LoadResult(
        options=opts,
        series=series,
        summary=summary,
        breaker_events=[
            {
                "target": _provider_of(e.scope),
                "layer": e.layer,
                "at": round(e.at, 6),
                "from": e.old.value,
                "to": e.new.value,
                "reason": e.reason,
            }
            for e in events
        ],
        wall=wall,
        cpu=cpu,
    )


def _provider_of(scope: str) -> str:
    """The provider a breaker scope belongs to: both of a target's scopes start with its base URL
    (``http://a.fake/...``)."""
    return next((name for name in ALL_PROVIDERS if f"//{name}.fake" in scope), scope)


def _series(
    opts: LoadOptions,
    seconds: int,
    callers: Sequence[CallerOutcome],
    log: Sequence[tuple[float, str]],
    events: Sequence[BreakerEvent],
    withdrawals: Sequence[tuple[float, bool]],
    headroom: Sequence[int],
) -> dict[str, Any]:
    names = providers_of(opts.deployments)
    sent = {n: [0] * seconds for n in names}
    for t, name in log:
        if t < seconds:
            sent[name][int(t)] += 1
    offered, ok = [0] * seconds, [0] * seconds
    for c in callers:
        s = int(c.arrival)
        offered[s] += 1
        ok[s] += _won(c, opts.budget)
    granted, refused = [0] * seconds, [0] * seconds
    for t, yes in withdrawals:
        if t < seconds:
            (granted if yes else refused)[int(t)] += 1
    return {
        "t": list(range(seconds)),
        "offered": offered,
        "sent": sent,
        "ok": ok,
        "ok_share": [round(w / n, 4) if n else None for w, n in zip(ok, offered, strict=True)],
        "breaker": _breaker_states(seconds, events, "target", names),
        "key_breaker": _breaker_states(seconds, events, "key_model", names),
        "retries_granted": granted,
        "retries_refused": refused,
        "retry_headroom": list(headroom),
    }


def _balance_series(
    seconds: int, callers: Sequence[CallerOutcome], queued: Sequence[bool], tokens: Sequence[tuple[float, int, int]]
) -> dict[str, Any]:
    """Per second: requests (by arrival) that waited in a limiter's queue, and the input and
    cached input tokens of the answers the providers started then, with their ratio."""
    waits = [0] * seconds
    for c, q in zip(callers, queued, strict=True):
        waits[int(c.arrival)] += q
    inp, cached = [0] * seconds, [0] * seconds
    for t, n, hit in tokens:
        if t < seconds:
            inp[int(t)] += n
            cached[int(t)] += hit
    return {
        "limiter_waits": waits,
        "input_tokens": inp,
        "cached_tokens": cached,
        "cache_hit": [round(h / n, 4) if n else None for h, n in zip(cached, inp, strict=True)],
    }


def _won(outcome: CallerOutcome, budget: float) -> bool:
    return outcome.ok and outcome.done - outcome.arrival <= budget + 1e-9


def _breaker_states(
    seconds: int, events: Sequence[BreakerEvent], layer: str, names: Sequence[str]
) -> dict[str, list[str]]:
    """Each provider's breaker of ``layer`` (``target`` or ``key_model``): its state at the end of
    each second (closed before any event). A target is called only while both are closed (or
    half-open and probing): a 429 opens the key + model breaker alone, so its target breaker
    reads closed while it gets nothing.

    An open breaker turns half-open lazily, at the first call after its open period: the series
    shows what the router saw, as bench/goodput.py's open spans do."""
    out: dict[str, list[str]] = {}
    by_provider: dict[str, list[BreakerEvent]] = {}
    for e in events:
        if e.layer == layer:  # each provider has one scope per layer (one key, one model)
            by_provider.setdefault(_provider_of(e.scope), []).append(e)
    for name in names:
        mine = by_provider.get(name, [])
        states, state, i = [], "closed", 0
        for s in range(seconds):
            while i < len(mine) and mine[i].at < s + 1:
                state = mine[i].new.value
                i += 1
            states.append(state)
        out[name] = states
    return out


def _summary(
    opts: LoadOptions,
    callers: Sequence[CallerOutcome],
    log: Sequence[tuple[float, str]],
    events: Sequence[BreakerEvent],
    withdrawals: Sequence[tuple[float, bool]],
    wall: float,
    cpu: float,
) -> dict[str, Any]:
    won = sum(_won(c, opts.budget) for c in callers)
    names = providers_of(opts.deployments)
    return {
        "requests": len(callers),
        "served_in_deadline": won,
        "success_share": round(won / len(callers), 4) if callers else None,
        "provider_requests": {n: sum(1 for _, p in log if p == n) for n in names},
        "breaker_opened": _opened(events, "target", names),
        "key_breaker_opened": _opened(events, "key_model", names),
        "retries_granted": sum(1 for _, yes in withdrawals if yes),
        "retries_refused": sum(1 for _, yes in withdrawals if not yes),
        "virtual_seconds": opts.duration,
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
    }


def _opened(events: Sequence[BreakerEvent], layer: str, names: Sequence[str]) -> dict[str, int]:
    """How often each provider's breaker of ``layer`` opened."""
    return {
        n: sum(1 for e in events if e.layer == layer and e.new.value == "open" and _provider_of(e.scope) == n)
        for n in names
    }


__all__ = [
    "CALLER",
    "DEFAULT_SCHEDULE",
    "MAX_CLIENTS",
    "MAX_DURATION",
    "MAX_REQUESTS",
    "PROVIDERS",
    "CallerOutcome",
    "Fault",
    "LoadOptions",
    "LoadResult",
    "ScheduledNetwork",
    "parse_load",
    "parse_schedule",
    "poisson_arrivals",
    "providers_of",
    "run_arrivals",
    "run_load",
]
