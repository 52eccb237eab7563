"""The vocabulary shared by every state backend: parameters in, small frozen results out.

A backend keeps the state of breakers, rate-limit buckets, retry budgets and concurrency slots
under string keys and changes it in one atomic step per call. Times inside the store are the
store's own clock (the loop for :class:`MemoryStore`, the wall clock for SQLite, the Redis
server's ``TIME`` for Redis, because a fleet's process clocks differ); what a call returns is
always a duration ("wait 1.2 s", "open for 12 s more"), which the caller adds to its own clock.

Error tree::

    FailoverError
     └── StateUnavailable   the backend did not answer in time or is unreachable:
                            the caller falls back to its local state
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from ..model import FailoverError

BreakerStateName = Literal["closed", "open", "half_open"]
Outcome = Literal["success", "failure", "ignored"]


class StateUnavailable(FailoverError):
    """The shared state backend timed out or is unreachable; use local state instead."""

    def __init__(self, backend: str, why: str) -> None:
        self.backend = backend
        self.why = why
        super().__init__(f"state backend {backend} unavailable: {why}")


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerParams:
    """What a store needs to judge one breaker (a :class:`~failover.policy.BreakerConfig`, flattened).

    ``probe_lease`` bounds how long a half-open probe slot is held by a permit that is never
    released (its process crashed): after it the slot is free again.
    """

    window_kind: Literal["count", "time"] = "count"
    window_size: int = 20
    window_seconds: int = 60
    min_calls: int = 10
    failure_rate: float = 0.5
    slow_call_rate: float = 1.0
    slow_call_duration: float = 30.0
    open_duration: float = 2.0
    open_duration_growth: float = 1.5
    max_open_duration: float = 5.0
    half_open_probes: int = 2
    successes_to_close: int = 2
    probe_lease: float = 120.0

    def args(self) -> list[str]:
        """The parameters as script arguments, in a fixed order (see ``_lua.py``)."""
        return [
            self.window_kind,
            str(self.window_size),
            str(self.window_seconds),
            str(self.min_calls),
            repr(self.failure_rate),
            repr(self.slow_call_rate),
            repr(self.slow_call_duration),
            repr(self.open_duration),
            repr(self.open_duration_growth),
            repr(self.max_open_duration),
            str(self.half_open_probes),
            str(self.successes_to_close),
            repr(self.probe_lease),
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerView:
    """One breaker as the store saw it at the end of a call."""

    scope: str
    state: BreakerStateName
    retry_in: float | None  # open: seconds until the first probe is admitted
    why: str  # open: why it opened
    probes: int  # half-open: probes in flight
    open_for: float | None = None  # open: the length of this open period
    open_count: int = 0
    kind: str = ""  # open or half-open: the failure kind that opened it ("" if unknown, or slow calls)


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """A state change made by the store during a call (the caller turns it into a BreakerEvent)."""

    scope: str
    old: BreakerStateName
    new: BreakerStateName
    reason: str
    calls: int
    failures: int
    slow: int
    open_for: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """The answer of :meth:`StateStore.breaker_admit` for all the scopes of one attempt.

    ``granted``: every breaker admitted; then ``epochs`` and ``probes`` (one per scope) go back
    with the outcome. Otherwise ``rejected`` is the index of the scope that said no, and any
    probe slot taken from the scopes before it was given back in the same step.
    """

    granted: bool
    epochs: tuple[int, ...]
    probes: tuple[bool, ...]
    rejected: int | None
    views: tuple[BreakerView, ...]
    transitions: tuple[Transition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """The answer of :meth:`StateStore.breaker_record`: what changed, and the breakers now."""

    views: tuple[BreakerView, ...]
    transitions: tuple[Transition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerOutcome:
    """One permit's result, for :meth:`StateStore.breaker_record`."""

    scope: str
    params: BreakerParams
    epoch: int
    probe: bool
    outcome: Outcome
    kind: str = ""  # a failure: its kind (a FailureKind value), kept by the breaker it opens


@dataclass(frozen=True, slots=True, kw_only=True)
class Reserved:
    """The answer of :meth:`StateStore.reserve`.

    ``granted``: the amounts are taken (and a slot leased); ``at`` is the store's time of the
    grant, to be given back with :meth:`StateStore.settle`. Otherwise ``wait`` is how long
    until it could be granted if nothing else happens (``math.inf`` when unknown, as for a
    concurrency slot that frees when someone settles) and ``dimension`` what binds.
    """

    granted: bool
    wait: float = 0.0
    dimension: str = ""
    at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketView:
    """A shared bucket as the store sees it now (read-only; for admin pages and metrics)."""

    levels: dict[str, float]  # per dimension: capacity minus what the window holds
    blocked_for: float  # seconds until a 429 block ends (0: not blocked)
    slots: int  # concurrency slots leased fleet-wide


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetAnswer:
    """A retry budget's verdict and the extra attempts left fleet-wide after it."""

    allowed: bool
    available: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetLoad:
    """The answer of :meth:`StateStore.load_sync`: what the rest of the fleet has in flight per
    deployment, and the quota shares said by any member's rate-limit headers, each as
    (share, seconds it still holds, seconds since it was said)."""

    in_flight: dict[str, int]
    shares: dict[str, tuple[float, float, float]]


NO_WAIT = Reserved(granted=False, wait=math.inf, dimension="concurrency")


class StateStore(Protocol):
    """Where the shared state of breakers, buckets, budgets and slots lives.

    Every method is one atomic step on the backend (one Redis script, one SQLite
    ``BEGIN IMMEDIATE`` transaction, one uninterrupted call in memory). ``name`` is
    ``"memory"``, ``"sqlite"`` or ``"redis"``.
    """

    name: str

    async def breaker_admit(self, scopes: list[tuple[str, BreakerParams]], permit_id: str) -> Admission:
        """Permits on every scope (all or none); a half-open scope gives at most N probes fleet-wide."""
        ...

    async def breaker_record(self, outcomes: list[BreakerOutcome], permit_id: str, duration: float) -> Recorded:
        """Release the permits of one attempt with its outcome; may open, close or re-open."""
        ...

    async def breaker_views(self, scopes: list[tuple[str, BreakerParams]]) -> tuple[BreakerView, ...]:
        """Read-only: the breakers now (an elapsed open period already reads as half-open)."""
        ...

    async def reserve(
        self,
        scope: str,
        amounts: dict[str, float],
        capacities: dict[str, float],
        *,
        window: float,
        reservation_id: str,
        slots: int | None = None,
        lease: float = 300.0,
    ) -> Reserved:
        """Take ``amounts`` from the shared window buckets and a concurrency slot, or say how long to wait."""
        ...

    async def settle(
        self,
        scope: str,
        reservation_id: str,
        *,
        granted_at: float,
        window: float,
        refund: dict[str, float],
        charge: dict[str, float],
        free_slot: bool = True,
    ) -> None:
        """Reconcile a grant: give back ``refund`` (from the grant's moment), add ``charge`` (from now)."""
        ...

    async def sync(
        self,
        scope: str,
        dimension: str,
        *,
        remaining: float,
        reset_in: float | None,
        capacity: float,
        window: float,
        since: float | None = None,
    ) -> bool:
        """Provider headers: at most ``remaining`` (minus what was granted after ``since``) is left."""
        ...

    async def block(self, scope: str, seconds: float, *, window: float) -> None:
        """A 429: the shared bucket gives nothing for ``seconds``."""
        ...

    async def bucket_view(self, scope: str, capacities: dict[str, float]) -> BucketView:
        """Read-only: the levels of a shared bucket, its block and the slots leased."""
        ...

    async def budget_request(self, name: str, *, ratio: float, floor: int, window: float) -> int:
        """Count one first attempt; return the extra attempts now available fleet-wide."""
        ...

    async def budget_spend(
        self, name: str, *, ratio: float, floor: int, window: float, force: bool = False
    ) -> BudgetAnswer:
        """Take one extra attempt from the shared budget if any is left (``allowed``).

        ``force``: count it even when none is left, because the caller already made it (the
        policy decides synchronously on its last answer): the fleet's count then holds every
        extra attempt actually made, and an overdraft is paid back by the next refusals.
        """
        ...

    async def counter(self, name: str, amount: float, *, ttl: float) -> float:
        """Add ``amount`` (0: read only) to the counter ``name``, which lives ``ttl`` s more; the total."""
        ...

    async def load_sync(
        self,
        name: str,
        member: str,
        counts: dict[str, int],
        shares: dict[str, tuple[float, float]],
        *,
        lease: float,
    ) -> FleetLoad:
        """A member's requests in flight per deployment (its lease renewed for ``lease`` s; none:
        it leaves) and the quota shares it was told (deployment -> (share, seconds it holds));
        what the other live members have in flight, and the current shares."""
        ...

    async def aclose(self) -> None: ...
