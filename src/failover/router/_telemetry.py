"""Builds telemetry events from what the router records; called only when a hook listens."""

from __future__ import annotations

from ..model import Attempt, Failure, Response, RouteRecord, Target
from ..policy import BreakerEvent
from ..telemetry import AttemptEnded, BreakerChanged, RequestEnded, answered


def attempt_ended(
    request_id: str, route: str, target: Target, attempt: Attempt, t0: float, outcome: object
) -> AttemptEnded:
    """``attempt`` is the Attempt just appended to the record; ``outcome`` what the exchange returned, if anything."""
    response = outcome if isinstance(outcome, Response) else None
    if isinstance(outcome, Failure):
        response = outcome.response  # a truncation or refusal still has a stop reason
    return AttemptEnded(
        request_id=request_id,
        route=route,
        target=attempt.target,
        model=attempt.model,
        provider=str(target.dialect),
        phase=attempt.phase.value,
        index=attempt.index,
        outcome=attempt.outcome,
        failure=attempt.failure.kind.value if attempt.failure is not None else None,
        status=attempt.status,
        input_tokens=attempt.usage.input_tokens if attempt.usage is not None else None,
        output_tokens=attempt.usage.output_tokens if attempt.usage is not None else None,
        cached_input_tokens=attempt.usage.cached_input_tokens if attempt.usage is not None else None,
        cost=attempt.cost,
        duration=attempt.duration,
        stop_reason=response.stop_reason.value if response is not None else None,
        provider_request_id=attempt.provider_request_id,
        at=t0 + attempt.end,
        first_chunk=attempt.first_event - attempt.start if attempt.first_event is not None else None,
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


def breaker_changed(event: BreakerEvent) -> BreakerChanged:
    return BreakerChanged(
        scope=event.scope,
        layer=str(event.layer),
        old=event.old.value,
        new=event.new.value,
        reason=event.reason,
        at=event.at,
    )
