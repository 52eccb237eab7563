"""A fleet on loopback: one real Redis, one fake provider server, three ``failover serve``.

* ``fleet_redis``: redis-server on a free port, append-only file fsynced on every write, so
  a test can kill it mid-load and start it again with what it acknowledged;
* ``fake``: the fault kit's :class:`FakeServer` in a thread, serving one scripted provider
  per test (``limited``, ``brk``, ``probe``, ``agent``), each counting what it receives;
* ``fleet``: three gateway processes over one config file whose targets point at ``fake``,
  with ``state: {backend: redis}`` and ``ledger: {backend: redis}`` on ``fleet_redis``.

Everything is module-scoped (starting three gateways costs seconds); each test owns its
provider, target and route, so tests do not see each other's breakers or buckets. When a
service cannot start, the tests fail and say why: they are never skipped.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from failover.testing import FakeProvider, FakeServer, Script
from tests._services import RedisServer, fail_on_service_error, started_redis

from ._kit import Gateway, start_gateways, write_config

RPM = 12  # test (a): the fleet-wide requests per minute of target `limited`
OPEN_SECONDS = 2.0  # tests (b), (c): how long a breaker stays open before it lets probes in
PROBES = 2  # test (c): half-open probes allowed at once, fleet-wide
MIN_CALLS = 4  # a breaker gives a verdict after this many calls
LEDGER_PREFIX = "fleet-ledger"


@dataclass
class Fleet:
    gateways: list[Gateway]
    fake: FakeServer
    redis: RedisServer
    providers: dict[str, FakeProvider]
    config: Path
    state_prefix: str

    @property
    def urls(self) -> list[str]:
        return [g.url for g in self.gateways]


def fleet_config(fake: FakeServer, redis_url: str, state_prefix: str) -> dict[str, Any]:
    """The gateways' one config file: a target and a route per test, shared state on Redis."""

    def target(name: str, **extra: Any) -> dict[str, Any]:
        return {
            "dialect": "openai",
            "base_url": fake.api_url_for(name),
            "model": "gpt-4o-mini",
            "max_attempts": 1,  # one attempt per request: what the provider sees is what was admitted
            "timeouts": {"connect": 1, "total": 3},
            **extra,
        }

    return {
        "targets": {
            "warm": target("warm", limits={"rpm": 100_000}),
            "limited": target("limited", limits={"rpm": RPM}),
            "brk": target("brk"),
            "probe": target("probe"),
            "agent": target("agent", capabilities=["chat", "tools"]),
        },
        "routes": {
            "warm": {"primary": ["warm"]},
            "limited": {"primary": ["limited"]},
            "brk": {"primary": ["brk"]},
            "probe": {"primary": ["probe"]},
            "agent": {"primary": ["agent"], "contract": {"capabilities": ["chat", "tools"]}},
        },
        "breakers": {
            "min_calls": MIN_CALLS,
            "window_size": 10,
            "failure_rate": 0.5,
            "open_duration": OPEN_SECONDS,
            "open_duration_growth": 1.0,
            "half_open_probes": PROBES,
        },
        "state": {
            "backend": "redis",
            "url": redis_url,
            "prefix": state_prefix,
            "timeout_ms": 250,  # above this loaded machine's Redis p99: no flapping to local state
            "local_share": 0.25,
        },
        "ledger": {"backend": "redis", "url": redis_url, "prefix": LEDGER_PREFIX, "timeout_ms": 300},
        "gateway": {
            "envelope": {"deadline_ms": 4000, "max_attempts": 1},
            "shutdown": {"drain_seconds": 1},
        },
    }


@pytest.fixture(scope="module")
def fleet_redis() -> Iterator[RedisServer]:
    with started_redis(persistent=True, prefix="failover-fleet-redis-") as server:
        yield server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    providers = [
        FakeProvider("warm", "openai", Script.always("ok")),
        FakeProvider("limited", "openai", Script.always("ok")),
        FakeProvider("brk", "openai", Script.always("ok")),
        FakeProvider("probe", "openai", Script.always("ok")),
        FakeProvider("agent", "openai", Script.always("ok")),
    ]
    with FakeServer(*providers).run_in_thread() as srv:
        yield srv


@pytest.fixture(scope="module")
def fleet(fleet_redis: RedisServer, fake: FakeServer) -> Iterator[Fleet]:
    workdir = Path(tempfile.mkdtemp(prefix="failover-fleet-"))
    prefix = f"fleet-{uuid.uuid4().hex[:8]}:"
    config = write_config(workdir / "failover.yaml", fleet_config(fake, fleet_redis.url, prefix))
    with fail_on_service_error():
        gateways = start_gateways(config, 3, workdir)
    try:
        for gw in gateways:  # connect to Redis and load the scripts before any test counts
            warm = gw.post("warm")
            assert warm.status_code == 200, warm.text
        yield Fleet(
            gateways=gateways,
            fake=fake,
            redis=fleet_redis,
            providers={p.name: p for p in fake.providers},
            config=config,
            state_prefix=prefix,
        )
    finally:
        for gw in gateways:
            gw.stop()
