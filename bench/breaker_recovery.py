"""How soon the primary is used again after an outage: the breaker's open periods, measured.

    PYTHONPATH=src .venv/bin/python bench/breaker_recovery.py            # a few seconds
    PYTHONPATH=src .venv/bin/python bench/breaker_recovery.py --json out.json

On virtual loop time (looptime), in process (FakeNetwork): route ``r`` = primary ``a`` and
one approved fallback ``b`` (healthy, 0.2 s answers), the router as a user gets it (default
retry budget, backoff, breakers), targets with 2 s per attempt and a 5 s deadline. ``a`` is
down from t=0 to t=60 s (every call a 503, or every call hangs), then healthy (0.2 s answers).

* **sequential**: 20 requests, one every 4 s (t = 0, 4, ..., 76);
* **concurrent**: 50 callers every second from t=0 to t=90.

Printed per breaker configuration (today's defaults "before", the new defaults "after", and a
few neighbours): the time from recovery (t=60) to the first answer from ``a``; the requests
that failed (must be 0: the fallback serves); the calls ``a`` got during the outage (what the
probes cost); and the most calls ``a`` had in flight at once while its breaker was not closed
(at most ``half_open_probes``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
from dataclasses import dataclass

import looptime

from failover import Capability, Envelope, Price, Request, Route, Router, Timeouts, Unavailable
from failover.policy import Backoff, BreakerBoard, BreakerConfig, BreakerEvent, RetryBudget
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

RECOVERY = 60.0
CAPS = frozenset({Capability.CHAT})
FAULTS = {"503": Reply.overloaded, "hang": Reply.hang}

CONFIGS: dict[str, BreakerConfig] = {
    "before (30 s x2, max 300 s)": BreakerConfig(open_duration=30.0, open_duration_growth=2.0, max_open_duration=300.0),
    "after (defaults)": BreakerConfig(),
    "after, without the probe rule": BreakerConfig(),  # patched in main() (--no-probe-rule)
    "5 s, no growth": BreakerConfig(open_duration=5.0, open_duration_growth=1.0, max_open_duration=5.0),
    "10 s x2, max 30 s": BreakerConfig(open_duration=10.0, open_duration_growth=2.0, max_open_duration=30.0),
}


@dataclass
class Outcome:
    first_primary: float | None  # seconds from recovery to the first answer from a
    failed: int  # requests that ended in Unavailable
    outage_calls: int  # calls a received during the outage
    max_probes: int  # most calls on a in flight at once while its breaker was not closed
    requests: int
    timeline: list[tuple[float, float, str | None]]
    events: list[tuple[float, str, str]]


def target(p: FakeProvider, attempts: int) -> object:
    return p.target(
        capabilities=CAPS,
        timeouts=Timeouts(connect=2.0, first_event=2.0, idle=2.0, total=2.0, min_useful=0.05),
        max_attempts=attempts,
        price=Price(input_per_mtok=1.0, output_per_mtok=2.0),
        tokenizer="estimate",
    )


async def scenario(config: BreakerConfig, fault: str, mode: str) -> Outcome:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    a = FakeProvider("a", "openai", Script.always(FAULTS[fault]()))
    b = FakeProvider("b", "openai", Script.always(Reply.ok(latency=0.2)))
    route = Route(name="r", primary=(target(a, 2),), fallbacks=(target(b, 1),))  # type: ignore[arg-type]
    events: list[BreakerEvent] = []
    board = BreakerBoard(config, hooks=[events.append])
    router = Router(
        [route],
        transport=FakeNetwork(a, b),
        retry_budget=RetryBudget(),
        breakers=board,
        backoff=Backoff(),
        rng=random.Random(1),
    )
    loop.call_at(t0 + RECOVERY, a.load, Script.always(Reply.ok("a", latency=0.2)))
    answers: list[tuple[float, float, str | None]] = []  # (start, end, target) ; None: failed

    async def one(at: float) -> None:
        await asyncio.sleep(max(0.0, t0 + at - loop.time()))
        start = loop.time() - t0
        try:
            resp = await router.complete("r", Request.simple("hi"), Envelope(budget=5.0))
        except Unavailable:
            answers.append((start, loop.time() - t0, None))
            return
        assert resp.record is not None
        answers.append((start, loop.time() - t0, resp.record.target_used))

    if mode == "sequential":
        times = [4.0 * i for i in range(20)]
    else:
        times = [float(s) for s in range(91) for _ in range(50)]
    await asyncio.gather(*(one(t) for t in times))
    firsts = [end for _, end, used in answers if used == "a" and end >= RECOVERY]
    outage = [c for c in a.calls if c.time - t0 < RECOVERY and c.kind is not None]
    return Outcome(
        first_primary=(min(firsts) - RECOVERY) if firsts else None,
        failed=sum(1 for *_, used in answers if used is None),
        outage_calls=len(outage),
        max_probes=_max_probes(a, events, t0),
        requests=len(answers),
        timeline=sorted(answers),
        events=[(round(e.at - t0, 2), e.new.value, e.reason) for e in events if e.layer == "target"],
    )


def _max_probes(a: FakeProvider, events: list[BreakerEvent], t0: float) -> int:
    """The most probes on ``a`` in flight at once: calls that arrived while its target breaker
    was half-open (from each move to half-open to the next change)."""
    changes = [e for e in events if e.layer == "target"]
    spans = [
        (e.at, changes[i + 1].at if i + 1 < len(changes) else math.inf)
        for i, e in enumerate(changes)
        if e.new.value == "half_open"
    ]
    calls = [c for c in a.calls if c.kind is not None and any(s <= c.time < e for s, e in spans)]
    edges = sorted([(c.ended_at or math.inf, -1) for c in calls] + [(c.time, 1) for c in calls])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def run(config: BreakerConfig, fault: str, mode: str, *, probe_rule: bool = True) -> Outcome:
    loop = looptime.new_event_loop(start=0.0, noop_cycles=42)
    original = BreakerConfig.open_period
    if not probe_rule:  # the grown period from the probe's end, as before
        BreakerConfig.open_period = lambda self, streak, probe_duration=0.0: original(self, streak)  # type: ignore[method-assign]
    try:
        return loop.run_until_complete(scenario(config, fault, mode))
    finally:
        BreakerConfig.open_period = original  # type: ignore[method-assign]
        loop.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the numbers here too")
    args = ap.parse_args()
    rows = []
    head = ("config", "fault", "traffic", "recovery->a", "failed", "outage calls", "probes")
    print("{:<30} {:<5} {:<11} {:>12} {:>7} {:>13} {:>7}".format(*head))
    for name, config in CONFIGS.items():
        for fault in FAULTS:
            for mode in ("sequential", "concurrent"):
                o = run(config, fault, mode, probe_rule="without the probe rule" not in name)
                first = "never" if o.first_primary is None else f"{o.first_primary:.1f} s"
                print(
                    f"{name:<30} {fault:<5} {mode:<11} {first:>12} {o.failed:>7} {o.outage_calls:>13} {o.max_probes:>7}"
                )
                rows.append({"config": name, "fault": fault, "traffic": mode, **o.__dict__})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
