"""Real servers for the ledger's store tests, started on free loopback ports.

redis-server runs with no persistence (tests/_services.py starts it); PostgreSQL gets a
fresh cluster in a temporary directory (as the ``postgres`` user when the tests run as
root). Both stop when the session ends. scripts/services.sh installs them; when one cannot
start, the tests that need it fail and say why: they are never skipped.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from failover.ledger import LedgerStore, MemoryStore, SQLiteStore
from tests._services import RedisServer, ServiceError, fail_on_service_error, free_port, stop_process, wait_port

STORES = ["memory", "sqlite", "redis", "postgres"]


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real Redis: FAILOVER_TEST_REDIS_URL, or a redis-server started for this session."""
    given = os.environ.get("FAILOVER_TEST_REDIS_URL")
    if given:
        yield given
        return
    try:
        server = RedisServer(prefix="failover-ledger-redis-")
    except ServiceError as exc:
        pytest.fail(f"{exc}, or set FAILOVER_TEST_REDIS_URL, so the RedisStore tests can run", pytrace=False)
    try:
        with fail_on_service_error():
            server.start()
        yield server.url
    finally:
        server.close()


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A real PostgreSQL: FAILOVER_TEST_POSTGRES_DSN, or a fresh cluster for this session."""
    given = os.environ.get("FAILOVER_TEST_POSTGRES_DSN")
    if given:
        yield given
        return
    initdb, postgres = _pg_bin("initdb"), _pg_bin("postgres")
    if initdb is None or postgres is None:
        pytest.fail(
            "PostgreSQL (initdb, postgres) is not installed, so the PostgresStore tests cannot run. Run "
            "scripts/services.sh (it runs `apt-get install -y postgresql` as root), or set FAILOVER_TEST_POSTGRES_DSN.",
            pytrace=False,
        )
    workdir = Path(tempfile.mkdtemp(prefix="failover-pg-"))
    data, log = workdir / "data", workdir / "postgres.log"
    as_user: dict[str, Any] = {}
    if os.geteuid() == 0:  # postgres refuses to run as root: run it as the postgres user
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("running as root and there is no `postgres` user to run PostgreSQL as", pytrace=False)
        os.chown(workdir, user.pw_uid, user.pw_gid)
        as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    init = subprocess.run(
        [initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"],
        capture_output=True,
        text=True,
        check=False,
        cwd=workdir,
        **as_user,
    )
    if init.returncode != 0:
        pytest.fail(f"initdb failed ({init.returncode}):\n{init.stdout}\n{init.stderr}", pytrace=False)
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                postgres,
                "-D",
                str(data),
                "-p",
                str(port),
                "-k",
                str(workdir),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            **as_user,
        )
    try:
        with fail_on_service_error():
            wait_port(port, proc, "postgres", log, timeout=30.0)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        stop_process(proc, signal.SIGINT)  # a fast shutdown: nothing here needs to be kept
        shutil.rmtree(workdir, ignore_errors=True)


StoreFactory = Callable[[], LedgerStore]


@pytest.fixture(params=STORES)
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Builds stores of one kind that share their data (one file, one Redis prefix, ...),
    as separate processes of a fleet would; closes them all at the end."""
    kind: str = request.param
    made: list[LedgerStore] = []
    shared_memory = MemoryStore()
    tag = "t" + uuid.uuid4().hex[:12]
    redis = request.getfixturevalue("redis_url") if kind == "redis" else ""
    postgres = request.getfixturevalue("postgres_dsn") if kind == "postgres" else ""

    def make() -> LedgerStore:
        store: LedgerStore
        if kind == "memory":
            store = shared_memory
        elif kind == "sqlite":
            store = SQLiteStore(tmp_path / "ledger.db", synchronous="NORMAL")
        elif kind == "redis":
            from failover.ledger import RedisStore

            store = RedisStore(redis, prefix=f"failover-test:{tag}")
        else:
            from failover.ledger import PostgresStore

            store = PostgresStore(postgres, table=tag, max_size=20)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()


@pytest.fixture
async def store(make_store: StoreFactory) -> LedgerStore:
    return make_store()
