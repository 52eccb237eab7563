"""PostgresStore: the ledger shared by a fleet, in PostgreSQL (asyncpg).

Every transition is one transaction that first takes a transaction-scoped advisory lock on
the record's identity (so the first claim of a key that has no row yet is serialized too),
reads the row, applies the shared state machine (``_machine.py``) and upserts the result.
Needs ``asyncpg`` (``pip install failover[postgres]``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from . import _machine as machine
from ._record import EXECUTION_COLUMNS, Checkpoint, Execution, State, canonical_json
from ._store import TransactionalStore

T = TypeVar("T")

_COLUMNS = EXECUTION_COLUMNS


def _schema(prefix: str) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {prefix}_executions (
            operation_id TEXT NOT NULL,
            key          TEXT NOT NULL,
            tool         TEXT NOT NULL,
            args_hash    TEXT NOT NULL,
            state        TEXT NOT NULL,
            idempotent   BOOLEAN NOT NULL,
            result       TEXT,
            error        TEXT,
            external_ref TEXT,
            retry_safe   BOOLEAN NOT NULL,
            attempts     INTEGER NOT NULL,
            owner        TEXT,
            lease_until  DOUBLE PRECISION,
            created_at   DOUBLE PRECISION NOT NULL,
            started_at   DOUBLE PRECISION,
            finished_at  DOUBLE PRECISION,
            updated_at   DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (operation_id, key))""",
        f"CREATE INDEX IF NOT EXISTS {prefix}_executions_open ON {prefix}_executions (state, lease_until)",
        f"""CREATE TABLE IF NOT EXISTS {prefix}_checkpoints (
            task_id  TEXT PRIMARY KEY,
            state    TEXT NOT NULL,
            version  INTEGER NOT NULL,
            saved_at DOUBLE PRECISION NOT NULL)""",
    ]


def _record(row: Any) -> Execution:
    d = {c: row[c] for c in _COLUMNS}
    d["result"] = None if d["result"] is None else json.loads(d["result"])
    return Execution.from_dict(d)


def _values(rec: Execution) -> list[Any]:
    d = rec.to_dict()
    d["result"] = None if rec.result is None else canonical_json(rec.result)
    return [d[c] for c in _COLUMNS]


class PostgresStore(TransactionalStore):
    """The ledger in PostgreSQL tables named ``<table>_executions`` and ``<table>_checkpoints``.

    >>> store = PostgresStore("postgresql://app@db/app")      # or PostgresStore(pool)
    """

    def __init__(self, dsn_or_pool: str | Any, *, table: str = "failover_ledger", max_size: int = 10) -> None:
        if not table.replace("_", "").isalnum():
            raise ValueError(f"table prefix must be letters, digits and underscores, got {table!r}")
        self._dsn = dsn_or_pool if isinstance(dsn_or_pool, str) else None
        self._pool: Any = None if isinstance(dsn_or_pool, str) else dsn_or_pool
        self._owns = isinstance(dsn_or_pool, str)
        self.table = table
        self.max_size = max_size
        self._ready = False
        self._init_lock = asyncio.Lock()
        t = table
        self._select = f"SELECT {', '.join(_COLUMNS)} FROM {t}_executions"
        cols = ", ".join(_COLUMNS)
        params = ", ".join(f"${i}" for i in range(1, len(_COLUMNS) + 1))
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS[2:])
        self._upsert = (
            f"INSERT INTO {t}_executions ({cols}) VALUES ({params}) "
            f"ON CONFLICT (operation_id, key) DO UPDATE SET {updates}"
        )

    async def _get_pool(self) -> Any:
        if self._ready:
            return self._pool
        async with self._init_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self.max_size)
            if not self._ready:
                async with self._pool.acquire() as conn, conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{self.table}:schema")
                    for stmt in _schema(self.table):
                        await conn.execute(stmt)
                self._ready = True
        return self._pool

    async def _apply(
        self, operation_id: str, key: str, fn: Callable[[Execution | None], tuple[Execution | None, T]]
    ) -> T:
        pool = await self._get_pool()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                f"{self.table}:x:{len(operation_id)}:{operation_id}:{key}",
            )
            row = await conn.fetchrow(self._select + " WHERE operation_id = $1 AND key = $2", operation_id, key)
            new, out = fn(None if row is None else _record(row))
            if new is not None:
                await conn.execute(self._upsert, *_values(new))
            return out

    async def _checkpoint(self, task_id: str, fn: Callable[[Checkpoint | None], Checkpoint]) -> Checkpoint:
        pool = await self._get_pool()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{self.table}:c:{task_id}")
            cp = fn(await self._load_checkpoint(conn, task_id))
            await conn.execute(
                f"INSERT INTO {self.table}_checkpoints (task_id, state, version, saved_at) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (task_id) DO UPDATE SET state = EXCLUDED.state, version = EXCLUDED.version, "
                "saved_at = EXCLUDED.saved_at",
                task_id,
                canonical_json(cp.state),
                cp.version,
                cp.saved_at,
            )
            return cp

    async def expire(self, *, now: float) -> list[Execution]:
        pool = await self._get_pool()
        out = []
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                self._select
                + " WHERE state = $1 AND (lease_until IS NULL OR lease_until <= $2) FOR UPDATE SKIP LOCKED",
                State.STARTED.value,
                now,
            )
            for row in rows:
                new = machine.expire(_record(row), now)
                if new is not None:
                    await conn.execute(self._upsert, *_values(new))
                    out.append(new)
        return out

    async def get(self, operation_id: str, key: str) -> Execution | None:
        pool = await self._get_pool()
        row = await pool.fetchrow(self._select + " WHERE operation_id = $1 AND key = $2", operation_id, key)
        return None if row is None else _record(row)

    async def records(self, operation_id: str) -> list[Execution]:
        pool = await self._get_pool()
        rows = await pool.fetch(self._select + " WHERE operation_id = $1 ORDER BY created_at, key", operation_id)
        return [_record(r) for r in rows]

    async def load_checkpoint(self, task_id: str) -> Checkpoint | None:
        pool = await self._get_pool()
        async with pool.acquire() as conn:
            return await self._load_checkpoint(conn, task_id)

    async def _load_checkpoint(self, conn: Any, task_id: str) -> Checkpoint | None:
        row = await conn.fetchrow(
            f"SELECT state, version, saved_at FROM {self.table}_checkpoints WHERE task_id = $1", task_id
        )
        if row is None:
            return None
        return Checkpoint(
            task_id=task_id, state=json.loads(row["state"]), version=int(row["version"]), saved_at=row["saved_at"]
        )

    async def aclose(self) -> None:
        if self._owns and self._pool is not None:
            await self._pool.close()
            self._pool = None
            self._ready = False
