"""Per-route hooks the router calls: quality gates (task-level success) and degrade handlers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from ..model import FailureKind, Request, Response, Unavailable


class Verdict(Protocol):
    @property
    def passed(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


class QualityGate(Protocol):
    """Judges whether a contract-valid answer actually does the task (a rule, an evaluator,
    or a judge model called through the router). A failed gate is never a recovery."""

    def __call__(self, request: Request, response: Response, /) -> Awaitable[Verdict]: ...


DegradeHandler = Callable[[Request, Unavailable], Awaitable[Response | None]]
"""A non-model fallback: rules, a cached answer, "try again later". Its Response is returned
marked degraded (``record.degraded``, ``record.degraded_reason``), never as a fresh answer."""

# The caller's own mistake or a policy refusal is not papered over by a canned answer.
NOT_DEGRADED = frozenset({FailureKind.INVALID_REQUEST, FailureKind.CONTENT_FILTERED, FailureKind.SIDE_EFFECT_UNCERTAIN})


async def degraded(handler: DegradeHandler | None, request: Request, exc: Unavailable) -> Response | None:
    """The degraded Response for ``exc``, or None when there is none to give."""
    if handler is None or exc.reason in NOT_DEGRADED:
        return None
    resp = await handler(request, exc)
    if resp is None:
        return None
    record = replace(
        exc.record, degraded=True, degraded_reason=f"{exc.reason.value}: {exc.message}", outcome="degraded"
    )
    return replace(resp, record=record)
