"""Where shared state lives: memory (default), SQLite (one machine), Redis (a fleet).

Breakers, rate-limit buckets, the retry budget and concurrency slots keep their state in
the process by default. Give the policy objects a store (``BreakerBoard(store=...)``,
``LimiterBoard(store=...)``, ``RetryBudget(store=...)``; or a ``state:`` section in the config
file) and every process that uses the same store shares it: one atomic step per call (a Lua
script on Redis, a ``BEGIN IMMEDIATE`` transaction on SQLite). A store that does not answer
within its timeout is bypassed: the policy falls back to its local state
(:class:`GuardedStore`), and returns to the shared state once the backend answers again.
"""

from typing import TYPE_CHECKING

from ._config import StateConfig, StateSpec, state_config
from ._guard import BackendHealth, GuardedStore, backend_health
from ._local import MemoryStore, SQLiteStore
from ._types import (
    Admission,
    BreakerOutcome,
    BreakerParams,
    BreakerView,
    BucketView,
    BudgetAnswer,
    FleetLoad,
    Recorded,
    Reserved,
    StateStore,
    StateUnavailable,
    Transition,
)

if TYPE_CHECKING:
    from ._redis import RedisStore


def __getattr__(name: str) -> object:
    if name == "RedisStore":  # needs the optional redis package
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(name)


__all__ = [
    "Admission",
    "BackendHealth",
    "BreakerOutcome",
    "BreakerParams",
    "BreakerView",
    "BucketView",
    "BudgetAnswer",
    "FleetLoad",
    "GuardedStore",
    "MemoryStore",
    "Recorded",
    "RedisStore",
    "Reserved",
    "SQLiteStore",
    "StateConfig",
    "StateSpec",
    "StateStore",
    "StateUnavailable",
    "Transition",
    "backend_health",
    "state_config",
]
