"""GuardedStore: a shared store that may be slow or gone, and what the policy does then.

Every call gets ``timeout`` seconds. A timeout or a connection error marks the backend down:
the call raises :class:`StateUnavailable` and the policy object uses its local state (health
and limits fail open, limits at ``local_share`` of the fleet's quota). While down, calls fail
at once without touching the network until ``retry_after`` has passed (doubling after each
failed probe, up to ``max_retry_after``; the calls in flight when it went down are one
failure, not one each); then the next call probes the backend, and its success switches back.
Each switch is logged once on ``failover.state`` (never the URL: it may hold a password) and
counted; :func:`backend_health` is what ``/metrics`` reads
(``failover_state_backend_up{backend=...}``, ``failover_state_fallbacks_total{backend=...}``).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from ._types import StateStore, StateUnavailable

logger = logging.getLogger("failover.state")

P = ParamSpec("P")
T = TypeVar("T")

_BASE_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, OSError, ConnectionError, sqlite3.Error)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendHealth:
    backend: str
    up: bool
    fallbacks: int  # calls answered by local state since start
    transitions: int  # up -> down and down -> up switches since start


_LIVE: weakref.WeakSet[GuardedStore] = weakref.WeakSet()


def backend_health() -> list[BackendHealth]:
    """One entry per backend name over every live GuardedStore (up only if all are up)."""
    merged: dict[str, BackendHealth] = {}
    for g in list(_LIVE):
        h = g.health()
        m = merged.get(h.backend)
        if m is None:
            merged[h.backend] = h
        else:
            merged[h.backend] = BackendHealth(
                backend=h.backend,
                up=m.up and h.up,
                fallbacks=m.fallbacks + h.fallbacks,
                transitions=m.transitions + h.transitions,
            )
    return list(merged.values())


class GuardedStore:
    """Wraps a store: per-call timeout, down/up switching with back-off, one log line per switch."""

    def __init__(
        self,
        store: StateStore,
        *,
        timeout: float = 0.25,
        local_share: float = 1.0,
        retry_after: float = 0.5,
        max_retry_after: float = 10.0,
    ) -> None:
        if not 0 < local_share <= 1:
            raise ValueError(f"local_share must be in (0, 1], not {local_share!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.store = store
        self.name = store.name
        self.timeout = timeout
        self.local_share = local_share
        self.retry_after = retry_after
        self.max_retry_after = max_retry_after
        self.errors: tuple[type[BaseException], ...] = _BASE_ERRORS + tuple(getattr(store, "errors", ()))
        self.up = True
        self.fallbacks = 0
        self.transitions = 0
        self._next_probe = 0.0
        self._backoff = retry_after
        _LIVE.add(self)

    def health(self) -> BackendHealth:
        return BackendHealth(backend=self.name, up=self.up, fallbacks=self.fallbacks, transitions=self.transitions)

    async def call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await fn(*args)`` on the backend, or StateUnavailable (and the caller goes local)."""
        loop = asyncio.get_running_loop()
        probe = not self.up
        if probe:
            now = loop.time()
            if now < self._next_probe:
                self.fallbacks += 1
                raise StateUnavailable(self.name, "down, waiting to probe again")
            self._next_probe = now + self._backoff  # this call is the probe; the others stay local meanwhile
        try:
            async with asyncio.timeout(self.timeout):
                result = await fn(*args, **kwargs)
        except self.errors as exc:
            self._down(exc, loop.time(), probe)
            raise StateUnavailable(self.name, type(exc).__name__) from None
        if not self.up:
            self._recovered()
        return result

    def _down(self, exc: BaseException, now: float, probe: bool) -> None:
        self.fallbacks += 1
        if not self.up and not probe:
            # Sent while it was up and failed with the others in flight: the outage is one
            # event, so it neither grows the back-off nor delays the next probe.
            return
        if self.up:
            self.up = False
            self.transitions += 1
            self._backoff = self.retry_after
            logger.warning(
                "state backend %s unreachable (%s): using local state, limits at local_share=%g, until it answers",
                self.name,
                type(exc).__name__,
                self.local_share,
            )
        else:
            self._backoff = min(self.max_retry_after, self._backoff * 2)
        self._next_probe = now + self._backoff

    def _recovered(self) -> None:
        self.up = True
        self.transitions += 1
        self._backoff = self.retry_after
        logger.warning("state backend %s reachable again: shared state resumed", self.name)

    async def aclose(self) -> None:
        await self.store.aclose()

    def __getattr__(self, name: str) -> Any:
        # The store's own helpers (key, round_trips, ttls) stay reachable through the guard.
        return getattr(self.store, name)
