"""Shared breakers: a board's breakers kept in a store, so the fleet opens and probes as one.

With a store (``failover.state``: SQLite for the processes of one machine, Redis for a fleet;
``BreakerBoard(store=...)``), a breaker opened by one process is open for all of them on their
next attempt, and half-open probes are limited to ``half_open_probes`` across the fleet.
Admission is awaited (one round trip for both breakers of an attempt); outcomes are written in
the background (:meth:`SharedBreakers.drain` waits for them). Between round trips, rejections,
holds and snapshots are read from the last view of each breaker this process saw.

Every call here answers None (or writes nothing) while the store is unavailable: the board
then falls back to its in-process breakers (fail open) until the store is back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence

from ...state import BreakerOutcome, BreakerParams, BreakerView, GuardedStore, StateUnavailable, Transition
from ._circuit import (
    HALF_OPEN_RETRY,
    BreakerEvent,
    BreakerHold,
    BreakerSnapshot,
    BreakerState,
    CircuitBreaker,
    Layer,
    Outcome,
    Permit,
    SharedPermit,
    breaker_hold,
    rate,
)


class SharedBreakers:
    """The store's side of a board: admission, background outcome writes, the last views seen.

    ``params`` and ``key_params`` are the target and key + model breakers' rules as the store
    applies them; ``fan_out`` receives a :class:`BreakerEvent` for every transition the store
    reports (whichever process caused it).
    """

    def __init__(
        self,
        guard: GuardedStore,
        params: BreakerParams,
        key_params: BreakerParams,
        fan_out: Callable[[BreakerEvent], None],
    ) -> None:
        self.guard = guard
        self.params = params
        self.key_params = key_params
        self._fan_out = fan_out
        self.views: dict[str, tuple[BreakerView, float]] = {}  # scope -> (last view, loop time)
        # the scopes whose last view is not closed: while there is none, no view rejects or holds
        # (selection asks of every candidate of every request)
        self.unclosed: set[str] = set()
        self.layers: dict[str, Layer] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    async def admit(self, tb: CircuitBreaker, kb: CircuitBreaker, now: float) -> tuple[list[Permit], str | None] | None:
        """Permits of the target breaker ``tb`` and key + model breaker ``kb`` in one atomic step.

        ``(permits, None)`` when both admit, ``([], reason)`` when either rejects, None when the
        store is unavailable (the board then admits in-process).
        """
        guard = self.guard
        pid = os.urandom(8).hex()
        scopes = [(tb.scope, self.params), (kb.scope, self.key_params)]
        try:
            a = await guard.call(guard.store.breaker_admit, scopes, pid)
            if not a.granted and self.tasks:
                # Outcomes of this process (a probe that just ended) may still be on their way:
                # let them land and ask once more.
                await asyncio.gather(*tuple(self.tasks), return_exceptions=True)
                a = await guard.call(guard.store.breaker_admit, scopes, pid)
        except StateUnavailable:
            return None
        at = asyncio.get_running_loop().time()
        self.layers[tb.scope], self.layers[kb.scope] = "target", "key_model"
        self.seen(a.views, a.transitions, at)
        if not a.granted:
            i = a.rejected or 0
            return [], shared_reason((tb, kb)[i], a.views[i], self.params.half_open_probes)
        permits: list[Permit] = [
            SharedPermit(b, epoch, now, probe, pid)
            for b, epoch, probe in zip((tb, kb), a.epochs, a.probes, strict=True)
        ]
        return permits, None

    async def drain(self) -> None:
        """Wait until every outcome written in the background has reached the store."""
        while self.tasks:
            await asyncio.gather(*tuple(self.tasks), return_exceptions=True)

    def seen(self, views: Sequence[BreakerView], transitions: Sequence[Transition], at: float) -> None:
        """Keep the views the store answered with, and report its transitions as events."""
        for v in views:
            self.views[v.scope] = (v, at)
            if v.state == "closed":
                self.unclosed.discard(v.scope)
            else:
                self.unclosed.add(v.scope)
        for t in transitions:
            event = BreakerEvent(
                scope=t.scope,
                layer=self.layers.get(t.scope, "target"),
                old=BreakerState(t.old),
                new=BreakerState(t.new),
                at=at,
                reason=t.reason,
                failure_rate=rate(t.failures, t.calls),
                slow_rate=rate(t.slow, t.calls),
                calls=t.calls,
                open_for=t.open_for,
            )
            self._fan_out(event)

    def send(self, permits: Sequence[Permit], outcomes: Sequence[Outcome], duration: float, kind: str = "") -> None:
        """Write the outcomes of shared permits in the background (merged with other writes)."""
        items = []
        for p, outcome in zip(permits, outcomes, strict=True):
            if p.released:
                raise RuntimeError(f"permit for {p.scope!r} released twice")
            p.released = True
            params = self.params if p.layer == "target" else self.key_params
            items.append(
                BreakerOutcome(scope=p.scope, params=params, epoch=p.epoch, probe=p.probe, outcome=outcome, kind=kind)
            )
        pid = permits[0].permit_id if isinstance(permits[0], SharedPermit) else ""
        task = asyncio.get_running_loop().create_task(self._write(items, pid, duration))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _write(self, items: list[BreakerOutcome], pid: str, duration: float) -> None:
        guard = self.guard
        try:
            r = await guard.call(guard.store.breaker_record, items, pid, duration)
        except StateUnavailable:
            return  # the shared breaker misses this outcome; a held probe slot frees at its lease
        self.seen(r.views, r.transitions, asyncio.get_running_loop().time())

    def rejection(self, breakers: Sequence[CircuitBreaker]) -> str | None:
        """Why the store would turn ``breakers`` away, from the last views this process saw."""
        loop_now = asyncio.get_running_loop().time()
        for b in breakers:
            seen = self.views.get(b.scope)
            if seen is None:
                continue
            view, at = seen
            if view.state == "open" and view.retry_in is not None and view.retry_in - (loop_now - at) > 0:
                left = view.retry_in - (loop_now - at)
                return f"{b.label()} open for {left:.1f}s more ({view.why})"
        return None

    def hold(self, breakers: Sequence[CircuitBreaker]) -> BreakerHold | None:
        """The longest hold of ``breakers``, from the last views this process saw."""
        loop_now = asyncio.get_running_loop().time()
        held: BreakerHold | None = None
        for b in breakers:
            seen = self.views.get(b.scope)
            if seen is None:
                continue
            view, at = seen
            h: BreakerHold | None = None
            if view.state == "open" and view.retry_in is not None and view.retry_in - (loop_now - at) > 0:
                h = breaker_hold(view.retry_in - (loop_now - at), view.kind)
            elif view.state == "half_open" and view.probes >= b.config.half_open_probes:
                h = breaker_hold(min(HALF_OPEN_RETRY, b.config.open_duration), view.kind)
            if h is not None and (held is None or h.wait > held.wait):
                held = h
        return held

    def snapshots(self, now: float) -> list[BreakerSnapshot]:
        """The last view of each shared breaker (counts of the window are not fetched). As an
        in-process breaker's snapshot, a view open past its period shows the half-open state
        the store moves it to at the next admission (a read: nothing is asked or changed)."""
        out = []
        for scope, (v, at) in self.views.items():
            retry_at = at + v.retry_in if v.retry_in is not None else None
            elapsed = v.state == "open" and retry_at is not None and now >= retry_at
            out.append(
                BreakerSnapshot(
                    scope=scope,
                    layer=self.layers.get(scope, "target"),
                    state=BreakerState.HALF_OPEN if elapsed else BreakerState(v.state),
                    calls=0,
                    failures=0,
                    slow_calls=0,
                    failure_rate=0.0,
                    slow_rate=0.0,
                    open_count=v.open_count,
                    probes_in_flight=0 if elapsed else v.probes,
                    retry_at=None if elapsed else retry_at,
                    open_for=None if elapsed else v.open_for,
                )
            )
        return out


def shared_reason(breaker: CircuitBreaker, view: BreakerView, probes: int) -> str:
    """Why the store rejected an admission to ``breaker``, as the in-process breaker would say it."""
    if view.state == "open":
        return f"{breaker.label()} open for {view.retry_in or 0.0:.1f}s more ({view.why})"
    prefix = "half-open" if breaker.layer == "target" else "key+model half-open"
    return f"{prefix}: {view.probes} probes already in flight"
