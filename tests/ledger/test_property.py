"""Random fault schedules: no operation ever executes twice and none is lost.

A schedule is a list of rounds; each round delivers one operation to 1-3 concurrent callers
(duplicate deliveries), each with its own fault for the case where its body is the one that
runs: success, a plain failure, a failure that did not take effect, a timeout or a
cancellation before or after the side effect, an "I don't know" after it, or a process crash
before or after it (its store connection dies with it and the clock moves past its lease).
Each caller is its own Ledger, as separate processes would be. The external system's
reconcile hook tells the truth. After the schedule, every operation is delivered once more.
Then: each operation took effect at most once (checked at every effect), and each one either
succeeded with exactly one effect and the result of that effect, or failed for good with
none. Nothing is left started, unknown or planned.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from failover.ledger import (
    Checkpoint,
    Claim,
    Execution,
    ExecutionFailed,
    Intent,
    Json,
    Ledger,
    LedgerStore,
    MaybeExecuted,
    MemoryStore,
    NotExecuted,
    Outcome,
    Run,
    SQLiteStore,
    State,
    Verdict,
)

from ._kit import Clock

LEASE = 10.0
FAULTS = [
    "ok",
    "error",
    "not_executed",
    "timeout_before",
    "timeout_after",
    "cancel_after",
    "maybe_after",
    "crash_before",
    "crash_after",
]
OPS = 3

schedules = st.lists(
    st.tuples(st.integers(0, OPS - 1), st.lists(st.sampled_from(FAULTS), min_size=1, max_size=3)),
    min_size=1,
    max_size=8,
)


class Crash(BaseException):
    """The process died: nothing after this point reaches the store."""


class Dying:
    """One process's connection to the shared store; after a crash every call fails."""

    def __init__(self, inner: LedgerStore) -> None:
        self.inner = inner
        self.dead = False

    def _alive(self) -> LedgerStore:
        if self.dead:
            raise Crash()
        return self.inner

    async def plan(self, intent: Intent, *, now: float) -> Execution:
        return await self._alive().plan(intent, now=now)

    async def claim(self, intent: Intent, *, owner: str, now: float, lease: float) -> Claim:
        return await self._alive().claim(intent, owner=owner, now=now, lease=lease)

    async def renew(self, operation_id: str, key: str, *, owner: str, attempt: int, now: float, lease: float) -> bool:
        return await self._alive().renew(operation_id, key, owner=owner, attempt=attempt, now=now, lease=lease)

    async def finish(
        self, operation_id: str, key: str, *, attempt: int, outcome: Outcome, now: float
    ) -> Execution | None:
        return await self._alive().finish(operation_id, key, attempt=attempt, outcome=outcome, now=now)

    async def resolve(
        self, operation_id: str, key: str, *, owner: str, outcome: Outcome, now: float
    ) -> Execution | None:
        return await self._alive().resolve(operation_id, key, owner=owner, outcome=outcome, now=now)

    async def expire(self, *, now: float) -> list[Execution]:
        return await self._alive().expire(now=now)

    async def get(self, operation_id: str, key: str) -> Execution | None:
        return await self._alive().get(operation_id, key)

    async def records(self, operation_id: str) -> list[Execution]:
        return await self._alive().records(operation_id)

    async def save_checkpoint(
        self, task_id: str, state: Json, *, now: float, expected_version: int | None = None
    ) -> Checkpoint:
        return await self._alive().save_checkpoint(task_id, state, now=now, expected_version=expected_version)

    async def load_checkpoint(self, task_id: str) -> Checkpoint | None:
        return await self._alive().load_checkpoint(task_id)

    async def aclose(self) -> None:
        return None


class World:
    """The external system: each operation's side effect, and the truth about it."""

    def __init__(self) -> None:
        self.effects: dict[str, int] = {}
        self.results: dict[str, str] = {}
        self.failed_for_good: set[str] = set()

    def apply(self, op: str, attempt: int) -> str:
        assert self.effects.get(op, 0) == 0, f"{op} executed twice"
        self.effects[op] = 1
        self.results[op] = f"order-of-{op}-attempt-{attempt}"
        return self.results[op]

    async def reconcile(self, rec: Execution) -> Verdict:
        if rec.operation_id in self.results:
            return Verdict.succeeded(self.results[rec.operation_id])
        return Verdict.not_done()


async def deliver(shared: LedgerStore, world: World, clock: Clock, op: str, fault: str) -> Any:
    conn = Dying(shared)
    ledger = Ledger(conn, clock=clock, lease=LEASE, poll=0.001, max_poll=0.004)
    ledger.tool("create_order", reconcile=world.reconcile)

    async def body(run: Run) -> Any:
        await asyncio.sleep(0)
        if fault == "error":
            world.failed_for_good.add(op)
            raise RuntimeError("rejected: out of stock")
        if fault == "not_executed":
            raise NotExecuted("validation failed before anything happened")
        if fault in ("timeout_before", "crash_before"):
            if fault == "crash_before":
                conn.dead = True
                clock.advance(LEASE + 1)
                raise Crash()
            raise TimeoutError("connect timeout")
        result = world.apply(op, run.attempt)
        await asyncio.sleep(0)
        if fault == "timeout_after":
            raise TimeoutError("read timeout")
        if fault == "maybe_after":
            raise MaybeExecuted("connection reset after the request was sent")
        if fault == "cancel_after":
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)
        if fault == "crash_after":
            conn.dead = True
            clock.advance(LEASE + 1)
            raise Crash()
        return result

    return await ledger.run(op, "create_order", {"sku": op}, body)


async def play(stores: list[LedgerStore], schedule: list[tuple[int, list[str]]]) -> None:
    world, clock = World(), Clock(1_000_000.0)
    n = 0
    for op_index, faults in schedule:
        op = f"op{op_index}"
        tasks = []
        for fault in faults:
            tasks.append(asyncio.create_task(deliver(stores[n % len(stores)], world, clock, op, fault)))
            n += 1
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for out in outcomes:
            if isinstance(out, str):  # whoever got a result got the one effect's result
                assert out == world.results[op]
    clock.advance(LEASE + 1)
    for i in range(OPS):
        op = f"op{i}"
        try:
            got = await deliver(stores[0], world, clock, op, "ok")
        except ExecutionFailed:
            assert op in world.failed_for_good and world.effects.get(op, 0) == 0
            continue
        assert got == world.results[op] and world.effects[op] == 1
    for i in range(OPS):
        for rec in await stores[0].records(f"op{i}"):
            assert rec.state in (State.SUCCEEDED, State.FAILED), rec
            if rec.state is State.SUCCEEDED:
                assert rec.result == world.results[rec.operation_id] and world.effects[rec.operation_id] == 1
            else:
                assert world.effects.get(rec.operation_id, 0) == 0


def run_schedule(stores: list[LedgerStore], schedule: list[tuple[int, list[str]]]) -> None:
    async def main() -> None:
        try:
            await asyncio.wait_for(play(stores, schedule), 20)
        finally:
            for s in stores:
                await s.aclose()

    asyncio.run(main())


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(schedules)
def test_memory_store_never_executes_twice_and_loses_nothing(schedule: list[tuple[int, list[str]]]) -> None:
    run_schedule([MemoryStore()], schedule)


@SETTINGS
@given(schedules)
def test_sqlite_store_never_executes_twice_and_loses_nothing(schedule: list[tuple[int, list[str]]]) -> None:
    work = Path(tempfile.mkdtemp(prefix="failover-ledger-prop-"))
    try:
        db = work / "ledger.db"
        run_schedule([SQLiteStore(db, synchronous="NORMAL"), SQLiteStore(db, synchronous="NORMAL")], schedule)
    finally:
        shutil.rmtree(work, ignore_errors=True)
