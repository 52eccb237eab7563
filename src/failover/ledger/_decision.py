"""Workflow 3 for the router: may this task's request be replayed or fall back?

The router's recovery (replay from scratch, failover, cross-model fallback) re-asks a model.
That is harmless for the model call itself, but once a side-effecting tool has *started*
within the task and nobody knows whether it took effect, a fresh attempt can lead the
application to act on a state the model never saw. So :func:`side_effect_decision` refuses,
naming the uncertain operation, unless the request resumes the task from its saved state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..model import FailureKind, SideEffectMode
from ._record import Checkpoint, Execution, Json, State


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskState:
    """What the ledger knows about one agent task (its operation id is the task id).

    ``resumed`` is True when the caller rebuilt its request from the task's checkpoint
    (:meth:`Ledger.resume`, or ``task_state(..., resumed_from=version)``).
    """

    task_id: str
    records: tuple[Execution, ...] = ()
    checkpoint: Checkpoint | None = None
    resumed: bool = False

    @property
    def state(self) -> Json:
        """The saved resumable state, or None when the task has no checkpoint."""
        return None if self.checkpoint is None else self.checkpoint.state

    @property
    def completed(self) -> tuple[Execution, ...]:
        return tuple(r for r in self.records if r.state is State.SUCCEEDED)

    @property
    def uncertain(self) -> tuple[Execution, ...]:
        """Started or unknown: these may have happened."""
        return tuple(r for r in self.records if r.uncertain)

    @property
    def failed(self) -> tuple[Execution, ...]:
        return tuple(r for r in self.records if r.state is State.FAILED)

    @property
    def planned(self) -> tuple[Execution, ...]:
        return tuple(r for r in self.records if r.state is State.PLANNED)

    @property
    def results(self) -> dict[str, Json]:
        """key -> result of every completed action, to hand back instead of re-running."""
        return {r.key: r.result for r in self.completed}


@dataclass(frozen=True, slots=True, kw_only=True)
class SideEffectDecision:
    verdict: Literal["proceed", "refuse"]
    reason: str
    operation: Execution | None = None  # the uncertain operation a refusal is about

    @property
    def refused(self) -> bool:
        return self.verdict == "refuse"

    @property
    def kind(self) -> FailureKind | None:
        """``side_effect_uncertain`` for a refusal (the router's Unavailable reason)."""
        return FailureKind.SIDE_EFFECT_UNCERTAIN if self.refused else None

    @property
    def operation_name(self) -> str | None:
        return None if self.operation is None else self.operation.name


def side_effect_decision(mode: SideEffectMode | str, task: TaskState | None) -> SideEffectDecision:
    """``proceed`` or ``refuse`` (with the uncertain operation) for one more model attempt.

    - mode ``none``: the caller declared no side effects for this request: proceed.
    - no ledger state for the task: nothing is known to have started: proceed.
    - the task resumes from its saved state: proceed. Its tool calls go through the ledger
      again, where a duplicate replays the first result and an uncertain one reconciles.
    - a non-idempotent tool of the task is ``started`` or ``unknown``: refuse, naming it.
      (``read_only`` requests are held to the same evidence: an uncertain write recorded in
      the ledger outweighs the envelope's claim.)
    - otherwise (nothing uncertain, or only idempotent tools): proceed. Completed actions
      are safe: a repeated request for one is answered from the ledger.
    """
    m = SideEffectMode(mode)
    if m is SideEffectMode.NONE:
        return SideEffectDecision(verdict="proceed", reason="the request declares no side effects")
    if task is None:
        return SideEffectDecision(verdict="proceed", reason="no ledger state for this task")
    risky = [r for r in task.uncertain if not r.idempotent]
    if not risky:
        return SideEffectDecision(verdict="proceed", reason="no side effect of this task is uncertain")
    first = min(risky, key=lambda r: (r.started_at or r.created_at, r.key))
    if task.resumed:
        return SideEffectDecision(
            verdict="proceed",
            reason=f"the task resumes from its checkpoint; {first.name} is reconciled by the ledger if asked again",
            operation=first,
        )
    more = f" (and {len(risky) - 1} more)" if len(risky) > 1 else ""
    return SideEffectDecision(
        verdict="refuse",
        reason=(
            f"{first.name} was started and its outcome is {first.state.value}{more}: replaying the task or falling "
            f"back to another model could repeat it; reconcile it or resume the task from its checkpoint"
        ),
        operation=first,
    )
