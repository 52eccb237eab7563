"""Balancing the primary tier's deployments, on virtual time with the fault kit.

The measurement that asked for it: three deployments of one model, answering in 0.30, 0.35
and 0.40 s, each with a quota of 300 requests a minute; 600 requests offered at 10/s for 60 s
(two thirds of what the three allow together, twice what one does). Trying the first that is
admitted sent 270 / 279 / 36, queued 269 requests up to 30 s and failed 15 while the third
deployment was mostly idle. Every strategy now serves all 600, none waits in a limiter's
queue, and no deployment goes over its quota.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import replace

import pytest

from failover import Envelope, Limits, Request, Route, Router
from failover.model import Balance, Message, RouteRecord, Target
from failover.policy import NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime

SENT_AT: dict[str, float] = {}
STRATEGIES: tuple[Balance, ...] = ("order", "weighted", "least_busy", "p2c", "quota")


def _deployments(*latencies: float, rpm: int | None = 300) -> tuple[list[FakeProvider], list[Target]]:
    providers = [
        FakeProvider(f"d{i}", "openai", Script.always(Reply.ok(f"from d{i}", latency=lat)))
        for i, lat in enumerate(latencies)
    ]
    targets = [
        replace(target(p, cap=10.0, key="gpt-x"), limits=Limits(rpm=rpm) if rpm else Limits()) for p in providers
    ]
    return providers, targets


async def _offer(router: Router, n: int, every: float, budget: float = 30.0) -> list[RouteRecord]:
    """``n`` requests, one every ``every`` seconds (open loop), each with its own deadline;
    ``SENT_AT[request_id]``: when each was sent, in seconds from the first."""
    records: list[RouteRecord] = []
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def one(i: int) -> None:
        at = loop.time() - t0
        resp = await router.complete("r", Request.simple(f"q{i}", max_tokens=10), Envelope(budget=budget))
        assert resp.record is not None
        SENT_AT[resp.record.request_id] = at
        records.append(resp.record)

    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(one(i)))
        await asyncio.sleep(every)
    await asyncio.gather(*tasks)
    return records


def _most_in_a_minute(times: list[float]) -> int:
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - 60.0:
            j += 1
        most = max(most, i - j + 1)
    return most


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_three_quotas_at_two_thirds_of_their_sum_serve_everything_without_a_queue(strategy: Balance) -> None:
    providers, targets = _deployments(0.30, 0.35, 0.40)
    router = Router(
        [Route(name="r", primary=tuple(targets), balance=strategy)],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        rng=random.Random(1),
        balance_rng=random.Random(2),
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    records = await _offer(router, 600, 0.1)
    assert [r.outcome for r in records].count("ok") == 600
    assert not [w for r in records for w in r.waits], "a request waited in a limiter's queue"
    used = Counter(r.target_used for r in records)
    assert sum(used.values()) == 600 and len(used) == 3, used
    for p in providers:  # every deployment within its quota: at most 300 calls in any minute
        assert _most_in_a_minute([c.time for c in p.calls]) <= 300, p.name
    assert loop.time() - t0 < 61.0
    latencies = sorted(r.elapsed_ms for r in records)
    assert latencies[int(0.99 * len(latencies))] < 500, latencies[-10:]  # p99: an answer's own time


async def test_order_keeps_the_configured_order_until_the_first_is_at_its_limit() -> None:
    """``order`` sends every request without an affinity key to the first deployment while it
    has room, and spills to the next only when its quota is spent."""
    providers, targets = _deployments(0.30, 0.35, 0.40, rpm=60)
    router = Router(
        [Route(name="r", primary=tuple(targets), balance="order")],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
    )
    records = await _offer(router, 20, 0.5)
    assert {r.target_used for r in records} == {"d0"}
    assert all(r.placement is None or r.placement.startswith("order: d0") for r in records)
    more = await _offer(router, 80, 0.05)  # 20/s: d0's minute of 60 (less the margin) runs out
    used = Counter(r.target_used for r in more)
    assert used["d0"] < 80 and used["d1"] > 0, used
    spilled = [r for r in more if r.target_used != "d0"]
    assert all(r.placement and "spill: d0 is at its client-side rate limit" in r.placement for r in spilled), [
        r.placement for r in spilled[:3]
    ]
    assert not [w for r in more for w in r.waits]


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def test_p2c_follows_the_fast_deployments_and_probes_the_slow_one_until_it_recovers() -> None:
    """0.3 / 0.6 / 2 s deployments, 10 requests a second for 90 s; the fastest slows to 3 s
    from 30 s to 60 s, then recovers. p99 follows the fast ones; the slow one keeps a trickle
    (each answer re-measures it), and the one that slowed down gets its share back."""
    providers, targets = _deployments(0.3, 0.6, 2.0, rpm=None)
    router = Router(
        [Route(name="r", primary=tuple(targets), balance="p2c")],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        balance_rng=random.Random(7),
    )
    fast, slowed = Script.always(Reply.ok("from d0", latency=0.3)), Script.always(Reply.ok("from d0", latency=3.0))

    async def slow_down() -> None:
        await asyncio.sleep(30)
        providers[0].script = slowed
        await asyncio.sleep(30)
        providers[0].script = fast

    changer = asyncio.create_task(slow_down())
    records = await _offer(router, 900, 0.1)
    await changer
    phases = {"before": (0, 30), "slow": (30, 60), "recovering": (60, 75), "after": (75, 90)}
    by_phase = {name: Counter[str]() for name in phases}
    for r in records:
        at = SENT_AT[r.request_id]
        name = next(n for n, (a, b) in phases.items() if a <= at < b)
        by_phase[name][r.target_used or "-"] += 1
    before, slow, after = by_phase["before"], by_phase["slow"], by_phase["after"]
    assert 0 < before["d2"] <= 0.02 * sum(before.values()), by_phase  # a trickle to the 2 s one
    assert before["d0"] > before["d1"] > before["d2"], by_phase
    assert 0 < slow["d0"] < 0.1 * sum(slow.values()), by_phase  # avoided while slow (3 s), still probed
    # its share back once it answers fast again (each fast answer blends into its 3 s peak)
    share_after, share_slow = after["d0"] / sum(after.values()), slow["d0"] / sum(slow.values())
    assert share_after >= 0.4 and share_after > 3 * share_slow, by_phase
    assert after["d2"] <= 0.02 * sum(after.values()), by_phase
    calm = [r.elapsed_ms / 1000 for r in records if SENT_AT[r.request_id] < 30]
    assert _p(calm, 0.95) <= 0.61, sorted(calm)[-20:]  # the fast ones' latency, not the slow one's


SYSTEM = "You are the support assistant of a shop. " + "Answer from the catalogue below. " * 200  # ~1,500 tokens


def _turn(conversation: int, turn: int) -> Request:
    history = [Message.system(SYSTEM), Message.user(f"order #{conversation}")]
    for t in range(1, turn):
        history += [Message.assistant(f"answer {t}"), Message.user(f"more {t}")]
    return Request(messages=tuple(history), max_tokens=10)


async def _conversations(router: Router, turns: range, placed: dict[int, list[str]]) -> None:
    for turn in turns:
        for conversation in range(50):
            resp = await router.complete("r", _turn(conversation, turn), Envelope(budget=30))
            assert resp.record is not None and resp.record.target_used is not None
            placed.setdefault(conversation, []).append(resp.record.target_used)


def _cached_share(placed: dict[int, list[str]]) -> float:
    """Turns after a conversation's first that land where its previous turn went (where its
    prefix up to that turn is cached)."""
    hits = total = 0
    for where in placed.values():
        for i in range(1, len(where)):
            total += 1
            hits += where[i] == where[i - 1]
    return hits / total


@pytest.mark.parametrize("affinity", [True, False])
async def test_affinity_keeps_each_conversation_where_its_prefix_is_cached(affinity: bool) -> None:
    """50 conversations x 10 turns over three deployments (p2c): with affinity every later turn
    lands where the conversation's prefix is cached; without, far fewer do, by chance."""
    providers, targets = _deployments(0.3, 0.3, 0.3, rpm=None)
    router = Router(
        [Route(name="r", primary=tuple(targets), balance="p2c", affinity=affinity)],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        balance_rng=random.Random(3),
    )
    placed: dict[int, list[str]] = {}
    await _conversations(router, range(1, 11), placed)
    share = _cached_share(placed)
    spread = Counter(where[0] for where in placed.values())
    assert len(spread) == 3 and min(spread.values()) >= 8, spread  # the conversations are spread
    if affinity:
        assert share == 1.0, share
    else:
        assert share < 0.6, share


async def test_a_failing_deployment_moves_its_conversations_and_only_them() -> None:
    providers, targets = _deployments(0.3, 0.3, 0.3, rpm=None)
    router = Router(
        [Route(name="r", primary=tuple(targets), balance="p2c")],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        balance_rng=random.Random(3),
    )
    placed: dict[int, list[str]] = {}
    await _conversations(router, range(1, 6), placed)
    home = {c: where[0] for c, where in placed.items()}
    assert all(len(set(where)) == 1 for where in placed.values())
    providers[1].script = Script.always(Reply.server_error())
    await _conversations(router, range(6, 11), placed)
    for c, where in placed.items():
        later = where[5:]
        if home[c] != "d1":
            assert set(later) == {home[c]}, (c, where)  # never moved
        else:
            assert "d1" not in later[1:] and len(set(later[1:])) == 1, (c, where)  # moved once, then kept


@pytest.mark.parametrize("strategy", ["quota", "order"])
async def test_quota_reads_the_providers_headers_and_moves_away_before_a_429(strategy: Balance) -> None:
    """No client-side limit: each provider enforces 10 requests a minute and says what is left
    in ``x-ratelimit-*-requests`` on every answer. 24 requests in a minute fit the three
    together; ``quota`` reads the headers and provokes no 429, ``order`` learns of d0's quota
    only from its 429s (the failover still answers)."""
    providers = [FakeProvider(f"d{i}", "openai", Reply.ok(f"from d{i}", latency=0.2), rpm=10) for i in range(3)]
    targets = [target(p, cap=10.0, key="gpt-x") for p in providers]
    router = Router(
        [Route(name="r", primary=tuple(targets), balance=strategy, affinity=False)],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        balance_rng=random.Random(2),
    )
    records = await _offer(router, 24, 2.5)
    assert [r.outcome for r in records].count("ok") == 24
    rejected = sum(c.status == 429 for p in providers for c in p.calls)
    if strategy == "quota":
        assert rejected == 0, Counter(r.target_used for r in records)
        assert all(r.placement and "most quota left" in r.placement for r in records[1:])
        assert max(Counter(r.target_used for r in records).values()) <= 10
    else:
        assert rejected > 0
