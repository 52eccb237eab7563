"""Balancing equivalent deployments: every strategy, and the behaviour before the balancer.

    .venv/bin/python bench/balance.py                       # every scenario, ~1 min
    .venv/bin/python bench/balance.py --scenarios quotas,affinity
    .venv/bin/python bench/balance.py --instructions 200    # + the balancer's instructions per request

One route whose primary tier is one model on three deployments (OpenAI dialect, fake
providers), run by the real :class:`~failover.Router` at its default policies (retry budget,
breakers, backoff, limiters) on a looptime virtual clock: minutes of traffic take seconds,
and a rerun gives the same numbers. The scenarios:

* ``quotas``: three deployments answering in 0.30 / 0.35 / 0.40 s, each with ``limits: rpm
  300`` (the client-side limiter); 600 requests, one every 0.1 s (10/s: two thirds of what
  the three allow together, twice what one does).
* ``quotas-429``: the same, without a client-side limit: each fake provider enforces 300
  requests in any 60 s (``FakeProvider(rpm=300)``): it answers 429 past it, with a Retry-After
  to when its minute has room, and says what is left on every answer in OpenAI's
  ``x-ratelimit-*-requests`` headers, which ``quota`` reads.
* ``latency``: deployments of 0.3 / 0.6 / 2 s, no limits, 10/s for 90 s; the fastest answers
  in 3 s from 30 s to 60 s, then recovers.
* ``affinity``: 50 conversations x 10 turns over three deployments (0.30 / 0.35 / 0.40 s, no
  limits): a ~1,500-token system prompt shared by all, then each conversation's history grows
  by ~250 tokens a turn (a question, an answer); a conversation sends its next turn 2 s after
  its answer, the conversations start 0.2 s apart. Each fake keeps a prompt cache (the lab's
  ``PromptCache``): a request's cached tokens are the longest prefix of whole messages that
  deployment has seen before, when that prefix is at least 1,024 tokens, rounded down to a
  multiple of 128 past 1,024; tokens are four characters of a message's JSON. Input cost at $1 per million
  input tokens and $0.10 per million cached ones (a cached token costs a tenth).

The strategies: each ``Route.balance`` (affinity on, the default), and "first admitted",
the behaviour before the balancer: the plan ranks the primary tier by the route's ``ranking``
(configured order) and the first deployment the limiter admits takes the request (the plan's
balancer is switched off by patching it to None). The affinity scenario adds ``p2c`` with
affinity off.

Columns: p50 / p99 of the caller's latency (all requests), requests that waited in a
limiter's queue, 429s the providers answered, failed requests, requests served per
deployment, the share of input tokens that were cached, and the input cost.

``--instructions N`` counts, with callgrind, the instructions of one plain request
(``Router.complete`` through the in-process fake, a real asyncio loop) on a route with one
target, and with three equivalents: with the plan's balancer switched off (the plan before
it), under ``order`` and under ``p2c`` (affinity on): N requests per run, minus a run of
none. With ``--long`` the request carries a ~1,500-token system prompt, so the affinity key
is hashed on every request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import looptime

from failover import Envelope, Limits, Request, Route, Router
from failover.lab._cache import PromptCache
from failover.model import Message, Price, RouteRecord, Target, Timeouts, Unavailable
from failover.router import _generate
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.transport import HttpRequest, HttpResponse

STRATEGIES = ("order", "weighted", "least_busy", "p2c", "quota")
BEFORE = "first admitted (before)"
PRICE_INPUT = 1.0  # USD per million input tokens
PRICE_CACHED = 0.1  # USD per million cached input tokens: a tenth

# -- the fake deployments --------------------------------------------------------------------------


class Deployments:
    """A Transport over a FakeNetwork of three OpenAI-dialect deployments ``d0``..``d2``.

    Each request gets, with no await before the fake answers it: the deployment's latency at
    that moment (``latency(name, now)``) and its usage with the cached tokens of its own prompt
    cache. With ``quota``, each fake enforces that many requests a minute itself (``rpm``): a
    429 past it, and its rate-limit headers on every answer."""

    enforces_total = True

    def __init__(self, latency: Callable[[str, float], float], quota: int | None = None) -> None:
        self.providers = {f"d{i}": FakeProvider(f"d{i}", "openai", model="gpt-x", rpm=quota) for i in range(3)}
        self.network = FakeNetwork(*self.providers.values())
        self.latency = latency
        self.cache = PromptCache()
        self.rejected: Counter[str] = Counter()
        self.input_tokens = 0
        self.cached_tokens = 0

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        now = asyncio.get_running_loop().time()
        name = request.url.split("//", 1)[1].split(".fake", 1)[0]
        provider = self.providers[name]
        if provider.quota is not None and provider.quota.full(now):  # the fake answers 429 itself
            self.rejected[name] += 1
        else:
            inp, cached = self.cache.usage(name, request.json)
            self.input_tokens += inp
            self.cached_tokens += cached
            provider.load(Script.always(Reply.ok("ok", latency=self.latency(name, now), usage=(inp, 10, cached))))
        return await self.network.send(request, connect_timeout=connect_timeout, total_timeout=total_timeout)

    async def aclose(self) -> None:
        return None


def targets(net: Deployments, rpm: int | None) -> tuple[Target, ...]:
    return tuple(
        p.target(
            timeouts=Timeouts(connect=10.0, total=10.0, min_useful=0.05),
            limits=Limits(rpm=rpm) if rpm else Limits(),
            price=Price(input_per_mtok=PRICE_INPUT, output_per_mtok=2.0),
            equivalence_key="gpt-x",
            tokenizer="estimate",
            context_window=128_000,
        )
        for p in net.providers.values()
    )


@contextlib.contextmanager
def before_balancer(on: bool) -> Iterator[None]:
    """With ``on``: the plan gets no balancer, so it ranks the primary tier as before it."""
    if not on:
        yield
        return
    with mock.patch.object(_generate, "balancer", _no_balancer):
        yield


def _no_balancer(*args: object, **kwargs: object) -> None:
    """A plain function (a Mock would add its own bookkeeping to the instruction counts)."""


# -- the scenarios ---------------------------------------------------------------------------------


@dataclass
class Run:
    records: list[RouteRecord] = field(default_factory=list)
    net: Deployments | None = None
    moves: int | None = None  # affinity: turns served elsewhere than the conversation's previous one
    wall: float = 0.0


@dataclass(frozen=True)
class Variant:
    label: str
    strategy: str  # a Balance, or "before"
    affinity: bool = True


def variants(extra: Sequence[Variant] = ()) -> list[Variant]:
    return [Variant(BEFORE, "before"), *(Variant(s, s) for s in STRATEGIES), *extra]


def make_router(net: Deployments, variant: Variant, rpm: int | None, seed: int) -> Router:
    strategy = "order" if variant.strategy == "before" else variant.strategy
    route = Route(name="r", primary=targets(net, rpm), balance=strategy, affinity=variant.affinity)  # type: ignore[arg-type]
    return Router([route], transport=net, rng=random.Random(seed), balance_rng=random.Random(seed + 1))


async def complete(router: Router, request: Request, out: list[RouteRecord]) -> None:
    try:
        resp = await router.complete("r", request, Envelope(budget=30.0))
    except Unavailable as exc:
        out.append(exc.record)
        return
    assert resp.record is not None
    out.append(resp.record)


def on_virtual_time(body: Callable[[Run], object], variant: Variant) -> Run:
    run = Run()
    loop = looptime.new_event_loop(start=0.0, noop_cycles=0)
    w0 = time.perf_counter()
    try:
        with before_balancer(variant.strategy == "before"):
            loop.run_until_complete(body(run))  # type: ignore[arg-type]
    finally:
        loop.close()
    run.wall = time.perf_counter() - w0
    return run


def open_loop(variant: Variant, n: int, every: float, net: Deployments, rpm: int | None, seed: int) -> Run:
    async def body(run: Run) -> None:
        run.net = net
        router = make_router(net, variant, rpm, seed)
        tasks = []
        for i in range(n):
            tasks.append(asyncio.ensure_future(complete(router, Request.simple(f"q{i}", max_tokens=10), run.records)))
            await asyncio.sleep(every)
        await asyncio.gather(*tasks)

    return on_virtual_time(body, variant)


def fixed(*latencies: float) -> Callable[[str, float], float]:
    return lambda name, now: latencies[int(name[1:])]


def quotas(variant: Variant, seed: int) -> Run:
    return open_loop(variant, 600, 0.1, Deployments(fixed(0.30, 0.35, 0.40)), 300, seed)


def quotas_429(variant: Variant, seed: int) -> Run:
    return open_loop(variant, 600, 0.1, Deployments(fixed(0.30, 0.35, 0.40), quota=300), None, seed)


def latency(variant: Variant, seed: int) -> Run:
    def lat(name: str, now: float) -> float:
        if name == "d0":
            return 3.0 if 30.0 <= now < 60.0 else 0.3
        return 0.6 if name == "d1" else 2.0

    return open_loop(variant, 900, 0.1, Deployments(lat), None, seed)


SYSTEM = "You are the support assistant of a shop. " + "Answer from the catalogue below. " * 180  # ~1,500 tokens
QUESTION = " Please check the order history and the delivery notes again." * 3  # ~50 tokens
ANSWER = " The parcel left the warehouse on Monday and is with the carrier now." * 12  # ~200 tokens


def turn(conversation: int, n: int) -> Request:
    history = [Message.system(SYSTEM), Message.user(f"Order #{conversation}:{QUESTION}")]
    for t in range(1, n):
        history += [Message.assistant(f"Answer {t}:{ANSWER}"), Message.user(f"Question {t}:{QUESTION}")]
    return Request(messages=tuple(history), max_tokens=10)


def affinity(variant: Variant, seed: int) -> Run:
    net = Deployments(fixed(0.30, 0.35, 0.40))

    async def body(run: Run) -> None:
        run.net = net
        router = make_router(net, variant, None, seed)

        run.moves = 0

        async def conversation(c: int) -> None:
            await asyncio.sleep(0.2 * c)
            where = None
            for n in range(1, 11):
                await complete(router, turn(c, n), run.records)
                now = run.records[-1].target_used
                run.moves = (run.moves or 0) + (where is not None and now != where)
                where = now
                await asyncio.sleep(2.0)

        await asyncio.gather(*(conversation(c) for c in range(50)))

    return on_virtual_time(body, variant)


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    run: Callable[[Variant, int], Run]
    extra: tuple[Variant, ...] = ()


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("quotas", "three quotas: 0.30/0.35/0.40 s, limits rpm 300 each, 600 requests at 10/s", quotas),
        Scenario(
            "quotas-429",
            "three quotas, no client-side limit: each provider answers 429 above 300 requests a minute",
            quotas_429,
        ),
        Scenario("latency", "0.3/0.6/2 s, no limits, 10/s for 90 s; the fastest takes 3 s from 30 to 60 s", latency),
        Scenario(
            "affinity",
            "50 conversations x 10 turns (1,500-token system prompt, +250 tokens a turn), 0.30/0.35/0.40 s",
            affinity,
            (Variant("p2c, affinity off", "p2c", affinity=False),),
        ),
    )
}


# -- the table -------------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if s else math.nan


@dataclass(frozen=True)
class Row:
    label: str
    p50: float
    p99: float
    mean: float
    queued: int
    provider_429: int
    failed: int
    served: dict[str, int]
    cached_share: float | None
    input_cost: float | None
    moves: int | None
    wall: float


def row(label: str, run: Run) -> Row:
    records = run.records
    assert run.net is not None
    ms = [r.elapsed_ms for r in records]
    served = Counter(r.target_used for r in records if r.outcome == "ok")
    net = run.net
    share = cost = None
    if net.cached_tokens:
        share = net.cached_tokens / net.input_tokens
    if net.input_tokens:
        uncached = net.input_tokens - net.cached_tokens
        cost = (uncached * PRICE_INPUT + net.cached_tokens * PRICE_CACHED) / 1e6
    return Row(
        label=label,
        p50=pct(ms, 0.5),
        p99=pct(ms, 0.99),
        mean=sum(ms) / len(ms),
        queued=sum(1 for r in records if any(w.reason == "rate_limit" for w in r.waits)),
        provider_429=sum(net.rejected.values()),
        failed=sum(1 for r in records if r.outcome != "ok"),
        served={n: served.get(n, 0) for n in net.providers},
        cached_share=share if share is not None else (0.0 if net.input_tokens else None),
        input_cost=cost,
        moves=run.moves,
        wall=run.wall,
    )


def print_table(rows: Sequence[Row], cache: bool) -> None:
    head = "| strategy | p50 ms | p99 ms | mean ms | waited in a limiter queue | provider 429s | failed "
    head += "| served d0 / d1 / d2 |"
    sep = "|---|---:|---:|---:|---:|---:|---:|---|"
    if cache:
        head += " turns moved | cached input share | input cost |"
        sep += "---:|---:|---:|"
    print(head)
    print(sep)
    for r in rows:
        line = (
            f"| {r.label} | {r.p50:,.0f} | {r.p99:,.0f} | {r.mean:,.0f} | {r.queued} | {r.provider_429} | {r.failed} "
            f"| {' / '.join(str(v) for v in r.served.values())} |"
        )
        if cache:
            line += f" {r.moves} | {(r.cached_share or 0) * 100:.1f}% | ${r.input_cost or 0:.4f} |"
        print(line)


def best_key(r: Row, cache: bool) -> tuple[float, ...]:
    cost = round(r.input_cost or 0, 4) if cache else 0
    return (r.failed, r.queued + r.provider_429, cost, round(r.mean), round(r.p99))


def best(rows: Sequence[Row], cache: bool) -> Row:
    """Fewest failures, then fewest requests hurt (queued or 429), then (with a cache) the
    lowest input cost, then the lowest mean latency, then p99."""
    return min((r for r in rows if r.label != BEFORE), key=lambda r: best_key(r, cache))


def run_scenarios(names: Sequence[str], seed: int) -> None:
    winners: dict[str, str] = {}
    ranks: Counter[str] = Counter()
    for name in names:
        sc = SCENARIOS[name]
        print(f"### {name}: {sc.title}")
        print()
        rows = [row(v.label, sc.run(v, seed)) for v in variants(sc.extra)]
        cache = name == "affinity"
        print_table(rows, cache)
        won = best(rows, cache)
        keys = {r.label: best_key(r, cache) for r in rows if r.label in STRATEGIES}
        for label, k in keys.items():  # its place: how many strategies did strictly better (ties share one)
            ranks[label] += sum(1 for other in keys.values() if other < k)
        print()
        tied = [r.label for r in rows if r.label != BEFORE and best_key(r, cache) == best_key(won, cache)]
        print(f"best: {', '.join(tied)} ({sum(r.wall for r in rows):.1f} s wall for the scenario)")
        winners[name] = ", ".join(tied)
        print()
    if len(names) > 1:
        print("### Which default")
        print()
        for name, label in winners.items():
            print(f"- {name}: {label}")
        print()
        ladder = sorted(STRATEGIES, key=lambda s: ranks[s])
        print(
            "sum of places over the scenarios (0 = first everywhere): " + ", ".join(f"{s} {ranks[s]}" for s in ladder)
        )
        print(f"by these numbers the default would be: {ladder[0]}")


# -- the balancer's instructions per request -------------------------------------------------------

SHAPES = {
    "one target": (1, "order"),
    "three equivalents, before the balancer": (3, "before"),
    "three equivalents, order": (3, "order"),
    "three equivalents, p2c + affinity": (3, "p2c"),
}


def _count_run(shape: str, reps: int, long: bool) -> None:
    """One run under callgrind: set up, warm up, then ``reps`` plain requests (0: none)."""
    count, strategy = SHAPES[shape]
    if strategy == "before":
        with before_balancer(True):
            _count_requests(count, "order", reps, long)
        return
    _count_requests(count, strategy, reps, long)


def _count_requests(count: int, strategy: str, reps: int, long: bool) -> None:
    providers = [FakeProvider(f"d{i}", "openai", Script.always(Reply.ok("ok")), model="gpt-x") for i in range(count)]
    primary = tuple(
        p.target(equivalence_key="gpt-x", tokenizer="estimate", price=Price(input_per_mtok=1, output_per_mtok=2))
        for p in providers
    )
    router = Router(
        [Route(name="r", primary=primary, balance=strategy)],  # type: ignore[arg-type]
        transport=FakeNetwork(*providers),
        balance_rng=random.Random(1),
    )
    system = Message.system(SYSTEM if long else "You are a helpful assistant.")
    request = Request(messages=(system, Message.user("Say hello.")), max_tokens=64)

    async def go() -> None:
        for _ in range(200):  # warm-up: caches, first measurements, lazily built state
            await router.complete("r", request, Envelope(budget=30.0))
        for _ in range(reps):
            await router.complete("r", request, Envelope(budget=30.0))

    asyncio.run(go())


def count_instructions(reps: int, long: bool) -> None:
    if shutil.which("valgrind") is None:
        print("NOTE: valgrind is not installed: no instruction counts.")
        return

    def run(shape: str, n: int) -> int:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "callgrind.out"
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__]
            cmd += ["--_count", shape, "--_reps", str(n)] + (["--long"] if long else [])
            subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
            for line in out.read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        raise RuntimeError("no total in callgrind's output")

    prompt = "a ~1,500-token system prompt" if long else "a short system prompt"
    print(f"### Instructions per plain request (callgrind, {reps} requests per run minus none; {prompt})")
    print()
    print("| route | instructions per request | vs one target |")
    print("|---|---:|---:|")
    base = None
    for shape in SHAPES:
        per = (run(shape, reps) - run(shape, 0)) / reps
        base = base or per
        print(f"| {shape} | {per:,.0f} | {per / base - 1:+.1%} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--instructions", type=int, default=0, metavar="N", help="count instructions, N requests a run")
    parser.add_argument("--long", action="store_true", help="instructions: a ~1,500-token system prompt")
    parser.add_argument("--no-scenarios", dest="run", action="store_false", help="instructions only")
    parser.add_argument("--_count", help=argparse.SUPPRESS)
    parser.add_argument("--_reps", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._count:  # one run under callgrind
        _count_run(args._count, args._reps, args.long)
        return
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; they are {list(SCENARIOS)}")
    if args.run:
        run_scenarios(names, args.seed)
    if args.instructions:
        count_instructions(args.instructions, args.long)


if __name__ == "__main__":
    main()
