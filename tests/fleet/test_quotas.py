"""A tenant's quota holds across three gateway processes that share one Redis.

Without the shared store each gateway would count alone and a tenant with ``rpm: R`` would
get up to 3R requests a minute through the fleet.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from failover.testing import FakeServer
from tests._services import RedisServer, fail_on_service_error

from ._kit import Gateway, start_gateways, write_config
from .conftest import fleet_config

pytestmark = pytest.mark.e2e

TENANT_RPM = 9
KEY = "sk-fleet-tenant-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def tenant_fleet(fleet_redis: RedisServer, fake: FakeServer) -> Iterator[list[Gateway]]:
    workdir = Path(tempfile.mkdtemp(prefix="failover-fleet-quota-"))
    config = fleet_config(fake, fleet_redis.url, f"fleet-q-{uuid.uuid4().hex[:8]}:")
    config["gateway"]["tenants"] = {
        "acme": {"key_sha256": [hashlib.sha256(KEY.encode()).hexdigest()], "rpm": TENANT_RPM},
    }
    with fail_on_service_error():
        gateways = start_gateways(write_config(workdir / "failover.yaml", config), 3, workdir)
    try:
        yield gateways
    finally:
        for gw in gateways:
            gw.stop()


async def test_a_tenants_rpm_holds_across_the_fleet(tenant_fleet: list[Gateway], fake: FakeServer) -> None:
    provider = next(p for p in fake.providers if p.name == "warm")
    before = len(provider.calls)
    body = {"model": "warm", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}, timeout=10) as client:
        # round-robin, one at a time: each gateway admits 3, then every gateway refuses
        answers = [
            await client.post(f"{tenant_fleet[i % 3].url}/v1/chat/completions", json=body)
            for i in range(2 * TENANT_RPM)
        ]
        # and a burst on top, all at once: still nothing more
        answers += await asyncio.gather(
            *(client.post(f"{tenant_fleet[i % 3].url}/v1/chat/completions", json=body) for i in range(TENANT_RPM))
        )
    assert [r.status_code for r in answers[:TENANT_RPM]] == [200] * TENANT_RPM, [r.text for r in answers[:TENANT_RPM]]
    statuses = Counter(r.status_code for r in answers)
    assert set(statuses) <= {200, 429}, (statuses, [r.text for r in answers if r.status_code not in (200, 429)][:2])
    assert statuses[200] <= TENANT_RPM, f"the fleet admitted {statuses[200]} requests, the tenant's rpm is {TENANT_RPM}"
    assert len(provider.calls) - before == statuses[200]  # a refused request was never routed
    for r in answers:
        if r.status_code == 429:
            err = r.json()["error"]
            assert err["code"] == "rate_limit_exceeded" and err["type"] == "requests", r.text
            assert f"{TENANT_RPM} requests per minute" in err["message"]
            # shared buckets free their entries at whole seconds, rounded up: up to 61 s
            assert 1 <= int(r.headers["retry-after"]) <= 61
    assert Counter(r.url.port for r in answers[:TENANT_RPM]) == Counter({gw.port: 3 for gw in tenant_fleet})
