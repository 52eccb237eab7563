"""What the ledger raises, and what a tool body may raise to say how it failed.

FailoverError
 +-- LedgerError
      +-- ExecutionFailed     an earlier execution failed and may not run again
      +-- OutcomeUnknown      it may have happened; reconcile and the confirm gate left it open
      +-- StillRunning        another owner still runs it and the caller would not wait longer
      +-- KeyConflict         the key is taken by another tool or other arguments
      +-- CheckpointConflict  someone saved the task's state since the caller read it
      +-- LedgerMisuse        the body neither reported a result nor raised

Raised by a tool body:
  NotExecuted     "this failed before it took effect": a retry is allowed
  MaybeExecuted   "I cannot tell whether it took effect": the record becomes unknown
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import FailoverError, FailureKind

if TYPE_CHECKING:
    from ._record import Execution


class LedgerError(FailoverError):
    """Base of the ledger's errors. ``record`` is the execution concerned, when there is one."""

    record: Execution | None = None


class ExecutionFailed(LedgerError):
    def __init__(self, record: Execution) -> None:
        super().__init__(
            f"{record.name} failed on attempt {record.attempts} and is not safe to run again: {record.error}"
        )
        self.record = record


class OutcomeUnknown(LedgerError):
    """The tool may have run. Nothing was re-run; a person or a later reconcile must decide."""

    kind = FailureKind.SIDE_EFFECT_UNCERTAIN

    def __init__(self, record: Execution, reason: str) -> None:
        super().__init__(f"side_effect_uncertain: {record.name} was started and its outcome is unknown ({reason})")
        self.record = record
        self.reason = reason


class StillRunning(LedgerError):
    def __init__(self, record: Execution, waited: float) -> None:
        super().__init__(f"{record.name} is still {record.state.value} by another owner after waiting {waited:.3f}s")
        self.record = record


class KeyConflict(LedgerError):
    def __init__(self, record: Execution, tool: str, args_hash: str) -> None:
        what = "tool" if record.tool != tool else "arguments"
        super().__init__(
            f"key {record.key!r} of operation {record.operation_id} belongs to {record.tool} "
            f"with arguments {record.args_hash[:12]}; this call has a different {what} "
            f"({tool}, {args_hash[:12]}): use another key"
        )
        self.record = record


class CheckpointConflict(LedgerError):
    def __init__(self, task_id: str, expected: int, actual: int) -> None:
        super().__init__(f"checkpoint of task {task_id}: expected version {expected}, the store has {actual}")
        self.task_id = task_id
        self.expected = expected
        self.actual = actual


class LedgerMisuse(LedgerError, RuntimeError):
    pass


class NotExecuted(Exception):
    """Raise from a tool body (``raise NotExecuted("card declined") from exc``) when the
    action certainly did not take effect: the record is ``failed`` but safe to run again."""


class MaybeExecuted(Exception):
    """Raise from a tool body when the action may have taken effect but the outcome is not
    known (a timeout after the request was sent): the record becomes ``unknown``."""
