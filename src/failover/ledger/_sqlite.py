"""SQLiteStore: the default durable ledger on one machine.

Every state change is one ``BEGIN IMMEDIATE`` transaction in WAL mode, committed before the
ledger lets a tool body run, so a process killed at any point leaves either no record or a
``started`` one with a lease, never a half-written one. Several processes (and several
stores in one process) may share the file: SQLite's write lock makes each claim atomic, and
the busy timeout makes writers queue instead of failing.

The stdlib ``sqlite3`` module runs on one dedicated thread per store (its connection never
changes threads); the event loop only awaits the result. A caller cancelled mid-call does
not cut a transaction in half: it runs to its end on the thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from . import _machine as machine
from ._record import EXECUTION_COLUMNS, Checkpoint, Execution, State, canonical_json
from ._store import TransactionalStore

T = TypeVar("T")

_COLUMNS = EXECUTION_COLUMNS

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_executions (
    operation_id TEXT NOT NULL,
    key          TEXT NOT NULL,
    tool         TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    state        TEXT NOT NULL,
    idempotent   INTEGER NOT NULL,
    result       TEXT,
    error        TEXT,
    external_ref TEXT,
    retry_safe   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    owner        TEXT,
    lease_until  REAL,
    created_at   REAL NOT NULL,
    started_at   REAL,
    finished_at  REAL,
    updated_at   REAL NOT NULL,
    PRIMARY KEY (operation_id, key)
);
CREATE INDEX IF NOT EXISTS ledger_executions_open ON ledger_executions (state, lease_until);
CREATE TABLE IF NOT EXISTS ledger_checkpoints (
    task_id  TEXT PRIMARY KEY,
    state    TEXT NOT NULL,
    version  INTEGER NOT NULL,
    saved_at REAL NOT NULL
);
"""

_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM ledger_executions"
_UPSERT = f"INSERT OR REPLACE INTO ledger_executions ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


def _row(rec: Execution) -> tuple[Any, ...]:
    d = rec.to_dict()
    d["result"] = None if rec.result is None else canonical_json(rec.result)
    d["idempotent"] = int(rec.idempotent)
    d["retry_safe"] = int(rec.retry_safe)
    return tuple(d[c] for c in _COLUMNS)


def _record(row: tuple[Any, ...]) -> Execution:
    d = dict(zip(_COLUMNS, row, strict=True))
    d["result"] = None if d["result"] is None else json.loads(d["result"])
    d["idempotent"] = bool(d["idempotent"])
    d["retry_safe"] = bool(d["retry_safe"])
    return Execution.from_dict(d)


class SQLiteStore(TransactionalStore):
    """The ledger in an SQLite file (WAL, ``synchronous=FULL`` by default).

    >>> ledger = Ledger(SQLiteStore("/var/lib/myapp/ledger.db"))

    ``synchronous="NORMAL"`` is still safe across process crashes (WAL) but may lose the
    last transactions on a power loss; ``FULL`` (the default) does not.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL", "EXTRA"] = "FULL",
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="failover-ledger-sqlite")
        self._closed = False

    # -- the thread side -------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
            self._wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            self._conn = conn
            try:
                self._tx(lambda c: [c.execute(stmt) for stmt in _SCHEMA.split(";") if stmt.strip()])
            except BaseException:
                self._conn = None
                conn.close()
                raise
        return self._conn

    def _wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL. The switch takes an exclusive lock and, when two
        connections race to make it on a new file, one can fail at once with "database is
        locked" without waiting: retry until the busy timeout."""
        end = time.monotonic() + self.busy_timeout
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > end:
                    raise
                time.sleep(0.005)
                continue
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"{self.path}: cannot use WAL (journal_mode is {mode})")
            return

    def _tx(self, body: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = body(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return out

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        return body(self._connect())

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise RuntimeError("SQLiteStore is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    # -- TransactionalStore ----------------------------------------------------------

    async def _apply(
        self, operation_id: str, key: str, fn: Callable[[Execution | None], tuple[Execution | None, T]]
    ) -> T:
        def body(conn: sqlite3.Connection) -> T:
            row = conn.execute(_SELECT + " WHERE operation_id = ? AND key = ?", (operation_id, key)).fetchone()
            new, out = fn(None if row is None else _record(row))
            if new is not None:
                conn.execute(_UPSERT, _row(new))
            return out

        return await self._run(lambda: self._tx(body))

    async def _checkpoint(self, task_id: str, fn: Callable[[Checkpoint | None], Checkpoint]) -> Checkpoint:
        def body(conn: sqlite3.Connection) -> Checkpoint:
            cp = fn(_load_checkpoint(conn, task_id))
            conn.execute(
                "INSERT OR REPLACE INTO ledger_checkpoints (task_id, state, version, saved_at) VALUES (?, ?, ?, ?)",
                (task_id, canonical_json(cp.state), cp.version, cp.saved_at),
            )
            return cp

        return await self._run(lambda: self._tx(body))

    async def expire(self, *, now: float) -> list[Execution]:
        def body(conn: sqlite3.Connection) -> list[Execution]:
            rows = conn.execute(
                _SELECT + " WHERE state = ? AND (lease_until IS NULL OR lease_until <= ?)", (State.STARTED.value, now)
            ).fetchall()
            out = []
            for row in rows:
                new = machine.expire(_record(row), now)
                if new is not None:
                    conn.execute(_UPSERT, _row(new))
                    out.append(new)
            return out

        return await self._run(lambda: self._tx(body))

    async def get(self, operation_id: str, key: str) -> Execution | None:
        def body(conn: sqlite3.Connection) -> Execution | None:
            row = conn.execute(_SELECT + " WHERE operation_id = ? AND key = ?", (operation_id, key)).fetchone()
            return None if row is None else _record(row)

        return await self._run(lambda: self._read(body))

    async def records(self, operation_id: str) -> list[Execution]:
        def body(conn: sqlite3.Connection) -> list[Execution]:
            rows = conn.execute(_SELECT + " WHERE operation_id = ? ORDER BY created_at, key", (operation_id,))
            return [_record(r) for r in rows.fetchall()]

        return await self._run(lambda: self._read(body))

    async def load_checkpoint(self, task_id: str) -> Checkpoint | None:
        return await self._run(lambda: self._read(lambda conn: _load_checkpoint(conn, task_id)))

    async def aclose(self) -> None:
        if self._closed:
            return

        def close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._run(close)
        self._closed = True
        self._pool.shutdown(wait=True)


def _load_checkpoint(conn: sqlite3.Connection, task_id: str) -> Checkpoint | None:
    row = conn.execute(
        "SELECT state, version, saved_at FROM ledger_checkpoints WHERE task_id = ?", (task_id,)
    ).fetchone()
    if row is None:
        return None
    return Checkpoint(task_id=task_id, state=json.loads(row[0]), version=int(row[1]), saved_at=float(row[2]))
