"""max_cost holds over every attempt: a repair at its raised max_tokens, a request with no
max_tokens at the most the target may write, a hedge beside the lead still in flight, and a
cancelled loser at what it may have cost."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from failover import Envelope, Message, Price, Request, Route, Router, Target, Unavailable
from failover.model import RouteRecord
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime

# $1 per 1,000 output tokens, input free: an attempt's cost is its output alone
DEAR = Price(input_per_mtok=0.0, output_per_mtok=1_000.0)
CHEAP = Price(input_per_mtok=0.0, output_per_mtok=10.0)


def priced(p: FakeProvider, price: Price = DEAR, *, max_out: int = 4_096, **kw: object) -> Target:
    return replace(target(p, price=price, **kw), max_output_tokens=max_out)  # type: ignore[arg-type]


def make(
    primary: tuple[Target, ...], *providers: FakeProvider, fallbacks: tuple[Target, ...] = (), **route: object
) -> Router:
    return Router(
        [Route(name="r", primary=primary, fallbacks=fallbacks, **route)],  # type: ignore[arg-type]
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
    )


def within(record: RouteRecord | None, cap: float) -> RouteRecord:
    assert record is not None
    assert record.total_cost == pytest.approx(sum(a.cost for a in record.attempts))
    assert record.total_cost <= cap + 1e-9
    return record


# -- a repair is estimated at the max_tokens it sends -----------------------------------------


async def test_a_repair_is_estimated_at_its_doubled_max_tokens() -> None:
    # $1.00 truncated at 1,000 tokens; the repair asks for 2,000 ($2.00), over the $2.50 cap:
    # the cheap fallback answers instead (estimated at the old 1,000 it went out and cost $1.90)
    a = FakeProvider(
        "a", "openai", Script.of(Reply.truncate("x", usage=(10, 1_000)), default=Reply.ok("a", usage=(10, 1_900)))
    )
    b = FakeProvider("b", "openai", Script.always(Reply.ok("from b", usage=(10, 500))))
    r = make((priced(a),), a, b, fallbacks=(priced(b, CHEAP),))
    req = Request(messages=(Message.user("story"),), max_tokens=1_000)
    resp = await r.complete("r", req, Envelope(budget=10, max_cost=2.5))
    assert resp.text == "from b"
    assert len(a.calls) == 1 and len(b.calls) == 1
    rec = within(resp.record, 2.5)
    assert rec.total_cost == pytest.approx(1.0 + 0.005)
    assert any("estimated cost $2.00" in e.reason and "max_cost" in e.reason for e in rec.excluded)


async def test_a_repair_within_the_cap_is_still_made() -> None:
    a = FakeProvider(
        "a", "openai", Script.of(Reply.truncate("x", usage=(10, 1_000)), default=Reply.ok("whole", usage=(10, 1_900)))
    )
    r = make((priced(a),), a)
    req = Request(messages=(Message.user("story"),), max_tokens=1_000)
    resp = await r.complete("r", req, Envelope(budget=10, max_cost=3.0))
    assert resp.text == "whole" and len(a.calls) == 2
    assert [c.json.get("max_tokens") for c in a.calls if c.json is not None] == [1_000, 2_000]
    assert within(resp.record, 3.0).total_cost == pytest.approx(2.9)


# -- no max_tokens: the most the target may write ---------------------------------------------


async def test_a_request_without_max_tokens_is_estimated_at_the_targets_max_output() -> None:
    # 4,096 tokens may come back ($4.10): over $0.50, nothing is sent (at zero it went out, $3.00)
    a = FakeProvider("a", "openai", Script.always(Reply.ok("long", usage=(10, 3_000))))
    with pytest.raises(Unavailable) as ei:
        await make((priced(a),), a).complete("r", Request.simple("essay"), Envelope(budget=10, max_cost=0.5))
    assert len(a.calls) == 0
    rec = within(ei.value.record, 0.5)
    assert rec.total_cost == 0 and "estimated cost $4.10" in ei.value.message


@pytest.mark.parametrize(
    ("max_out", "window", "allowed"),
    [(400, 128_000, True), (4_096, 128_000, False), (4_096, 450, True)],
    ids=["small-max-output", "default-max-output", "window-bounds-it"],
)
async def test_without_max_tokens_the_bound_is_the_max_output_or_the_window_room(
    max_out: int, window: int, allowed: bool
) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("fits", usage=(10, 300))))
    t = priced(a, max_out=max_out, window=window)
    r = make((t,), a)
    if allowed:
        resp = await r.complete("r", Request.simple("essay"), Envelope(budget=10, max_cost=0.5))
        assert resp.text == "fits" and len(a.calls) == 1
        within(resp.record, 0.5)
    else:
        with pytest.raises(Unavailable) as ei:
            await r.complete("r", Request.simple("essay"), Envelope(budget=10, max_cost=0.5))
        assert len(a.calls) == 0
        within(ei.value.record, 0.5)


# -- hedges: the lead in flight counts, a cancelled loser is booked at its estimate ---------------


def hedged(a: FakeProvider, b: FakeProvider) -> Router:
    return make((priced(a, key="m", cap=5.0), priced(b, key="m", cap=5.0)), a, b, hedge_after=0.5)


async def test_a_hedge_is_not_started_when_the_lead_in_flight_leaves_no_room() -> None:
    # lead and hedge may each cost $1.00: the two do not fit $1.50, so the lead runs alone
    a = FakeProvider("a", "openai", Script.always(Reply.ok("slow a", latency=3.0, usage=(10, 1_000))))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("fast b", latency=0.2, usage=(10, 1_000))))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    req = Request(messages=(Message.user("hi"),), max_tokens=1_000)
    resp = await hedged(a, b).complete("r", req, Envelope(budget=10, max_cost=1.5))
    assert resp.text == "slow a" and loop.time() - t0 == pytest.approx(3.0)
    assert len(a.calls) == 1 and len(b.calls) == 0
    rec = within(resp.record, 1.5)
    assert rec.total_cost == pytest.approx(1.0)
    assert any(e.target == "b" and "max_cost" in e.reason for e in rec.excluded)


async def test_a_cancelled_loser_is_booked_at_what_it_may_have_cost() -> None:
    # room for both ($2.50): the hedge wins; the lead, cut after generating for 0.7 s of a
    # non-streamed answer the provider may finish and bill, is booked at its $1.00 estimate
    a = FakeProvider("a", "openai", Script.always(Reply.ok("slow a", latency=3.0, usage=(10, 1_000))))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("fast b", latency=0.2, usage=(10, 800))))
    req = Request(messages=(Message.user("hi"),), max_tokens=1_000)
    resp = await hedged(a, b).complete("r", req, Envelope(budget=10, max_cost=2.5))
    assert resp.text == "fast b"
    assert len(a.calls) == 1 and len(b.calls) == 1 and a.calls[0].outcome is Outcome.CLIENT_DISCONNECTED
    rec = within(resp.record, 2.5)
    by = {x.target: x for x in rec.attempts}
    assert by["a"].outcome == "cancelled" and by["a"].cost_estimated and by["a"].cost == pytest.approx(1.0)
    assert by["b"].cost == pytest.approx(0.8) and rec.total_cost == pytest.approx(1.8)
