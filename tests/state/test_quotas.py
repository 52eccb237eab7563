"""Tenant quotas on the shared store: rpm, tpm and the cost budget hold across processes.

Each "process" is its own :class:`TenantQuotas` over its own connection to one store
(memory, SQLite, Redis), as the gateways of a fleet are. Real time; no waits here.
"""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest

from failover.gateway import Tenant
from failover.gateway._errors import ApiError
from failover.gateway._quota import TenantQuotas, period_bounds
from failover.state import GuardedStore, MemoryStore, RedisStore
from tests._services import free_port

from .conftest import StoreFactory


def fleet(make_store: StoreFactory, *tenants: Tenant, n: int = 3, share: float = 0.25) -> list[TenantQuotas]:
    return [TenantQuotas(tenants, store=GuardedStore(make_store(), timeout=2.0, local_share=share)) for _ in range(n)]


def record(*, tokens: int = 0, cost: float = 0.0) -> Any:
    """What charge() reads of a RouteRecord: the cost and each attempt's usage."""
    return SimpleNamespace(total_cost=cost, attempts=[SimpleNamespace(usage=SimpleNamespace(total_tokens=tokens))])


async def admitted(quotas: TenantQuotas, tenant: Tenant) -> bool | ApiError:
    try:
        await quotas.admit_shared(tenant, None)
    except ApiError as err:
        return err
    return True


async def test_a_tenants_rpm_holds_across_processes(make_store: StoreFactory) -> None:
    acme = Tenant(name="acme", key_hashes=(), rpm=10)
    procs = fleet(make_store, acme)
    answers = [await admitted(procs[i % 3], acme) for i in range(30)]
    assert sum(a is True for a in answers) == 10
    refused = [a for a in answers if isinstance(a, ApiError)]
    assert all(e.status == 429 and e.code == "rate_limit_exceeded" and e.type == "requests" for e in refused)
    assert all(50 <= int(e.headers["retry-after"]) <= 61 for e in refused), refused[0].headers
    other = Tenant(name="other", key_hashes=(), rpm=10)  # its own bucket
    assert await admitted(TenantQuotas([other], store=procs[0].store), other) is True


async def test_tokens_spent_through_one_process_refuse_the_next_request_on_another(
    make_store: StoreFactory,
) -> None:
    tok = Tenant(name="tok", key_hashes=(), tpm=100)
    one, two, _ = fleet(make_store, tok)
    assert await admitted(one, tok) is True
    one.charge(tok, record(tokens=60))
    await one.drain()
    assert await admitted(two, tok) is True  # 60 < 100: not in debt yet
    two.charge(tok, record(tokens=60))
    await two.drain()
    err = await admitted(one, tok)
    assert isinstance(err, ApiError) and err.type == "tokens" and err.code == "rate_limit_exceeded", err


async def test_the_cost_budget_is_one_counter_for_the_fleet(make_store: StoreFactory) -> None:
    cash = Tenant(name="cash", key_hashes=(), budget_usd=1.0, budget_period="day")
    one, two, three = fleet(make_store, cash)
    assert await one.admit_shared(cash, None) == 1.0
    one.charge(cash, record(cost=0.6))
    await one.drain()
    assert await two.admit_shared(cash, 5.0) == pytest.approx(0.4)  # what is left caps the request
    assert await two.admit_shared(cash, 0.1) == 0.1  # or the caller's own ceiling, if smaller
    three.charge(cash, record(cost=0.5))
    await three.drain()
    err = await admitted(one, cash)
    assert isinstance(err, ApiError) and err.code == "budget_exhausted" and err.headers["x-should-retry"] == "false"
    _, end = period_bounds("day", one.wall())
    assert abs(int(err.headers["retry-after"]) - (end - one.wall())) <= 2


async def test_the_budget_counter_expires_when_its_period_ends() -> None:
    store = MemoryStore()
    cash = Tenant(name="cash", key_hashes=(), budget_usd=1.0, budget_period="hour")
    quotas = TenantQuotas([cash], store=GuardedStore(store, timeout=1.0))
    quotas.charge(cash, record(cost=0.2))
    await quotas.drain()
    ttls = store.ttls(asyncio.get_running_loop().time())
    (key,) = [k for k in ttls if ":ct:tenant:cash:budget:hour:" in k]
    _, end = period_bounds("hour", quotas.wall())
    assert math.isclose(ttls[key], end - quotas.wall() + 60.0, abs_tol=2.0)


async def test_with_the_store_down_each_process_allows_its_local_share() -> None:
    """Fail open, like the provider limits: rpm 8 at local_share 0.25 is 2 per process."""
    acme = Tenant(name="acme", key_hashes=(), rpm=8, budget_usd=1.0)
    down = [
        TenantQuotas(
            [acme],
            store=GuardedStore(RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5), local_share=0.25),
        )
        for _ in range(3)
    ]
    try:
        answers = [await admitted(q, acme) for q in down for _ in range(4)]
        assert [a is True for a in answers] == [True, True, False, False] * 3
        assert all(q.store is not None and not q.store.up for q in down)
        # the budget too: $0.25 each while local, what it charged locally counts
        q = down[0]
        q.charge(acme, record(cost=0.3))
        await q.drain()
        err = await admitted(q, acme)
        assert isinstance(err, ApiError) and err.code == "budget_exhausted"
        snap = q.snapshot()["acme"]
        assert snap["counted"] == "locally (state store unreachable)" and snap["rpm"] == 8
    finally:
        for q in down:
            assert q.store is not None
            await q.store.aclose()


async def test_the_admin_view_of_a_tenant_is_the_fleets(make_store: StoreFactory) -> None:
    acme = Tenant(name="acme", key_hashes=(), rpm=10, tpm=1000, budget_usd=2.0)
    one, two, _ = fleet(make_store, acme)
    for _ in range(3):
        assert await admitted(one, acme) is True
    one.charge(acme, record(tokens=250, cost=0.5))
    await one.drain()
    row = (await two.shared_snapshot())["acme"]  # the other process sees what the fleet used
    assert row["counted"] == "fleet-wide in the state store"
    assert row["rpm"] == 10 and row["rpm_available"] == 7.0
    assert row["tpm_available"] == 750.0
    assert row["budget_spent_usd"] == 0.5 and row["budget_left_usd"] == 1.5
    assert two.snapshot()["acme"]["rpm_available"] is None  # the sync snapshot does not pretend
