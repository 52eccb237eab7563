"""The one interface every ledger store implements, and a base for transactional stores."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

from . import _machine as machine
from ._errors import CheckpointConflict
from ._record import Checkpoint, Claim, Execution, Intent, Json, Outcome

T = TypeVar("T")


@runtime_checkable
class LedgerStore(Protocol):
    """Atomic operations over execution records and checkpoints.

    Each method is one atomic step (a claim or a compare-and-set): two callers racing on
    the same key see one winner. ``now`` is passed in (wall-clock seconds) so every store
    follows the same clock as the Ledger that drives it.
    """

    async def plan(self, intent: Intent, *, now: float) -> Execution:
        """Create a ``planned`` record unless the key has one; return the record."""
        ...

    async def claim(self, intent: Intent, *, owner: str, now: float, lease: float) -> Claim:
        """Decide, atomically, whether ``owner`` runs, replays, waits or reconciles."""
        ...

    async def renew(self, operation_id: str, key: str, *, owner: str, attempt: int, now: float, lease: float) -> bool:
        """Extend the owner's lease; False when the owner no longer holds it."""
        ...

    async def finish(
        self, operation_id: str, key: str, *, attempt: int, outcome: Outcome, now: float
    ) -> Execution | None:
        """Record how attempt ``attempt`` ended; None when it was settled by someone else."""
        ...

    async def resolve(
        self, operation_id: str, key: str, *, owner: str, outcome: Outcome, now: float
    ) -> Execution | None:
        """Record a reconciler's verdict on the unknown record it owns; None if it lost it."""
        ...

    async def expire(self, *, now: float) -> list[Execution]:
        """Turn every ``started`` record whose lease ran out into ``unknown``; return them."""
        ...

    async def get(self, operation_id: str, key: str) -> Execution | None: ...

    async def records(self, operation_id: str) -> list[Execution]:
        """Every record of one operation, oldest first."""
        ...

    async def save_checkpoint(
        self, task_id: str, state: Json, *, now: float, expected_version: int | None = None
    ) -> Checkpoint:
        """Save a task's state as the next version; with ``expected_version``, only if the
        saved version is still that one (0: none saved yet), else CheckpointConflict."""
        ...

    async def load_checkpoint(self, task_id: str) -> Checkpoint | None: ...

    async def aclose(self) -> None: ...


class TransactionalStore(ABC):
    """A store that can run a function over one record under a lock or in a transaction.

    Subclasses provide ``_apply`` (read, decide, write, atomically) and the reads; the state
    machine is the shared pure functions of ``_machine``.
    """

    @abstractmethod
    async def _apply(
        self, operation_id: str, key: str, fn: Callable[[Execution | None], tuple[Execution | None, T]]
    ) -> T: ...

    @abstractmethod
    async def _checkpoint(self, task_id: str, fn: Callable[[Checkpoint | None], Checkpoint]) -> Checkpoint: ...

    async def plan(self, intent: Intent, *, now: float) -> Execution:
        return await self._apply(intent.operation_id, intent.key, lambda rec: machine.plan(rec, intent, now))

    async def claim(self, intent: Intent, *, owner: str, now: float, lease: float) -> Claim:
        return await self._apply(
            intent.operation_id, intent.key, lambda rec: machine.claim(rec, intent, owner, now, lease)
        )

    async def renew(self, operation_id: str, key: str, *, owner: str, attempt: int, now: float, lease: float) -> bool:
        def fn(rec: Execution | None) -> tuple[Execution | None, bool]:
            new = machine.renew(rec, owner, attempt, now, lease)
            return new, new is not None

        return await self._apply(operation_id, key, fn)

    async def finish(
        self, operation_id: str, key: str, *, attempt: int, outcome: Outcome, now: float
    ) -> Execution | None:
        def fn(rec: Execution | None) -> tuple[Execution | None, Execution | None]:
            new = machine.finish(rec, attempt, outcome, now)
            return new, new

        return await self._apply(operation_id, key, fn)

    async def resolve(
        self, operation_id: str, key: str, *, owner: str, outcome: Outcome, now: float
    ) -> Execution | None:
        def fn(rec: Execution | None) -> tuple[Execution | None, Execution | None]:
            new = machine.resolve(rec, owner, outcome, now)
            return new, new

        return await self._apply(operation_id, key, fn)

    async def save_checkpoint(
        self, task_id: str, state: Json, *, now: float, expected_version: int | None = None
    ) -> Checkpoint:
        def fn(cur: Checkpoint | None) -> Checkpoint:
            version = cur.version if cur is not None else 0
            if expected_version is not None and expected_version != version:
                raise CheckpointConflict(task_id, expected_version, version)
            return Checkpoint(task_id=task_id, state=state, version=version + 1, saved_at=now)

        return await self._checkpoint(task_id, fn)
