"""Backends for the state contract tests: memory, SQLite (a temp file) and a real redis-server.

The Redis server here is this package's own (not the ledger's session server), because
tests stop, freeze (SIGSTOP) and restart it; it is started on a free loopback port with no
persistence, like tests/ledger/conftest.py does, and never skipped when missing.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from failover.state import GuardedStore, MemoryStore, SQLiteStore, StateStore
from tests.ledger.conftest import _stop, _wait_port, free_port

BACKENDS = ["memory", "sqlite", "redis"]


class RedisServer:
    """A redis-server this test session controls: stop, start again on the same port, freeze."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed: run scripts/services.sh", pytrace=False)
        self.exe = exe
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="failover-state-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = self.dir / "redis.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    self.exe,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.dir),
                    "--daemonize",
                    "no",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        _wait_port(self.port, self.proc, "redis-server", log)

    def stop(self) -> None:
        if self.proc is not None:
            self.resume()
            _stop(self.proc)
            self.proc = None

    def freeze(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def live_redis(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The session's server, running again after the test (tests may stop or freeze it)."""
    yield redis_server
    redis_server.resume()
    if redis_server.proc is None or redis_server.proc.poll() is not None:
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

            store = RedisStore(url, prefix=prefix, timeout=2.0)
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
