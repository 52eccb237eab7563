"""Circuit breakers per scope: stop calling what is failing, probe it carefully, let it back in.

Each attempt passes two breakers, each a resilience4j-style state machine (closed, open,
half-open; :class:`CircuitBreaker`): its target's and its credential + model's.

Outcomes come from the failure's disposition (``classify``): failures that are the provider's
fault count, the caller's fault and policy outcomes (invalid request, context overflow,
content filter, schema or tool-call repairs, deadline) are ignored. A 429 or an exhausted quota
is only the concern of the credential + model that got it: :class:`BreakerBoard` records those
on a separate key + model breaker, so a 429 on key A never opens key B's breaker nor the
target's.

**Async safety.** Nothing here awaits, so every method runs to completion without yielding to
the event loop: under asyncio each call is atomic, and 100 tasks arriving at once at the end of
an open period get exactly ``half_open_probes`` permits. The classes are not thread-safe; use
them from the one event loop that owns them. Hooks run synchronously inside the call that
changed the state: they must be quick and must not block.

A permit must be released exactly once (releasing twice raises ``RuntimeError``); a permit
that is never released holds its half-open probe slot forever, so release in ``finally``, with
``outcome="ignored"`` (``BreakerBoard.discard``) when the attempt was cancelled or never sent.

**Shared state.** ``BreakerBoard(store=...)`` keeps the breakers in a shared store
(``failover.state``: SQLite for the processes of one machine, Redis for a fleet), so a breaker
opened by one process is open for all of them on their next attempt, and half-open probes are
limited to ``half_open_probes`` across the fleet. The router then admits through the awaitable
:meth:`BreakerBoard.admit_shared` (one round trip for both breakers); outcomes are written in
the background (``await board.drain()`` waits for them). When the store does not answer, the
board falls back to its in-process breakers (fail open) until the store is back.

The board is assembled from parts, one module each:

* ``_config``: :class:`BreakerConfig`, how one breaker judges its scope;
* ``_window``: the sliding count and time windows with their running totals;
* ``_circuit``: :class:`CircuitBreaker`, the state machine, its permits, events and snapshots;
* ``_grace``: the overload grace, which spares a target that still serves while overloaded;
* ``_shared``: the breakers kept in a shared store for the fleet.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ...model import Dialect, Failure, HealthEffect, Target
from ...state import GuardedStore
from ._circuit import (
    BreakerEvent,
    BreakerHold,
    BreakerSnapshot,
    BreakerState,
    CircuitBreaker,
    Hook,
    Layer,
    Outcome,
    Permit,
    SharedPermit,
    emit,
)
from ._config import BreakerConfig, WindowKind, breaker_params
from ._grace import OverloadGrace
from ._shared import SharedBreakers

__all__ = [
    "BreakerBoard",
    "BreakerConfig",
    "BreakerEvent",
    "BreakerHold",
    "BreakerSettings",
    "BreakerSnapshot",
    "BreakerState",
    "CircuitBreaker",
    "Hook",
    "Layer",
    "NoBreakers",
    "Outcome",
    "Permit",
    "SharedPermit",
    "WindowKind",
    "breaker_params",
    "classify",
    "key_model_scope",
]


def classify(failure: Failure | None) -> Outcome:
    """What an attempt's result means to a breaker, from the failure's disposition.

    ``None`` (an acceptable answer) is a success. ``HealthEffect.TARGET`` (transport errors,
    5xx, overload, timeouts, auth, unknown model) is a failure. ``HealthEffect.KEY_MODEL`` (429,
    exhausted quota) is a failure too, but only for a key + model breaker: :class:`BreakerBoard`
    records it there and as ``"ignored"`` on the target breaker. ``HealthEffect.NONE`` (invalid
    request, context overflow, content filter, truncation, schema and tool-call failures,
    deadline, partial output) is ignored: it says nothing about the provider. So is a failure
    marked ``not_target`` (a stream cut while its slow reader held it back, an embeddings call
    to a model that does not embed): its disposition has no health effect, whatever its kind.
    """
    if failure is None:
        return "success"
    effect = failure.disposition.health
    if effect is HealthEffect.NONE:
        return "ignored"
    return "failure"


def key_model_scope(target: Target) -> str:
    """The credential + model scope of 429s and quotas: ``base_url|credential|model``."""
    return f"{target.base_url}|{target.credential or '-'}|{target.model}"


# The most targets whose scopes a board keeps (see BreakerBoard._scoped): past it, it forgets
# them all and works them out again (a router's targets are a few dozen; a long-lived board
# that is handed new Target objects should not keep every one it ever saw).
SCOPES_KEPT = 1024


def _outcome_for(layer: Layer, failure: Failure | None) -> Outcome:
    """The target breaker counts TARGET failures; the key + model breaker counts KEY_MODEL ones."""
    if failure is None:
        return "success"
    effect = failure.disposition.health
    if layer == "target":
        return "failure" if effect is HealthEffect.TARGET else "ignored"
    return "failure" if effect is HealthEffect.KEY_MODEL else "ignored"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerSettings:
    """Everything a :class:`BreakerBoard` can be tuned with (the YAML ``breakers:`` section)."""

    config: BreakerConfig = BreakerConfig()  # noqa: RUF009 (frozen: one shared default is safe)
    key_config: BreakerConfig | None = None  # None: ``config``
    overload_grace: float = 10.0
    overload_min_success: float = 0.05

    def board(self, *, store: GuardedStore | None = None, hooks: Iterable[Hook] = ()) -> BreakerBoard:
        return BreakerBoard(
            self.config,
            key_config=self.key_config,
            overload_grace=self.overload_grace,
            overload_min_success=self.overload_min_success,
            store=store,
            hooks=hooks,
        )


class BreakerBoard:
    """The breakers of every scope, and which of them each attempt's result concerns.

    Each target passes two breakers: its target breaker (scope ``scope(target)``, default
    ``target.scope`` = base URL + credential + model + region, and the API for a Responses
    target), which counts the provider's
    failures (``HealthEffect.TARGET``), and its key + model breaker (``key_model_scope``), which
    counts only 429s and exhausted quotas (``HealthEffect.KEY_MODEL``). Each ignores what the
    other counts; both count successes; neither counts ``HealthEffect.NONE``.

    Hooks receive every :class:`BreakerEvent` of every breaker, in order; a hook that raises is
    logged on ``failover.breaker`` and the others still run.
    """

    def __init__(
        self,
        config: BreakerConfig | None = None,
        *,
        key_config: BreakerConfig | None = None,
        scope: Callable[[Target], str] | None = None,
        hooks: Iterable[Hook] = (),
        overload_grace: float = 10.0,
        overload_min_success: float = 0.05,
        store: GuardedStore | None = None,
        probe_lease: float = 120.0,
    ) -> None:
        if not (overload_grace >= 0 and math.isfinite(overload_grace)):
            raise ValueError(f"overload_grace must be a finite number of seconds >= 0, not {overload_grace!r}")
        if not 0.0 < overload_min_success <= 1.0:
            raise ValueError(f"overload_min_success must be in (0, 1], not {overload_min_success!r}")
        self.config = config or BreakerConfig()
        self.key_config = key_config or self.config
        self._scope = scope or _target_scope
        self.hooks: list[Hook] = list(hooks)
        self._target: dict[str, CircuitBreaker] = {}
        self._key: dict[str, CircuitBreaker] = {}
        # Per target object: its two scopes, asked several times per request (selection, the
        # permits, the record) and the same for its life (a Target is frozen). Keyed by id, the
        # target kept beside them so the id is not reused while the entry lives.
        self._scopes: dict[int, tuple[Target, str, str]] = {}
        # The in-process breakers that are not closed, as (layer, scope), kept by their events
        # (_changed): while there is none (a healthy fleet), nothing can reject or hold a target
        # and selection's read of every candidate answers at once.
        self._unclosed: set[tuple[Layer, str]] = set()
        # An overloaded answer from a target that still serves (at least `overload_min_success`
        # of its answers in the last `overload_grace` seconds were successes) is not counted: it
        # says "over capacity", not "down" (see _grace). One that answers nothing but 503/529 is
        # down, and counts at once.
        self.overload_grace = overload_grace
        self.overload_min_success = overload_min_success

        # Shared state (failover.state): None keeps every breaker in this process, as before.
        # With a store the router calls `await admit_shared(...)` (`local` tells it which), and
        # record/discard/rejection/snapshots are swapped for their shared versions here, so the
        # in-process path has no extra check at all.
        self.store = store
        self.local = store is None
        if store is not None:  # (so _shared exists only with a store, as do the paths that use it)
            self._shared = SharedBreakers(
                store,
                breaker_params(self.config, probe_lease=probe_lease),
                breaker_params(self.key_config, probe_lease=probe_lease),
                self._fan_out,
            )
            self.record = self._record_shared  # type: ignore[method-assign]
            self.discard = self._discard_shared  # type: ignore[method-assign]
            self.rejection = self._rejection_shared  # type: ignore[method-assign]
            self.snapshots = self._shared.snapshots  # type: ignore[method-assign]
            self.hold = self._hold_shared  # type: ignore[method-assign]

    def _fan_out(self, event: BreakerEvent) -> None:
        for hook in tuple(self.hooks):
            emit(hook, event)

    def _changed(self, event: BreakerEvent) -> None:
        """A breaker of this board changed state (its ``on_change``): note whether it is closed,
        then tell the hooks."""
        if event.new is BreakerState.CLOSED:
            self._unclosed.discard((event.layer, event.scope))
        else:
            self._unclosed.add((event.layer, event.scope))
        self._fan_out(event)

    def _scoped(self, target: Target) -> tuple[Target, str, str]:
        """``(target, its target scope, its key + model scope)``, worked out once per target object."""
        entry = self._scopes.get(id(target))
        if entry is None or entry[0] is not target:
            if len(self._scopes) >= SCOPES_KEPT:
                self._scopes.clear()
            entry = self._scopes[id(target)] = (target, self._scope(target), key_model_scope(target))
        return entry

    def breaker(self, target: Target) -> CircuitBreaker:
        """The target breaker of ``target`` (created on first use)."""
        s = self._scoped(target)[1]
        b = self._target.get(s)
        if b is None:
            b = self._target[s] = CircuitBreaker(self.config, s, self._changed, layer="target")
            b.grace = OverloadGrace(self.overload_grace)
        return b

    def key_breaker(self, target: Target) -> CircuitBreaker:
        """The key + model breaker of ``target`` (created on first use)."""
        s = self._scoped(target)[2]
        b = self._key.get(s)
        if b is None:
            b = self._key[s] = CircuitBreaker(self.key_config, s, self._changed, layer="key_model")
        return b

    def rejection(self, target: Target, now: float) -> str | None:
        """Why ``admit`` would reject ``target`` at ``now``, without taking a permit (for selection)."""
        if not self._unclosed:  # every breaker closed: none rejects
            return None
        _, scope, key_scope = self._scoped(target)
        for b in (self._target.get(scope), self._key.get(key_scope)):
            if b is not None:
                why = b.rejection(now)
                if why is not None:
                    return why
        return None

    def admit(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        """Permits for one attempt on ``target`` (target breaker first, then key + model).

        Returns ``(permits, None)`` when both admit, or ``([], reason)`` when either rejects,
        e.g. ``"circuit open for 12.3s more (5/10 failed)"`` or ``"half-open: 2 probes already
        in flight"``; a permit taken from the first breaker is then given back unused.
        """
        permits: list[Permit] = []
        for b in (self.breaker(target), self.key_breaker(target)):
            p = b.try_acquire(now)
            if p is None:
                self.discard(permits, now)
                return [], b.rejection(now) or f"{b.scope}: rejected"
            permits.append(p)
        self._started(permits[0], now)
        return permits, None

    def _started(self, permit: Permit, now: float) -> None:
        """An attempt is sent under ``permit`` (its target breaker's): the grace keeps its flight."""
        g = permit.breaker.grace
        if g is not None:
            g.start(id(permit), now)

    def _ended(self, permits: Sequence[Permit]) -> None:
        if permits and (g := permits[0].breaker.grace) is not None:
            g.end(id(permits[0]))

    def record(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        """Release ``permits`` (from ``admit(target, ...)``) with the attempt's result."""
        _, scope, key_scope = self._scoped(target)
        for p in permits:
            b = p.breaker
            if b.scope != (scope if b.layer == "target" else key_scope):
                raise ValueError(f"permit for {p.scope!r} recorded against target {target.name!r}")
        graced = self._graced(target, permits, failure, now - duration, now)
        kind = "" if failure is None else failure.kind.value
        for p in permits:
            b = p.breaker
            outcome: Outcome = "ignored" if graced else _outcome_for(b.layer, failure)
            b.release(p, now, outcome=outcome, duration=duration, kind=kind)

    def _graced(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, started: float, now: float
    ) -> bool:
        """Whether this outcome is an overload of a target that still serves (the breaker ignores it).

        Decided by the target breaker's :class:`~failover.policy.breakers._grace.OverloadGrace`, with this
        board's ``overload_grace`` and ``overload_min_success``. Shared by the in-process and the
        shared-store record paths.
        """
        g = permits[0].breaker.grace if permits else None
        if g is None:
            return False
        return g.graced(
            id(permits[0]), failure, started, now, grace=self.overload_grace, min_success=self.overload_min_success
        )

    def hold(self, target: Target, now: float) -> BreakerHold | None:
        """Why the breakers of ``target`` turn it away now (the longer of the two), or None."""
        if not self._unclosed:  # every breaker closed: none holds
            return None
        held: BreakerHold | None = None
        _, scope, key_scope = self._scoped(target)
        for b in (self._target.get(scope), self._key.get(key_scope)):
            h = b.hold(now) if b is not None else None
            if h is not None and (held is None or h.wait > held.wait):
                held = h
        return held

    def discard(self, permits: Sequence[Permit], now: float) -> None:
        """Give ``permits`` back without a verdict (cancelled, or never sent)."""
        self._ended(permits)
        for p in permits:
            p.breaker.release(p, now, outcome="ignored", duration=0.0)

    def snapshots(self, now: float) -> list[BreakerSnapshot]:
        """Every breaker's numbers, target breakers first, each group in creation order."""
        return [b.snapshot(now) for b in (*self._target.values(), *self._key.values())]

    # -- shared state ----------------------------------------------------------------------

    async def admit_shared(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        """:meth:`admit` on the shared store: both breakers in one atomic step (one round trip).

        Falls back to the in-process breakers when the store is unavailable.
        """
        assert self.store is not None, "admit_shared needs BreakerBoard(store=...)"
        admitted = await self._shared.admit(self.breaker(target), self.key_breaker(target), now)
        if admitted is None:
            return BreakerBoard.admit(self, target, now)
        permits, why = admitted
        if permits:
            self._started(permits[0], now)
        return permits, why

    async def drain(self) -> None:
        """Wait until every outcome written in the background has reached the store."""
        if self.store is not None:
            await self._shared.drain()

    def _record_shared(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        if not permits or not isinstance(permits[0], SharedPermit):
            BreakerBoard.record(self, target, permits, failure, duration, now)  # granted locally (store down)
            return
        graced = self._graced(target, permits, failure, now - duration, now)
        outcomes: list[Outcome] = ["ignored" if graced else _outcome_for(p.layer, failure) for p in permits]
        self._shared.send(permits, outcomes, duration, "" if failure is None else failure.kind.value)

    def _discard_shared(self, permits: Sequence[Permit], now: float) -> None:
        if not permits or not isinstance(permits[0], SharedPermit):
            BreakerBoard.discard(self, permits, now)
            return
        self._ended(permits)
        if any(p.probe for p in permits):  # only a probe slot needs giving back
            self._shared.send(permits, ["ignored"] * len(permits), 0.0)
        else:
            for p in permits:
                p.released = True

    def _rejection_shared(self, target: Target, now: float) -> str | None:
        """From the last views this process saw (the store decides at admission)."""
        shared = self._shared
        if not shared.guard.up:
            return BreakerBoard.rejection(self, target, now)
        return shared.rejection(self._existing(target)) if shared.unclosed else None

    def _hold_shared(self, target: Target, now: float) -> BreakerHold | None:
        """:meth:`hold` from the last views this process saw (its own breakers when the store is down)."""
        shared = self._shared
        if not shared.guard.up:
            return BreakerBoard.hold(self, target, now)
        return shared.hold(self._existing(target)) if shared.unclosed else None

    def _existing(self, target: Target) -> list[CircuitBreaker]:
        """The breakers of ``target`` made already (a read creates none: one with a view was
        made at its admission)."""
        _, scope, key_scope = self._scoped(target)
        found = (self._target.get(scope), self._key.get(key_scope))
        return [b for b in found if b is not None]


def _target_scope(target: Target) -> str:
    """``target.scope``; a Responses API target of the same endpoint, key and model has its
    own: ``/responses`` and ``/chat/completions`` are separate services that fail apart (an
    outage of one must not hold the other), while their quota, the key + model breaker and the
    rate limits, stays one."""
    if target.dialect is Dialect.OPENAI_RESPONSES:
        return f"{target.scope}|responses"
    return target.scope


class NoBreakers:
    """A board that never rejects: circuit breaking switched off (for comparisons)."""

    hooks: list[Hook]
    local = True  # admitted in-process (see BreakerBoard.local)

    def __init__(self) -> None:
        self.hooks = []

    async def admit_shared(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        return [], None

    def rejection(self, target: Target, now: float) -> str | None:
        return None

    def hold(self, target: Target, now: float) -> BreakerHold | None:
        return None

    def admit(self, target: Target, now: float) -> tuple[list[Permit], str | None]:
        return [], None

    def record(
        self, target: Target, permits: Sequence[Permit], failure: Failure | None, duration: float, now: float
    ) -> None:
        return None

    def discard(self, permits: Sequence[Permit], now: float) -> None:
        return None

    def snapshots(self, now: float) -> list[BreakerSnapshot]:
        return []
