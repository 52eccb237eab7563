"""Pure decisions, with time passed in: deadline, backoff, retry budget, health, breakers, selection."""

from ._affinity import affinity_key, rendezvous
from ._backoff import Backoff, BackoffDecision
from ._balance import BALANCES, LoadBoard, LoadView, Placement, balance
from ._budget import RetryBudget, Unlimited
from ._canary import CanaryGate, CandidateStats, StatsBoard, answered, canary_problems
from ._deadline import Deadline
from ._health import HealthBoard, TargetHealth
from ._selection import (
    Candidate,
    Hold,
    Plan,
    Violation,
    caps_max_tokens,
    contract_check,
    contract_violation,
    embedding_check,
    embedding_violation,
    hold_of,
    max_tokens_for,
    plan,
    required_capabilities,
)
from ._shared import close_shared, shared_policies
from ._shared_load import SharedLoadBoard
from ._windows import WindowBoard, window_of
from .breakers import (
    BreakerBoard,
    BreakerConfig,
    BreakerEvent,
    BreakerSettings,
    BreakerSnapshot,
    BreakerState,
    CircuitBreaker,
    NoBreakers,
    Permit,
    key_model_scope,
)
from .limits import (
    CapacityReport,
    LimiterBoard,
    LimitWaitTooLong,
    Reservation,
    TargetLimiter,
    WindowBucket,
    plan_capacity,
)
from .limits import render as render_capacity

__all__ = [
    "Hold",
    "WindowBucket",
    "answered",
    "close_shared",
    "hold_of",
    "key_model_scope",
    "shared_policies",
    "BALANCES",
    "Backoff",
    "BackoffDecision",
    "BreakerBoard",
    "BreakerConfig",
    "BreakerEvent",
    "BreakerSettings",
    "BreakerSnapshot",
    "BreakerState",
    "CanaryGate",
    "Candidate",
    "CandidateStats",
    "CapacityReport",
    "CircuitBreaker",
    "Deadline",
    "HealthBoard",
    "LimitWaitTooLong",
    "LimiterBoard",
    "LoadBoard",
    "LoadView",
    "NoBreakers",
    "Permit",
    "Placement",
    "Plan",
    "Reservation",
    "RetryBudget",
    "SharedLoadBoard",
    "StatsBoard",
    "TargetHealth",
    "TargetLimiter",
    "Unlimited",
    "Violation",
    "WindowBoard",
    "canary_problems",
    "caps_max_tokens",
    "contract_check",
    "contract_violation",
    "embedding_check",
    "embedding_violation",
    "max_tokens_for",
    "affinity_key",
    "balance",
    "plan",
    "plan_capacity",
    "render_capacity",
    "rendezvous",
    "required_capabilities",
    "window_of",
]
