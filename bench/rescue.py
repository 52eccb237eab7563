"""Rescue under common provider faults: the rescue fault matrix at DEFAULT settings, counted.

    .venv/bin/python bench/rescue.py                      # the matrix (library, gateway) + the hold's TTFT cost
    .venv/bin/python bench/rescue.py --quick              # the matrix, and 2 s of TTFT traffic
    .venv/bin/python bench/rescue.py --no-ttft --clients library
    .venv/bin/python bench/rescue.py --faults silent,"cut after 40 of 60" --detail

Part 1, the matrix. The cells of tests/e2e/test_rescue_matrix.py (set-up, faults and checks in
tests/e2e/_rescue.py, imported from there: one definition of each cell): one route, primary =
the faulty upstream model, approved fallback = a healthy model on the same OpenAI-compatible
fake server over real loopback HTTP; default Target timeouts (connect 5 / first_event 30 /
idle 30 / total 60 s) and attempts (2 per target), default Router policies, a 30 s deadline;
streamed requests. "library" is ``Router.stream``; "gateway" is ``failover serve``'s app
(uvicorn in the same loop) called by the official openai SDK at its default settings
(``chat.completions.create(stream=True)``). On a looptime virtual clock: a 30 s deadline costs
well under a second. Each cell is counted as

* rescued: the complete answer (60 chunks of one model's text exactly once, one response id,
  the answering model in ``model``, a RouteRecord that says so) within the deadline;
* clean error: the typed failure the cell demands (a context overflow no fallback can take, a
  content filter), quickly, with no text and no call to the fallback;
* wrong: anything else (a wrong or spliced answer, a cut stream, a failure where a rescue was
  possible, over the deadline, the wrong ``model``, extra upstream requests).

Part 2, the commit point's cost. A healthy streamed route (60 chunks at 50 tokens/s from a
loopback FakeServer), Poisson arrivals at ``--rps`` (100/s) for ``--seconds``, through
``Router.stream``, in REAL time: time to first token (send -> first text delta) at p50 and
p99, and to the whole answer, with the route's default hold and with ``hold_tokens=0,
hold_seconds=0``, in the same run on the same arrival times; the ratio default / hold 0.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import looptime

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the matrix lives in tests/e2e/_rescue.py

from tests.e2e._rescue import CAPS, FAULTS, healthy, judge, run_cell, verdict

from failover.model import Envelope, Price, Request, Route, TextDelta
from failover.policy import Backoff, BreakerBoard, RetryBudget
from failover.router import Router
from failover.testing import FakeProvider, FakeServer, Script
from failover.transport import Http1Transport

CLIENT_OF = {"library": "library stream", "gateway": "openai chat"}
KINDS = ("rescued", "clean error", "wrong")


# -- part 1: the matrix --------------------------------------------------------------------------


@dataclasses.dataclass
class Cell:
    fault: str
    client: str
    verdict: str
    problems: list[str]
    wall: float


def close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the cell left behind (the gateway's delayed clean-ups), then close."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()

    async def drain() -> None:
        await asyncio.gather(*pending, return_exceptions=True)

    loop.run_until_complete(drain())
    loop.close()


def run_matrix(faults: Sequence[str], clients: Sequence[str], overrides: Mapping[str, Any]) -> list[Cell]:
    out = []
    for f in faults:
        for c in clients:
            loop = looptime.new_event_loop(start=0.0, noop_cycles=200)  # real sockets: let I/O land first
            w0 = time.perf_counter()
            try:
                result = loop.run_until_complete(run_cell(f, CLIENT_OF[c], overrides))
            finally:
                close(loop)
            problems = judge(result)
            out.append(Cell(f, c, verdict(result, problems), problems, time.perf_counter() - w0))
    return out


def report_matrix(cells: list[Cell], clients: Sequence[str], detail: bool) -> None:
    print("| fault | " + " | ".join(clients) + " | what went wrong (first problem) |")
    print("|---|" + "---|" * len(clients) + "---|")
    for f in dict.fromkeys(c.fault for c in cells):
        row = {c.client: c for c in cells if c.fault == f}
        first = next((f"{c.client}: {c.problems[0]}" for c in row.values() if c.problems), "")
        print(f"| {f} | " + " | ".join(row[c].verdict for c in clients) + f" | {first[:110]} |")
    totals = []
    for client in clients:
        mine = [c for c in cells if c.client == client]
        totals.append(f"{client} " + "/".join(str(sum(c.verdict == k for c in mine)) for k in KINDS))
    print()
    print(f"rescued / clean error / wrong: {', '.join(totals)}")
    if detail:
        for c in cells:
            for p in c.problems:
                print(f"  {c.client} | {c.fault}: {p}")


# -- part 2: the hold's cost in time to first token ------------------------------------------------


def arrivals(rps: float, seconds: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    while True:
        t += rng.expovariate(rps)
        if t >= seconds:
            return out
        out.append(t)


HOLD_OFF = {"hold_tokens": 0, "hold_seconds": 0}


def serve_upstream(urls: Any) -> None:
    """The healthy upstream in its own process (its own core): a FakeServer until terminated."""

    async def serve() -> None:
        p = FakeProvider("h", "openai", Script.always(healthy("a")), model="model-a")
        async with FakeServer(p) as srv:
            urls.put(srv.api_url_for(p))
            await asyncio.Event().wait()

    asyncio.run(serve())


async def ttft(
    times: Sequence[float], url: str
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, int]]:
    """Time to first text delta and to the whole answer (real seconds) per route, and the
    failures: arrivals alternate between the route at its default hold and the one with
    ``HOLD_OFF``, so both see the same load on the same loop. The upstream at ``url`` runs in
    another process."""
    target = FakeProvider("h", "openai").target(
        "model-a",
        base_url=url,
        capabilities=CAPS,
        price=Price(input_per_mtok=1, output_per_mtok=2),
        tokenizer="estimate",
    )
    routes = [
        Route(name="held", primary=(target,)),
        Route(name="off", primary=(target,), **HOLD_OFF),
    ]
    router = Router(
        routes, transport=Http1Transport(), retry_budget=RetryBudget(), breakers=BreakerBoard(), backoff=Backoff()
    )
    loop = asyncio.get_running_loop()
    got: dict[str, list[float]] = {"held": [], "off": []}
    whole: dict[str, list[float]] = {"held": [], "off": []}
    failed = {"held": 0, "off": 0}

    async def one(i: int, at: float, t0: float) -> None:
        route = "held" if i % 2 == 0 else "off"
        await asyncio.sleep(max(0.0, t0 + at - loop.time()))
        s0 = loop.time()
        first = None
        try:
            async with router.stream(route, Request.simple("hi"), Envelope(budget=30)) as s:
                async for ev in s:
                    if first is None and isinstance(ev, TextDelta):
                        first = loop.time() - s0
        except Exception:
            failed[route] += 1
            return
        if first is None:
            failed[route] += 1
        else:
            got[route].append(first)
            whole[route].append(loop.time() - s0)

    t0 = loop.time()
    await asyncio.gather(*(one(i, at, t0) for i, at in enumerate(times)))
    await router.aclose()
    return got, whole, failed


def pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def run_ttft(rps: float, seconds: float, seed: int) -> None:
    times = arrivals(rps, seconds, seed)
    print(
        f"Healthy streamed route (60 chunks at 50 tokens/s, loopback FakeServer), Router.stream, "
        f"{len(times)} Poisson arrivals at {rps:g}/s over {seconds:g} s alternating between the two "
        f"variants, real time, seed {seed}"
    )
    print()
    urls: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve_upstream, args=(urls,), daemon=True)
    server.start()
    try:
        w0 = time.perf_counter()
        got, whole, failed = asyncio.run(ttft(times, urls.get(timeout=30)))
        wall = time.perf_counter() - w0
    finally:
        server.terminate()
        server.join()
    labels = {"held": "default hold", "off": "hold_tokens=0"}
    print("| variant | requests | failed | TTFT p50 ms | TTFT p99 ms | whole answer p50 ms | whole answer p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key, label in labels.items():
        v, w = got[key], whole[key]
        shown = f"{pct(v, 0.5) * 1000:.1f} | {pct(v, 0.99) * 1000:.1f}" if v else "- | -"
        done = f"{pct(w, 0.5) * 1000:.1f} | {pct(w, 0.99) * 1000:.1f}" if w else "- | -"
        print(f"| {label} | {len(v) + failed[key]} | {failed[key]} | {shown} | {done} |")
    print()
    if got["held"] and got["off"]:
        r50 = pct(got["held"], 0.5) / pct(got["off"], 0.5)
        r99 = pct(got["held"], 0.99) / pct(got["off"], 0.99)
        print(f"default hold / hold 0: p50 x{r50:.2f}, p99 x{r99:.2f} ({wall:.1f} s wall)")


def number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="library,gateway", help="comma-separated: library, gateway")
    parser.add_argument("--faults", default="", help="comma-separated fault names (default: all)")
    parser.add_argument("--detail", action="store_true", help="print every problem of every cell")
    parser.add_argument("--no-matrix", dest="matrix", action="store_false", help="part 2 only")
    parser.add_argument("--no-ttft", dest="ttft", action="store_false", help="part 1 only")
    parser.add_argument("--rps", type=float, default=100.0, help="part 2: arrivals per second (default 100)")
    parser.add_argument("--seconds", type=float, default=5.0, help="part 2: seconds of arrivals (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="part 2 for 2 s only")
    parser.add_argument(
        "--route", default="", help="Route overrides for part 1, e.g. hold_tokens=0,fallback_reserve=0 (numbers)"
    )
    args = parser.parse_args()
    logging.getLogger("failover.gateway").setLevel(logging.ERROR)  # "gateway is OPEN", once per cell
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    faults = [f.strip() for f in args.faults.split(",") if f.strip()] or list(FAULTS)
    unknown = [f for f in faults if f not in FAULTS] + [c for c in clients if c not in CLIENT_OF]
    if unknown:
        parser.error(f"unknown: {unknown}; faults are {list(FAULTS)}")
    overrides = {k: number(v) for k, v in (kv.split("=", 1) for kv in args.route.split(",") if kv)}
    if args.matrix:
        shown = f" with {overrides}" if overrides else " at defaults"
        print(f"Rescue matrix{shown}: deadline 30 s, default timeouts and attempts, streamed requests")
        print()
        w0 = time.perf_counter()
        report_matrix(run_matrix(faults, clients, overrides), clients, args.detail)
        print(f"({time.perf_counter() - w0:.1f} s wall)")
        print()
    if args.ttft:
        run_ttft(args.rps, 2.0 if args.quick else args.seconds, args.seed)


if __name__ == "__main__":
    main()
