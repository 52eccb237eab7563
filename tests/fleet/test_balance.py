"""Three gateways balance one model's three deployments as one, on a shared Redis.

Three Routers, each with its own connection to the fleet's Redis (``state:`` as a gateway
builds it: shared breakers, limiters and load board), stand for three gateway processes; the
deployments are the fault kit's, in process. Each deployment has ``limits: {rpm: R}``. Waves
of requests arrive at one gateway or another, never more in all than the three quotas hold
together: every request is served at once (none waits in a limiter's queue or is turned away
by one while another deployment has room fleet-wide), and no deployment gets more than its
quota. With a per-process board, a gateway sends its wave to the deployment the others just
filled.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from failover import Envelope, Limits, Request, Route, Router
from failover.model import Balance, ExclusionCode, RouteRecord, Target
from failover.policy import BreakerBoard, LimiterBoard, SharedLoadBoard, Unlimited
from failover.state import GuardedStore, RedisStore
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from tests._services import RedisServer
from tests.router._kit import target

pytestmark = pytest.mark.e2e

RPM = 10  # per deployment; x 0.9 (the limiter's safety margin): 9 requests a minute each
ROOM = 9
GAP = 0.5  # seconds between waves: well over two refreshes (0.1 s each) and a round trip
STRATEGIES: tuple[Balance, ...] = ("order", "weighted", "least_busy", "p2c", "quota")


def _deployments() -> tuple[list[FakeProvider], list[Target]]:
    providers = [FakeProvider(f"d{i}", "openai", Script.always(Reply.ok(f"d{i}", latency=0.02))) for i in range(3)]
    targets = [replace(target(p, cap=5.0, key="gpt-x"), limits=Limits(rpm=RPM)) for p in providers]
    return providers, targets


def _gateway(url: str, prefix: str, strategy: Balance, providers: list[FakeProvider], targets: list[Target]) -> Router:
    store = GuardedStore(RedisStore(url, prefix=prefix, timeout=1.0), timeout=1.0)
    limiters = LimiterBoard(store=store)
    return Router(
        [Route(name="r", primary=tuple(targets), balance=strategy)],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=BreakerBoard(store=store),
        limiters=limiters,
        load=SharedLoadBoard(store, limiters=limiters),
        rng=random.Random(1),
        balance_rng=random.Random(2),
    )


async def _run(url: str, strategy: Balance, waves: list[tuple[int, int]]) -> tuple[list[RouteRecord], Counter[str]]:
    providers, targets = _deployments()
    prefix = f"fb-{uuid.uuid4().hex[:10]}:"
    gateways = [_gateway(url, prefix, strategy, providers, targets) for _ in range(3)]
    records: list[RouteRecord] = []

    async def one(gw: Router, i: int) -> None:
        resp = await gw.complete("r", Request.simple(f"q{i}", max_tokens=10), Envelope(budget=3.0))
        assert resp.record is not None
        records.append(resp.record)

    try:
        for gw in gateways:  # each gateway has read the fleet once, as a serving one has
            gw.load.outstanding(targets[0])
            for t in targets:
                assert gw.limiters is not None
                gw.limiters.limiter_for(t)
            assert isinstance(gw.load, SharedLoadBoard)
            await gw.load.sync()
        n = 0
        for g, count in waves:
            await asyncio.gather(*(one(gateways[g], n + k) for k in range(count)))
            n += count
            await asyncio.sleep(GAP)
    finally:
        for gw in gateways:
            await gw.aclose()
    return records, Counter({p.name: len(p.calls) for p in providers})


@st.composite
def _waves(draw: st.DrawFn) -> list[tuple[int, int]]:
    waves: list[tuple[int, int]] = []
    left = 3 * ROOM
    for _ in range(draw(st.integers(2, 7))):
        if left <= 0:
            break
        count = draw(st.integers(1, min(6, left)))
        waves.append((draw(st.integers(0, 2)), count))
        left -= count
    return waves


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strategy=st.sampled_from(STRATEGIES), waves=_waves())
# a gateway's second wave is larger than what the first left on the first deployment, then the
# other gateways come: per process, 25 of these 26 requests were turned away by a limiter
@example(strategy="least_busy", waves=[(0, 6), (0, 5), (1, 6), (2, 5), (1, 4)])
def test_three_gateways_balance_three_quotas_as_one(
    fleet_redis: RedisServer, strategy: Balance, waves: list[tuple[int, int]]
) -> None:
    records, calls = asyncio.run(_run(fleet_redis.url, strategy, waves))
    sent = sum(c for _, c in waves)
    assert [r.outcome for r in records].count("ok") == sent, [r.outcome for r in records]
    for name, n in calls.items():  # one minute at most has passed: each within its quota
        assert n <= ROOM, (name, calls)
    waited = [(r.target_used, w) for r in records for w in r.waits]
    assert not waited, f"a request waited while a deployment had room: {waited[:3]} ({strategy}, {waves})"
    refused = [e for r in records for e in r.excluded if e.code is ExclusionCode.RATE_LIMITED]
    assert not refused, f"a limiter turned a request away: {refused[:3]} ({strategy}, {waves}, {calls})"
