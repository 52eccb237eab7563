"""Builds the RouteRecord of one request while it runs.

The workflow and the recovery follow from which tier answered and why the candidates listed
before it were passed over: an answer from an approved fallback is a ``fallback`` whether the
primary failed or was only held away (an open breaker, a cool-down, the limiter, a spent retry
budget), and both are recoveries. A candidate left out for good (a missing capability, a
window, the envelope) is not a failure of anything: passing it over is no recovery.
"""

from __future__ import annotations

import math

from ..model import (
    Attempt,
    Exclusion,
    ExclusionCode,
    Failure,
    Phase,
    Route,
    RouteRecord,
    Target,
    Usage,
    Validation,
    Wait,
    Workflow,
)

_HOW = {
    Phase.PRIMARY: "replay",
    Phase.FAILOVER: "equivalent failover",
    Phase.FALLBACK: "cross-model fallback",
    Phase.REPAIR: "repair",
}


class Recorder:
    """Collects attempts, waits and exclusions; times are loop seconds from the start."""

    __slots__ = (
        "attempts",
        "excluded",
        "input_tokens",
        "listing",
        "placement",
        "request_id",
        "retry_budget_exhausted",
        "route",
        "t0",
        "uncertain_operation",
        "waits",
    )

    def __init__(self, request_id: str, route: str, t0: float, *, listing: Route | None = None) -> None:
        self.request_id = request_id
        self.route = route
        self.t0 = t0
        self.listing = listing  # the route, for the order it lists its targets in
        self.attempts: list[Attempt] = []
        self.waits: list[Wait] = []
        self.excluded: list[Exclusion] = []
        self.input_tokens: int | None = None
        self.retry_budget_exhausted = False
        self.uncertain_operation: str | None = None
        self.placement: str | None = None

    def exclude(
        self,
        target: str,
        phase: Phase,
        code: ExclusionCode,
        reason: str,
        *,
        temporary: bool = False,
        replay: bool = False,
    ) -> None:
        self.excluded.append(
            Exclusion(target=target, phase=phase, code=code, reason=reason, temporary=temporary, replay=replay)
        )

    def wait(self, target: str, start: float, end: float, reason: str) -> None:
        self.waits.append(Wait(target=target, start=start - self.t0, end=end - self.t0, reason=reason))

    def attempted(
        self,
        target: Target,
        phase: Phase,
        start: float,
        end: float,
        *,
        connect: float,
        total: float,
        hedge: bool,
        failure: Failure | None = None,
        outcome: str | None = None,
        status: int | None = None,
        usage: Usage | None = None,
        cost: float = 0.0,
        estimated: bool = False,
        provider_request_id: str | None = None,
        connected: float | None = None,
        streamed: bool = False,
        first_event: float | None = None,
        quiet: float = math.inf,
        committed: float | None = None,
        contract_ok: bool | None = None,
        task_ok: bool | None = None,
        stripped: int = 0,
        dropped: tuple[str, ...] = (),
        capped_to: int | None = None,
    ) -> Attempt:
        """Add the attempt on ``target`` that ran from ``start`` to ``end`` (loop times, as are
        ``connected`` and ``first_event``); ``outcome`` is the failure's label, or "ok"."""
        attempt = Attempt(
            index=len(self.attempts),
            target=target.name,
            model=target.model,
            phase=phase,
            start=start - self.t0,
            end=end - self.t0,
            connect_timeout=connect,
            total_timeout=total,
            first_event_timeout=min(target.timeouts.first_event, quiet, total) if streamed else None,
            idle_timeout=min(target.timeouts.idle, quiet) if streamed else None,
            first_event=None if first_event is None else first_event - self.t0,
            committed=None if committed is None else committed - self.t0,
            connected=None if connected is None else connected - self.t0,
            outcome=outcome or ("ok" if failure is None else failure.label),
            failure=failure,
            hedge=hedge,
            streamed=streamed,
            contract_ok=contract_ok,
            task_ok=task_ok,
            reasoning_stripped=stripped,
            passthrough_dropped=dropped,
            max_tokens_capped_to=capped_to,
            status=status,
            usage=usage,
            cost=cost,
            cost_estimated=estimated,
            provider_request_id=provider_request_id,
        )
        self.attempts.append(attempt)
        return attempt

    def _tier(self, used: Attempt) -> Phase:
        """The tier of the target that answered: its first attempt's phase (a repair is never first)."""
        for a in self.attempts:
            if a.target == used.target:
                return a.phase
        return used.phase

    def _rank(self, target: str) -> int:
        order = self.listing.targets if self.listing is not None else ()
        return next((i for i, t in enumerate(order) if t.name == target), len(order))

    def _passed_over(self, used: Attempt) -> Exclusion | None:
        """The first candidate the route lists before the one that answered, held away only for now."""
        held = [e for e in self.excluded if e.temporary and e.target != used.target]
        if not held:  # the common case: nothing was held away
            return None
        rank = self._rank(used.target)
        held = [e for e in held if self._rank(e.target) < rank]
        return min(held, key=lambda e: self._rank(e.target)) if held else None

    def _workflow(self, used: Attempt | None, stopped: bool, recovered: bool) -> Workflow:
        if stopped:
            return Workflow.STOP
        if used is None:
            if any(a.phase is Phase.FALLBACK for a in self.attempts):
                return Workflow.FALLBACK
            return Workflow.RETRY_FAILOVER if self.attempts else Workflow.STOP
        tier = self._tier(used)
        if tier is Phase.FALLBACK:
            return Workflow.FALLBACK
        if tier is Phase.PRIMARY and not recovered and len(self.attempts) == 1:
            return Workflow.DIRECT
        return Workflow.RETRY_FAILOVER

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
        reason = kind = None
        if used is not None and (len(self.attempts) > 1 or self.excluded):  # else: a direct answer
            failed = next((a for a in self.attempts if a.failure is not None), None)
            held = self._passed_over(used)
            how = _HOW[used.phase]
            if held is not None and (failed is None or self._rank(held.target) <= self._rank(failed.target)):
                reason, kind = f"{held.target} held ({held.reason}); recovered by {how} to {used.target}", "held"
            elif failed is not None:
                assert failed.failure is not None
                reason = f"{failed.failure.label} on {failed.target}; recovered by {how} to {used.target}"
                kind = failed.failure.kind.value
        recovered = reason is not None
        added = (used.start if used is not None else elapsed) * 1000.0
        return RouteRecord(
            request_id=self.request_id,
            route=self.route,
            workflow=self._workflow(used, stopped, recovered),
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
            recovery_kind=kind,
            model_used=used.model if used is not None else None,
            placement=self.placement,
        )
