"""Durable tool-execution records: no retry, fallback or crash repeats a side effect.

    from failover.ledger import Ledger, Verdict

    ledger = Ledger("ledger.db")                               # SQLite (WAL), the default store
    ledger.tool("create_order", reconcile=find_order)          # not idempotent: reconciled when unknown
    result = await ledger.run(task_id, "create_order", args, create_order)

Records are keyed by (operation_id, key): the operation is the user's action (an agent task,
a chat turn), the key a business key, a tool_call_id, or by default the tool plus its
arguments hash. States: planned -> started -> succeeded | failed | unknown. A duplicate gets
the first result without running; a record left ``started`` (crash, timeout) becomes
``unknown`` and is reconciled, never replayed blindly. See docs/side-effects.md.

Stores: :class:`MemoryStore` (one process), :class:`SQLiteStore` (one machine, durable),
:class:`RedisStore` (a fleet; ``pip install failover[redis]``), :class:`PostgresStore` (a
fleet; ``pip install failover[postgres]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._decision import SideEffectDecision, TaskState, side_effect_decision
from ._errors import (
    CheckpointConflict,
    ExecutionFailed,
    KeyConflict,
    LedgerError,
    LedgerMisuse,
    MaybeExecuted,
    NotExecuted,
    OutcomeUnknown,
    StillRunning,
)
from ._ledger import Confirm, Ledger, Reconcile, Run, ToolSpec, Verdict, VerdictKind
from ._memory import MemoryStore
from ._record import (
    Checkpoint,
    Claim,
    ClaimKind,
    Execution,
    Intent,
    Json,
    Outcome,
    State,
    arguments_hash,
    canonical_json,
    default_key,
    operation_id,
    tenant_task_id,
)
from ._sqlite import SQLiteStore
from ._store import LedgerStore, TransactionalStore

if TYPE_CHECKING:
    from ._postgres import PostgresStore
    from ._redis import RedisStore

__all__ = [
    # the API
    "Ledger",
    "Run",
    "ToolSpec",
    "Verdict",
    "VerdictKind",
    "Reconcile",
    "Confirm",
    "operation_id",
    "tenant_task_id",
    # records
    "State",
    "Execution",
    "Checkpoint",
    "TaskState",
    "Json",
    "arguments_hash",
    "canonical_json",
    "default_key",
    # router integration
    "side_effect_decision",
    "SideEffectDecision",
    # stores
    "LedgerStore",
    "TransactionalStore",
    "MemoryStore",
    "SQLiteStore",
    "RedisStore",
    "PostgresStore",
    "Intent",
    "Claim",
    "ClaimKind",
    "Outcome",
    # errors
    "LedgerError",
    "ExecutionFailed",
    "OutcomeUnknown",
    "StillRunning",
    "KeyConflict",
    "CheckpointConflict",
    "LedgerMisuse",
    "NotExecuted",
    "MaybeExecuted",
]


def __getattr__(name: str) -> Any:
    # The fleet stores import their optional drivers only when asked for.
    if name == "RedisStore":
        from ._redis import RedisStore

        return RedisStore
    if name == "PostgresStore":
        from ._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'failover.ledger' has no attribute {name!r}")
