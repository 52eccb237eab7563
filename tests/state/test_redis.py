"""The shared state on a real redis-server (and SQLite across processes), on real time.

Covers what only a real backend shows: separate connections (and separate OS processes)
racing for probes and buckets, round trips per request, Redis stopped and restarted under
load, and a frozen server (SIGSTOP) that accepts connections and never answers.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from failover import Envelope, Limits, Request, Route, Router
from failover.policy import Backoff, BreakerBoard, BreakerConfig, LimiterBoard, RetryBudget
from failover.state import BreakerOutcome, BreakerParams, GuardedStore, RedisStore, SQLiteStore, StateStore
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from tests._services import RedisServer
from tests.router._kit import target

from .test_policies import limited

CFG = BreakerConfig(window_size=4, min_calls=4, open_duration=0.5, half_open_probes=2)


def prefix() -> str:
    return f"r{uuid.uuid4().hex[:10]}:"


def redis_router(
    url: str, pfx: str, primary: list[Any], fallbacks: list[Any], providers: list[FakeProvider], **kw: Any
) -> Router:
    timeout = kw.pop("timeout", 0.5)
    store = GuardedStore(RedisStore(url, prefix=pfx, timeout=timeout), timeout=timeout, **kw)
    return Router(
        [Route(name="r", primary=tuple(primary), fallbacks=tuple(fallbacks))],
        transport=FakeNetwork(*providers),
        retry_budget=RetryBudget(ratio=1.0, floor=1000, store=store),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=BreakerBoard(CFG, store=store),
        limiters=LimiterBoard(store=store),
    )


def shared_store(router: Router) -> Any:
    assert isinstance(router.breakers, BreakerBoard) and router.breakers.store is not None
    return router.breakers.store


async def settle(*routers: Router) -> None:
    for r in routers:
        assert (
            isinstance(r.breakers, BreakerBoard) and r.limiters is not None and isinstance(r.retry_budget, RetryBudget)
        )
        await r.breakers.drain()
        await r.limiters.drain()
        await r.retry_budget.drain()


async def test_breaker_state_and_probes_are_shared_through_redis(redis_server: RedisServer) -> None:
    pfx = prefix()
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b", latency=0.05)))
    fleet = [redis_router(redis_server.url, pfx, [target(a, key="m")], [target(b)], [a, b]) for _ in range(3)]
    try:
        for _ in range(4):
            await fleet[0].complete("r", Request.simple("x"), Envelope(budget=5))
            await settle(fleet[0])
        resp = await fleet[1].complete("r", Request.simple("x"), Envelope(budget=5))
        assert resp.text == "b" and len(a.calls) == 4
        assert resp.record is not None and "circuit open" in resp.record.excluded[0].reason
        await asyncio.sleep(0.6)
        a.load(Script.always(Reply.ok("probe ok", latency=0.3)))
        results = await asyncio.gather(
            *(fleet[i % 3].complete("r", Request.simple(f"q{i}"), Envelope(budget=5)) for i in range(45))
        )
        assert sum(x.text == "probe ok" for x in results) == 2
        assert len(a.calls) == 6
    finally:
        for r in fleet:
            await r.aclose()


async def test_round_trips_per_request_are_a_small_constant(redis_server: RedisServer) -> None:
    pfx = prefix()
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok")))
    # a slow reply on a busy CI machine must not send the store local: the count is the point
    limits = Limits(rpm=10_000, input_tpm=1_000_000)
    router = redis_router(redis_server.url, pfx, [limited(p, limits)], [], [p], timeout=2.0)
    client = aioredis.Redis.from_url(redis_server.url)
    store = shared_store(router)
    try:
        await router.complete("r", Request.simple("warm-up"), Envelope(budget=5))
        await settle(router)
        before_trips = store.round_trips
        before = (await client.info("commandstats")).get("cmdstat_evalsha", {}).get("calls", 0)
        n = 20
        for i in range(n):
            await router.complete("r", Request.simple(f"q{i}"), Envelope(budget=5))
            await settle(router)
        trips = store.round_trips - before_trips
        evals = (await client.info("commandstats"))["cmdstat_evalsha"]["calls"] - before
        # per request: budget, breaker admission, bucket reservation, then one pipeline with the
        # breaker outcome and the bucket settle
        assert trips <= 4 * n, trips
        assert evals <= 5 * n, evals
        assert trips >= 3 * n  # the shared path was really taken
    finally:
        await client.aclose()
        await router.aclose()


async def test_every_redis_key_has_a_ttl_after_requests(redis_server: RedisServer) -> None:
    pfx = prefix()
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok")))
    router = redis_router(redis_server.url, pfx, [limited(p, Limits(rpm=100, concurrency=4))], [], [p])
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        for i in range(3):
            await router.complete("r", Request.simple(f"q{i}"), Envelope(budget=5))
        await settle(router)
        keys = [k async for k in client.scan_iter(match=f"{pfx}*")]
        assert len(keys) == 4  # target breaker, key breaker, bucket, retry budget
        ttls = [await client.pttl(k) for k in keys]
        assert all(t > 0 for t in ttls), ttls
    finally:
        await client.aclose()
        await router.aclose()


async def test_redis_stopped_mid_run_falls_back_then_recovers(
    live_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="failover.state")
    pfx = prefix()
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok")))
    t = limited(p, Limits(rpm=40))  # 36 a minute for the fleet, 9 for one process alone
    router = redis_router(
        live_redis.url, pfx, [t], [], [p], local_share=0.25, retry_after=0.2, max_retry_after=0.4, timeout=0.5
    )
    store = shared_store(router)
    try:
        ok = [await router.complete("r", Request.simple(f"a{i}"), Envelope(budget=1)) for i in range(5)]
        assert all(x.text == "ok" for x in ok) and store.up
        live_redis.stop()
        results = await asyncio.gather(
            *(router.complete("r", Request.simple(f"b{i}"), Envelope(budget=0.5)) for i in range(30)),
            return_exceptions=True,
        )
        assert not store.up
        assert sum(not isinstance(x, BaseException) for x in results) == 9  # local share, fail open
        live_redis.start()
        await asyncio.sleep(0.5)
        await router.complete("r", Request.simple("c"), Envelope(budget=1))  # a miss: fresh server, fresh bucket
        assert store.up
        results = await asyncio.gather(
            *(router.complete("r", Request.simple(f"d{i}"), Envelope(budget=0.5)) for i in range(50)),
            return_exceptions=True,
        )
        assert sum(not isinstance(x, BaseException) for x in results) == 35  # 36 minus "c"
        lines = [r.getMessage() for r in caplog.records if r.name == "failover.state"]
        assert len(lines) == 2, lines
        assert all(live_redis.url not in line for line in lines)
    finally:
        await router.aclose()


async def test_a_restart_under_load_switches_down_once_and_up_once(live_redis: RedisServer) -> None:
    """One outage is one switch each way, under load.

    The 16 calls in flight when Redis goes all fail: that is one event, which must not double
    the probe back-off 16 times (to its 10 s cap); and after the restart the stale pooled
    connections must not each fail once more (tests/fleet checks that across processes).
    """
    pfx = prefix()
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.01)))
    # probe back-off 0.5 s, at most 10 s. A stale connection fails at once (ConnectionError), which
    # is what this test is about; the 2 s call timeout keeps a busy CI machine's slow first reply
    # after the restart (a TimeoutError at 0.5 s) from counting as a flap.
    router = redis_router(live_redis.url, pfx, [target(p)], [], [p], timeout=2.0)
    store = shared_store(router)

    async def load(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:  # 16 at once: the pool holds many connections
            await asyncio.gather(*(router.complete("r", Request.simple("x"), Envelope(budget=2)) for _ in range(16)))

    try:
        await load(0.5)
        assert store.up and store.transitions == 0
        live_redis.stop()
        await load(0.5)
        assert not store.up and store.transitions == 1
        live_redis.start()
        await load(2.0)
        await settle(router)
        assert store.up
        assert store.transitions == 2, f"{store.transitions} switches: the stale connections flapped"
    finally:
        await router.aclose()


async def test_a_frozen_redis_costs_one_timeout_not_a_hang(live_redis: RedisServer) -> None:
    pfx = prefix()
    a = FakeProvider("a", "openai", Script.always(Reply.ok("ok")))
    router = redis_router(live_redis.url, pfx, [target(a)], [], [a], timeout=0.05, retry_after=5.0)
    store = shared_store(router)
    try:
        await router.complete("r", Request.simple("warm"), Envelope(budget=1))
        live_redis.freeze()
        t0 = time.monotonic()
        resp = await router.complete("r", Request.simple("x"), Envelope(budget=5))
        first = time.monotonic() - t0
        t0 = time.monotonic()
        for i in range(10):
            await router.complete("r", Request.simple(f"y{i}"), Envelope(budget=5))
        rest = time.monotonic() - t0
        assert resp.text == "ok" and not store.up
        assert first < 0.5, first  # one 50 ms timeout (a few at most), not the OS's
        assert rest < 0.5, rest  # while down, no call waits on the frozen server
    finally:
        live_redis.resume()
        await router.aclose()


def _race(kind: str, where: str, pfx: str, n: int, out: Any) -> None:
    async def main() -> int:
        store: StateStore = (
            RedisStore(where, prefix=pfx, timeout=5.0) if kind == "redis" else SQLiteStore(where, prefix=pfx)
        )
        granted = 0
        for _ in range(n):
            r = await store.reserve("q", {"rpm": 1.0}, {"rpm": 10.0}, window=60.0, reservation_id=uuid.uuid4().hex)
            granted += r.granted
        a = await store.breaker_admit([("s", _PROBE_PARAMS)], uuid.uuid4().hex)
        await store.aclose()
        return granted * 1000 + int(a.granted)

    out.put(asyncio.run(main()))


_PROBE_PARAMS = BreakerParams(half_open_probes=2, open_duration=0.5)


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
def test_processes_racing_never_exceed_the_bucket_or_the_probes(
    kind: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    pfx = prefix()
    where = redis_server.url if kind == "redis" else str(tmp_path / "state.db")

    async def open_breaker_half() -> None:
        store: StateStore = (
            RedisStore(where, prefix=pfx, timeout=5.0) if kind == "redis" else SQLiteStore(where, prefix=pfx)
        )
        for _ in range(10):
            a = await store.breaker_admit([("s", _PROBE_PARAMS)], "x")
            await store.breaker_record(
                [BreakerOutcome(scope="s", params=_PROBE_PARAMS, epoch=a.epochs[0], probe=False, outcome="failure")],
                "x",
                0.0,
            )
        await store.aclose()

    asyncio.run(open_breaker_half())
    time.sleep(0.6)  # the open period ends: the processes race for the 2 probe slots
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(kind, where, pfx, 20, out)) for _ in range(4)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=10)
    assert sum(r // 1000 for r in results) == 10  # 4 processes x 20 tries, 10 a minute
    assert sum(r % 1000 for r in results) == 2  # half-open: 2 probes across the processes


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
async def test_a_slot_freed_by_one_request_is_free_for_the_next(
    kind: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Sequential requests on a concurrency-1 target never wait for their own predecessor's slot."""
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok")))
    backend: StateStore = (
        RedisStore(redis_server.url, prefix=prefix(), timeout=1.0)
        if kind == "redis"
        else SQLiteStore(tmp_path / "s.db", prefix=prefix())
    )
    store = GuardedStore(backend, timeout=1.0)
    router = Router(
        [Route(name="r", primary=(limited(p, Limits(concurrency=1)),))],
        transport=FakeNetwork(p),
        retry_budget=RetryBudget(store=store),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=BreakerBoard(CFG, store=store),
        limiters=LimiterBoard(store=store),
    )
    try:
        for i in range(20):
            resp = await router.complete("r", Request.simple(f"q{i}"), Envelope(budget=5))
            assert resp.record is not None
            assert resp.record.waits == (), resp.record.waits
        assert store.up
    finally:
        await router.aclose()
