"""The hostile suite's fixtures.

- A real redis-server for the shared retry budget tests (tests/_services.py starts it on a
  free loopback port, no persistence; a missing redis-server fails the tests, never skips them).
- The log scan: every line the suite's gateways write, at DEBUG (``failover serve``
  subprocesses, and in-process gateways through a DEBUG handler on the root logger), is
  checked for every secret the suite uses; a module whose tests made a line with one fails at
  its end (see ``_harness.LogScan``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests._services import RedisServer, fail_on_service_error, started_redis

from ._harness import SCAN

_SECRET_NAMES = ("_KEY", "_KEYS", "_TOKEN", "_SECRET")


# The tests' own HTTP client logs each URL it is told to send (a hostile test puts a key in a
# query string on purpose): its lines are the attacker's, not a gateway's. A served gateway's
# lines are all scanned, whatever wrote them.
_CLIENT_LOGGERS = ("httpx", "httpcore")


class _ScanHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.name.partition(".")[0] not in _CLIENT_LOGGERS:
            SCAN.check(self.format(record), f"in-process {record.name}")


@pytest.fixture(scope="session", autouse=True)
def _debug_logs_scanned() -> Iterator[None]:
    root = logging.getLogger()
    handler = _ScanHandler(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


@pytest.fixture(scope="module", autouse=True)
def _no_secret_in_a_log_line(request: pytest.FixtureRequest) -> Iterator[None]:
    for name, value in vars(request.module).items():
        if name.isupper() and name.endswith(_SECRET_NAMES):
            values = value if isinstance(value, tuple | list | set | frozenset) else (value,)
            SCAN.add(*(v for v in values if isinstance(v, str)))
    before = len(SCAN.leaks)
    yield
    leaks = SCAN.leaks[before:]
    assert not leaks, f"{len(leaks)} log line(s) hold a secret, such as:\n" + "\n".join(leaks[:5])


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with fail_on_service_error(), started_redis(prefix="failover-hostile-redis-") as server:
        yield server
