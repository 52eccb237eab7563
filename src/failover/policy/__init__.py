"""Pure decisions, with time passed in: deadline, backoff, retry budget, health, breakers, selection."""

from ._backoff import Backoff, BackoffDecision
from ._breaker import (
    BreakerBoard,
    BreakerConfig,
    BreakerEvent,
    BreakerSnapshot,
    BreakerState,
    CircuitBreaker,
    NoBreakers,
    Permit,
)
from ._budget import RetryBudget, Unlimited
from ._deadline import Deadline
from ._health import HealthBoard, TargetHealth
from ._selection import Candidate, Plan, contract_violation, plan, required_capabilities

__all__ = [
    "Backoff",
    "BackoffDecision",
    "BreakerBoard",
    "BreakerConfig",
    "BreakerEvent",
    "BreakerSnapshot",
    "BreakerState",
    "Candidate",
    "CircuitBreaker",
    "Deadline",
    "HealthBoard",
    "NoBreakers",
    "Permit",
    "Plan",
    "RetryBudget",
    "TargetHealth",
    "Unlimited",
    "contract_violation",
    "plan",
    "required_capabilities",
]
