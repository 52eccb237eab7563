"""Every backend against the same contract: memory, SQLite and a real Redis.

Stores built by one ``make_store`` share their data, like the processes of a fleet. These
tests run on real time (SQLite and Redis use the wall clock and the server's TIME) with
periods of a few hundred milliseconds and margins of at least 2x.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import pytest

from failover.state import BreakerOutcome, BreakerParams, MemoryStore, SQLiteStore, StateStore

from .conftest import StoreFactory

P = BreakerParams(
    window_size=4, min_calls=4, open_duration=0.3, open_duration_growth=2.0, half_open_probes=2, successes_to_close=2
)


def pid() -> str:
    return uuid.uuid4().hex[:12]


async def fail_n(store: StateStore, scope: str, n: int, params: BreakerParams = P) -> None:
    for _ in range(n):
        a = await store.breaker_admit([(scope, params)], p := pid())
        assert a.granted
        await store.breaker_record(
            [BreakerOutcome(scope=scope, params=params, epoch=a.epochs[0], probe=a.probes[0], outcome="failure")],
            p,
            0.01,
        )


async def test_failures_open_the_breaker_for_every_process(make_store: StoreFactory) -> None:
    one, two = make_store(), make_store()
    await fail_n(one, "s", 3)
    assert (await two.breaker_views([("s", P)]))[0].state == "closed"
    a = await one.breaker_admit([("s", P)], p := pid())
    r = await one.breaker_record(
        [BreakerOutcome(scope="s", params=P, epoch=a.epochs[0], probe=False, outcome="failure")], p, 0.01
    )
    assert [(t.old, t.new, t.reason) for t in r.transitions] == [("closed", "open", "4/4 failed")]
    seen = await two.breaker_admit([("s", P)], pid())
    assert not seen.granted and seen.rejected == 0
    view = seen.views[0]
    assert view.state == "open" and view.why == "4/4 failed" and view.open_count == 1
    assert view.retry_in is not None and 0.0 < view.retry_in <= 0.3


async def test_half_open_gives_at_most_n_probes_across_the_fleet(make_store: StoreFactory) -> None:
    stores = [make_store() for _ in range(3)]
    await fail_n(stores[0], "s", 4)
    await asyncio.sleep(0.35)
    results = await asyncio.gather(*(stores[i % 3].breaker_admit([("s", P)], pid()) for i in range(60)))
    granted = [r for r in results if r.granted]
    assert len(granted) == 2
    assert all(r.probes == (True,) for r in granted)
    assert any(t.new == "half_open" for r in results for t in r.transitions)


async def test_probe_successes_close_and_a_failed_probe_reopens_longer(make_store: StoreFactory) -> None:
    store = make_store()
    await fail_n(store, "s", 4)
    await asyncio.sleep(0.35)
    ids = [pid(), pid()]
    adm = [await store.breaker_admit([("s", P)], i) for i in ids]
    r = await store.breaker_record(
        [BreakerOutcome(scope="s", params=P, epoch=adm[0].epochs[0], probe=True, outcome="failure")], ids[0], 0.01
    )
    assert r.views[0].state == "open" and r.views[0].why == "probe failed"
    # the second opening, 0.3 x 2, from the probe's start: less the 0.01 s the probe took
    assert r.views[0].open_for == pytest.approx(0.59)
    # the other probe's result belongs to the half-open state that ended: ignored
    r = await store.breaker_record(
        [BreakerOutcome(scope="s", params=P, epoch=adm[1].epochs[0], probe=True, outcome="success")], ids[1], 0.01
    )
    assert r.views[0].state == "open" and r.transitions == ()
    await asyncio.sleep(0.65)
    ids = [pid(), pid()]
    adm = [await store.breaker_admit([("s", P)], i) for i in ids]
    assert all(a.granted for a in adm)
    for a, i in zip(adm, ids, strict=True):
        r = await store.breaker_record(
            [BreakerOutcome(scope="s", params=P, epoch=a.epochs[0], probe=True, outcome="success")], i, 0.01
        )
    assert r.views[0].state == "closed"
    assert r.transitions[-1].reason == "2/2 probes succeeded"


async def test_the_open_period_grows_to_its_cap_counted_from_a_failed_probes_start(make_store: StoreFactory) -> None:
    """The rule of BreakerConfig.open_period on every backend: grown by the factor, capped, and
    after a failed probe less the time the probe took, but never under the base period."""
    p = BreakerParams(
        window_size=2,
        min_calls=2,
        open_duration=0.2,
        open_duration_growth=3.0,
        max_open_duration=1.0,
        half_open_probes=1,
        successes_to_close=1,
    )
    store = make_store()
    await fail_n(store, "s", 2, p)
    periods = []
    for took in (0.5, 0.05, 0.3):
        view = (await store.breaker_views([("s", p)]))[0]
        assert view.retry_in is not None
        await asyncio.sleep(view.retry_in + 0.02)
        a = await store.breaker_admit([("s", p)], i := pid())
        assert a.granted and a.probes == (True,)
        r = await store.breaker_record(
            [BreakerOutcome(scope="s", params=p, epoch=a.epochs[0], probe=True, outcome="failure")], i, took
        )
        assert r.views[0].state == "open" and r.views[0].why == "probe failed"
        periods.append(r.views[0].open_for)
    # 0.6 - 0.5 is under the base: 0.2; then the cap 1.0 (0.2 x 3^2 = 1.8) less 0.05; then 1.0 - 0.3
    assert periods == pytest.approx([0.2, 0.95, 0.7])


async def test_a_probe_whose_process_died_frees_its_slot_after_the_lease(make_store: StoreFactory) -> None:
    p = BreakerParams(window_size=2, min_calls=2, open_duration=0.2, half_open_probes=1, probe_lease=1.0)
    store = make_store()
    await fail_n(store, "s", 2, p)
    await asyncio.sleep(0.25)
    assert (await store.breaker_admit([("s", p)], pid())).granted  # held by a "crashed" process
    assert not (await store.breaker_admit([("s", p)], pid())).granted
    await asyncio.sleep(1.05)
    assert (await store.breaker_admit([("s", p)], pid())).granted


async def test_admission_is_all_or_nothing(make_store: StoreFactory) -> None:
    one = BreakerParams(window_size=2, min_calls=2, open_duration=0.2, half_open_probes=1)
    store = make_store()
    await fail_n(store, "target", 2, one)
    await fail_n(store, "key", 2, one)
    await asyncio.sleep(0.25)
    assert (await store.breaker_admit([("key", one)], pid())).granted  # the key's only probe
    refused = await store.breaker_admit([("target", one), ("key", one)], pid())
    assert not refused.granted and refused.rejected == 1
    assert refused.views[0].state == "half_open" and refused.views[0].probes == 0  # given back
    assert (await store.breaker_admit([("target", one)], pid())).granted


async def test_time_window_breaker(make_store: StoreFactory) -> None:
    p = BreakerParams(window_kind="time", window_seconds=5, min_calls=3, open_duration=0.2)
    store = make_store()
    await fail_n(store, "t", 2, p)
    assert (await store.breaker_views([("t", p)]))[0].state == "closed"
    await fail_n(store, "t", 1, p)
    assert (await store.breaker_views([("t", p)]))[0].state == "open"


async def test_reservations_never_exceed_capacity_under_a_race(make_store: StoreFactory) -> None:
    stores = [make_store() for _ in range(3)]
    caps = {"rpm": 10.0, "input_tpm": 1000.0}

    async def one(i: int) -> bool:
        r = await stores[i % 3].reserve("q", {"rpm": 1.0, "input_tpm": 50.0}, caps, window=60.0, reservation_id=pid())
        return r.granted

    assert sum(await asyncio.gather(*(one(i) for i in range(50)))) == 10
    late = await stores[0].reserve("q", {"rpm": 1.0}, caps, window=60.0, reservation_id=pid())
    assert not late.granted and late.dimension == "rpm" and 58.0 < late.wait <= 61.0


async def test_settle_refunds_and_charges(make_store: StoreFactory) -> None:
    store = make_store()
    caps = {"output_tpm": 100.0}
    r = await store.reserve("q", {"output_tpm": 100.0}, caps, window=60.0, reservation_id="a")
    assert r.granted
    assert not (await store.reserve("q", {"output_tpm": 30.0}, caps, window=60.0, reservation_id="b")).granted
    # 100 reserved, 20 used: 80 come back
    await store.settle(
        "q", "a", granted_at=r.at, window=60.0, refund={"output_tpm": 100.0}, charge={"output_tpm": 20.0}
    )
    assert (await store.reserve("q", {"output_tpm": 80.0}, caps, window=60.0, reservation_id="c")).granted
    assert not (await store.reserve("q", {"output_tpm": 1.0}, caps, window=60.0, reservation_id="d")).granted


async def test_headers_and_429_shrink_the_shared_bucket(make_store: StoreFactory) -> None:
    store = make_store()
    caps = {"rpm": 100.0}
    lowered = await store.sync("q", "rpm", remaining=2.0, reset_in=30.0, capacity=100.0, window=60.0)
    assert lowered
    assert (await store.reserve("q", {"rpm": 2.0}, caps, window=60.0, reservation_id="a")).granted
    r = await store.reserve("q", {"rpm": 1.0}, caps, window=60.0, reservation_id="b")
    assert not r.granted and 28.0 < r.wait <= 31.0
    assert not await store.sync("q", "rpm", remaining=50.0, reset_in=None, capacity=100.0, window=60.0)
    await store.block("z", 1.0, window=60.0)
    r = await store.reserve("z", {"rpm": 1.0}, caps, window=60.0, reservation_id="c")
    assert not r.granted and r.dimension == "retry_after" and 0.0 < r.wait <= 1.0
    await asyncio.sleep(1.05)
    assert (await store.reserve("z", {"rpm": 1.0}, caps, window=60.0, reservation_id="c")).granted


async def test_concurrency_slots_with_leases(make_store: StoreFactory) -> None:
    one, two = make_store(), make_store()
    kw = {"window": 60.0, "slots": 2, "lease": 1.0}
    a = await one.reserve("c", {}, {}, reservation_id="a", **kw)  # type: ignore[arg-type]
    b = await two.reserve("c", {}, {}, reservation_id="b", **kw)  # type: ignore[arg-type]
    c = await one.reserve("c", {}, {}, reservation_id="c", **kw)  # type: ignore[arg-type]
    assert a.granted and b.granted and not c.granted and c.dimension == "concurrency" and math.isinf(c.wait)
    await one.settle("c", "a", granted_at=a.at, window=60.0, refund={}, charge={})
    assert (await two.reserve("c", {}, {}, reservation_id="c", **kw)).granted  # type: ignore[arg-type]
    assert not (await two.reserve("c", {}, {}, reservation_id="d", **kw)).granted  # type: ignore[arg-type]
    await asyncio.sleep(1.05)  # "b" and "c" were never released: their leases ran out
    assert (await two.reserve("c", {}, {}, reservation_id="d", **kw)).granted  # type: ignore[arg-type]


async def test_retry_budget_is_shared(make_store: StoreFactory) -> None:
    one, two = make_store(), make_store()
    kw = {"ratio": 0.5, "floor": 1, "window": 10.0}
    for _ in range(4):
        await one.budget_request("rb", **kw)  # type: ignore[arg-type]
    assert await two.budget_request("rb", **kw) == 1 + 2  # type: ignore[arg-type]
    answers = await asyncio.gather(*(s.budget_spend("rb", **kw) for s in (one, two) * 3))  # type: ignore[arg-type]
    assert sum(a.allowed for a in answers) == 3
    assert answers[-1].available == 0


async def test_a_forced_spend_is_counted_even_when_none_is_left(make_store: StoreFactory) -> None:
    """A process that already made the attempt (it decided on its last answer) charges it anyway:
    the overdraft is paid back by later refusals, never spent again by another process."""
    one, two = make_store(), make_store()
    kw: dict[str, Any] = {"ratio": 1.0, "floor": 1, "window": 10.0}
    await one.budget_request("rb", **kw)  # floor 1 + 1 x 1 = 2 allowed
    assert (await one.budget_spend("rb", **kw)).allowed
    assert (await two.budget_spend("rb", **kw)).allowed
    forced = await one.budget_spend("rb", force=True, **kw)
    assert not forced.allowed and forced.available == 0
    assert not (await two.budget_spend("rb", **kw)).allowed  # a refusal is not counted
    assert await two.budget_request("rb", **kw) == 0  # 3 allowed, 3 spent: the overdraft is paid back
    assert await one.budget_request("rb", **kw) == 1  # 4 allowed: one more


async def test_every_key_has_a_ttl(make_store: StoreFactory, request: pytest.FixtureRequest) -> None:
    store = make_store()
    await fail_n(store, "s", 1)
    await store.reserve("q", {"rpm": 1.0}, {"rpm": 5.0}, window=60.0, reservation_id="a", slots=1)
    await store.block("q", 5.0, window=60.0)
    await store.budget_request("rb", ratio=0.1, floor=1, window=10.0)
    if isinstance(store, MemoryStore):
        ttls = store.ttls(asyncio.get_running_loop().time())
    elif isinstance(store, SQLiteStore):
        ttls = store.ttls()
    else:
        client = store.client  # type: ignore[attr-defined]
        keys = [k async for k in client.scan_iter(match=f"{store.prefix}*")]  # type: ignore[attr-defined]
        ttls = {k: (await client.pttl(k)) / 1000 for k in keys}
    assert len(ttls) == 3
    assert all(0 < t <= 3700 for t in ttls.values()), ttls


async def test_the_breaker_remembers_the_kind_of_failure_that_opened_it(make_store: StoreFactory) -> None:
    """Another process turned away by the open breaker can tell its caller what is wrong."""
    one, two = make_store(), make_store()
    for i in range(4):
        a = await one.breaker_admit([("k", P)], p := pid())
        kind = "provider_server_error" if i < 3 else "authentication_or_permission"
        await one.breaker_record(
            [BreakerOutcome(scope="k", params=P, epoch=a.epochs[0], probe=False, outcome="failure", kind=kind)],
            p,
            0.01,
        )
    seen = await two.breaker_admit([("k", P)], pid())
    assert not seen.granted and seen.views[0].kind == "authentication_or_permission"  # the one that tripped it
    await asyncio.sleep(0.35)
    probe = await two.breaker_admit([("k", P)], p := pid())
    assert probe.views[0].state == "half_open" and probe.views[0].kind == "authentication_or_permission"
    r = await two.breaker_record(
        [BreakerOutcome(scope="k", params=P, epoch=probe.epochs[0], probe=True, outcome="failure", kind="timeout")],
        p,
        0.01,
    )
    assert r.views[0].state == "open" and r.views[0].kind == "timeout"
    await asyncio.sleep(0.65)
    for _ in range(2):
        a = await one.breaker_admit([("k", P)], p := pid())
        r = await one.breaker_record(
            [BreakerOutcome(scope="k", params=P, epoch=a.epochs[0], probe=True, outcome="success")], p, 0.01
        )
    assert r.views[0].state == "closed" and r.views[0].kind == ""


async def test_a_bucket_view_reads_the_shared_levels_without_taking_anything(make_store: StoreFactory) -> None:
    one, two = make_store(), make_store()
    caps = {"rpm": 10.0, "input_tpm": 1000.0}
    r = await one.reserve("b", {"rpm": 1.0, "input_tpm": 300.0}, caps, window=60.0, reservation_id="r1", slots=3)
    assert r.granted
    for _ in range(2):  # reading twice changes nothing
        v = await two.bucket_view("b", caps)
        assert v.levels == pytest.approx({"rpm": 9.0, "input_tpm": 700.0}) and v.slots == 1 and v.blocked_for == 0.0
    await two.block("b", 5.0, window=60.0)
    v = await one.bucket_view("b", caps)
    assert 4.0 < v.blocked_for <= 5.0
    assert (await one.bucket_view("unknown", caps)).levels == {"rpm": 10.0, "input_tpm": 1000.0}
