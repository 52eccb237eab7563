"""MemoryStore: the ledger in a dict. One process, no durability: tests and single-run scripts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from . import _machine as machine
from ._record import Checkpoint, Execution
from ._store import TransactionalStore

T = TypeVar("T")


class MemoryStore(TransactionalStore):
    """Records in a dict. Every operation runs without awaiting, so it is atomic on one loop."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], Execution] = {}
        self._checkpoints: dict[str, Checkpoint] = {}

    async def _apply(
        self, operation_id: str, key: str, fn: Callable[[Execution | None], tuple[Execution | None, T]]
    ) -> T:
        new, out = fn(self._records.get((operation_id, key)))
        if new is not None:
            self._records[(operation_id, key)] = new
        return out

    async def _checkpoint(self, task_id: str, fn: Callable[[Checkpoint | None], Checkpoint]) -> Checkpoint:
        cp = fn(self._checkpoints.get(task_id))
        self._checkpoints[task_id] = cp
        return cp

    async def expire(self, *, now: float) -> list[Execution]:
        out = []
        for ident, rec in list(self._records.items()):
            new = machine.expire(rec, now)
            if new is not None:
                self._records[ident] = new
                out.append(new)
        return out

    async def get(self, operation_id: str, key: str) -> Execution | None:
        return self._records.get((operation_id, key))

    async def records(self, operation_id: str) -> list[Execution]:
        found = [r for (op, _), r in self._records.items() if op == operation_id]
        return sorted(found, key=lambda r: (r.created_at, r.key))

    async def load_checkpoint(self, task_id: str) -> Checkpoint | None:
        return self._checkpoints.get(task_id)

    async def aclose(self) -> None:
        return None
