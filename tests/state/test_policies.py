"""The router's breakers, limiters and retry budget on a shared store, on virtual time.

Several Routers over one MemoryStore stand for the processes of a fleet (the store's clock is
the loop's, so looptime applies); tests/state/test_redis.py repeats the essentials against a
real Redis. A store that can be switched off stands for an unreachable backend.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import pytest

from failover import Envelope, FailureKind, Limits, Request, Route, Router, Unavailable
from failover.policy import (
    Backoff,
    BreakerBoard,
    BreakerConfig,
    BreakerEvent,
    BreakerState,
    LimiterBoard,
    RetryBudget,
    Unlimited,
)
from failover.state import GuardedStore, MemoryStore, StateUnavailable, backend_health
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from tests.router._kit import target

pytestmark = pytest.mark.looptime

CFG = BreakerConfig(window_size=10, min_calls=4, failure_rate=0.5, open_duration=30.0, half_open_probes=2)


class Switchable(MemoryStore):
    """A MemoryStore whose every call fails with ConnectionError while ``down``."""

    down = False

    async def _apply(self, *args: Any) -> Any:
        if self.down:
            raise ConnectionError("backend unreachable")
        return await super()._apply(*args)


def limited(p: FakeProvider, limits: Limits) -> Any:
    t = target(p, cap=5.0)
    return type(t)(**{**{f: getattr(t, f) for f in t.__dataclass_fields__}, "limits": limits})


def fleet_router(
    store: GuardedStore, primary: list[Any], fallbacks: list[Any], providers: list[FakeProvider]
) -> Router:
    return Router(
        [Route(name="r", primary=tuple(primary), fallbacks=tuple(fallbacks))],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=BreakerBoard(CFG, store=store),
        limiters=LimiterBoard(store=store),
    )


async def drain(*routers: Router) -> None:
    for r in routers:
        assert isinstance(r.breakers, BreakerBoard)
        await r.breakers.drain()
        assert r.limiters is not None
        await r.limiters.drain()


async def test_a_breaker_opened_by_one_process_is_open_for_the_others() -> None:
    store = GuardedStore(MemoryStore())
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b")))
    one, two = (fleet_router(store, [target(a, key="m")], [target(b)], [a, b]) for _ in range(2))
    for _ in range(4):
        await one.complete("r", Request.simple("x"), Envelope(budget=10))
        await drain(one)
    assert len(a.calls) == 4
    resp = await two.complete("r", Request.simple("x"), Envelope(budget=10))
    assert resp.text == "b" and len(a.calls) == 4  # the second process never called a
    assert resp.record is not None
    assert resp.record.excluded[0].reason.startswith("circuit open for 30.0s more (4/4 failed)")


async def test_another_process_turned_away_by_the_shared_breaker_learns_why_and_when() -> None:
    """The kind that opened it travels through the store; retry_after_ms is the rest of the period."""
    store = GuardedStore(MemoryStore())
    a = FakeProvider("a", "openai", Script.always(Reply.unauthorized()))
    one, two = (fleet_router(store, [target(a, key="m")], [], [a]) for _ in range(2))
    for _ in range(4):
        with pytest.raises(Unavailable):
            await one.complete("r", Request.simple("x"), Envelope(budget=10))
        await drain(one)
    await asyncio.sleep(12.0)
    with pytest.raises(Unavailable) as ei:  # two never saw a fail: only the store knows
        await two.complete("r", Request.simple("x"), Envelope(budget=10))
    exc = ei.value
    assert len(a.calls) == 4
    assert exc.reason is FailureKind.AUTHENTICATION_OR_PERMISSION and exc.retryable, exc
    assert exc.retry_after_ms == 18_000


async def test_shared_breaker_reads_make_nothing_and_show_an_elapsed_period_as_half_open() -> None:
    store = GuardedStore(MemoryStore())
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    ta = target(a, key="m")
    one = fleet_router(store, [ta], [], [a])
    assert isinstance(one.breakers, BreakerBoard)
    events: list[BreakerEvent] = []
    one.breakers.hooks.append(events.append)
    for _ in range(4):
        with pytest.raises(Unavailable):
            await one.complete("r", Request.simple("x"), Envelope(budget=10))
        await drain(one)
    assert [(e.layer, e.new) for e in events] == [("target", BreakerState.OPEN)]
    loop = asyncio.get_running_loop()
    other = BreakerBoard(CFG, store=store)  # a process that never admitted ta
    assert other.rejection(ta, loop.time()) is None and other.hold(ta, loop.time()) is None
    assert not other._target and not other._key  # a read made no breaker
    await asyncio.sleep(30.0)
    now = loop.time()
    (snap,) = (s for s in one.breakers.snapshots(now) if s.layer == "target")
    assert snap.state is BreakerState.HALF_OPEN and snap.retry_at is None  # the store moves it at admission
    assert one.breakers.rejection(ta, now) is None and one.breakers.hold(ta, now) is None
    assert len(events) == 1  # reads fired nothing


async def test_a_process_reads_the_views_it_saw_until_the_shared_breaker_closes_again() -> None:
    store = GuardedStore(MemoryStore())
    a = FakeProvider("a", "openai", Script.of(*[Reply.server_error()] * 4, default=Reply.ok("a")))
    ta = target(a, key="m")
    one = fleet_router(store, [ta], [], [a])
    assert isinstance(one.breakers, BreakerBoard)
    loop = asyncio.get_running_loop()
    assert one.breakers.rejection(ta, loop.time()) is None  # nothing seen yet
    for _ in range(4):
        with pytest.raises(Unavailable):
            await one.complete("r", Request.simple("x"), Envelope(budget=10))
        await drain(one)
    reason = one.breakers.rejection(ta, loop.time())
    assert reason is not None and reason.startswith("circuit open for 30.0s more (4/4 failed)")
    assert one.breakers.hold(ta, loop.time()) is not None
    await asyncio.sleep(30.0)
    for _ in range(2):  # two probes succeed: closed
        assert (await one.complete("r", Request.simple("x"), Envelope(budget=10))).text == "a"
        await drain(one)
    now = loop.time()
    assert one.breakers.rejection(ta, now) is None and one.breakers.hold(ta, now) is None
    assert {s.state for s in one.breakers.snapshots(now)} == {BreakerState.CLOSED}


async def test_half_open_probes_are_limited_across_the_fleet() -> None:
    store = GuardedStore(MemoryStore())
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b", latency=0.1)))
    fleet = [fleet_router(store, [target(a, key="m")], [target(b)], [a, b]) for _ in range(3)]
    for _ in range(4):
        await fleet[0].complete("r", Request.simple("x"), Envelope(budget=10))
        await drain(fleet[0])
    await asyncio.sleep(30.0)
    a.load(Script.always(Reply.ok("probe ok", latency=0.5)))
    before = len(a.calls)
    results = await asyncio.gather(
        *(fleet[i % 3].complete("r", Request.simple(f"q{i}"), Envelope(budget=10)) for i in range(90))
    )
    assert len(a.calls) - before == 2
    assert sum(x.text == "probe ok" for x in results) == 2


async def test_a_fleet_shares_one_rate_limit() -> None:
    store = GuardedStore(MemoryStore())
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.05)))
    t = limited(p, Limits(rpm=20))  # 18 a minute with the 0.9 safety factor
    fleet = [fleet_router(store, [t], [], [p]) for _ in range(3)]
    results = await asyncio.gather(
        *(fleet[i % 3].complete("r", Request.simple(f"q{i}"), Envelope(budget=5)) for i in range(60)),
        return_exceptions=True,
    )
    assert len(p.calls) == 18
    assert sum(not isinstance(x, BaseException) for x in results) == 18
    await drain(*fleet)


async def test_limiter_snapshots_show_the_fleets_buckets_and_say_so() -> None:
    """/admin/health reads shared_snapshot: the fleet's levels, not this process's fallback share."""
    store = GuardedStore(Switchable(), local_share=0.25)
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.05)))
    t = limited(p, Limits(rpm=20, concurrency=4))  # 18 a minute with the 0.9 safety factor
    one, two = (fleet_router(store, [t], [], [p]) for _ in range(2))
    for i in range(6):
        await one.complete("r", Request.simple(f"q{i}"), Envelope(budget=5))
    await drain(one)
    assert one.limiters is not None and two.limiters is not None
    two.limiters.limiter_for(t)  # the other process has not served yet: its limiter is new
    (snap,) = (await two.limiters.shared_snapshot()).values()
    assert snap.view == "shared"
    (rpm,) = [b for b in snap.buckets if b.dimension == "rpm"]
    assert rpm.capacity == 18 and rpm.level == 12  # 6 taken fleet-wide, seen from the other process
    assert snap.concurrency == 4 and snap.in_flight == 0
    (local,) = two.limiters.snapshot().values()
    assert local.view == "fallback" and [b.capacity for b in local.buckets if b.dimension == "rpm"] == [4.5]
    store.store.down = True  # type: ignore[attr-defined]
    with pytest.raises(StateUnavailable):  # the guard marks it down
        await store.call(store.store.bucket_view, "x", {})
    (snap,) = (await two.limiters.shared_snapshot()).values()
    assert snap.view == "fallback"  # the store is away: what this process enforces now


async def test_shared_concurrency_slots_are_leases() -> None:
    store = GuardedStore(MemoryStore())
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=1.0)))
    t = limited(p, Limits(concurrency=2))
    fleet = [fleet_router(store, [t], [], [p]) for _ in range(2)]
    results = await asyncio.gather(
        *(fleet[i % 2].complete("r", Request.simple(f"q{i}"), Envelope(budget=10)) for i in range(6))
    )
    assert all(x.text == "ok" for x in results)
    starts = sorted(c.time for c in p.calls)
    assert starts[2] - starts[0] >= 1.0  # never more than 2 in flight
    # a "crashed" process holds both slots; they come back after the lease
    limiter = LimiterBoard(store=store, lease=5.0).limiter_for(t)
    assert limiter is not None
    for _ in range(2):
        await limiter.acquire(input_tokens=1, max_output_tokens=1, deadline_at=1e9)
    t0 = asyncio.get_running_loop().time()
    resp = await fleet[0].complete("r", Request.simple("after"), Envelope(budget=30))
    assert resp.text == "ok"
    assert 5.0 <= asyncio.get_running_loop().time() - t0 <= 7.5


async def test_the_retry_budget_is_shared() -> None:
    store = GuardedStore(MemoryStore())
    one, two = (RetryBudget(ratio=0.5, floor=0, window=10.0, store=store) for _ in range(2))
    for _ in range(10):
        one.record_request(0.0)
    await one.drain()
    two.record_request(0.0)  # two learns the fleet-wide budget with its first write
    await two.drain()
    granted = sum(two.try_withdraw(0.0) for _ in range(20))
    assert granted == 5  # 11 requests fleet-wide x 0.5, although two made one request itself
    await two.drain()


async def test_an_unreachable_store_falls_back_to_the_local_share_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="failover.state")
    backend = Switchable()
    store = GuardedStore(backend, local_share=0.25, retry_after=1.0)
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.01)))
    t = limited(p, Limits(rpm=40))  # 36 fleet-wide; 9 for one process on its own
    router = fleet_router(store, [t], [], [p])

    backend.down = True
    results = await asyncio.gather(
        *(router.complete("r", Request.simple(f"q{i}"), Envelope(budget=2)) for i in range(30)),
        return_exceptions=True,
    )
    assert sum(not isinstance(x, BaseException) for x in results) == 9  # fail open, at the local share
    assert not store.up
    assert [h.up for h in backend_health() if h.backend == "memory"] == [False]

    backend.down = False
    await asyncio.sleep(61.0)  # the local window passes; the back-off too
    results = await asyncio.gather(
        *(router.complete("r", Request.simple(f"r{i}"), Envelope(budget=2)) for i in range(60)),
        return_exceptions=True,
    )
    assert store.health().up
    assert sum(not isinstance(x, BaseException) for x in results) == 36  # the shared bucket again
    switches = [r.getMessage() for r in caplog.records if r.name == "failover.state"]
    assert len(switches) == 2, switches  # once down, once up: not once per request
    assert "unreachable" in switches[0] and "reachable again" in switches[1]
    await drain(router)


async def test_breakers_fail_open_while_the_store_is_down() -> None:
    backend = Switchable()
    store = GuardedStore(backend)
    a = FakeProvider("a", "openai", Script.always(Reply.ok("a")))
    router = fleet_router(store, [target(a)], [], [a])
    backend.down = True
    resp = await router.complete("r", Request.simple("x"), Envelope(budget=5))
    assert resp.text == "a"
    assert store.fallbacks >= 1


async def test_retry_budgets_are_per_upstream_and_fleet_wide() -> None:
    """Two processes share each upstream's budget; A's spent budget never refuses B's pool."""
    store = GuardedStore(MemoryStore())
    one, two = (RetryBudget(ratio=0.0, floor=2, window=10.0, store=store) for _ in range(2))
    a, b = "http://a.fake/v1|m-a", "http://b.fake/v1|m-b"
    one.record_request(0.0, a)
    two.record_request(0.0, b)
    await one.drain()
    await two.drain()
    assert [one.try_withdraw(0.0, a) for _ in range(3)] == [True, True, False]  # A's floor, fleet-wide
    await one.drain()
    two.record_request(0.0, a)  # two learns A's pool from the store: spent by one
    await two.drain()
    assert not two.try_withdraw(0.0, a)
    assert [two.try_withdraw(0.0, b) for _ in range(3)] == [True, True, False]  # B's own floor


class Laggy(MemoryStore):
    """Applies a budget request at once but answers it late: a spend sent after it is answered
    first, and the request's answer, older, arrives after it."""

    async def budget_request(self, name: str, *, ratio: float, floor: int, window: float) -> int:
        left = await super().budget_request(name, ratio=ratio, floor=floor, window=window)
        await asyncio.sleep(0.01)
        return left


async def test_a_late_answer_does_not_undo_the_spends_still_on_their_way() -> None:
    """The shared budget once let a late answer overwrite the local count, and overspent ~2.3x
    the allowed extra attempts under load; the spends sent after a write stay taken."""
    store = GuardedStore(Laggy())
    budget = RetryBudget(ratio=0.1, floor=0, window=60.0, store=store)
    pool = "http://a.fake/v1|m"
    for _ in range(100):  # 100 first attempts: 10 extra attempts allowed, fleet-wide
        budget.record_request(0.0, pool)
    await budget.drain()
    granted = 0
    for _ in range(40):  # a request arrives (its answer comes back late) and a retry is asked
        budget.record_request(0.0, pool)
        granted += budget.try_withdraw(0.0, pool)
        await asyncio.sleep(0.002)
    await budget.drain()
    # 140 requests x 0.1 = 14 allowed; an answer that overwrote the local count granted 23 here.
    # The count is conservative by the deposits still on their way: never over, at most one under.
    assert 13 <= granted <= 14
