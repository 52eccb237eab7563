"""Pure decisions, with time passed in: deadline, backoff, retry budget, health, selection."""

from ._backoff import Backoff, BackoffDecision
from ._budget import RetryBudget, Unlimited
from ._deadline import Deadline
from ._health import HealthBoard, TargetHealth
from ._selection import Candidate, Plan, contract_violation, plan, required_capabilities

__all__ = [
    "Backoff",
    "BackoffDecision",
    "Candidate",
    "Deadline",
    "HealthBoard",
    "Plan",
    "RetryBudget",
    "TargetHealth",
    "Unlimited",
    "contract_violation",
    "plan",
    "required_capabilities",
]
