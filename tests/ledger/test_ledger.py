"""The Ledger's rules, run against every store (memory, SQLite, a real Redis, a real PostgreSQL)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from failover.ledger import (
    CheckpointConflict,
    ExecutionFailed,
    KeyConflict,
    Ledger,
    LedgerMisuse,
    LedgerStore,
    MaybeExecuted,
    MemoryStore,
    NotExecuted,
    OutcomeUnknown,
    Run,
    SQLiteStore,
    State,
    StillRunning,
    Verdict,
    arguments_hash,
    default_key,
    operation_id,
)

from ._kit import Clock, Shop

ARGS = {"sku": "A-1", "qty": 2}


async def test_a_duplicate_returns_the_first_result_without_running(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    first = await ledger.run("op1", "create_order", ARGS, shop.create_order)
    again = await ledger.run("op1", "create_order", {"qty": 2, "sku": "A-1"}, shop.create_order)  # same, reordered
    assert first == again == {"order_id": "ord_1", "sku": "A-1"}
    assert shop.calls == 1
    (rec,) = await ledger.records("op1")
    assert rec.state is State.SUCCEEDED and rec.attempts == 1 and rec.tool == "create_order"
    assert rec.args_hash == arguments_hash(ARGS) and rec.key == default_key("create_order", rec.args_hash)
    assert rec.external_ref == "ord_1" and rec.owner is None and rec.lease_until is None
    assert rec.created_at <= rec.started_at <= rec.finished_at  # type: ignore[operator]


async def test_the_context_manager_says_when_the_body_must_not_act(store: LedgerStore) -> None:
    ledger = Ledger(store)
    async with ledger.execute("op1", "send_invoice", {"order": 7}, key="invoice:7") as run:
        assert not run.done and not run.replayed and run.attempt == 1
        assert run.idempotency_key == "op1/invoice:7"
        run.succeed({"invoice": "inv_1"}, external_ref="inv_1")
    async with ledger.execute("op1", "send_invoice", {"order": 7}, key="invoice:7") as again:
        assert again.done and again.replayed
        with pytest.raises(LedgerMisuse):
            again.succeed({"invoice": "inv_2"})
    assert again.result == {"invoice": "inv_1"} and again.external_ref == "inv_1"


async def test_keys_separate_actions_and_a_reused_key_with_other_arguments_is_refused(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    await ledger.run("op1", "create_order", ARGS, shop.create_order)
    await ledger.run("op1", "create_order", {"sku": "B-2"}, shop.create_order)  # other arguments: another action
    await ledger.run("op2", "create_order", ARGS, shop.create_order)  # another operation
    await ledger.run("op1", "create_order", ARGS, shop.create_order, key="second-on-purpose")
    assert shop.calls == 4
    # tool_call_id keys: the same id with other arguments is a conflict, not a silent replay
    await ledger.run("op3", "create_order", '{"sku": "C"}', shop.create_order, key="call_1")
    with pytest.raises(KeyConflict, match="call_1"):
        await ledger.run("op3", "create_order", '{"sku": "D"}', shop.create_order, key="call_1")
    with pytest.raises(KeyConflict):
        await ledger.run("op3", "cancel_order", '{"sku": "C"}', shop.create_order, key="call_1")
    assert shop.calls == 5


async def test_a_failure_is_recorded_and_not_retried_unless_safe_or_idempotent(store: LedgerStore) -> None:
    ledger = Ledger(store)
    calls: list[str] = []

    async def boom(run: Run) -> Any:
        calls.append(run.key)
        raise RuntimeError("payment gateway said 500")

    with pytest.raises(RuntimeError):
        await ledger.run("op1", "charge", {"cents": 100}, boom, key="charge")
    rec = await ledger.get("op1", "charge")
    assert rec is not None and rec.state is State.FAILED and "500" in (rec.error or "") and not rec.retry_safe
    with pytest.raises(ExecutionFailed, match="not safe to run again"):
        await ledger.run("op1", "charge", {"cents": 100}, boom, key="charge")
    assert calls == ["charge"]

    async def declined(run: Run) -> Any:
        calls.append(run.key)
        if len(calls) < 3:
            raise NotExecuted("card declined before any charge")
        return {"charged": True}

    with pytest.raises(NotExecuted):
        await ledger.run("op1", "charge", {"cents": 5}, declined, key="charge-2")
    assert await ledger.run("op1", "charge", {"cents": 5}, declined, key="charge-2") == {"charged": True}
    rec = await ledger.get("op1", "charge-2")
    assert rec is not None and rec.state is State.SUCCEEDED and rec.attempts == 2

    async def flaky(run: Run) -> Any:
        calls.append(run.key)
        if run.attempt == 1:
            raise ConnectionError("reset")
        return {"weather": "sunny"}

    with pytest.raises(ConnectionError):
        await ledger.run("op1", "get_weather", {"city": "Paris"}, flaky, idempotent=True)
    assert await ledger.run("op1", "get_weather", {"city": "Paris"}, flaky, idempotent=True) == {"weather": "sunny"}

    ledger.tool("refund", safe_errors=(PermissionError,))

    async def refused(run: Run) -> Any:
        calls.append(run.key)
        if run.attempt == 1:
            raise PermissionError("not yet")
        return "ok"

    with pytest.raises(PermissionError):
        await ledger.run("op1", "refund", {}, refused)
    assert await ledger.run("op1", "refund", {}, refused) == "ok"


async def test_cancelled_mid_body_is_unknown_and_reconciled_not_rerun(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    ledger.tool("create_order", reconcile=shop.find_order)
    applied = asyncio.Event()

    async def slow_create(run: Run) -> Any:
        await shop.place(run)  # the order exists...
        applied.set()
        await asyncio.sleep(30)  # ...but the response never makes it back
        return {}

    task = asyncio.create_task(ledger.run("op1", "create_order", ARGS, slow_create))
    await applied.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (rec,) = await ledger.records("op1")
    assert rec.state is State.UNKNOWN and rec.owner is None and "CancelledError" in (rec.error or "")

    async with ledger.execute("op1", "create_order", ARGS) as run:
        assert run.done and run.reconciled
    assert run.result == {"order_id": "ord_1"} and run.external_ref == "ord_1"
    assert shop.calls == 1 and len(shop.reconciled) == 1
    (rec,) = await ledger.records("op1")
    assert rec.state is State.SUCCEEDED and rec.attempts == 1


async def test_reconcile_that_finds_nothing_runs_it_again_once(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    ledger.tool("create_order", reconcile=shop.find_order)

    async def times_out_before_sending(run: Run) -> Any:
        raise TimeoutError("connect timeout")

    with pytest.raises(TimeoutError):
        await ledger.run("op1", "create_order", ARGS, times_out_before_sending)
    rec = (await ledger.records("op1"))[0]
    assert rec.state is State.UNKNOWN
    assert await ledger.run("op1", "create_order", ARGS, shop.create_order) == {"order_id": "ord_1", "sku": "A-1"}
    assert shop.calls == 1 and len(shop.reconciled) == 1
    (rec,) = await ledger.records("op1")
    assert rec.state is State.SUCCEEDED and rec.attempts == 2


async def test_still_unknown_goes_to_the_confirm_gate_for_a_non_idempotent_tool(store: LedgerStore) -> None:
    ledger = Ledger(store)
    asked: list[tuple[str, str]] = []
    runs: list[int] = []

    async def cannot_tell(rec: Any) -> Verdict:
        return Verdict.unknown("the mail server keeps no sent log")

    async def send(run: Run) -> Any:
        runs.append(run.attempt)
        if run.attempt == 1:
            raise MaybeExecuted("SMTP connection dropped after DATA")
        return {"sent": True}

    ledger.tool("send_email", reconcile=cannot_tell)
    with pytest.raises(MaybeExecuted):
        await ledger.run("op1", "send_email", {"to": "a@b.c"}, send)

    # no gate: escalated to the caller, never re-run
    with pytest.raises(OutcomeUnknown, match=r"send_email .* no confirm gate") as info:
        await ledger.run("op1", "send_email", {"to": "a@b.c"}, send)
    assert info.value.kind == "side_effect_uncertain" and info.value.record is not None
    assert runs == [1]

    async def escalate(rec: Any, reason: str) -> Verdict:
        asked.append((rec.tool, reason))
        return Verdict.unknown("paged the on-call")

    with pytest.raises(OutcomeUnknown, match="paged the on-call"):
        await ledger.run("op1", "send_email", {"to": "a@b.c"}, send, confirm=escalate)
    assert runs == [1] and asked == [("send_email", "the mail server keeps no sent log")]
    rec = (await ledger.records("op1"))[0]
    assert rec.state is State.UNKNOWN and rec.owner is None

    async def approve(rec: Any, reason: str) -> Verdict:
        return Verdict.rerun("the customer asked for it again")

    assert await ledger.run("op1", "send_email", {"to": "a@b.c"}, send, confirm=approve) == {"sent": True}
    assert runs == [1, 2]

    async def it_was_sent(rec: Any, reason: str) -> Verdict:
        return Verdict.succeeded({"sent": True, "by": "operator"})

    with pytest.raises(MaybeExecuted):
        await ledger.run("op2", "send_email", {"to": "a@b.c"}, send)  # attempt 1 again: maybe sent
    ledger.confirm = it_was_sent  # the ledger-wide gate
    assert await ledger.run("op2", "send_email", {"to": "a@b.c"}, send) == {"sent": True, "by": "operator"}
    assert runs == [1, 2, 1]


async def test_an_idempotent_tool_of_unknown_outcome_runs_again(store: LedgerStore) -> None:
    ledger = Ledger(store)
    ledger.tool("upsert_profile", idempotent=True)
    runs: list[int] = []

    async def upsert(run: Run) -> Any:
        runs.append(run.attempt)
        if run.attempt == 1:
            raise MaybeExecuted("timeout")
        return "saved"

    with pytest.raises(MaybeExecuted):
        await ledger.run("op1", "upsert_profile", {"name": "x"}, upsert)
    assert await ledger.run("op1", "upsert_profile", {"name": "x"}, upsert) == "saved"
    assert runs == [1, 2]


async def test_reconcile_errors_count_as_unknown(store: LedgerStore) -> None:
    ledger = Ledger(store)

    async def broken(rec: Any) -> Verdict:
        raise ConnectionError("shop API down")

    async def body(run: Run) -> Any:
        raise MaybeExecuted()

    with pytest.raises(MaybeExecuted):
        await ledger.run("op1", "create_order", ARGS, body, reconcile=broken)
    with pytest.raises(OutcomeUnknown, match="reconcile raised ConnectionError"):
        await ledger.run("op1", "create_order", ARGS, body, reconcile=broken)


async def test_a_lease_that_ran_out_means_unknown_then_reconcile(store: LedgerStore) -> None:
    clock = Clock()
    shop = Shop()
    ledger = Ledger(store, clock=clock, lease=10)
    ledger.tool("create_order", reconcile=shop.find_order)
    crashed = Ledger(store, clock=clock, lease=10)
    # a process claims the action and dies before writing anything back
    claim = await crashed.store.claim(
        crashed.execute("op1", "create_order", ARGS).intent, owner="dead", now=clock(), lease=10
    )
    assert claim.kind == "run"
    with pytest.raises(StillRunning):
        await ledger.run("op1", "create_order", ARGS, shop.create_order, wait=0)
    clock.advance(11)
    expired = await ledger.recover()
    assert [(r.key, r.state) for r in expired] == [(claim.record.key, State.UNKNOWN)]
    assert await ledger.recover() == []
    # reconcile finds no order: it never happened, so it runs now (attempt 2)
    assert await ledger.run("op1", "create_order", ARGS, shop.create_order) == {"order_id": "ord_1", "sku": "A-1"}
    assert shop.reconciled == [f"op1/{claim.record.key}"] and shop.calls == 1


async def test_the_lease_is_renewed_while_the_body_runs(store: LedgerStore) -> None:
    # Real time (the stores are real): the body outlives its lease 2.4 times over, renewed every
    # 0.17 s; only a stall of the whole process for half a second could lose it (a loaded CI
    # machine lost a 0.12 s lease once).
    shop = Shop(delay=1.2)
    ledger = Ledger(store, lease=0.5)
    ledger.tool("create_order", reconcile=shop.find_order)
    first = asyncio.create_task(ledger.run("op1", "create_order", ARGS, shop.create_order))
    await asyncio.sleep(0.05)
    second = await ledger.run("op1", "create_order", ARGS, shop.create_order)  # waits, renewed lease seen
    assert second == await first
    assert shop.calls == 1 and shop.reconciled == []


async def test_a_run_always_stops_its_heartbeat(store: LedgerStore) -> None:
    """Hundreds of short runs whose lease heartbeat fires while the store is answering: every
    run ends, and no heartbeat outlives its run. (redis-py can swallow a cancellation that lands
    mid-command; a heartbeat cancelled that way renewed forever and its run never ended.)"""
    rnd = random.Random(7)
    for i in range(150):
        ledger = Ledger(store, lease=rnd.choice([0.003, 0.006, 0.012]))

        async def body(run: Run, pause: float = rnd.random() * 0.01) -> Any:
            await asyncio.sleep(pause)
            return {"n": run.arguments["n"]}

        task = asyncio.create_task(ledger.run(f"op{i}", "create_order", {"n": i}, body))
        done, _ = await asyncio.wait({task}, timeout=5)  # wait() never cancels: a lost cancel shows as a hang
        assert task in done, f"run {i} did not end: its lease heartbeat ignored the cancellation"
        assert task.result() == {"n": i}
    beats = [t for t in asyncio.all_tasks() if "_keep_lease" in repr(t.get_coro())]
    assert beats == []


async def test_misuse_is_reported_and_recorded_as_unknown(store: LedgerStore) -> None:
    ledger = Ledger(store)
    with pytest.raises(LedgerMisuse, match=r"without run\.succeed"):
        async with ledger.execute("op1", "create_order", ARGS):
            pass  # acted (maybe) and reported nothing
    rec = (await ledger.records("op1"))[0]
    assert rec.state is State.UNKNOWN

    async def returns_a_set(run: Run) -> Any:
        return {1, 2}

    with pytest.raises(LedgerMisuse, match="not JSON"):
        await ledger.run("op2", "create_order", ARGS, returns_a_set)
    rec = (await ledger.records("op2"))[0]
    assert rec.state is State.SUCCEEDED and rec.result is None
    with pytest.raises(LedgerMisuse):
        ledger.execute("op3", "x", {}).succeed(1)
    with pytest.raises(ValueError):
        ledger.execute("", "x", {})


async def test_a_success_reported_before_an_error_is_kept(store: LedgerStore) -> None:
    ledger = Ledger(store)

    async def report_then_fail() -> None:
        async with ledger.execute("op1", "create_order", ARGS) as run:
            run.succeed({"order_id": "ord_9"})
            raise KeyError("post-processing bug")

    with pytest.raises(KeyError):
        await report_then_fail()
    assert await ledger.run("op1", "create_order", ARGS, Shop().create_order) == {"order_id": "ord_9"}


async def test_planned_records_run_on_the_first_claim(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    planned = await ledger.plan("op1", "create_order", ARGS)
    assert planned.state is State.PLANNED and planned.attempts == 0
    assert (await ledger.plan("op1", "create_order", ARGS)).state is State.PLANNED
    with pytest.raises(KeyConflict):
        await ledger.plan("op1", "create_order", {"sku": "other"}, key=planned.key)
    await ledger.run("op1", "create_order", ARGS, shop.create_order)
    assert shop.calls == 1
    (rec,) = await ledger.records("op1")
    assert rec.state is State.SUCCEEDED and rec.attempts == 1


async def test_checkpoints_version_and_resume(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    assert (await ledger.resume("task1")).state is None
    cp1 = await ledger.checkpoint("task1", {"messages": ["hi"], "step": 1})
    assert cp1.version == 1
    await ledger.run("task1", "create_order", ARGS, shop.create_order, key="order")
    cp2 = await ledger.checkpoint("task1", {"messages": ["hi", "ordered"], "step": 2}, expected_version=1)
    assert cp2.version == 2
    with pytest.raises(CheckpointConflict) as info:
        await ledger.checkpoint("task1", {"step": 99}, expected_version=1)
    assert info.value.actual == 2
    with pytest.raises(CheckpointConflict):
        await ledger.checkpoint("task-new", {"step": 1}, expected_version=3)
    assert (await ledger.checkpoint("task-new", {"step": 1}, expected_version=0)).version == 1

    resumed = await ledger.resume("task1")
    assert resumed.resumed and resumed.state == {"messages": ["hi", "ordered"], "step": 2}
    assert resumed.checkpoint is not None and resumed.checkpoint.version == 2
    assert resumed.results == {"order": {"order_id": "ord_1", "sku": "A-1"}}
    assert [r.key for r in resumed.completed] == ["order"] and not resumed.uncertain
    plain = await ledger.task_state("task1")
    assert not plain.resumed
    assert (await ledger.task_state("task1", resumed_from=2)).resumed
    assert not (await ledger.task_state("task1", resumed_from=3)).resumed


async def test_string_arguments_from_a_tool_call_hash_like_objects(store: LedgerStore) -> None:
    shop = Shop()
    ledger = Ledger(store)
    await ledger.run("op1", "create_order", '{"qty":2,"sku":"A-1"}', shop.create_order)
    await ledger.run("op1", "create_order", ARGS, shop.create_order)
    assert shop.calls == 1
    with pytest.raises(ValueError):
        await ledger.run("op1", "create_order", "[1, 2]", shop.create_order)


async def test_a_path_means_the_default_sqlite_store(tmp_path: Path) -> None:
    shop = Shop()
    async with Ledger(tmp_path / "ledger.db") as ledger:
        assert isinstance(ledger.store, SQLiteStore)
        await ledger.run("op1", "create_order", ARGS, shop.create_order)
    async with Ledger(str(tmp_path / "ledger.db")) as reopened:  # durable: another process would see it
        assert await reopened.run("op1", "create_order", ARGS, shop.create_order) == {"order_id": "ord_1", "sku": "A-1"}
    assert shop.calls == 1
    with pytest.raises(ValueError):
        Ledger(MemoryStore(), lease=0)


def test_operation_ids_derive_from_the_users_action() -> None:
    a = operation_id("user-17", "conv-3", "turn-12")
    assert a == operation_id("user-17", "conv-3", "turn-12") and a.startswith("op_")
    assert a != operation_id("user-17", "conv-3", "turn-13") != operation_id("user-17conv-3", "turn-12")
    with pytest.raises(ValueError):
        operation_id()
