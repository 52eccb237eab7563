"""MemoryStore and SQLiteStore: the pure logic of ``_logic.py`` applied in one atomic step.

Both share :class:`_LogicStore`, which turns each operation into "load these keys, run this
function on their state at this time, save them"; the backend only says how that step is made
atomic: :class:`MemoryStore` by not awaiting inside it (asyncio runs it to completion),
:class:`SQLiteStore` with ``BEGIN IMMEDIATE`` (one writer at a time across processes, WAL so
readers never block).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from . import _logic as L
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
    Transition,
)

T = TypeVar("T")
Step = Callable[[list[L.State], float], T]

_NEW: dict[str, Callable[[], L.State]] = {
    "br": L.breaker_new,
    "rl": L.bucket_new,
    "rb": L.budget_new,
    "ct": lambda: {"v": 0.0},
    "lb": L.load_new,
}


class _LogicStore:
    name = "logic"

    def __init__(self, prefix: str = "failover:") -> None:
        self.prefix = prefix

    def key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    async def _apply(self, keys: list[str], ttl: Callable[[list[L.State], float], float], step: Step[T]) -> T:
        raise NotImplementedError

    # -- breakers --------------------------------------------------------------------------

    async def breaker_admit(self, scopes: list[tuple[str, BreakerParams]], permit_id: str) -> Admission:
        def step(states: list[L.State], now: float) -> Admission:
            out: list[Transition] = []
            epochs: list[int] = []
            probes: list[bool] = []
            rejected: int | None = None
            for i, ((scope, p), b) in enumerate(zip(scopes, states, strict=True)):
                L.breaker_advance(b, p, scope, now, out)
                got = L.breaker_try(b, p, permit_id, now)
                if got is None:
                    rejected = i
                    for earlier in states[:i]:
                        earlier["pr"].pop(permit_id, None)
                    break
                epochs.append(b["ep"])
                probes.append(got)
            views = tuple(L.breaker_view(b, s, now) for (s, _), b in zip(scopes, states, strict=True))
            if rejected is not None:
                return Admission(
                    granted=False, epochs=(), probes=(), rejected=rejected, views=views, transitions=tuple(out)
                )
            return Admission(
                granted=True,
                epochs=tuple(epochs),
                probes=tuple(probes),
                rejected=None,
                views=views,
                transitions=tuple(out),
            )

        keys = [self.key("br", s) for s, _ in scopes]
        return await self._apply(keys, self._breaker_ttl(scopes), step)

    async def breaker_record(self, outcomes: list[BreakerOutcome], permit_id: str, duration: float) -> Recorded:
        def step(states: list[L.State], now: float) -> Recorded:
            out: list[Transition] = []
            for o, b in zip(outcomes, states, strict=True):
                L.breaker_record(
                    b,
                    o.params,
                    o.scope,
                    epoch=o.epoch,
                    permit_id=permit_id,
                    outcome=o.outcome,
                    duration=duration,
                    now=now,
                    out=out,
                    kind=o.kind,
                )
                L.breaker_advance(b, o.params, o.scope, now, out)
            views = tuple(L.breaker_view(b, o.scope, now) for o, b in zip(outcomes, states, strict=True))
            return Recorded(views=views, transitions=tuple(out))

        keys = [self.key("br", o.scope) for o in outcomes]
        return await self._apply(keys, self._breaker_ttl([(o.scope, o.params) for o in outcomes]), step)

    async def breaker_views(self, scopes: list[tuple[str, BreakerParams]]) -> tuple[BreakerView, ...]:
        def step(states: list[L.State], now: float) -> tuple[BreakerView, ...]:
            out: list[Transition] = []
            for (scope, p), b in zip(scopes, states, strict=True):
                L.breaker_advance(b, p, scope, now, out)
            return tuple(L.breaker_view(b, s, now) for (s, _), b in zip(scopes, states, strict=True))

        return await self._apply([self.key("br", s) for s, _ in scopes], self._breaker_ttl(scopes), step)

    @staticmethod
    def _breaker_ttl(scopes: list[tuple[str, BreakerParams]]) -> Callable[[list[L.State], float], float]:
        ttl = max((L.breaker_ttl(p) for _, p in scopes), default=3600.0)
        return lambda states, now: ttl

    # -- buckets and slots ---------------------------------------------------------------------

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
        def step(states: list[L.State], now: float) -> Reserved:
            ok, wait, dim = L.bucket_reserve(
                states[0],
                amounts,
                capacities,
                window=window,
                reservation_id=reservation_id,
                slots=slots,
                lease=lease,
                now=now,
            )
            return Reserved(granted=ok, wait=wait, dimension=dim, at=now)

        return await self._apply([self.key("rl", scope)], _bucket_ttl(window), step)

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
        def step(states: list[L.State], now: float) -> None:
            L.bucket_settle(
                states[0],
                reservation_id,
                granted_at=granted_at,
                window=window,
                refund=refund,
                charge=charge,
                free_slot=free_slot,
                now=now,
            )

        await self._apply([self.key("rl", scope)], _bucket_ttl(window), step)

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
        def step(states: list[L.State], now: float) -> bool:
            return L.bucket_sync(
                states[0],
                dimension,
                remaining=remaining,
                reset_in=reset_in,
                capacity=capacity,
                window=window,
                since=since,
                now=now,
            )

        return await self._apply([self.key("rl", scope)], _bucket_ttl(window), step)

    async def block(self, scope: str, seconds: float, *, window: float) -> None:
        def step(states: list[L.State], now: float) -> None:
            L.bucket_block(states[0], seconds, now)

        await self._apply([self.key("rl", scope)], _bucket_ttl(window), step)

    async def bucket_view(self, scope: str, capacities: dict[str, float]) -> BucketView:
        def step(states: list[L.State], now: float) -> BucketView:
            levels, blocked, slots = L.bucket_view(states[0], capacities, now)
            return BucketView(levels=levels, blocked_for=blocked, slots=slots)

        return await self._apply([self.key("rl", scope)], lambda s, n: L.bucket_ttl(s[0], 60.0, n), step)

    # -- retry budget ----------------------------------------------------------------------------

    async def budget_request(self, name: str, *, ratio: float, floor: int, window: float) -> int:
        def step(states: list[L.State], now: float) -> int:
            return L.budget_request(states[0], ratio=ratio, floor=floor, window=window, now=now)

        return await self._apply([self.key("rb", name)], lambda s, n: window + 60.0, step)

    async def budget_spend(
        self, name: str, *, ratio: float, floor: int, window: float, force: bool = False
    ) -> BudgetAnswer:
        def step(states: list[L.State], now: float) -> BudgetAnswer:
            ok, left = L.budget_spend(states[0], ratio=ratio, floor=floor, window=window, now=now, force=force)
            return BudgetAnswer(allowed=ok, available=left)

        return await self._apply([self.key("rb", name)], lambda s, n: window + 60.0, step)

    # -- counters ---------------------------------------------------------------------------------

    async def counter(self, name: str, amount: float, *, ttl: float) -> float:
        def step(states: list[L.State], now: float) -> float:
            states[0]["v"] = float(states[0]["v"]) + amount
            return float(states[0]["v"])

        return await self._apply([self.key("ct", name)], lambda s, n: ttl, step)

    # -- fleet load ---------------------------------------------------------------------------

    async def load_sync(
        self,
        name: str,
        member: str,
        counts: dict[str, int],
        shares: dict[str, tuple[float, float]],
        *,
        lease: float,
    ) -> FleetLoad:
        def step(states: list[L.State], now: float) -> FleetLoad:
            others, held = L.load_sync(states[0], member, counts, shares, lease=lease, now=now)
            return FleetLoad(in_flight=others, shares=held)

        return await self._apply([self.key("lb", name)], lambda s, n: L.load_ttl(s[0], n), step)

    async def aclose(self) -> None:
        return None


def _bucket_ttl(window: float) -> Callable[[list[L.State], float], float]:
    return lambda states, now: L.bucket_ttl(states[0], window, now)


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class MemoryStore(_LogicStore):
    """Shared state inside one process (several routers, or the backend contract tests).

    The clock is the running loop's by default, so it runs on virtual time under looptime.
    A router without a ``state`` store does not use this: its policy objects keep their own
    state inline, which is the same thing without the indirection.
    """

    name = "memory"

    def __init__(self, *, clock: Callable[[], float] = _loop_time, prefix: str = "failover:") -> None:
        super().__init__(prefix)
        self.clock = clock
        self._data: dict[str, tuple[L.State, float]] = {}  # key -> (state, expires at)

    async def _apply(self, keys: list[str], ttl: Callable[[list[L.State], float], float], step: Step[T]) -> T:
        now = self.clock()
        states = []
        for k in keys:
            held = self._data.get(k)
            states.append(held[0] if held is not None and held[1] > now else _NEW[k[len(self.prefix) :][:2]]())
        result = step(states, now)
        expires = now + ttl(states, now)
        for k, s in zip(keys, states, strict=True):
            self._data[k] = (s, expires)
        return result

    def ttls(self, now: float) -> dict[str, float]:
        """Seconds left to live per key (for tests: every key has one)."""
        return {k: e - now for k, (_, e) in self._data.items()}


def _wal(conn: sqlite3.Connection, patience: float) -> None:
    """Switch to WAL. On a new file several processes do this at once, and the switch takes
    the file lock without SQLite's busy handler ("database is locked" at once): retry."""
    end = time.monotonic() + patience
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > end:
                raise
            time.sleep(0.01)


class SQLiteStore(_LogicStore):
    """Shared state for several processes on one machine: one SQLite file in WAL mode.

    Each operation is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken up front,
    so two processes never both read the old state and both write), run in a worker thread
    so the event loop never waits on the file lock. One thread and one connection per store:
    the operations of one process queue in order instead of fighting over the file lock (whose
    busy handler sleeps in steps of milliseconds). Times are the wall clock (``time.time``),
    which every process on one machine shares. Expired rows are skipped on read and deleted
    now and then.
    """

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str = "failover:",
        busy_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(prefix)
        self.path = Path(path)
        self.clock = clock
        self.busy_timeout = busy_timeout
        self._ops = 0
        self._conn_: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="failover-state-sqlite")

    def _conn(self) -> sqlite3.Connection:
        conn = self._conn_
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
            _wal(conn, self.busy_timeout)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS failover_state (k TEXT PRIMARY KEY, v TEXT NOT NULL, expires REAL NOT NULL)"
            )
            self._conn_ = conn
        return conn

    def _run(self, keys: list[str], ttl: Callable[[list[L.State], float], float], step: Step[T]) -> T:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = self.clock()
            states: list[L.State] = []
            for k in keys:
                row = conn.execute("SELECT v, expires FROM failover_state WHERE k = ?", (k,)).fetchone()
                fresh = row is not None and row[1] > now
                states.append(json.loads(row[0]) if fresh else _NEW[k[len(self.prefix) :][:2]]())
            result = step(states, now)
            expires = now + ttl(states, now)
            conn.executemany(
                "INSERT INTO failover_state (k, v, expires) VALUES (?, ?, ?) "
                "ON CONFLICT(k) DO UPDATE SET v = excluded.v, expires = excluded.expires",
                [(k, json.dumps(s, separators=(",", ":")), expires) for k, s in zip(keys, states, strict=True)],
            )
            self._ops += 1
            if self._ops % 1000 == 0:
                conn.execute("DELETE FROM failover_state WHERE expires <= ?", (now,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return result

    async def _apply(self, keys: list[str], ttl: Callable[[list[L.State], float], float], step: Step[T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._run, keys, ttl, step)

    def ttls(self) -> dict[str, float]:
        """Seconds left to live per key (for tests: every key has one)."""
        now = self.clock()
        rows = self._conn().execute("SELECT k, expires FROM failover_state").fetchall()
        return {k: e - now for k, e in rows if math.isfinite(e)}

    async def aclose(self) -> None:
        def close() -> None:
            if self._conn_ is not None:
                self._conn_.close()
                self._conn_ = None

        await asyncio.get_running_loop().run_in_executor(self._thread, close)
        self._thread.shutdown(wait=False)
