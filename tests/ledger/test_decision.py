"""side_effect_decision: the router's workflow-3 check, as a pure function."""

from __future__ import annotations

import pytest

from failover import FailureKind, SideEffectMode
from failover.ledger import Checkpoint, Execution, State, TaskState, side_effect_decision


def rec(
    key: str, state: State, *, idempotent: bool = False, started: float = 1.0, tool: str = "create_order"
) -> Execution:
    return Execution(
        operation_id="task-1",
        key=key,
        tool=tool,
        args_hash="0" * 64,
        state=state,
        idempotent=idempotent,
        attempts=1,
        created_at=0.0,
        started_at=started,
        updated_at=started,
    )


def task(*records: Execution, resumed: bool = False) -> TaskState:
    cp = Checkpoint(task_id="task-1", state={"step": 1}, version=1, saved_at=0.0)
    return TaskState(task_id="task-1", records=records, checkpoint=cp, resumed=resumed)


@pytest.mark.parametrize("state", [State.STARTED, State.UNKNOWN])
def test_an_uncertain_side_effect_refuses_and_names_the_operation(state: State) -> None:
    d = side_effect_decision(SideEffectMode.WRITE_POSSIBLE, task(rec("order:1", state), rec("mail", State.SUCCEEDED)))
    assert d.verdict == "refuse" and d.refused and d.kind is FailureKind.SIDE_EFFECT_UNCERTAIN
    assert d.operation is not None and d.operation.key == "order:1"
    assert d.operation_name == "create_order (operation task-1, key order:1)"
    assert f"outcome is {state.value}" in d.reason and "resume the task from its checkpoint" in d.reason


def test_the_earliest_uncertain_operation_is_named_with_a_count_of_the_rest() -> None:
    d = side_effect_decision(
        "write_possible",
        task(rec("b", State.UNKNOWN, started=5.0), rec("a", State.STARTED, started=2.0, tool="send_invoice")),
    )
    assert d.operation is not None and d.operation.key == "a" and "(and 1 more)" in d.reason


def test_read_only_requests_are_held_to_the_ledgers_evidence() -> None:
    assert side_effect_decision(SideEffectMode.READ_ONLY, task(rec("order:1", State.STARTED))).refused


@pytest.mark.parametrize(
    ("mode", "state", "why"),
    [
        (SideEffectMode.NONE, task(rec("o", State.STARTED)), "declares no side effects"),
        (SideEffectMode.WRITE_POSSIBLE, None, "no ledger state"),
        (SideEffectMode.WRITE_POSSIBLE, task(), "no side effect of this task is uncertain"),
        (SideEffectMode.WRITE_POSSIBLE, task(rec("o", State.SUCCEEDED), rec("p", State.FAILED)), "is uncertain"),
        (SideEffectMode.WRITE_POSSIBLE, task(rec("w", State.STARTED, idempotent=True)), "is uncertain"),
        (SideEffectMode.WRITE_POSSIBLE, task(rec("o", State.PLANNED)), "is uncertain"),
        (SideEffectMode.WRITE_POSSIBLE, task(rec("o", State.UNKNOWN), resumed=True), "resumes from its checkpoint"),
    ],
)
def test_proceed(mode: SideEffectMode, state: TaskState | None, why: str) -> None:
    d = side_effect_decision(mode, state)
    assert d.verdict == "proceed" and not d.refused and d.kind is None
    assert why in d.reason


def test_task_state_views() -> None:
    t = task(
        rec("a", State.SUCCEEDED),
        rec("b", State.STARTED),
        rec("c", State.FAILED),
        rec("d", State.PLANNED),
        rec("e", State.UNKNOWN),
    )
    assert [r.key for r in t.completed] == ["a"]
    assert [r.key for r in t.uncertain] == ["b", "e"]
    assert [r.key for r in t.failed] == ["c"] and [r.key for r in t.planned] == ["d"]
    assert t.state == {"step": 1} and TaskState(task_id="x").state is None
