"""The balancer's load board on a shared store: the fleet's requests in flight and quota shares.

Two boards on one store stand for two gateways. ``load_sync`` is checked on every backend (the
contract); the boards themselves against the real redis-server of tests/state/conftest.py,
on real time (the store's clock is the server's).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import pytest

from failover import Limits, Target
from failover.model import RateLimitInfo
from failover.policy import LimiterBoard, SharedLoadBoard
from failover.state import GuardedStore, RedisStore, StateStore
from failover.testing import FakeProvider, Reply, Script
from tests._services import RedisServer, free_port
from tests.router._kit import target


def _target(name: str, limits: Limits | None = None) -> Target:
    t = target(FakeProvider(name, "openai", Script.always(Reply.ok("x"))), key="m")
    return t if limits is None else replace(t, limits=limits)


A, B = _target("a"), _target("b")


# -- the store's step, on every backend --------------------------------------------------------


async def test_load_sync_sums_the_other_members_and_replaces_a_members_own_counts(store: StateStore) -> None:
    one = await store.load_sync("lb", "m1", {"a": 2, "b": 1}, {}, lease=30.0)
    assert one.in_flight == {}  # its own counts are not in what it is told
    two = await store.load_sync("lb", "m2", {"a": 1}, {"b": (0.25, 30.0)}, lease=30.0)
    assert two.in_flight == {"a": 2, "b": 1}
    assert two.shares["b"][0] == pytest.approx(0.25) and 29.0 < two.shares["b"][1] <= 30.0
    again = await store.load_sync("lb", "m1", {"a": 1}, {}, lease=30.0)  # replaces, not adds
    assert again.in_flight == {"a": 1} and again.shares["b"][0] == pytest.approx(0.25)
    gone = await store.load_sync("lb", "m2", {}, {}, lease=30.0)  # nothing in flight: it leaves
    assert gone.in_flight == {"a": 1}
    assert (await store.load_sync("lb", "m1", {}, {}, lease=30.0)).in_flight == {}


# -- boards on a real Redis --------------------------------------------------------------------


@pytest.fixture
async def redis_stores(redis_server: RedisServer) -> AsyncIterator[Callable[[], GuardedStore]]:
    prefix = f"lb{uuid.uuid4().hex[:10]}:"
    made: list[GuardedStore] = []

    def make() -> GuardedStore:
        g = GuardedStore(RedisStore(redis_server.url, prefix=prefix, timeout=2.0), timeout=2.0)
        made.append(g)
        return g

    yield make
    for g in made:
        await g.aclose()


async def test_two_boards_on_one_store_count_the_fleets_requests_in_flight(
    redis_stores: Callable[[], GuardedStore],
) -> None:
    one, two = SharedLoadBoard(redis_stores()), SharedLoadBoard(redis_stores())
    now = asyncio.get_running_loop().time()
    one.started(A, now)
    one.started(A, now)
    two.started(A, now)
    two.started(B, now)
    for board in (one, two, one):
        await board.sync()
    assert (one.outstanding(A), one.outstanding(B)) == (3, 1)
    assert (two.outstanding(A), two.outstanding(B)) == (3, 1)
    one.ended(A, now, 0.2, now + 0.2)  # its own end is seen by itself at once, by the other after a sync
    assert one.outstanding(A) == 2 and two.outstanding(A) == 3
    await one.sync()
    await two.sync()
    assert two.outstanding(A) == 2
    assert one.snapshot(now)["a"]["fleet_in_flight"] == 2
    await one.aclose()  # a clean exit leaves the count at once
    await two.sync()
    assert two.outstanding(A) == 1 and two.outstanding(B) == 1
    await two.aclose()


async def test_the_refresher_brings_the_fleet_in_without_a_call_on_the_request_path(
    redis_stores: Callable[[], GuardedStore],
) -> None:
    one = SharedLoadBoard(redis_stores(), interval=0.05)
    two = SharedLoadBoard(redis_stores(), interval=0.05)
    loop = asyncio.get_running_loop()
    for _ in range(4):
        one.started(A, loop.time())
    assert two.outstanding(A) == 0  # read from memory: starts the refresher, does not wait for it
    await asyncio.sleep(0.5)
    assert two.outstanding(A) == 4
    await one.aclose()
    await two.aclose()


async def test_a_dead_boards_lease_runs_out(redis_stores: Callable[[], GuardedStore]) -> None:
    dead = SharedLoadBoard(redis_stores(), interval=0.1, lease=0.6)
    alive = SharedLoadBoard(redis_stores(), interval=0.1, lease=0.6)
    now = asyncio.get_running_loop().time()
    dead.started(A, now)
    dead.started(A, now)
    await dead.sync()
    task = dead._task
    assert task is not None
    task.cancel()  # the process dies: no goodbye, no more renewals
    await asyncio.gather(task, return_exceptions=True)
    await alive.sync()
    assert alive.outstanding(A) == 2
    await asyncio.sleep(0.8)
    await alive.sync()
    assert alive.outstanding(A) == 0
    await alive.aclose()


async def test_a_share_one_gateway_was_told_is_the_fleets(redis_stores: Callable[[], GuardedStore]) -> None:
    one, two = SharedLoadBoard(redis_stores()), SharedLoadBoard(redis_stores())
    now = asyncio.get_running_loop().time()
    one.observe(A, RateLimitInfo(remaining_requests=20, limit_requests=100, reset_requests=30.0), now)
    assert two.share_left(A, now) is None
    await one.sync()
    await two.sync()
    assert two.share_left(A, asyncio.get_running_loop().time()) == pytest.approx(0.2)
    later = asyncio.get_running_loop().time()
    two.observe(A, RateLimitInfo(remaining_requests=50, limit_requests=100, reset_requests=30.0), later)
    assert two.share_left(A, later) == pytest.approx(0.5)  # its own, newer
    await two.sync()
    await one.sync()
    assert one.share_left(A, asyncio.get_running_loop().time()) == pytest.approx(0.5)
    await one.aclose()
    await two.aclose()


async def test_the_fleets_bucket_levels_reach_the_balancer(redis_stores: Callable[[], GuardedStore]) -> None:
    """Another gateway spent the deployment's minute: this one's limiter says wait, before
    it sends anything."""
    d = _target("d", Limits(rpm=10))
    s1, s2 = redis_stores(), redis_stores()
    lim1, lim2 = LimiterBoard(store=s1), LimiterBoard(store=s2)
    board2 = SharedLoadBoard(s2, limiters=lim2)
    limiter1, limiter2 = lim1.limiter_for(d), lim2.limiter_for(d)
    assert limiter1 is not None and limiter2 is not None
    loop = asyncio.get_running_loop()
    board2.outstanding(d)  # the balancer read it: the board refreshes its limiter from now on
    await board2.sync()
    assert limiter2.share_left(loop.time()) == pytest.approx(1.0)
    assert limiter2.wait_for(10, 10, loop.time()) == 0
    for _ in range(9):  # rpm 10 x safety 0.9
        res = await limiter1.acquire(input_tokens=10, max_output_tokens=10, deadline_at=loop.time() + 1)
        res.settle(10, 10)
    await lim1.drain()
    await board2.sync()
    assert limiter2.share_left(loop.time()) == pytest.approx(0.0)
    assert limiter2.wait_for(10, 10, loop.time()) > 0.5
    await board2.aclose()


async def test_with_the_store_away_the_board_is_the_local_one(redis_server: RedisServer) -> None:
    down = GuardedStore(RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.2), timeout=0.2)
    board = SharedLoadBoard(down)
    loop = asyncio.get_running_loop()
    board.started(A, loop.time())
    board.observe(A, RateLimitInfo(remaining_requests=1, limit_requests=4), loop.time())
    assert await board.sync() is None
    assert not down.up
    assert board.outstanding(A) == 1 and board.share_left(A, loop.time()) == pytest.approx(0.25)
    t0 = loop.time()
    for _ in range(1000):  # the request path never waits on the store
        board.outstanding(A)
        board.share_left(A, loop.time())
    assert loop.time() - t0 < 0.5
    await board.aclose()
    await down.aclose()


async def test_this_gateways_reservations_come_off_the_copy_before_the_store_answers(
    redis_stores: Callable[[], GuardedStore],
) -> None:
    d = _target("d", Limits(rpm=10))  # 9 a minute after the safety margin
    store = redis_stores()
    limiters = LimiterBoard(store=store)
    board = SharedLoadBoard(store, limiters=limiters)
    limiter = limiters.limiter_for(d)
    assert limiter is not None
    loop = asyncio.get_running_loop()
    await board.sync()
    assert limiter.share_left(loop.time()) == pytest.approx(1.0)
    burst = [
        asyncio.create_task(limiter.acquire(input_tokens=1, max_output_tokens=1, deadline_at=loop.time() + 0.5))
        for _ in range(5)
    ]
    await asyncio.sleep(0)  # each has sent its reservation; none is answered yet
    assert limiter.share_left(loop.time()) == pytest.approx(4 / 9)
    for res in await asyncio.gather(*burst):
        res.settle(1, 1)
    await limiters.drain()
    await board.sync()
    assert limiter.share_left(loop.time()) == pytest.approx(4 / 9)
    more = [
        asyncio.create_task(limiter.acquire(input_tokens=1, max_output_tokens=1, deadline_at=loop.time() + 0.3))
        for _ in range(5)
    ]
    await asyncio.sleep(0)
    assert limiter.wait_for(1, 1, loop.time()) > 0  # the copy is spent: the balancer looks elsewhere
    done = await asyncio.gather(*more, return_exceptions=True)
    assert sum(not isinstance(x, BaseException) for x in done) == 4  # one was refused: its take came back
    assert limiter.share_left(loop.time()) == pytest.approx(0.0)
    await board.aclose()
