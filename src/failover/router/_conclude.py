"""How a request that found no answer ends: the Stop that :func:`conclude` makes of its state,
its attempts and the candidates it left (pure, like the engine it follows).

Every choice here reads typed fields: the failures' kinds and the exclusions' codes, never
their wording (an ``Exclusion.reason`` is for a person, and may be reworded).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Attempt, Exclusion, ExclusionCode, FailureKind
from ._state import RunState, Stop

# the kinds of an answer that came back but did not meet the contract
CONTRACT_KINDS = frozenset({FailureKind.SCHEMA_INVALID, FailureKind.TOOL_CALL_MALFORMED, FailureKind.CONTRACT_FAILURE})

_NO_TIME = 1e-3
# Exclusions for a window too small: listed after a context overflow
_WINDOW_CODES = frozenset({ExclusionCode.CONTEXT_WINDOW, ExclusionCode.MIN_CONTEXT})


def conclude(
    state: RunState, attempts: Sequence[Attempt], excluded: Sequence[Exclusion], now: float, budget: float
) -> Stop:
    """Why the request failed once every candidate was left (the loop found no answer)."""
    # Less than a millisecond left is none: an attempt cut at the deadline can end a hair before
    # it (a timer that fires early by the clock's resolution, a float sum of start + cap).
    if state.deadline_at - now < _NO_TIME or state.short_of_time:
        left = max(0.0, state.deadline_at - now)
        return Stop(
            FailureKind.DEADLINE_EXHAUSTED,
            f"the {budget:.3f}s budget is spent ({left:.3f}s left) after {len(attempts)} attempt(s)",
        )
    failed = [a for a in attempts if a.failure is not None]
    if not failed:
        why = "; ".join(f"{e.target}: {e.reason}" for e in excluded)
        if state.holds:
            first = min(state.holds, key=lambda h: h.until)
            return Stop(first.kind, f"no candidate could be tried now ({why})", retryable=True)
        if state.budget_spent:  # every upstream it could use is failing for many requests: come back later
            return Stop(FailureKind.PROVIDER_OVERLOADED, f"no candidate could be tried now ({why})", retryable=True)
        # turned away by the client-side limiter: the target's own rate limit, retryable later
        kind = FailureKind.RATE_LIMITED if state.limited else FailureKind.CONTRACT_FAILURE
        return Stop(kind, f"no candidate could be tried ({why})")
    tried = ", ".join(sorted({a.target for a in attempts}))
    last = failed[-1]
    assert last.failure is not None
    detail = f"last failure on {attempts[-1].target}: {last.failure.label}: {last.failure.message}"
    if last.failure.kind is FailureKind.CONTEXT_OVERFLOW:  # the candidates no known window could hold
        small = [f"{e.target}: {e.reason}" for e in excluded if e.code in _WINDOW_CODES]
        if small:
            detail += "; " + "; ".join(small)
    why_not = next((e.reason for e in reversed(excluded) if e.target == last.target and e.replay), None)
    if why_not is not None:  # why it was not tried again, e.g. a Retry-After beyond the deadline
        detail += f"; {why_not}"
    if last.failure.kind in CONTRACT_KINDS:  # answers came back, but none met the contract
        return Stop(FailureKind.CONTRACT_FAILURE, f"no answer met the contract (tried {tried}); {detail}")
    return Stop(last.failure.kind, f"every candidate failed (tried {tried}); {detail}")


__all__ = ["conclude"]
