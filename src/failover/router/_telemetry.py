"""Builds telemetry events from what the router records; called only when a hook listens."""

from __future__ import annotations

from ..model import Attempt, Failure, Response, RouteRecord, Target
from ..policy import BreakerEvent
from ..telemetry import AttemptEnded, BreakerChanged, RequestEnded, answered


def attempt_ended(request_id: str, route: str, target: Target, a: Attempt, t0: float, outcome: object) -> AttemptEnded:
    """``a`` is the Attempt just appended to the record; ``outcome`` what the exchange returned, if anything."""
    response = outcome if isinstance(outcome, Response) else None
    if isinstance(outcome, Failure):
        response = outcome.response  # a truncation or refusal still has a stop reason
    return AttemptEnded(
        request_id=request_id,
        route=route,
        target=a.target,
        model=a.model,
        provider=str(target.dialect),
        phase=a.phase.value,
        index=a.index,
        outcome=a.outcome,
        failure=a.failure.kind.value if a.failure is not None else None,
        status=a.status,
        input_tokens=a.usage.input_tokens if a.usage is not None else None,
        output_tokens=a.usage.output_tokens if a.usage is not None else None,
        cached_input_tokens=a.usage.cached_input_tokens if a.usage is not None else None,
        cost=a.cost,
        duration=a.duration,
        stop_reason=response.stop_reason.value if response is not None else None,
        provider_request_id=a.provider_request_id,
        at=t0 + a.end,
        first_chunk=a.first_event - a.start if a.first_event is not None else None,
    )


def request_ended(record: RouteRecord, at: float, *, tenant: str | None = None) -> RequestEnded:
    answered_by, first_chunk = answered(record)
    return RequestEnded(
        request_id=record.request_id,
        route=record.route,
        outcome=record.outcome,
        workflow=record.workflow.value,
        recovered=record.recovered,
        degraded=record.degraded,
        target_used=record.target_used,
        attempts=len(record.attempts),
        elapsed_ms=record.elapsed_ms,
        total_cost=record.total_cost,
        at=at,
        tenant=tenant,
        answered_by=answered_by,
        first_chunk=first_chunk,
        recovery_kind=record.recovery_kind,
    )


def breaker_changed(e: BreakerEvent) -> BreakerChanged:
    return BreakerChanged(scope=e.scope, layer=str(e.layer), old=e.old.value, new=e.new.value, reason=e.reason, at=e.at)
