"""Workflow 3 in the router: no replay or fallback once a side effect of the task is uncertain."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from failover import Envelope, FailureKind, Request, Route, Router, SideEffectMode, Unavailable
from failover.ledger import Ledger, MaybeExecuted, MemoryStore
from failover.policy import Backoff, NoBreakers, RetryBudget, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime

W = SideEffectMode.WRITE_POSSIBLE


def make(ledger: Ledger, *ps: FakeProvider, attempts: int = 2) -> Router:
    a, *rest = ps
    route = Route(name="r", primary=(target(a, attempts=attempts),), fallbacks=tuple(target(p) for p in rest))
    return Router(
        [route],
        transport=FakeNetwork(*ps),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=NoBreakers(),
        ledger=ledger,
    )


async def leave_uncertain(ledger: Ledger, task: str) -> None:
    async def create_order(run: object) -> None:
        raise MaybeExecuted("the payment API timed out after the request was sent")

    with pytest.raises(MaybeExecuted):  # recorded `unknown`, and the caller is told
        await ledger.run(task, "create_order", {"sku": "A-1", "qty": 1}, create_order)


async def test_an_uncertain_side_effect_refuses_the_replay_and_names_the_operation() -> None:
    ledger = Ledger(MemoryStore())
    await leave_uncertain(ledger, "task-9")
    a = FakeProvider("a", "openai", Script.always(Reply.ok("order again?")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b")))
    with pytest.raises(Unavailable) as ei:
        await make(ledger, a, b).complete("r", Request.simple("continue"), Envelope(task_id="task-9", side_effects=W))
    err = ei.value
    assert err.reason is FailureKind.SIDE_EFFECT_UNCERTAIN and not err.retryable
    assert (len(a.calls), len(b.calls)) == (0, 0)
    assert err.record.uncertain_operation is not None and "create_order" in err.record.uncertain_operation
    assert "create_order" in str(err)


async def test_without_a_task_or_with_side_effects_off_nothing_is_read() -> None:
    ledger = Ledger(MemoryStore())
    await leave_uncertain(ledger, "task-9")
    a = FakeProvider("a", "openai", Script.always(Reply.ok("fine")))
    router = make(ledger, a)
    assert (await router.complete("r", Request.simple("x"), Envelope(task_id="task-9"))).text == "fine"
    assert (await router.complete("r", Request.simple("x"), Envelope(side_effects=W))).text == "fine"


async def test_a_side_effect_that_starts_during_the_request_stops_its_replays() -> None:
    ledger = Ledger(MemoryStore())
    a = FakeProvider("a", "openai", Script.always(Reply.server_error(latency=0.5)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b")))
    router = make(ledger, a, b)
    started = asyncio.Event()

    async def slow_tool(run: object) -> None:
        started.set()
        await asyncio.sleep(3600)  # still running: its outcome is not known yet

    async def app_runs_a_tool() -> None:
        await asyncio.sleep(0.2)  # while the first model attempt is in flight
        await ledger.run("task-7", "send_invoice", {"to": "acme"}, slow_tool)

    tool = asyncio.ensure_future(app_runs_a_tool())
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", Request.simple("x"), Envelope(task_id="task-7", side_effects=W))
    assert started.is_set()
    assert ei.value.reason is FailureKind.SIDE_EFFECT_UNCERTAIN
    assert "send_invoice" in (ei.value.record.uncertain_operation or "")
    tool.cancel()
    await asyncio.gather(tool, return_exceptions=True)
    assert len(a.calls) == 1  # the first attempt ran; its replay was refused
    assert len(b.calls) == 0  # and so was the fallback


class SlowLedger(Ledger):
    """A ledger whose store answers after 20 ms (a remote one)."""

    async def side_effects(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.02)
        return await super().side_effects(*args, **kwargs)


async def test_a_slow_ledger_cannot_let_concurrent_replays_overdraw_the_retry_budget() -> None:
    """A budget that allows one replay, a ledger answering in 20 ms, five concurrent requests
    whose first attempt fails: one replay is sent and the budget counts it. The token is taken
    with the engine's decision, before the ledger is awaited (it was taken after, unchecked,
    and all five replays went out)."""
    a = FakeProvider("a", "openai", Script.of(*[Reply.overloaded(latency=0.05)] * 5, default=Reply.ok("again")))
    budget = RetryBudget(ratio=0.0, floor=1, window=60)
    route = Route(name="r", primary=(target(a, attempts=2),))
    router = Router(
        [route],
        transport=FakeNetwork(a),
        retry_budget=budget,
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=NoBreakers(),
        ledger=SlowLedger(MemoryStore()),
    )
    env = [Envelope(budget=10, task_id=f"t{i}", side_effects=W) for i in range(5)]
    results = await asyncio.gather(
        *(router.complete("r", Request.simple(f"{i}"), env[i]) for i in range(5)), return_exceptions=True
    )
    assert len(a.calls) == 6  # five first attempts, one replay
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, Unavailable) for r in results if isinstance(r, BaseException))
    assert budget.available(asyncio.get_running_loop().time(), budget.pool_of(route.primary[0])) == 0
