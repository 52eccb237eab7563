"""Processes that die: ``kill -9`` while a tool is started, and duplicates from several processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failover.ledger import Execution, Ledger, Run, SQLiteStore, State, Verdict

ROOT = Path(__file__).resolve().parents[2]  # the child runs as ``-m tests.ledger._child`` from here
ARGS = {"sku": "A-1", "qty": 1}


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.ledger._child", *args], stderr=subprocess.PIPE, cwd=ROOT)


async def wait_for(path: Path, proc: subprocess.Popen[bytes], limit: float = 20.0) -> None:
    end = time.monotonic() + limit
    while not await asyncio.to_thread(path.exists):
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"the child exited with {proc.returncode} before {path.name}:\n{err}")
        if time.monotonic() > end:
            proc.kill()
            pytest.fail(f"the child never wrote {path.name}")
        await asyncio.sleep(0.01)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("effect", ["after", "before"])
async def test_kill_9_while_started_then_restart_reconciles_and_never_reruns_blindly(
    tmp_path: Path, effect: str
) -> None:
    db = str(tmp_path / "ledger.db")
    child = spawn("hang", db, str(tmp_path), effect)
    try:
        await wait_for(tmp_path / "started", child)
        store = SQLiteStore(db)
        (rec,) = await store.records("checkout-42")
        assert rec.state is State.STARTED and rec.attempts == 1 and rec.lease_until is not None
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    # "restart": a new process opens the same file once the dead owner's lease has run out
    await asyncio.sleep(max(0.0, rec.lease_until - time.time()) + 0.02)
    reconciled: list[Execution] = []

    async def find_order(r: Execution) -> Verdict:
        reconciled.append(r)
        for line in lines(tmp_path / "orders"):
            key, order_id = line.split()
            if key == f"{r.operation_id}/{r.key}":
                return Verdict.succeeded({"order_id": order_id}, external_ref=order_id)
        return Verdict.not_done()

    ledger = Ledger(store)
    ledger.tool("create_order", reconcile=find_order)
    recovered = await ledger.recover()
    assert [(r.key, r.state, r.attempts) for r in recovered] == [(rec.key, State.UNKNOWN, 1)]
    after_restart = await ledger.get("checkout-42", rec.key)
    assert after_restart is not None and after_restart.state is State.UNKNOWN and after_restart.owner is None

    ran_here: list[int] = []

    async def create_order(run: Run) -> dict[str, str]:
        ran_here.append(run.attempt)
        return {"order_id": "ord_2"}

    result = await ledger.run("checkout-42", "create_order", ARGS, create_order)
    assert len(reconciled) == 1 and reconciled[0].state is State.UNKNOWN
    final = await ledger.get("checkout-42", rec.key)
    assert final is not None and final.state is State.SUCCEEDED
    if effect == "after":  # the order exists: reconcile settles it, the tool is not run again
        assert result == {"order_id": "ord_1"} and ran_here == [] and final.attempts == 1
    else:  # reconcile proves it never happened: it runs once, now
        assert result == {"order_id": "ord_2"} and ran_here == [2] and final.attempts == 2
    assert len(lines(tmp_path / "executions")) == 1  # the killed process's one start
    # and a later duplicate is a plain replay
    assert await ledger.run("checkout-42", "create_order", ARGS, create_order) == result
    assert len(reconciled) == 1
    await ledger.aclose()


async def test_duplicates_from_several_processes_on_one_sqlite_file_execute_once(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    await SQLiteStore(db).aclose()  # the schema exists before they race
    children = [spawn("dupes", db, str(tmp_path), "10") for _ in range(3)]
    try:
        end = time.monotonic() + 30
        while sum(n.startswith("ready-") for n in os.listdir(tmp_path)) < len(children):
            for c in children:
                if c.poll() is not None:
                    err = c.stderr.read().decode() if c.stderr else ""
                    pytest.fail(f"a child exited early:\n{err}")
            assert time.monotonic() < end, "children never got ready"
            await asyncio.sleep(0.01)
        (tmp_path / "go").touch()
        for c in children:
            assert c.wait(timeout=30) == 0, c.stderr.read().decode() if c.stderr else ""
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
    assert len(lines(tmp_path / "executions")) == 1  # 3 processes x 10 duplicates: one execution
    assert len(set(lines(tmp_path / "results"))) == 1  # every process got that one result
