"""50 concurrent duplicates of one operation: exactly one execution, on every store.

The duplicates come through several store instances sharing the same data (separate SQLite
connections on one file, separate Redis clients, separate PostgreSQL pools), as the
processes of a fleet would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from failover.ledger import Ledger, Run, State

from .conftest import StoreFactory

ARGS = {"sku": "A-1", "qty": 1}


async def test_fifty_concurrent_duplicates_execute_once(make_store: StoreFactory) -> None:
    ledgers = [Ledger(make_store(), poll=0.005) for _ in range(5)]
    executions: list[int] = []
    inside = 0

    async def create_order(run: Run) -> Any:
        nonlocal inside
        inside += 1
        assert inside == 1, "two bodies ran at once"
        executions.append(run.attempt)
        await asyncio.sleep(0.05)
        inside -= 1
        return {"order_id": "ord_1"}

    results = await asyncio.gather(
        *(ledgers[i % 5].run("checkout-42", "create_order", ARGS, create_order) for i in range(50))
    )
    assert executions == [1]
    assert results == [{"order_id": "ord_1"}] * 50
    (rec,) = await ledgers[0].records("checkout-42")
    assert rec.state is State.SUCCEEDED and rec.attempts == 1


async def test_many_operations_with_duplicates_each_execute_once(make_store: StoreFactory) -> None:
    ledgers = [Ledger(make_store(), poll=0.005) for _ in range(3)]
    done: dict[str, int] = {}

    async def create_order(run: Run) -> Any:
        done[run.operation_id] = done.get(run.operation_id, 0) + 1
        await asyncio.sleep(0)
        return run.operation_id

    calls = [
        ledgers[(i + d) % 3].run(f"op-{i}", "create_order", ARGS, create_order) for i in range(20) for d in range(3)
    ]
    results = await asyncio.gather(*calls)
    assert done == {f"op-{i}": 1 for i in range(20)}
    assert results == [f"op-{i}" for i in range(20) for _ in range(3)]
