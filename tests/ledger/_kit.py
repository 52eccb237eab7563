from __future__ import annotations

import asyncio
import time
from typing import Any

from failover.ledger import Execution, Run, Verdict


class Clock:
    """A wall clock the test moves by hand (leases are compared against it)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Shop:
    """The external system: orders, keyed by the idempotency key the ledger hands out."""

    def __init__(self, delay: float = 0.0) -> None:
        self.orders: dict[str, str] = {}
        self.calls = 0
        self.delay = delay
        self.reconciled: list[str] = []

    async def place(self, run: Run) -> str:
        """Create the order in the shop (the side effect), without telling the ledger."""
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        order_id = f"ord_{len(self.orders) + 1}"
        self.orders[run.idempotency_key] = order_id
        return order_id

    async def create_order(self, run: Run) -> dict[str, Any]:
        order_id = await self.place(run)
        run.succeed({"order_id": order_id, "sku": run.arguments.get("sku")}, external_ref=order_id)
        return {}

    async def find_order(self, rec: Execution) -> Verdict:
        ident = f"{rec.operation_id}/{rec.key}"
        self.reconciled.append(ident)
        order_id = self.orders.get(ident)
        if order_id is None:
            return Verdict.not_done()
        return Verdict.succeeded({"order_id": order_id}, external_ref=order_id)
