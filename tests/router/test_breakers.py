"""Circuit breakers in the router: open breakers make candidates ineligible, with a reason."""

from __future__ import annotations

import asyncio

import pytest

from failover import Envelope, Request, Route, Router, Unavailable
from failover.policy import Backoff, BreakerBoard, BreakerConfig, BreakerEvent, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime

CFG = BreakerConfig(window_size=10, min_calls=4, failure_rate=0.5, open_duration=30.0, half_open_probes=2)


def make(primary: list[FakeProvider], fallbacks: list[FakeProvider], board: BreakerBoard) -> Router:
    route = Route(
        name="r",
        primary=tuple(target(p, key="m") for p in primary),
        fallbacks=tuple(target(p) for p in fallbacks),
    )
    return Router(
        [route],
        transport=FakeNetwork(*primary, *fallbacks),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=board,
    )


async def test_an_open_breaker_keeps_traffic_off_the_sick_provider_until_it_probes() -> None:
    events: list[BreakerEvent] = []
    board = BreakerBoard(CFG, hooks=[events.append])
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b")))
    r = make([a], [b], board)
    for _ in range(4):
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
    assert len(a.calls) == 4
    assert [(e.old.value, e.new.value) for e in events] == [("closed", "open")]
    resp = await r.complete("r", Request.simple("x"), Envelope(budget=10))
    assert len(a.calls) == 4  # a was not called
    assert resp.record is not None
    (ex,) = resp.record.excluded
    assert ex.target == "a" and ex.reason.startswith("circuit open for 30.0s more (4/4 failed)")

    await asyncio.sleep(30.0)
    a.load(Script.always(Reply.ok("a is back")))
    resp = await r.complete("r", Request.simple("x"), Envelope(budget=10))
    assert resp.text == "a is back"
    resp = await r.complete("r", Request.simple("x"), Envelope(budget=10))
    assert [e.new.value for e in events] == ["open", "half_open", "closed"]


async def test_at_the_end_of_the_open_period_exactly_n_probes_reach_the_provider() -> None:
    board = BreakerBoard(CFG)
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b", latency=0.1)))
    r = make([a], [b], board)
    for _ in range(4):
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
    await asyncio.sleep(30.0)
    a.load(Script.always(Reply.ok("probe ok", latency=0.5)))
    before = len(a.calls)
    results = await asyncio.gather(*(r.complete("r", Request.simple(f"q{i}"), Envelope(budget=10)) for i in range(100)))
    assert len(a.calls) - before == 2  # half_open_probes
    assert sum(x.text == "probe ok" for x in results) == 2
    assert sum(x.text == "b" for x in results) == 98
    reasons = {e.reason for x in results if x.record for e in x.record.excluded}
    assert reasons == {"half-open: 2 probes already in flight"}


async def test_a_429_on_one_key_does_not_open_another_keys_breaker() -> None:
    board = BreakerBoard(CFG)
    k1 = FakeProvider("k1", "openai", Script.always(Reply.rate_limit(latency=0.01)))
    k2 = FakeProvider("k2", "openai", Script.always(Reply.ok("k2")))
    # same model, two credentials (two pools of the same contract)
    r = make([k1, k2], [], board)
    for _ in range(6):
        resp = await r.complete("r", Request.simple("x"), Envelope(budget=10))
        assert resp.text == "k2"
    assert len(k1.calls) == 4  # then k1's key+model breaker opened
    assert "key+model circuit open" in resp.record.excluded[0].reason  # type: ignore[union-attr]
    assert len(k2.calls) == 6


async def test_the_callers_mistakes_never_open_a_breaker() -> None:
    board = BreakerBoard(CFG)
    a = FakeProvider("a", "openai", Script.always(Reply.invalid()))
    r = make([a], [], board)
    for _ in range(10):
        with pytest.raises(Unavailable):
            await r.complete("r", Request.simple("x"), Envelope(budget=10))
    assert len(a.calls) == 10
    assert all(s.state.value == "closed" for s in board.snapshots(asyncio.get_running_loop().time()))


async def test_overload_with_partial_service_is_left_to_the_budget_but_a_dead_provider_trips() -> None:
    loop = asyncio.get_running_loop()
    board = BreakerBoard(CFG, overload_grace=10.0)
    # serving some requests, shedding the rest with 529: over capacity, not down
    a = FakeProvider("a", "anthropic", Script.of(*([Reply.overloaded(), Reply.ok("a")] * 20)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b")))
    r = make([a], [b], board)
    for _ in range(20):
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
        await asyncio.sleep(1.0)
    assert all(s.state.value == "closed" for s in board.snapshots(loop.time()))

    # only 529s: a provider that serves nothing is down, whatever the grace: min_calls (4)
    # counted failures open it, and no more calls reach it while it is open
    dead = FakeProvider("d", "anthropic", Script.always(Reply.overloaded()))
    r2 = make([dead], [b], BreakerBoard(CFG, overload_grace=10.0))
    for _ in range(20):
        await r2.complete("r", Request.simple("x"), Envelope(budget=10))
        await asyncio.sleep(1.0)
    assert len(dead.calls) == 4


async def test_a_provider_that_stops_serving_trips_once_its_successes_leave_the_grace_window() -> None:
    loop = asyncio.get_running_loop()
    board = BreakerBoard(CFG, overload_grace=5.0)
    # served twice, then nothing but 529s: graced while those successes are recent, then counted
    a = FakeProvider("a", "anthropic", Script.of(Reply.ok("a"), Reply.ok("a"), default=Reply.overloaded()))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b")))
    r = make([a], [b], board)
    for _ in range(20):
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
        await asyncio.sleep(1.0)
    # t=0,1 ok; t=2..5 graced (a success is in the last 5 s, and >= 5% of the answers); from
    # t=6 the grace window holds only 529s: counted, and with the two successes the breaker's
    # window holds 2 of 4 failed at t=7 (min_calls 4, failure_rate 50%): it opens
    assert len(a.calls) == 8
    assert next(s.state.value for s in board.snapshots(loop.time()) if s.layer == "target") == "open"


async def test_too_small_a_share_of_successes_is_no_grace() -> None:
    board = BreakerBoard(CFG, overload_grace=30.0, overload_min_success=0.25)
    # one success in five answers: 20% < 25%, so the overloads count and the breaker opens
    replies = [Reply.ok("a"), *[Reply.overloaded()] * 4] * 4
    a = FakeProvider("a", "anthropic", Script.of(*replies))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b")))
    r = make([a], [b], board)
    for _ in range(20):
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
        await asyncio.sleep(0.5)
    assert len(a.calls) < 20  # the breaker opened: not every request reached A
    with pytest.raises(ValueError, match="overload_min_success"):
        BreakerBoard(CFG, overload_min_success=0.0)
    with pytest.raises(ValueError, match="overload_grace"):
        BreakerBoard(CFG, overload_grace=-1.0)
