"""The whole router over random fault schedules on virtual time (hypothesis): the invariants of
the recovery engine hold through the real loop, the real policy objects and the fault kit.

A answers each call from a random schedule of faults (503, 500, 429 with a Retry-After, a hang,
a reset, an answer); B answers after a random latency. Each example runs a few callers one
after another on a fresh looptime loop, with the router's default retry budget and breakers.
"""

from __future__ import annotations

import asyncio
import random

import looptime
from hypothesis import example, given, settings
from hypothesis import strategies as st

from failover import Envelope, Request, Route, Router, Timeouts, Unavailable, Workflow
from failover.policy import Backoff, BreakerBoard, RetryBudget
from failover.router._engine import UNKNOWN_LATENCY
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

FAULTS = {
    "503": Reply.overloaded(latency=0.02),
    "500": Reply.server_error(latency=0.02),
    "429": Reply.rate_limit(retry_after=0.5, latency=0.02),
    "429 long": Reply.rate_limit(retry_after=20, latency=0.02),
    "hang": Reply.hang(),
    "reset": Reply.reset(latency=0.01),
    "ok": Reply.ok("from a", latency=0.1),
}


def run(schedule: list[str], cap: float, attempts: int, budget: float, b_latency: float, callers: int) -> None:
    loop = looptime.new_event_loop(start=0.0, noop_cycles=0)
    try:
        loop.run_until_complete(_callers(schedule, cap, attempts, budget, b_latency, callers))
    finally:
        loop.close()


async def _callers(schedule: list[str], cap: float, attempts: int, budget: float, b_latency: float, n: int) -> None:
    a = FakeProvider("a", "openai", Script.of(*(FAULTS[f] for f in schedule), default=FAULTS[schedule[-1]]))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", latency=b_latency)))
    ta = a.target(
        timeouts=Timeouts(connect=cap, total=cap, min_useful=0.05), max_attempts=attempts, tokenizer="estimate"
    )
    tb = b.target(timeouts=Timeouts(connect=5, total=5, min_useful=0.05), max_attempts=1, tokenizer="estimate")
    router = Router(
        [Route(name="r", primary=(ta,), fallbacks=(tb,))],
        transport=FakeNetwork(a, b),
        retry_budget=RetryBudget(),
        breakers=BreakerBoard(),
        backoff=Backoff(base=0.2, cap=1.0),
        rng=random.Random(3),
    )
    loop = asyncio.get_running_loop()
    for _ in range(n):
        a_before = len(a.calls)
        t0 = loop.time()
        try:
            resp = await router.complete("r", Request.simple("hi"), Envelope(budget=budget))
        except Unavailable as exc:
            rec, target = exc.record, None
        else:
            assert resp.record is not None
            rec, target = resp.record, resp.record.target_used
        elapsed = loop.time() - t0
        assert elapsed <= budget + 1e-6
        assert len(a.calls) - a_before <= attempts
        # no wait slept before a refusal: each wait is followed by the attempt it waited for
        for w in rec.waits:
            assert any(x.target == w.target and x.start >= w.end - 1e-6 for x in rec.attempts) or w.end - w.start < 0.01
        # if B fits in what A's first attempt leaves, the caller gets an answer
        if budget - min(cap, budget) >= 0.05 + max(b_latency, UNKNOWN_LATENCY) + 0.02:
            assert target is not None, (schedule, rec.attempts, rec.excluded)
        if target == "b":
            assert rec.workflow is Workflow.FALLBACK and rec.recovered
        elif target == "a":
            assert rec.workflow in (Workflow.DIRECT, Workflow.RETRY_FAILOVER)
    await router.aclose()


@settings(max_examples=300, deadline=None)
@example(schedule=["hang"], cap=2.0, attempts=3, budget=5.0, b_latency=0.3)  # the hanging primary
@example(schedule=["503"], cap=2.0, attempts=4, budget=2.0, b_latency=0.9)  # the outage, a tight budget
@example(schedule=["429 long"], cap=1.0, attempts=2, budget=5.0, b_latency=0.3)  # a wait beyond the deadline
@given(
    schedule=st.lists(st.sampled_from(sorted(FAULTS)), min_size=1, max_size=6),
    cap=st.sampled_from([0.5, 1.0, 2.0]),
    attempts=st.integers(1, 4),
    budget=st.sampled_from([2.0, 5.0, 10.0]),
    b_latency=st.sampled_from([0.05, 0.3, 0.9]),
)
def test_random_fault_schedules_keep_the_recovery_invariants(
    schedule: list[str], cap: float, attempts: int, budget: float, b_latency: float
) -> None:
    run(schedule, cap, attempts, budget, b_latency, callers=4)
