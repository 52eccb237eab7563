"""What one request's run uses of the Router that started it: the process's shared parts.

A run (plain, streamed or embedding) reads the Router's HTTP pool, credential chains,
boards and hooks, and never anything of its entry points; typing it against this protocol
instead of the Router keeps the package's imports one-way (the Router builds runs, a run
does not know the Router). Every member is read-only here: a run never replaces a part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import random

    from ..auth import Authorizers
    from ..ledger import Ledger
    from ..model import Target
    from ..policy import BreakerBoard, HealthBoard, LimiterBoard, NoBreakers, RetryBudget, Unlimited
    from ..policy._canary import StatsBoard
    from ..providers import DialectAdapter
    from ..telemetry import Hooks
    from ..tokens import CompactionHook
    from ..transport import Transport
    from ._engine import Policies
    from ._hooks import DegradeHandler, QualityGate


class RouterParts(Protocol):
    """The Router as a run sees it (see :class:`~failover.router.Router` for each part)."""

    @property
    def transport(self) -> Transport: ...
    @property
    def transport_enforces_total(self) -> bool: ...
    @property
    def auth(self) -> Authorizers: ...
    @property
    def retry_budget(self) -> RetryBudget | Unlimited: ...
    @property
    def health(self) -> HealthBoard: ...
    @property
    def breakers(self) -> BreakerBoard | NoBreakers: ...
    @property
    def limiters(self) -> LimiterBoard | None: ...
    @property
    def gates(self) -> dict[str, QualityGate]: ...
    @property
    def degrade(self) -> dict[str, DegradeHandler]: ...
    @property
    def stream_threshold(self) -> float | None: ...
    @property
    def compaction(self) -> CompactionHook | None: ...
    @property
    def ledger(self) -> Ledger | None: ...
    @property
    def count_timeout(self) -> float: ...
    @property
    def hooks(self) -> Hooks: ...
    @property
    def policies(self) -> Policies: ...
    @property
    def canary_rng(self) -> random.Random: ...
    @property
    def stats(self) -> StatsBoard: ...

    def dialect(self, target: Target) -> DialectAdapter: ...

    async def wait_unless_opened(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less if a breaker opens meanwhile (then True)."""
        ...


__all__ = ["RouterParts"]
