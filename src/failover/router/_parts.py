"""What one request's run uses of the Router that started it: the process's shared parts.

A run (plain, streamed or embedding) reads the Router's HTTP pool, credential chains,
boards and hooks, and never anything of its entry points; typing it against this protocol
instead of the Router keeps the package's imports one-way (the Router builds runs, a run
does not know the Router). A run only reads these; it never replaces a part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import random

    from ..auth import Authorizers
    from ..ledger import Ledger
    from ..model import Target
    from ..policy import (
        BreakerBoard,
        HealthBoard,
        LimiterBoard,
        LoadBoard,
        NoBreakers,
        RetryBudget,
        StatsBoard,
        Unlimited,
        WindowBoard,
    )
    from ..providers import DialectAdapter
    from ..telemetry import Hooks
    from ..tokens import CompactionHook
    from ..transport import Transport
    from ._engine import Policies
    from ._hooks import DegradeHandler, QualityGate


class RouterParts(Protocol):
    """The Router as a run sees it (see :class:`~failover.router.Router` for each part)."""

    transport: Transport
    transport_enforces_total: bool
    auth: Authorizers
    retry_budget: RetryBudget | Unlimited
    health: HealthBoard
    load: LoadBoard  # requests in flight, latency and quota per deployment, for the balancer
    windows: WindowBoard
    breakers: BreakerBoard | NoBreakers
    limiters: LimiterBoard | None
    gates: dict[str, QualityGate]
    degrade: dict[str, DegradeHandler]
    stream_threshold: float | None
    compaction: CompactionHook | None
    ledger: Ledger | None
    count_timeout: float
    hooks: Hooks
    policies: Policies
    rng: random.Random  # backoff jitter, passed to the engine's decisions
    canary_rng: random.Random
    balance_rng: random.Random
    stats: StatsBoard

    def dialect(self, target: Target) -> DialectAdapter: ...

    async def wait_unless_opened(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less if a breaker opens meanwhile (then True)."""
        ...


__all__ = ["RouterParts"]
