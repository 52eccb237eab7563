"""Backends for the state contract tests: memory, SQLite (a temp file) and a real redis-server.

The Redis server here is this package's own (not the ledger's session server), because
tests stop, freeze (SIGSTOP) and restart it; tests/_services.py (the same code that starts
the ledger's) starts it on a free loopback port with no persistence, and never skips when
redis-server is missing.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from failover.state import GuardedStore, MemoryStore, SQLiteStore, StateStore
from tests._services import RedisServer, fail_on_service_error, started_redis

BACKENDS = ["memory", "sqlite", "redis"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with started_redis(prefix="failover-state-redis-") as server:
        yield server


@pytest.fixture
def live_redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The session's server, running again after the test (tests may stop or freeze it)."""
    yield redis_server
    redis_server.resume()
    if not redis_server.running():
        with fail_on_service_error():
            redis_server.start()


StoreFactory = Callable[[], StateStore]


@pytest.fixture(params=BACKENDS)
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Stores of one backend that share their data, as the processes of a fleet would."""
    kind: str = request.param
    made: list[StateStore] = []
    shared = MemoryStore()
    prefix = f"t{uuid.uuid4().hex[:10]}:"
    url = request.getfixturevalue("redis_server").url if kind == "redis" else ""

    def make() -> StateStore:
        store: StateStore
        if kind == "memory":
            return shared
        if kind == "sqlite":
            store = SQLiteStore(tmp_path / "state.db", prefix=prefix)
        else:
            from failover.state import RedisStore

            # The contract is about what the fleet decides, not how long Redis may take: the
            # timeout only stops a hang. On a loaded CI box a first connect once took over 2 s.
            store = RedisStore(url, prefix=prefix, timeout=10.0)
        made.append(store)
        return store

    yield make
    for s in made:
        await s.aclose()


@pytest.fixture
async def store(make_store: StoreFactory) -> StateStore:
    return make_store()


def guarded(store: StateStore, **kw: float) -> GuardedStore:
    return GuardedStore(store, **kw)
