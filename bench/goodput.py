"""Goodput under overload: failover's retry policy against a retry storm, on virtual loop time.

    .bench-venv/bin/python bench/goodput.py                   # table + plots in docs/goodput/
    .venv/bin/python bench/goodput.py --no-plots              # table only (no matplotlib there)
    .bench-venv/bin/python bench/goodput.py --investigate     # also the variants behind the findings
    .venv/bin/python bench/goodput.py --outage                # primary hard down, fallback healthy

One fake provider of capacity C requests/s receives Poisson arrivals at 3x C for 60 s (the
overload), then at 0.5x C for another 60 s (the provider has "healed": the spike is over).
Every caller has a 10 s deadline and one route with ONE target (Anthropic dialect, at most 3
attempts), so every extra provider request is a retry, never a fallback. The same arrival
times (same seed) are replayed against each strategy:

* (a) failover, full policy: ``Router`` defaults (``RetryBudget()``, ``BreakerBoard()``,
  ``Backoff()``)
* (b) failover without retry budget and breaker: ``Router(retry_budget=Unlimited(),
  breakers=NoBreakers())``, same backoff and attempt limit
* (c) SDK defaults: what the official openai and anthropic Python SDKs do (read in the
  installed openai 3.57.0 and anthropic 2.14.0, ``_constants.py`` and
  ``_base_client.py``): ``DEFAULT_MAX_RETRIES = 2``; retry on ``x-should-retry: true``, 408,
  409, 429 and >= 500 unless ``x-should-retry: false``; wait the server's
  ``retry-after-ms``/``retry-after`` when given, else ``min(INITIAL_RETRY_DELAY * 2**n,
  MAX_RETRY_DELAY) * (1 - 0.25 * random())`` with 0.5 s and 8 s; no budget, no breaker. It is
  a loop around a bare dialect call (build -> send -> parse) through the same fake, under the
  caller's own ``asyncio.timeout(10)``.

The provider model (``OverloadedProvider``, a Transport over ``FakeNetwork``), deterministic on
the loop clock:

* capacity: ``C x L`` generations at once, each taking ``L`` (0.5 s), so at most C answers/s;
* an arrival that finds every slot busy gets Anthropic's 529 ``overloaded_error`` after 0.05 s
  (no Retry-After, ``x-should-retry: true``, as the fake renders it);
* overload degrades it: while the requests that reached it in the last second exceed C, every
  generation it starts is slowed by ``1 + k x (rate / C - 1)`` (k = ``--slowdown``, 0.02), so
  latency grows AND throughput falls below C. Extra load is what hurts, so retries hurt;
* a generation, once started, runs to its end even if the client has given up (its slot stays
  busy): work is never cancelled in the provider.

Measured per strategy: caller requests and provider requests (amplification = provider requests
/ caller requests; also for the overload's callers alone, each provider request being charged to
the caller that sent it), success within the deadline, goodput (answers served within the
deadline during the overload, per second, as % of C) and time to recover (whole seconds from the
heal at 60 s to the first of 5 seconds in a row in which >= 95 % of the callers are served).
Plots: provider requests/s and caller success rate per arrival second, per strategy.

``--investigate`` adds (a1) the full policy without breaker, (a2) the full policy with a
prototype breaker board that ignores 529s while the target still answers (``GraceBoard``,
defined here, not in failover) and (ref) no retries at all. ``--sweep 0,0.05`` repeats the
goodput column at other slowdowns k.

Everything runs on a looptime virtual clock (``noop_cycles=0``: with nothing but asyncio timers
on the loop, skipping looptime's idle cycles changes no number and saves 3/4 of the time): two
simulated minutes take 1-6 s of wall time per strategy, and every number is exactly what the
code did (rerun: same numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failover import Envelope, Request, Route, Router, Unavailable
from failover.lab._load import CALLER, Call, poisson_arrivals, run_arrivals
from failover.lab._load import CallerOutcome as Outcome
from failover.model import Failure, FailureKind, Response, Target
from failover.policy import BreakerBoard, BreakerEvent, NoBreakers, Permit, RetryBudget, Unlimited
from failover.providers import dialect_for
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.transport import HttpRequest, HttpResponse, TransportError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "goodput"


@dataclass(frozen=True, slots=True, kw_only=True)
class Params:
    capacity: float = 50.0  # C, requests/s the provider completes when not degraded
    latency: float = 0.5  # L, seconds per generation
    reject_latency: float = 0.05  # seconds to a 529
    slowdown: float = 0.02  # k: per 1x of offered load above C, generations take k x L longer
    overload: float = 3.0  # offered load during the overload, x C
    overload_s: float = 60.0
    after: float = 0.5  # offered load after the heal, x C
    after_s: float = 60.0
    budget: float = 10.0  # each caller's deadline, seconds
    attempts: int = 3  # target max_attempts; SDK: 1 + DEFAULT_MAX_RETRIES
    recovered_at: float = 0.95  # success rate that counts as recovered
    seed: int = 1

    @property
    def slots(self) -> int:
        return max(1, round(self.capacity * self.latency))

    @property
    def heal(self) -> float:
        return self.overload_s

    @property
    def end(self) -> float:
        return self.overload_s + self.after_s


DEFAULT = Params()


def arrivals(p: Params) -> list[float]:
    """Poisson arrival times: ``overload x C`` per second, then ``after x C`` (seeded)."""
    segments = [(0.0, p.heal, p.overload * p.capacity), (p.heal, p.end, p.after * p.capacity)]
    return poisson_arrivals(random.Random(p.seed), segments)


# -- the provider -------------------------------------------------------------------------------


class OverloadedProvider:
    """A Transport to one fake Anthropic provider with a capacity, that degrades under overload.

    Each request is admitted or rejected on arrival (see the module docstring for the model);
    the verdict becomes the fake's next reply, so the router and the SDK loop receive the real
    wire bytes (200, or 529 ``overloaded_error``) and classify them as they would in production.
    """

    enforces_total = True  # FakeNetwork bounds every exchange by total_timeout on the loop clock

    def __init__(self, p: Params) -> None:
        self.p = p
        self.provider = FakeProvider("p", "anthropic")
        self.network = FakeNetwork(self.provider)
        self.busy = 0
        self.recent: deque[float] = deque()  # arrival times within the last second
        self.requests: list[tuple[float, int, bool]] = []  # (arrival, caller, admitted)
        self.reject = Script.always(Reply.overloaded(latency=p.reject_latency))

    def _free(self) -> None:
        self.busy -= 1

    async def send(self, request: HttpRequest, *, connect_timeout: float, total_timeout: float) -> HttpResponse:
        loop = asyncio.get_running_loop()
        now = loop.time()
        recent = self.recent
        recent.append(now)
        while recent[0] <= now - 1.0:
            recent.popleft()
        admitted = self.busy < self.p.slots
        self.requests.append((now, CALLER.get(), admitted))
        if admitted:
            excess = max(0.0, len(recent) / self.p.capacity - 1.0)
            service = self.p.latency * (1.0 + self.p.slowdown * excess)
            self.busy += 1
            loop.call_at(now + service, self._free)  # the slot stays busy if the client leaves
            self.provider.load(Script.always(Reply.ok(latency=service)))
        else:
            self.provider.load(self.reject)
        # No await between choosing the reply and the fake taking it: the verdict is this call's.
        return await self.network.send(request, connect_timeout=connect_timeout, total_timeout=total_timeout)

    async def aclose(self) -> None:
        return None


# -- the callers --------------------------------------------------------------------------------


def target_for(provider: FakeProvider, p: Params) -> Target:
    return provider.target(max_attempts=p.attempts, tokenizer="estimate")


def request() -> Request:
    return Request.simple("Classify this support ticket: 'my invoice is wrong'.", max_tokens=256)


def router_strategy(**kw: Any) -> Callable[[OverloadedProvider, Params, random.Random], Call]:
    def make(transport: OverloadedProvider, p: Params, rng: random.Random) -> Call:
        route = Route(name="r", primary=(target_for(transport.provider, p),))
        router = Router([route], transport=transport, rng=rng, **kw)
        req = request()

        async def call() -> bool:
            try:
                await router.complete("r", req, Envelope(budget=p.budget))
            except Unavailable:
                return False
            return True

        return call

    return make


def sdk_strategy(transport: OverloadedProvider, p: Params, rng: random.Random) -> Call:
    """The official SDKs' default retry loop around a bare dialect call, under the caller's deadline."""
    target = target_for(transport.provider, p)
    dialect = dialect_for(target.dialect)
    req = request()
    max_retries = p.attempts - 1  # DEFAULT_MAX_RETRIES = 2
    initial, cap = 0.5, 8.0  # INITIAL_RETRY_DELAY, MAX_RETRY_DELAY

    def retry_after(resp: HttpResponse) -> float | None:
        for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
            value = resp.header(name)
            if value is not None:
                try:
                    return float(value) / divisor
                except ValueError:
                    continue
        return None

    def should_retry(resp: HttpResponse) -> bool:
        flag = resp.header("x-should-retry")
        if flag in ("true", "false"):
            return flag == "true"
        return resp.status in (408, 409, 429) or resp.status >= 500

    async def once() -> bool:
        for retries_taken in range(max_retries + 1):
            http = dialect.build(target, req)
            try:
                resp = await transport.send(http, connect_timeout=5.0, total_timeout=600.0)  # DEFAULT_TIMEOUT
            except TransportError:  # the SDKs retry connection errors and timeouts too
                resp = None
            if resp is not None and resp.status < 400:
                return isinstance(dialect.parse(target, resp), Response)
            if retries_taken == max_retries or (resp is not None and not should_retry(resp)):
                return False
            ra = retry_after(resp) if resp is not None else None
            if ra is not None and ra > 0:  # anthropic: honoured as given; openai: if <= 120 s
                wait = ra
            else:
                wait = min(initial * 2.0**retries_taken, cap) * (1.0 - 0.25 * rng.random())
            await asyncio.sleep(wait)
        return False

    async def call() -> bool:
        try:
            async with asyncio.timeout(p.budget):
                return await once()
        except TimeoutError:
            return False

    return call


class GraceBoard(BreakerBoard):
    """Prototype, for --investigate only: a breaker board that does not count a 529 as a failure
    while the target is still answering.

    A ``provider_overloaded`` failure counts against the target breaker only when the target
    has had no acceptable answer for ``grace`` seconds (and has been watched that long);
    otherwise its permits are given back with no verdict. Every other failure counts as
    before, and a provider that only answers 529 still opens its breaker, ``grace`` later.
    """

    def __init__(self, grace: float = 10.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.grace = grace
        self._seen: dict[str, float] = {}  # scope -> first attempt, or last acceptable answer

    def admit(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        self._seen.setdefault(target.scope, now)
        return super().admit(target, now)

    def record(
        self, target: Target, permits: list[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        if failure is None:
            self._seen[target.scope] = now
        elif failure.kind is FailureKind.PROVIDER_OVERLOADED and now - self._seen.get(target.scope, now) < self.grace:
            self.discard(permits, now)
            return
        super().record(target, permits, failure, duration, now)


@dataclass(frozen=True, slots=True)
class Strategy:
    key: str
    label: str
    make: Callable[[OverloadedProvider, Params, random.Random], Call]
    events: list[BreakerEvent] = field(default_factory=list, compare=False)  # the target breaker's


def strategies(investigate: bool) -> list[Strategy]:
    """Fresh strategies (a breaker board holds state: one per run)."""
    a_events: list[BreakerEvent] = []
    out = [
        Strategy(
            "a", "(a) failover, full policy", router_strategy(breakers=BreakerBoard(hooks=[a_events.append])), a_events
        ),
        Strategy(
            "b",
            "(b) failover, no budget, no breaker",
            router_strategy(retry_budget=Unlimited(), breakers=NoBreakers()),
        ),
        Strategy("c", "(c) SDK defaults (2 retries)", sdk_strategy),
    ]
    if investigate:
        g_events: list[BreakerEvent] = []
        out += [
            Strategy("a1", "(a1) failover, budget, no breaker", router_strategy(breakers=NoBreakers())),
            Strategy(
                "a2",
                "(a2) failover, budget, breaker ignoring 529 while answering",
                router_strategy(breakers=GraceBoard(hooks=[g_events.append])),
                g_events,
            ),
            Strategy(
                "ref",
                "(ref) no retries at all, no breaker",
                router_strategy(retry_budget=RetryBudget(ratio=0.0, floor=0), breakers=NoBreakers()),
            ),
        ]
    return out


# -- one run --------------------------------------------------------------------------------------


RECOVERY_RUN = 5  # recovered: this many seconds in a row with >= 95 % of their callers served


@dataclass(slots=True)
class Result:
    strategy: Strategy
    p: Params
    callers: list[Outcome]
    requests: list[tuple[float, int, bool]]
    wall: float

    def won(self, c: Outcome) -> bool:
        return c.ok and c.done - c.arrival <= self.p.budget

    def amplification(self, overload_only: bool = False) -> float:
        if not overload_only:
            return len(self.requests) / len(self.callers)
        heal = self.p.heal
        callers = sum(1 for c in self.callers if c.arrival < heal)
        sent = sum(1 for _, who, _ in self.requests if who >= 0 and self.callers[who].arrival < heal)
        return sent / callers

    def success(self, lo: float = 0.0, hi: float = math.inf) -> float:
        picked = [c for c in self.callers if lo <= c.arrival < hi]
        return sum(self.won(c) for c in picked) / max(1, len(picked))

    def goodput(self) -> float:
        """Callers served within the deadline whose answer came during the overload, per second of
        overload, as a share of C (the first answers arrive after L: a ceiling just under 100 %)."""
        won = sum(self.won(c) for c in self.callers if c.done < self.p.heal)
        return won / self.p.heal / self.p.capacity

    def per_second(self) -> tuple[list[int], list[float]]:
        """Per whole second: provider requests received, and the success rate of that second's callers."""
        n = math.ceil(self.p.end)
        sent = [0] * n
        for t, _, _ in self.requests:
            if t < n:
                sent[int(t)] += 1
        won, seen = [0] * n, [0] * n
        for c in self.callers:
            s = int(c.arrival)
            seen[s] += 1
            won[s] += self.won(c)
        return sent, [w / s if s else math.nan for w, s in zip(won, seen, strict=True)]

    def recovery(self) -> float | None:
        """Whole seconds from the heal to the first second that starts a run of RECOVERY_RUN
        seconds whose callers each succeed at >= recovered_at (None: not within the run)."""
        p = self.p
        _, rate = self.per_second()
        ok = [math.isnan(x) or x >= p.recovered_at for x in rate]
        heal = math.ceil(p.heal)
        for s in range(heal, len(ok) - RECOVERY_RUN + 1):
            if all(ok[s : s + RECOVERY_RUN]):
                return float(s - heal)
        return None

    def open_spans(self) -> list[tuple[float, float]]:
        """When the target breaker was open (until the first call that found it elapsed)."""
        spans: list[tuple[float, float]] = []
        opened = None
        for e in self.strategy.events:
            if e.layer != "target":
                continue
            if e.new.value == "open":
                opened = e.at
            elif opened is not None:
                spans.append((opened, e.at))
                opened = None
        if opened is not None:
            spans.append((opened, self.p.end))
        return spans


def run_one(strategy: Strategy, p: Params, times: list[float]) -> Result:
    """One strategy on a fresh virtual-time loop (the engine is the lab's load mode's)."""
    transport = OverloadedProvider(p)
    callers, wall = run_arrivals(
        times, lambda: strategy.make(transport, p, random.Random(p.seed + 1)), p.end + p.budget + 5.0
    )
    return Result(strategy, p, callers, transport.requests, wall)


def run_all(p: Params, investigate: bool) -> list[Result]:
    times = arrivals(p)
    return [run_one(s, p, times) for s in strategies(investigate)]


# -- report -------------------------------------------------------------------------------------


def describe(p: Params) -> str:
    return (
        f"C = {p.capacity:g} req/s ({p.slots} slots x {p.latency:g} s), 529 after {p.reject_latency:g} s, "
        f"slowdown k = {p.slowdown:g}; Poisson load {p.overload:g}x C for {p.overload_s:g} s, then {p.after:g}x C "
        f"for {p.after_s:g} s; deadline {p.budget:g} s; {p.attempts} attempts per request; seed {p.seed}"
    )


def fmt_recovery(r: float | None, p: Params) -> str:
    return f"> {p.after_s - RECOVERY_RUN:.0f} s" if r is None else f"{r:.0f} s"


def report(results: list[Result], p: Params) -> None:
    print(describe(p))
    print()
    print(
        "| strategy | caller requests | provider requests | amplification: all / overload "
        "| success in deadline: all / overload / after heal | goodput, % of C | time to recover | wall s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    heal = p.heal
    for r in results:
        print(
            f"| {r.strategy.label} | {len(r.callers):,} | {len(r.requests):,} "
            f"| {r.amplification():.3f} / {r.amplification(overload_only=True):.3f} "
            f"| {100 * r.success():.1f}% / {100 * r.success(hi=heal):.1f}% / {100 * r.success(lo=heal):.1f}% "
            f"| {100 * r.goodput():.1f}% | {fmt_recovery(r.recovery(), p)} | {r.wall:.1f} |"
        )
    for r in results:
        opens = [e for e in r.strategy.events if e.layer == "target" and e.new.value == "open"]
        if r.strategy.events or r.strategy.key == "a":
            spans = r.open_spans()
            shown = ", ".join(f"{e.at:.2f} s ({e.reason}, for {e.open_for:g} s)" for e in opens[:6])
            print(
                f"\n{r.strategy.label}: the target breaker opened {len(opens)} time(s) and was open "
                f"{sum(b - a for a, b in spans):.1f} s of {p.end:g} s" + (f"; it opened at {shown}" if shown else "")
            )


def sweep(slowdowns: list[float], base: Params, investigate: bool) -> None:
    print("\nGoodput (% of C) and overload amplification by slowdown k:\n")
    rows = []
    for k in slowdowns:
        p = Params(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, "slowdown": k})
        rows.append((k, run_all(p, investigate)))
    labels = [r.strategy.label for r in rows[0][1]]
    print("| k | " + " | ".join(labels) + " |")
    print("|---:|" + "---:|" * len(labels))
    for k, results in rows:
        cells = [f"{100 * r.goodput():.1f}% (x{r.amplification(overload_only=True):.2f})" for r in results]
        print(f"| {k:g} | " + " | ".join(cells) + " |")


COLORS = {"a": "tab:blue", "b": "tab:orange", "c": "tab:red", "a1": "tab:green"}  # (a2) and (ref) lie on (a1)


def plot(results: list[Result], p: Params, out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nmatplotlib is not installed here: no plots (.bench-venv/bin/pip install matplotlib)")
        return []
    out.mkdir(parents=True, exist_ok=True)
    secs = list(range(math.ceil(p.end)))
    results = [r for r in results if r.strategy.key in COLORS]
    a = next((r for r in results if r.strategy.key == "a"), None)
    written: list[Path] = []

    def finish(fig: Any, ax: Any, name: str, where: str) -> None:
        if a is not None:
            for i, (lo, hi) in enumerate(a.open_spans()):
                label = "(a): breaker open" if i == 0 else None
                ax.axvspan(lo, hi, color=COLORS["a"], alpha=0.08, label=label)
        ax.axvline(p.heal, color="gray", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc=where)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for r in results:
        sent, _ = r.per_second()
        ax.plot(secs, sent, label=r.strategy.label, color=COLORS[r.strategy.key], lw=1.2)
    offered = [p.overload * p.capacity if s < p.heal else p.after * p.capacity for s in secs]
    ax.plot(secs, offered, color="black", ls=":", lw=1, label="caller requests offered")
    ax.axhline(p.capacity, color="black", ls="--", lw=1, label=f"capacity C = {p.capacity:g}/s")
    ax.set(
        xlabel="time (s); overload until the grey line",
        ylabel="provider requests / s",
        title="Requests reaching the provider",
    )
    finish(fig, ax, "provider_rate.png", "upper right")

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for r in results:
        _, rate = r.per_second()
        ax.plot(secs, [100 * x for x in rate], label=r.strategy.label, color=COLORS[r.strategy.key], lw=1.2)
    ax.axhline(100 * p.recovered_at, color="black", ls="--", lw=1, label=f"{100 * p.recovered_at:g}% (recovered)")
    ax.axhline(100 / p.overload, color="black", ls=":", lw=1, label=f"C / offered = {100 / p.overload:.0f}%")
    ax.set(
        xlabel="caller arrival second; overload until the grey line",
        ylabel="callers served within deadline (%)",
        title="Caller success rate",
        ylim=(-2, 115),
    )
    finish(fig, ax, "success_rate.png", "center right")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=float, default=DEFAULT.capacity, help="C, requests/s (default 50)")
    parser.add_argument("--slowdown", type=float, default=DEFAULT.slowdown, help="k, degradation per 1x excess (0.02)")
    parser.add_argument("--overload", type=float, default=DEFAULT.overload, help="load in the overload, x C (3)")
    parser.add_argument(
        "--overload-seconds", type=float, default=DEFAULT.overload_s, help="length of the overload (default 60)"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT.seed, help="arrival times and jitter (default 1)")
    parser.add_argument("--investigate", action="store_true", help="also run the variants behind the findings")
    parser.add_argument("--sweep", default="", help="comma-separated slowdowns k for a goodput table, e.g. 0,0.05")
    parser.add_argument("--no-plots", dest="plots", action="store_false", help="print the table only")
    parser.add_argument("--out", type=Path, default=DOCS, help="where the plots go (default docs/goodput/)")
    parser.add_argument(
        "--outage", action="store_true", help="instead: primary hard down, fallback healthy (goodput_support/outage.py)"
    )
    parser.add_argument("--outage-rate", type=float, default=20.0, help="--outage: callers per second (default 20)")
    parser.add_argument("--outage-burst", type=int, default=0, help="--outage: N callers at once instead")
    opts = parser.parse_args()
    if opts.outage:
        from goodput_support.outage import OutageParams, report_outage, run_outage

        t0 = time.perf_counter()
        op = OutageParams(rate=opts.outage_rate, burst=opts.outage_burst, seed=opts.seed)
        report_outage(run_outage(op), op)
        print(f"\n{time.perf_counter() - t0:.1f} s of wall time in all")
        return
    p = Params(
        capacity=opts.capacity,
        slowdown=opts.slowdown,
        overload=opts.overload,
        overload_s=opts.overload_seconds,
        seed=opts.seed,
    )
    t0 = time.perf_counter()
    results = run_all(p, opts.investigate)
    report(results, p)
    if opts.sweep:
        sweep([float(k) for k in opts.sweep.split(",")], p, opts.investigate)
    if opts.plots:
        for path in plot(results, p, opts.out):
            print(f"wrote {path}")
    print(f"\n{time.perf_counter() - t0:.1f} s of wall time in all")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
