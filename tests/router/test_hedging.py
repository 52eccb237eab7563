"""Hedging: a second attempt after a delay; the first acceptable result wins."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from failover import Envelope, Request, Route, Router
from failover.policy import Backoff, NoBreakers, RetryBudget, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime


def make(a: FakeProvider, b: FakeProvider, *, hedge_after: float | None = 0.5, budget: object = None) -> Router:
    route = Route(name="r", primary=(target(a, key="m", cap=5.0), target(b, key="m", cap=5.0)), hedge_after=hedge_after)
    return Router(
        [route],
        transport=FakeNetwork(a, b),
        retry_budget=budget or Unlimited(),  # type: ignore[arg-type]
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
    )


async def test_the_hedge_wins_and_the_loser_is_cancelled_with_both_costs_recorded() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("slow a", latency=3.0)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("fast b", latency=0.2)))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await make(a, b).complete("r", Request.simple("hi"), Envelope(budget=10))
    assert resp.text == "fast b"
    assert loop.time() - t0 == pytest.approx(0.7)  # hedge delay + b's latency
    (call_a,) = a.calls
    assert call_a.outcome is Outcome.CLIENT_DISCONNECTED
    assert call_a.disconnected_at - t0 == pytest.approx(0.7)
    rec = resp.record
    assert rec is not None
    by_target = {x.target: x for x in rec.attempts}
    assert by_target["b"].hedge and by_target["b"].outcome == "ok"
    assert by_target["a"].outcome == "cancelled" and by_target["a"].cost > 0 and by_target["a"].cost_estimated
    assert rec.total_cost == pytest.approx(by_target["a"].cost + by_target["b"].cost)


async def test_a_fast_primary_never_starts_a_hedge() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("a", latency=0.1)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b")))
    resp = await make(a, b).complete("r", Request.simple("hi"), Envelope(budget=10))
    assert resp.text == "a" and len(b.calls) == 0


async def test_the_primary_can_still_win_the_race() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("a", latency=0.8)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b", latency=2.0)))
    resp = await make(a, b).complete("r", Request.simple("hi"), Envelope(budget=10))
    assert resp.text == "a"
    assert b.calls[0].outcome is Outcome.CLIENT_DISCONNECTED


async def test_hedges_into_the_same_upstream_draw_on_its_retry_budget() -> None:
    """Two keys of one upstream (same endpoint and model): a hedge adds load to the provider
    the lead already loads, so it is an extra attempt on that upstream's retry budget."""
    a = FakeProvider("a", "openai", Script.of(*[Reply.ok("lead", latency=1.0)] * 10, default=Reply.ok("hedge")))
    lead = target(a, cap=5.0)
    other_key = replace(lead, name="a-key2", credential="OTHER_KEY")
    route = Route(name="r", primary=(lead, other_key), hedge_after=0.5)
    router = Router(
        [route],
        transport=FakeNetwork(a),
        retry_budget=RetryBudget(ratio=0.0, floor=2, window=60),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=NoBreakers(),
    )
    results = await asyncio.gather(
        *(router.complete("r", Request.simple(f"{i}"), Envelope(budget=10)) for i in range(10))
    )
    assert len(a.calls) == 12  # ten leads, and only the floor's two hedges
    assert sum(r.text == "hedge" for r in results) == 2
    assert sum(r.text == "lead" for r in results) == 8
    refused = [e for r in results for e in r.record.excluded if r.record is not None]  # type: ignore[union-attr]
    assert len(refused) == 8 and all("retry budget of a-key2's upstream" in e.reason for e in refused)


async def test_a_hedge_into_another_upstream_is_its_first_attempt_there() -> None:
    """A hedge to another region or provider does not multiply the load on either: it is the
    other upstream's first attempt for this request (it deposits), not a retry."""
    a = FakeProvider("a", "openai", Script.always(Reply.ok("a", latency=1.0)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b", latency=0.1)))
    router = make(a, b, budget=RetryBudget(ratio=0.0, floor=0, window=60))
    results = await asyncio.gather(
        *(router.complete("r", Request.simple(f"{i}"), Envelope(budget=10)) for i in range(10))
    )
    assert (len(a.calls), len(b.calls)) == (10, 10)
    assert all(r.text == "b" for r in results)
    # the envelope's attempt limit still counts the hedge
    one = await make(a, b).complete("r", Request.simple("x"), Envelope(budget=10, max_attempts=1))
    assert one.text == "a" and len(b.calls) == 10
    assert any(e.reason.startswith("no hedge: max_attempts 1 spent") for e in one.record.excluded)  # type: ignore[union-attr]
