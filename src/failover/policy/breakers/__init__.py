"""Circuit breakers: a state machine per scope, kept by a board per target and per key + model.

``_board`` holds the board; ``_circuit`` one breaker, judged by ``_config`` over ``_window``
and spared by ``_grace``; ``_shared`` keeps a board's breakers in a store for the fleet.
"""

from ._board import (
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

__all__ = [
    "BreakerBoard",
    "BreakerConfig",
    "BreakerEvent",
    "BreakerSettings",
    "BreakerSnapshot",
    "BreakerState",
    "CircuitBreaker",
    "NoBreakers",
    "Permit",
    "key_model_scope",
]
