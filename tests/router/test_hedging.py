"""Hedging: a second attempt after a delay; the first acceptable result wins."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from failover import Envelope, FailureKind, Request, Route, Router, Unavailable
from failover.policy import Backoff, NoBreakers, RetryBudget, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime


def make(
    a: FakeProvider, b: FakeProvider, *, hedge_after: float | None = 0.5, budget: object = None, attempts: int = 1
) -> Router:
    lead = target(a, key="m", cap=5.0, attempts=attempts)
    route = Route(name="r", primary=(lead, target(b, key="m", cap=5.0)), hedge_after=hedge_after)
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


async def test_the_leads_spent_envelope_does_not_cancel_the_hedge_that_answers() -> None:
    """max_attempts 2, a hedge after 0.1 s: the lead's 503 at 0.3 s spends the envelope for the
    lead only; the hedge already in flight answers at 0.6 s, and the record has both calls."""
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded(latency=0.3)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("hedge", latency=0.5)))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    router = make(a, b, hedge_after=0.1, attempts=3)  # the lead's target would replay
    resp = await router.complete("r", Request.simple("hi"), Envelope(budget=10, max_attempts=2))
    assert resp.text == "hedge"
    assert loop.time() - t0 == pytest.approx(0.6)
    assert (len(a.calls), len(b.calls)) == (1, 1)
    rec = resp.record
    assert rec is not None
    assert [(x.target, x.outcome, x.hedge) for x in rec.attempts] == [
        ("a", "provider_overloaded", False),
        ("b", "ok", True),
    ]
    assert rec.total_cost == pytest.approx(sum(x.cost for x in rec.attempts))


async def test_max_added_latency_spent_by_the_lead_leaves_the_hedge_its_answer() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded(latency=0.3)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("hedge", latency=0.5)))
    env = Envelope(budget=10, max_added_latency=0.2)
    resp = await make(a, b, hedge_after=0.1, attempts=3).complete("r", Request.simple("hi"), env)
    assert resp.text == "hedge" and (len(a.calls), len(b.calls)) == (1, 1)


async def test_when_both_lanes_fail_the_record_has_every_call() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded(latency=0.3)))
    b = FakeProvider("b", "openai", Script.always(Reply.server_error(latency=0.5)))
    with pytest.raises(Unavailable) as ei:
        await make(a, b, hedge_after=0.1, attempts=3).complete(
            "r", Request.simple("hi"), Envelope(budget=10, max_attempts=2)
        )
    rec = ei.value.record
    assert (len(a.calls), len(b.calls)) == (1, 1)
    assert [x.target for x in rec.attempts] == ["a", "b"]
    assert ei.value.reason is FailureKind.PROVIDER_SERVER_ERROR  # the latest failure's kind


async def test_hedging_keeps_the_last_attempt_for_the_fallback_as_without_it() -> None:
    """A primary that fails fast (max_attempts 3) and a fallback, with hedging on: the lead's
    replays keep the envelope's last attempt for the fallback (a, a, fallback), as the same
    route does without hedging; they once spent all three and the fallback was refused."""
    for hedge_after in (None, 0.5):
        a = FakeProvider("a", "openai", Script.always(Reply.overloaded(latency=0.05)))
        f = FakeProvider("f", "anthropic", Script.always(Reply.ok("fallback", latency=0.1)))
        route = Route(
            name="r",
            primary=(target(a, cap=5.0, attempts=3),),
            fallbacks=(target(f, cap=5.0),),
            hedge_after=hedge_after,
        )
        router = Router(
            [route],
            transport=FakeNetwork(a, f),
            retry_budget=Unlimited(),
            backoff=Backoff(base=0.0, cap=0.0),
            breakers=NoBreakers(),
        )
        resp = await router.complete("r", Request.simple("hi"), Envelope(budget=10, max_attempts=3))
        assert resp.text == "fallback", hedge_after
        assert resp.record is not None
        assert [x.target for x in resp.record.attempts] == ["a", "a", "f"], hedge_after


async def test_a_stop_of_the_whole_request_cancels_the_other_lane_and_records_it() -> None:
    """A failure whose disposition is stop (a refused request) ends the request while the hedge
    is in flight: the hedge is cancelled, and the error's record lists its cancelled attempt."""
    a = FakeProvider("a", "openai", Script.always(Reply.ok("slow a", latency=3.0)))
    b = FakeProvider("b", "openai", Script.always(Reply.invalid(latency=0.2)))
    c = FakeProvider("c", "openai", Script.always(Reply.ok("c")))
    route = Route(
        name="r",
        primary=(target(a, key="m", cap=5.0), target(b, key="m", cap=5.0), target(c, key="m", cap=5.0)),
        hedge_after=0.1,
    )
    router = Router(
        [route],
        transport=FakeNetwork(a, b, c),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=NoBreakers(),
    )
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", Request.simple("hi"), Envelope(budget=10))
    rec = ei.value.record
    assert (len(a.calls), len(b.calls), len(c.calls)) == (1, 1, 0)
    outcomes = {x.target: x.outcome for x in rec.attempts}
    assert outcomes["a"] == "cancelled" and outcomes["b"] != "ok"
    assert rec.total_cost == pytest.approx(sum(x.cost for x in rec.attempts)) and rec.total_cost > 0
