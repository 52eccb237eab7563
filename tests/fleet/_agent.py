"""An agent application process for the fleet's ledger test.

    python -m tests.fleet._agent GATEWAY_URL REDIS_URL PREFIX WORKDIR SEED TASK...

It waits for ``WORKDIR/go``, then works through every task (in an order shuffled by SEED,
a few at a time), as an agent loop does: ask the gateway (route ``agent``, the OpenAI SDK,
``x-failover-task-id``, side effects ``write_possible``) and run the tool call it gets back
through a ``Ledger`` on the fleet's Redis. Its tool, ``create_order``, appends one line to
``WORKDIR/shop`` (the external system; fsynced) and its reconcile hook looks there.

The other agent processes work on the SAME tasks at the same time, so every task is
delivered three times over, and Redis is killed and restarted while they run. A turn that
fails (the gateway says 409, the ledger raises because Redis is gone) is retried after a
short pause, as an application replays a turn. At the end the process writes
``WORKDIR/agent-<pid>.json``: what it saw, by kind.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import openai
import redis.asyncio as aioredis

from failover.ledger import Execution, Ledger, RedisStore, Run, Verdict
from tests._services import append_synced as append

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "parameters": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
            },
        },
    }
]
ARGS = {"sku": "A-1", "qty": 1}  # what the fake model asks for (the test scripts it)
TOOL_SECONDS = 0.1  # how long the external call takes: far below the lease, as the ledger requires
LEASE = 1.0
RUN_FOR = 25.0  # give up (and report what is left) after this long


class Agent:
    def __init__(self, gateway: str, redis_url: str, prefix: str, work: Path) -> None:
        self.work = work
        self.shop = work / "shop"
        self.seen: Counter[str] = Counter()
        self.client = openai.AsyncOpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=5)
        redis = aioredis.Redis.from_url(redis_url, socket_timeout=0.3, socket_connect_timeout=0.3)
        self.ledger = Ledger(RedisStore(redis, prefix=prefix), lease=LEASE, poll=0.01, max_poll=0.05)
        self.ledger.tool("create_order", reconcile=self.find_order)

    async def create_order(self, run: Run) -> Any:
        await asyncio.sleep(TOOL_SECONDS)
        append(self.shop, f"{run.idempotency_key} {os.getpid()} attempt {run.attempt}")
        self.seen["executed"] += 1
        return {"order_id": run.idempotency_key}

    async def find_order(self, rec: Execution) -> Verdict:
        """Reconcile: the shop knows every order it made, by the ledger's idempotency key."""
        self.seen["reconciled"] += 1
        wanted = f"{rec.operation_id}/{rec.key}"
        lines = self.shop.read_text().splitlines() if self.shop.exists() else []
        if any(line.split(" ", 1)[0] == wanted for line in lines):
            return Verdict.succeeded({"order_id": wanted})
        return Verdict.not_done()

    async def turn(self, task: str) -> bool:
        """One turn of the agent loop; True when the task's order is settled."""
        try:
            resp = await self.client.chat.completions.create(
                model="agent",
                messages=[{"role": "user", "content": "Buy one A-1"}],
                tools=TOOLS,  # type: ignore[arg-type]
                extra_headers={"x-failover-task-id": task, "x-failover-side-effects": "write_possible"},
            )
        except openai.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            code = body.get("code") or f"http_{exc.status_code}"
            ledger_down = "could not be read" in str(body.get("message", ""))
            self.seen[f"gateway:{exc.status_code}:{code}{':ledger_down' if ledger_down else ''}"] += 1
            if code == "side_effect_uncertain" and not ledger_down:
                return await self.resume(task)
            return False
        except openai.APIConnectionError:
            self.seen["gateway:connection"] += 1
            return False
        calls = resp.choices[0].message.tool_calls or []
        if not calls:
            self.seen["no_tool_call"] += 1
            return False
        call = calls[0]
        try:
            await self.ledger.run(task, call.function.name, call.function.arguments, self.create_order)  # type: ignore[union-attr]
        except Exception as exc:  # Redis is down, or another owner's outcome is still open: replay the turn
            self.seen[f"ledger:{type(exc).__name__}"] += 1
            return False
        self.seen["settled"] += 1
        return True

    async def resume(self, task: str) -> bool:
        """The gateway refused: a tool of this task may have run. Ask the ledger for each such
        action again (docs/side-effects.md, "Checkpoints"): a live owner is waited for, an
        expired one is reconciled against the shop. The next turn then proceeds."""
        try:
            state = await self.ledger.resume(task)
            for rec in state.uncertain:
                await self.ledger.run(task, rec.tool, ARGS, self.create_order, key=rec.key)
        except Exception as exc:
            self.seen[f"ledger:{type(exc).__name__}"] += 1
        return False

    async def work_on(self, task: str, end: float) -> None:
        while time.monotonic() < end:
            if await self.turn(task):
                return
            await asyncio.sleep(0.05)
        self.seen["gave_up"] += 1

    async def run(self, tasks: list[str], seed: int) -> None:
        random.Random(seed).shuffle(tasks)
        (self.work / f"ready-{os.getpid()}").touch()
        while not (self.work / "go").exists():  # noqa: ASYNC110 - the signal is a file from another process
            await asyncio.sleep(0.005)
        end = time.monotonic() + RUN_FOR
        sem = asyncio.Semaphore(4)

        async def one(task: str) -> None:
            async with sem:
                await self.work_on(task, end)

        await asyncio.gather(*(one(t) for t in tasks))
        (self.work / f"agent-{os.getpid()}.json").write_text(json.dumps(dict(self.seen)))
        await self.client.close()


def main() -> None:
    gateway, redis_url, prefix, work, seed = sys.argv[1:6]
    tasks = sys.argv[6:]
    asyncio.run(Agent(gateway, redis_url, prefix, Path(work)).run(tasks, int(seed)))


if __name__ == "__main__":
    main()
