"""A separate process for the crash and multi-process tests, run from the repository root as
``python -m tests.ledger._child MODE DB DIR ...``.

hang DB DIR EFFECT    claim create_order, record the execution (and the order, if EFFECT is
                      "after"), write DIR/started, then hang until killed
dupes DB DIR N        wait for DIR/go, then run N concurrent duplicates of one create_order
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from failover.ledger import Ledger, Run, SQLiteStore
from tests._services import append_synced as append

ARGS = {"sku": "A-1", "qty": 1}


async def hang(db: str, work: Path, effect: str) -> None:
    ledger = Ledger(SQLiteStore(db), lease=0.3)

    async def create_order(run: Run) -> Any:
        append(work / "executions", f"{os.getpid()} attempt {run.attempt}")
        if effect == "after":
            append(work / "orders", f"{run.idempotency_key} ord_1")
        (work / "started").write_text(str(os.getpid()))
        await asyncio.sleep(120)  # killed here
        return {"order_id": "ord_1"}

    await ledger.run("checkout-42", "create_order", ARGS, create_order)


async def dupes(db: str, work: Path, n: int) -> None:
    ledger = Ledger(SQLiteStore(db), poll=0.005)

    async def create_order(run: Run) -> Any:
        append(work / "executions", f"{os.getpid()} attempt {run.attempt}")
        await asyncio.sleep(0.2)
        return {"order_id": "ord_1", "by": os.getpid()}

    (work / f"ready-{os.getpid()}").touch()
    end = time.monotonic() + 30
    while not (work / "go").exists():
        if time.monotonic() > end:
            raise SystemExit("no go signal")
        await asyncio.sleep(0.002)
    results = await asyncio.gather(*(ledger.run("checkout-42", "create_order", ARGS, create_order) for _ in range(n)))
    assert len({r["by"] for r in results}) == 1
    append(work / "results", str(results[0]["by"]))
    await ledger.aclose()


def main() -> None:
    mode, db, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if mode == "hang":
        asyncio.run(hang(db, work, sys.argv[4]))
    elif mode == "dupes":
        asyncio.run(dupes(db, work, int(sys.argv[4])))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
