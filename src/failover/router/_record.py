"""Builds the RouteRecord of one request while it runs."""

from __future__ import annotations

from ..model import (
    Attempt,
    Exclusion,
    FailureKind,
    Phase,
    RouteRecord,
    Validation,
    Wait,
    Workflow,
)


class Recorder:
    """Collects attempts, waits and exclusions; times are loop seconds from the start."""

    __slots__ = (
        "attempts",
        "excluded",
        "input_tokens",
        "request_id",
        "retry_budget_exhausted",
        "route",
        "t0",
        "uncertain_operation",
        "waits",
    )

    def __init__(self, request_id: str, route: str, t0: float) -> None:
        self.request_id = request_id
        self.route = route
        self.t0 = t0
        self.attempts: list[Attempt] = []
        self.waits: list[Wait] = []
        self.excluded: list[Exclusion] = []
        self.input_tokens: int | None = None
        self.retry_budget_exhausted = False
        self.uncertain_operation: str | None = None

    def exclude(self, target: str, phase: Phase, reason: str) -> None:
        self.excluded.append(Exclusion(target=target, phase=phase, reason=reason))

    def wait(self, target: str, start: float, end: float, reason: str) -> None:
        self.waits.append(Wait(target=target, start=start - self.t0, end=end - self.t0, reason=reason))

    def _workflow(self, used: Attempt | None, stopped: bool) -> Workflow:
        if stopped:
            return Workflow.STOP
        if used is not None and len(self.attempts) == 1:
            return Workflow.DIRECT
        if any(a.phase is Phase.FALLBACK for a in self.attempts):
            return Workflow.FALLBACK
        return Workflow.RETRY_FAILOVER if self.attempts else Workflow.STOP

    def freeze(
        self,
        now: float,
        *,
        used: Attempt | None,
        outcome: str,
        stopped: bool = False,
        validation: Validation | None = None,
    ) -> RouteRecord:
        elapsed = now - self.t0
        failed = [a for a in self.attempts if a.failure is not None]
        recovered = used is not None and bool(failed)
        reason = None
        if recovered and used is not None:
            first = failed[0]
            assert first.failure is not None
            how = {
                Phase.PRIMARY: "replay",
                Phase.FAILOVER: "equivalent failover",
                Phase.FALLBACK: "cross-model fallback",
                Phase.REPAIR: "repair",
            }[used.phase]
            reason = f"{first.failure.label} on {first.target}; recovered by {how} to {used.target}"
        added = (used.start if used is not None else elapsed) * 1000.0
        return RouteRecord(
            request_id=self.request_id,
            route=self.route,
            workflow=self._workflow(used, stopped),
            outcome=outcome,
            attempts=tuple(self.attempts),
            waits=tuple(self.waits),
            excluded=tuple(self.excluded),
            recovered=recovered,
            recovery_reason=reason,
            target_used=used.target if used is not None else None,
            elapsed_ms=elapsed * 1000.0,
            added_latency_ms=added,
            total_cost=sum(a.cost for a in self.attempts),
            validation=validation or Validation(transport=used is not None),
            input_tokens_estimated=self.input_tokens,
            retry_budget_exhausted=self.retry_budget_exhausted,
            uncertain_operation=self.uncertain_operation,
        )


def last_failure_kind(attempts: list[Attempt]) -> FailureKind | None:
    for a in reversed(attempts):
        if a.failure is not None:
            return a.failure.kind
    return None
