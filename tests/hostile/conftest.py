"""A real redis-server for the shared retry budget tests (tests/_services.py starts it on a
free loopback port, no persistence; a missing redis-server fails the tests, never skips them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._services import RedisServer, fail_on_service_error, started_redis


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with fail_on_service_error(), started_redis(prefix="failover-hostile-redis-") as server:
        yield server
