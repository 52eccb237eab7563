"""Router overhead: CPU time per call of ``Router.complete`` against a bare dialect call.

    .bench-venv/bin/python bench/overhead.py            # with LiteLLM (pip install -e '.[bench]')
    .venv/bin/python bench/overhead.py --rounds 5       # quicker; LiteLLM row only when installed

Each pair talks to its own copy of the same fake provider (``FakeProvider``, OpenAI dialect)
through the same Transport, so the fake's cost is identical on both sides and the difference
is what the router adds: Envelope, preflight (token count, plan), the deadline and the
per-attempt timeout, validation, the health board, the Attempt and the RouteRecord.

* bare:    ``dialect.build`` -> ``await transport.send(...)`` -> ``dialect.parse``
* router:  ``await router.complete("r", request, Envelope(...))`` on a route whose only target
  is that provider (one Envelope built per call, as an application would)
* workloads: plain text; a JSON-schema request (the router validates the answer); a 500 then
  a 200 (the router replays at once, with no retry budget or circuit breaker in the way; the
  bare side makes the same two exchanges); the plain request over loopback HTTP
  (``HttpxTransport`` to a ``FakeServer`` in the same process), to see the same overhead next
  to a real HTTP stack
* LiteLLM: ``litellm.Router`` with ``mock_response`` in the deployment's ``litellm_params``,
  which answers before any HTTP request is built: it measures LiteLLM's own bookkeeping
  around a call, with no wire exchange at all (see docs/benchmarks.md)

Time is ``time.process_time_ns()``: CPU time of the whole process, all threads included
(LiteLLM runs its sync ``completion`` in a thread pool); wall time (``perf_counter_ns``) is
printed beside it. Cases are interleaved finely: each round is cut into blocks, and the
blocks of all cases alternate in a shuffled order, so a slow stretch of the machine hits every
case alike and ratios stay steady even when absolute times drift. Each number is the median
over rounds of (CPU time of the round / calls). A first round warms up, then what already
exists (imported modules, encodings, caches) is frozen out of the cyclic collector so that a
full collection of LiteLLM's large import does not land at random in one block; garbage is
collected before each round and left to the collector inside it. Every request has its own
user message, so tiktoken really counts it; the system prompt repeats, as in an application.

Prints numbers measured in this run; nothing is asserted about them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from failover import Envelope, Message, Request, ResponseFormat, Route, Router, Target
from failover.model import Capability, Failure, Response
from failover.policy import Backoff, Unlimited
from failover.providers import dialect_for
from failover.testing import FakeNetwork, FakeProvider, FakeServer, Reply, Script
from failover.tokens import counter_for
from failover.transport import HttpxTransport, Transport

try:  # circuit breakers (on by default) would open on a provider that fails every other call
    from failover.policy import NoBreakers
except ImportError:  # a failover from before circuit breakers
    NoBreakers = None

SHARED_TIKTOKEN = Path(__file__).resolve().parents[2] / "shared" / "tiktoken"

SYSTEM = (
    "You are a support triage assistant for an online store. Classify each customer message into "
    "one of: billing, shipping, returns, account, other. Answer briefly."
)
USER = "Hi, order {n} has said 'label created' for five days now. Can I get the express shipping refunded?"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "returns", "account", "other"]},
        "reason": {"type": "string"},
        "urgent": {"type": "boolean"},
    },
    "required": ["category", "reason", "urgent"],
    "additionalProperties": False,
}
CAPS = frozenset({Capability.CHAT, Capability.STRUCTURED_OUTPUT})
_serial = itertools.count(1)


def requests(n: int, *, schema: bool) -> list[Request]:
    """``n`` requests, each with a user message never sent before in this process."""
    fmt = ResponseFormat.json_schema(SCHEMA, name="triage") if schema else None
    return [
        Request(
            messages=(Message.system(SYSTEM), Message.user(USER.format(n=f"{next(_serial):07d}"))),
            response_format=fmt,
            max_tokens=256,
        )
        for _ in range(n)
    ]


@dataclass(eq=False)
class Case:
    label: str
    workload: str  # "text" | "json_schema" | "retry" | "http": a ratio compares cases of one workload
    calls: int  # per round
    setup: Callable[[int], list[Any]]  # outside the timing: reset the fake, build the arguments
    call: Callable[[Any], Awaitable[object]]
    check: Callable[[object], str | None]  # what is wrong with one result (checked before timing)
    baseline: bool = False
    drain: Callable[[], Awaitable[None]] | None = None  # let work the calls left behind finish
    cpu: list[float] = field(default_factory=list)  # ns per call, one per timed round
    wall: list[float] = field(default_factory=list)

    async def block(self, args: list[Any]) -> tuple[int, int]:
        """(CPU ns, wall ns) of one block of calls. CPU includes the drain; wall does not."""
        call = self.call
        w0, c0 = time.perf_counter_ns(), time.process_time_ns()
        for a in args:
            await call(a)
        w1 = time.perf_counter_ns()
        if self.drain is not None:
            await self.drain()
        return time.process_time_ns() - c0, w1 - w0


# -- failover: bare dialect call and Router.complete over one fake provider -----------------------


@dataclass(eq=False)
class Wire:
    """A fake provider and the Transport that reaches it; one per case, so no case shares state."""

    provider: FakeProvider
    transport: Transport
    base_url: str
    forget: Callable[[], None]  # drop the calls the fake recorded (it keeps every one)

    @classmethod
    def in_process(cls) -> Wire:
        provider = FakeProvider("p", "openai")
        network = FakeNetwork(provider)
        return cls(provider, network, provider.base_url, network.clear)

    @classmethod
    async def loopback(cls, stack: AsyncExitStack) -> Wire:
        provider = FakeProvider("p", "openai")
        server = await stack.enter_async_context(FakeServer(provider))
        transport = HttpxTransport()
        stack.push_async_callback(transport.aclose)
        return cls(provider, transport, server.api_url_for(provider), provider.clear)

    def target(self, tokenizer: str) -> Target:
        return self.provider.target(capabilities=CAPS, tokenizer=tokenizer, max_attempts=2, base_url=self.base_url)

    def reset(self, workload: str, n: int) -> None:
        self.forget()
        if workload == "retry":  # every call: a 500, then the 200
            self.provider.load(Script.of(*[Reply.server_error(), Reply.ok()] * n))
        else:
            self.provider.load(Script.always(Reply.ok()))


def bare_case(label: str, workload: str, calls: int, wire: Wire) -> Case:
    target = wire.target("estimate")
    dialect = dialect_for(target.dialect)
    transport = wire.transport
    connect, total = target.timeouts.connect, target.timeouts.total

    async def once(request: Request) -> Response | Failure:
        http = dialect.build(target, request)
        resp = await transport.send(http, connect_timeout=connect, total_timeout=total)
        return dialect.parse(target, resp)

    if workload == "retry":  # what a caller doing its own replay would run: the 500, then the 200

        async def call(request: Request) -> object:
            await once(request)
            return await once(request)

    else:
        call = once

    def setup(n: int) -> list[Request]:
        wire.reset(workload, n)
        return requests(n, schema=workload == "json_schema")

    def check(result: object) -> str | None:
        return None if isinstance(result, Response) else f"expected a Response, got {result!r}"

    return Case(label, workload, calls, setup, call, check, baseline=True)


def router_case(label: str, workload: str, calls: int, wire: Wire, tokenizer: str) -> Case:
    target = wire.target(tokenizer)
    route = Route(name="r", primary=(target,))
    if workload == "retry":
        # No wait between the 500 and the replay, no retry budget and no circuit breaker (a
        # provider failing every other call would trip it): every call replays once.
        off: dict[str, Any] = {} if NoBreakers is None else {"breakers": NoBreakers()}
        router = Router(
            [route], transport=wire.transport, retry_budget=Unlimited(), backoff=Backoff(base=0, cap=0), **off
        )
    else:
        router = Router([route], transport=wire.transport)  # the default RetryBudget, HealthBoard, Backoff
    attempts = 2 if workload == "retry" else 1

    async def call(request: Request) -> Response:
        return await router.complete("r", request, Envelope(budget=30.0))

    def setup(n: int) -> list[Request]:
        wire.reset(workload, n)
        return requests(n, schema=workload == "json_schema")

    def check(result: object) -> str | None:
        counting = counter_for(target).name
        if not counting.startswith(tokenizer):  # tiktoken falls back to the estimate when offline
            return f"counting with {counting!r}, not {tokenizer}: set TIKTOKEN_CACHE_DIR to a folder with o200k_base"
        if not isinstance(result, Response) or result.record is None:
            return f"expected a Response with a record, got {result!r}"
        if len(result.record.attempts) != attempts:
            return f"expected {attempts} attempt(s), got {result.record.attempts!r}"
        if workload == "json_schema" and (result.record.validation.contract is not True or result.parsed is None):
            return f"expected a validated structured answer, got {result!r}"
        return None

    return Case(label, workload, calls, setup, call, check)


# -- LiteLLM ----------------------------------------------------------------------------------------


def litellm_case(calls: int) -> tuple[Case | None, str]:
    # Before the import: no fetch of the model cost map, no other call home (no network here).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    try:
        import litellm
    except ImportError:
        return None, "litellm not installed: pip install -e '.[bench]'"
    from importlib.metadata import version

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    router = litellm.Router(
        model_list=[
            {
                "model_name": "r",
                "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "sk-x", "mock_response": "ok"},
            }
        ]
    )

    async def call(messages: list[dict[str, str]]) -> object:
        return await router.acompletion(model="r", messages=messages, max_tokens=256)

    def setup(n: int) -> list[list[dict[str, str]]]:
        return [[{"role": m.role, "content": m.text} for m in r.messages] for r in requests(n, schema=False)]

    def check(result: object) -> str | None:
        content = getattr(getattr(result, "choices", [None])[0], "message", None)
        text = getattr(content, "content", None)
        return None if text == "ok" else f"expected the mock answer 'ok', got {result!r}"

    async def drain() -> None:
        # LiteLLM logs every call from background tasks (its logging worker) after acompletion
        # returns; 10 ms idle lets them finish here, so their CPU is charged to LiteLLM and not to
        # the next block of another case. Sleeping costs no CPU; the wall column leaves it out.
        await asyncio.sleep(0.010)

    case = Case("LiteLLM Router, mock_response", "text", calls, setup, call, check, drain=drain)
    return case, f"litellm {version('litellm')}"


# -- running and reporting --------------------------------------------------------------------------


async def run(cases: list[Case], rounds: int, blocks: int, seed: int) -> None:
    for case in cases:  # check that each case does what it says before timing it
        problem = case.check(await case.call(case.setup(1)[0]))
        if problem is not None:
            sys.exit(f"{case.label}: {problem}")
    rng = random.Random(seed)
    for i in range(-1, rounds):  # round -1 warms up: encodings, caches, the allocator
        split = []
        for case in cases:
            args = case.setup(case.calls)
            split.append([args[b * len(args) // blocks : (b + 1) * len(args) // blocks] for b in range(blocks)])
        totals = [[0, 0] for _ in cases]
        gc.collect()
        for b in range(blocks):  # blocks of each case alternate in a shuffled order
            order = list(range(len(cases)))
            rng.shuffle(order)
            for k in order:
                cpu, wall = await cases[k].block(split[k][b])
                totals[k][0] += cpu
                totals[k][1] += wall
        if i < 0:
            # What exists now (imported modules: LiteLLM's are many; encodings, caches) stays
            # for the whole run: keep it out of the cyclic collector, so a full collection
            # of it does not land at random in one case's block. The garbage the calls make
            # is still collected, in the blocks that make it.
            gc.collect()
            gc.freeze()
        else:
            for case, (cpu, wall) in zip(cases, totals, strict=True):
                case.cpu.append(cpu / case.calls)
                case.wall.append(wall / case.calls)
        print(f"\rround {i + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def report(cases: list[Case], rounds: int, notes: list[str]) -> None:
    baselines = {c.workload: c for c in cases if c.baseline}
    print(f"date: {date.today().isoformat()}")
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPUs; " + "; ".join(notes)
    )
    print(f"CPU time per call (time.process_time_ns), median of {rounds} rounds of interleaved blocks\n")
    print(
        "| case | calls/round | CPU µs/call | wall µs/call | added CPU µs/call | vs bare | per round, median (range) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in cases:
        cpu, wall = statistics.median(c.cpu), statistics.median(c.wall)
        base = baselines.get(c.workload)
        added = ratio = spread = ""
        if base is not None and base is not c:
            added = f"{(cpu - statistics.median(base.cpu)) / 1e3:+.1f}"
            ratio = f"{cpu / statistics.median(base.cpu):.2f}x"
            per_round = [x / b for x, b in zip(c.cpu, base.cpu, strict=True)]
            spread = f"{statistics.median(per_round):.2f} ({min(per_round):.2f}–{max(per_round):.2f})"
        print(f"| {c.label} | {c.calls:,} | {cpu / 1e3:.1f} | {wall / 1e3:.1f} | {added} | {ratio} | {spread} |")


async def amain(opts: argparse.Namespace) -> None:
    n = opts.calls
    notes: list[str] = []
    async with AsyncExitStack() as stack:
        cases = [
            bare_case("bare dialect call", "text", n, Wire.in_process()),
            router_case("router, estimate", "text", n, Wire.in_process(), "estimate"),
            router_case("router, tiktoken", "text", n, Wire.in_process(), "tiktoken"),
            bare_case("bare dialect call, json_schema", "json_schema", n, Wire.in_process()),
            router_case("router, json_schema (validated), estimate", "json_schema", n, Wire.in_process(), "estimate"),
            router_case("router, json_schema (validated), tiktoken", "json_schema", n, Wire.in_process(), "tiktoken"),
            bare_case("bare: 500, then the 200 (2 exchanges)", "retry", n, Wire.in_process()),
            router_case("router: 500, replay, 200, estimate", "retry", n, Wire.in_process(), "estimate"),
            router_case("router: 500, replay, 200, tiktoken", "retry", n, Wire.in_process(), "tiktoken"),
        ]
        if opts.http:
            h = max(1, n // 4)  # a loopback exchange costs several times an in-process one
            cases += [
                bare_case("bare dialect call, loopback HTTP", "http", h, await Wire.loopback(stack)),
                router_case("router, estimate, loopback HTTP", "http", h, await Wire.loopback(stack), "estimate"),
            ]
        if opts.no_litellm:
            notes.append("LiteLLM left out (--no-litellm)")
        else:
            case, note = litellm_case(opts.litellm_calls)
            notes.append(note)
            if case is None:
                print(note)
            else:
                cases.append(case)
        await run(cases, opts.rounds, opts.blocks, opts.seed)
    report(cases, opts.rounds, notes)
    if opts.verbose:
        print()
        for c in cases:
            print(f"{c.label}: " + " ".join(f"{x / 1e3:.0f}" for x in c.cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds (default 20)")
    parser.add_argument("--calls", type=int, default=2_000, help="calls per round, failover cases (default 2000)")
    parser.add_argument(
        "--litellm-calls", type=int, default=200, help="calls per round, LiteLLM (default 200: ~5 ms a call)"
    )
    parser.add_argument("--blocks", type=int, default=20, help="blocks per round, interleaved across cases")
    parser.add_argument("--no-http", dest="http", action="store_false", help="leave out the loopback HTTP pair")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM out even when installed")
    parser.add_argument("--seed", type=int, default=1, help="seed of the block order")
    parser.add_argument("--verbose", action="store_true", help="also print every round's CPU µs/call per case")
    opts = parser.parse_args()
    if "TIKTOKEN_CACHE_DIR" not in os.environ and SHARED_TIKTOKEN.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)  # read when an encoding loads
    asyncio.run(amain(opts))


if __name__ == "__main__":
    main()
