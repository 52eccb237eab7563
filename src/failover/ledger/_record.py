"""Execution records: what the ledger knows about one tool execution.

A record is keyed by ``(operation_id, key)``. The operation id names the user's action (one
agent task, one chat turn the user asked for), never one provider attempt, so a retried or
failed-over model call that asks for the same tool again lands on the same record. The key is
a business key (``order:cart-42``), a tool_call_id, or by default the tool name plus the hash of
its arguments.

States::

    planned -> started -> succeeded    duplicates get this result
                       -> failed       retried only when idempotent or marked safe
                       -> unknown      crash, timeout or cancellation mid-execution:
                                       reconciled, never replayed blindly
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

Json = Any
"""A JSON value: None, bool, int, float, str, list or dict of JSON values."""


class State(StrEnum):
    PLANNED = "planned"  # the model asked for it; nothing has run
    STARTED = "started"  # an owner holds a lease and is running the tool
    SUCCEEDED = "succeeded"  # done; duplicates get this result
    FAILED = "failed"  # the tool reported a failure
    UNKNOWN = "unknown"  # it may or may not have happened


TERMINAL = frozenset({State.SUCCEEDED, State.FAILED})


def canonical_json(value: Json) -> str:
    """Sorted keys, no spaces, no NaN: the same arguments always give the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def parse_arguments(arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """Tool arguments as a dict; a string (``ToolCall.arguments``) is decoded first."""
    if isinstance(arguments, str):
        decoded = json.loads(arguments) if arguments.strip() else {}
        if not isinstance(decoded, dict):
            raise ValueError(f"tool arguments must be a JSON object, got {type(decoded).__name__}")
        return decoded
    return dict(arguments)


def arguments_hash(arguments: Mapping[str, Any] | str) -> str:
    """sha256 (hex) of the canonical JSON of the arguments."""
    return hashlib.sha256(canonical_json(parse_arguments(arguments)).encode()).hexdigest()


def default_key(tool: str, args_hash: str) -> str:
    """The key used when none is given: the tool and its arguments.

    A model that asks again for the same call after a timeout usually gives it a NEW
    tool_call_id; the same tool with the same arguments within one operation is the same
    action. Pass an explicit key to run two identical calls in one operation on purpose.
    """
    return f"{tool}:{args_hash[:32]}"


def tenant_task_id(tenant: str | None, task_id: str) -> str:
    """The operation id under which the ledger holds ``task_id`` of ``tenant``: ``<tenant>/<task_id>``.

    A Router (and so the gateway) reads a request's task under this id, so one tenant can
    never see, block or complete another's task, even with the same ``x-failover-task-id``
    (a task id cannot hold ``/``, so no tenant can name another's namespace). Without a
    tenant (an open gateway, a Router called without ``Envelope.tenant``) it is the bare task
    id. Agents of a tenant record their tool calls under the same id::

        await ledger.run(tenant_task_id("alpha", task), "create_order", args, create_order)
    """
    if not task_id:
        raise ValueError("tenant_task_id needs a non-empty task id")
    return task_id if tenant is None else f"{tenant}/{task_id}"


def operation_id(*parts: str) -> str:
    """A stable operation id from what identifies the user's action (user, conversation, turn).

    >>> operation_id("user-17", "conv-3", "turn-12")
    'op_...'
    """
    if not parts:
        raise ValueError("operation_id() needs at least one part")
    return "op_" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Intent:
    """What a caller wants to execute: the identity of the record and how to treat it."""

    operation_id: str
    key: str
    tool: str
    args_hash: str
    idempotent: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """One tool execution as the store holds it. Times are wall-clock epoch seconds.

    ``attempts`` counts how many times the tool body was started; ``owner`` and
    ``lease_until`` belong to whoever runs (or is reconciling) it right now.
    """

    operation_id: str
    key: str
    tool: str
    args_hash: str
    state: State
    idempotent: bool = False
    result: Json = None
    error: str | None = None
    external_ref: str | None = None
    retry_safe: bool = False  # a failure that did not take effect: running again is allowed
    attempts: int = 0
    owner: str | None = None
    lease_until: float | None = None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    updated_at: float = 0.0

    @property
    def uncertain(self) -> bool:
        """Started or unknown: a side effect may have happened and nobody knows its outcome."""
        return self.state in (State.STARTED, State.UNKNOWN)

    def lease_live(self, now: float) -> bool:
        return self.owner is not None and self.lease_until is not None and self.lease_until > now

    @property
    def name(self) -> str:
        """``create_order (operation op_1, key order:42)``: how errors and records name it."""
        return f"{self.tool} (operation {self.operation_id}, key {self.key})"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = self.state.value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Execution:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["state"] = State(values["state"])
        return cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What an owner writes when it is done: the body's end, or a reconcile / confirm verdict."""

    state: State  # SUCCEEDED, FAILED or UNKNOWN
    result: Json = None
    error: str | None = None
    external_ref: str | None = None
    retry_safe: bool = False


class ClaimKind(StrEnum):
    RUN = "run"  # the caller owns a new attempt and must run the tool
    REPLAY = "replay"  # it already succeeded: return the recorded result
    FAILED = "failed"  # it failed and may not be retried
    BUSY = "busy"  # another owner holds a live lease (running or reconciling)
    RESOLVE = "resolve"  # the outcome is unknown and the caller now owns reconciling it
    CONFLICT = "conflict"  # the key is taken by another tool or other arguments


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    kind: ClaimKind
    record: Execution


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """The resumable state of an agent task. ``version`` grows by one with each save."""

    task_id: str
    state: Json
    version: int
    saved_at: float


# The columns of an execution record in the SQL stores (SQLite, PostgreSQL), in one order.
EXECUTION_COLUMNS = (
    "operation_id",
    "key",
    "tool",
    "args_hash",
    "state",
    "idempotent",
    "result",
    "error",
    "external_ref",
    "retry_safe",
    "attempts",
    "owner",
    "lease_until",
    "created_at",
    "started_at",
    "finished_at",
    "updated_at",
)
