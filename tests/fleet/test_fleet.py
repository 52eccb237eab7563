"""Three gateway processes, one Redis: limits, breakers, probes and the ledger hold fleet-wide.

Each test drives real HTTP into ``failover serve`` processes (tests/fleet/conftest.py) and
counts what the fake provider behind them received. Without shared state every process
would count alone: three times the rate limit, a breaker open on one process only, three
times the half-open probes. The last test kills Redis under load.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from failover.ledger import RedisStore, State
from failover.testing import FakeToolCall, Reply, Script

from .conftest import LEDGER_PREFIX, MIN_CALLS, OPEN_SECONDS, PROBES, RPM, Fleet

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]  # the agents run as ``-m tests.fleet._agent`` from here
ARGS = {"sku": "A-1", "qty": 1}  # tests/fleet/_agent.py asks for the same


_SEQ = itertools.count()


async def chat(client: httpx.AsyncClient, gateway: str, route: str, **headers: str) -> httpx.Response:
    """One new request: a body of its own (the same body again after a failure would be a
    client's retry, charged to the upstream's retry budget)."""
    return await client.post(
        f"{gateway}/v1/chat/completions",
        json={"model": route, "messages": [{"role": "user", "content": f"hi {next(_SEQ)}"}]},
        headers=headers,
        timeout=10,
    )


def attempts(resp: httpx.Response) -> int:
    return int(resp.headers["x-failover-attempts"])


async def trip(client: httpx.AsyncClient, fleet: Fleet, route: str) -> httpx.Response:
    """Fail requests through gateway 1 only, until it answers without calling the provider."""
    fleet.providers[route].load(Script.always("server_error"))
    for _ in range(4 * MIN_CALLS):
        resp = await chat(client, fleet.urls[0], route)
        if attempts(resp) == 0:
            return resp
    raise AssertionError(f"the breaker of {route} did not open after {4 * MIN_CALLS} failures through gateway 1")


def target_breaker(health: dict[str, Any], target: str) -> dict[str, Any]:
    """The target-layer breaker of ``target`` in an /admin/health answer (its scope holds the URL)."""
    found: list[dict[str, Any]] = [
        b for b in health["breakers"] if b["layer"] == "target" and f"/{target}/" in b["scope"]
    ]
    assert len(found) == 1, health["breakers"]
    return found[0]


def turned_away(resp: httpx.Response) -> None:
    """An open circuit is temporary: 503 with Retry-After up to the open period, the kind that opened it."""
    assert resp.status_code == 503, resp.text
    assert resp.json()["error"]["code"] == "provider_server_error", resp.text
    assert (resp.headers["x-should-retry"], resp.headers["x-failover-retryable"]) == ("false", "true")
    assert 1 <= int(resp.headers["retry-after"]) <= OPEN_SECONDS, resp.headers
    assert 0 < int(resp.headers["retry-after-ms"]) <= OPEN_SECONDS * 1000, resp.headers


async def test_a_target_limit_holds_across_the_fleet(fleet: Fleet) -> None:
    """rpm: R on the target: 3R requests spread over three gateways, the provider sees <= R."""
    provider = fleet.providers["limited"]
    async with httpx.AsyncClient() as client:
        # one request through each gateway first (so each has served), then the rest at once:
        # left to the burst alone, whichever gateway got going first could take the whole minute
        answers = [await chat(client, url, "limited") for url in fleet.urls]
        answers += await asyncio.gather(*(chat(client, fleet.urls[i % 3], "limited") for i in range(3 * RPM - 3)))
    ok = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code != 200]
    assert len(provider.calls) <= RPM, f"the provider saw {len(provider.calls)} requests, the fleet limit is {RPM}"
    assert len(ok) == len(provider.calls)
    assert len(ok) >= RPM // 2, f"only {len(ok)} of the {RPM} allowed requests were served"
    assert {r.status_code for r in refused} <= {429, 503}, (
        Counter(r.status_code for r in refused),
        refused[0].text,
        dict(refused[0].headers),
    )
    for r in refused:
        assert "retry-after" in r.headers, r.headers
        assert r.json()["error"]["code"] in ("rate_limited", "rate_limit_exceeded"), r.text
        assert attempts(r) == 0
    served_by = Counter(r.url.port for r in ok)
    assert len(served_by) == 3, f"not every gateway served: {served_by}"
    for gw in fleet.gateways:  # /admin/health shows the fleet's bucket on every gateway, not its local share
        lim = gw.get("/admin/health").json()["limiters"]["limited"]
        assert lim["view"] == "shared", lim
        (rpm,) = [b for b in lim["buckets"] if b["dimension"] == "rpm"]
        assert rpm["capacity"] == pytest.approx(RPM * 0.9) and rpm["level"] < 1, lim


async def test_a_breaker_opened_by_one_gateway_is_open_on_the_others(fleet: Fleet) -> None:
    provider = fleet.providers["brk"]
    async with httpx.AsyncClient() as client:
        opened = await trip(client, fleet, "brk")
        assert "circuit open" in opened.json()["error"]["message"], opened.text
        turned_away(opened)
        called = len(provider.calls)
        assert called >= MIN_CALLS
        provider.load(Script.always("ok"))  # it would answer now: any call would be visible
        for gateway in fleet.urls[1:]:
            resp = await chat(client, gateway, "brk")
            assert resp.status_code != 200, resp.text
            assert attempts(resp) == 0  # the RouteRecord: no attempt was made
            assert resp.headers["x-failover-target"] == ""
            assert "brk: circuit open" in resp.json()["error"]["message"], resp.text
            turned_away(resp)
            breaker = target_breaker((await client.get(f"{gateway}/admin/health")).json(), "brk")
            assert breaker["state"] == "open", breaker
    assert len(provider.calls) == called, "gateways 2 and 3 called a provider whose breaker gateway 1 opened"


async def test_half_open_probes_are_limited_across_the_fleet(fleet: Fleet) -> None:
    provider = fleet.providers["probe"]
    async with httpx.AsyncClient() as client:
        await trip(client, fleet, "probe")
        provider.load(Script.always(Reply.ok(latency=0.5)))  # probes stay in flight while the rest arrive
        before = len(provider.calls)
        await asyncio.sleep(OPEN_SECONDS + 0.3)
        burst = [chat(client, fleet.urls[i % 3], "probe") for i in range(30)]
        answers = await asyncio.gather(*burst)
    probes = len(provider.calls) - before
    served = [r for r in answers if r.status_code == 200]
    # a gateway whose store call timed out admits from its local breakers (fail open, by design):
    # say so if that is what let an extra probe through
    local = [gw.log.read_text(errors="replace").count("state backend redis unreachable") for gw in fleet.gateways]
    assert 1 <= probes <= PROBES, (
        f"{probes} probes reached the provider, {PROBES} allowed fleet-wide; went local: {local}"
    )
    assert len(served) == probes
    for r in answers:
        if r.status_code != 200:
            message = r.json()["error"]["message"]
            assert attempts(r) == 0 and ("probe: half-open" in message or "probe: circuit open" in message), r.text


def _wait_for(check: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _errors_logged(fleet: Fleet) -> str:
    """The gateways' ERROR lines (an internal error's traceback among them), for a failure's message."""
    out = []
    for gw in fleet.gateways:
        text = gw.log.read_text(errors="replace")
        out += [f"{gw.name}: {chunk[:3000]}" for chunk in text.split("\n20") if " ERROR " in chunk[:40]]
    return "\n".join(out[:10]) or "(no ERROR line in the gateways' logs)"


async def _ledger_records(redis_url: str, tasks: list[str]) -> dict[str, list[Any]]:
    store = RedisStore(aioredis.Redis.from_url(redis_url), prefix=LEDGER_PREFIX)
    try:
        return {t: await store.records(t) for t in tasks}
    finally:
        await store.client.aclose()


def test_stopping_redis_mid_load_loses_no_record_and_runs_no_tool_twice(fleet: Fleet, tmp_path: Path) -> None:
    """Three agent processes deliver the same 24 tasks through gateways 1-3 while Redis is
    killed and restarted: every order is made exactly once and recorded exactly once."""
    fleet.providers["agent"].load(Script.always(Reply.ok(tool_calls=[FakeToolCall("create_order", ARGS)])))
    tasks = [f"task-{uuid.uuid4().hex[:8]}-{i}" for i in range(24)]
    errs = [(tmp_path / f"agent-{i}.err").open("wb") for i in range(3)]
    agents = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fleet._agent",
                gw,
                fleet.redis.url,
                LEDGER_PREFIX,
                str(tmp_path),
                str(seed),
                *tasks,
            ],
            stdout=subprocess.DEVNULL,
            stderr=errs[seed],
            cwd=ROOT,
        )
        for seed, gw in enumerate(fleet.urls)
    ]
    shop = tmp_path / "shop"
    try:
        _wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 3, 30, "the agents to start")
        (tmp_path / "go").touch()
        _wait_for(lambda: shop.exists() and len(shop.read_text().splitlines()) >= 5, 20, "the first orders")
        fleet.redis.kill()  # mid-load: orders are being made, records are being written
        end = time.monotonic() + 1.5
        while time.monotonic() < end:  # plain requests need the shared state (breakers, limits) meanwhile
            for gw in fleet.gateways:
                gw.post("warm")
            time.sleep(0.1)
        fleet.redis.start()
        for agent in agents:
            agent.wait(timeout=40)
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
        for f in errs:
            f.close()
        if not fleet.redis.ping():
            fleet.redis.start()
    stderr = "\n".join((tmp_path / f"agent-{i}.err").read_text()[-1500:] for i in range(3))
    assert [a.returncode for a in agents] == [0, 0, 0], stderr
    seen: Counter[str] = Counter()
    for path in tmp_path.glob("agent-*.json"):
        seen.update(json.loads(path.read_text()))

    orders = Counter(line.split(" ", 1)[0] for line in shop.read_text().splitlines())
    assert not [k for k, n in orders.items() if n > 1], f"a tool ran twice: {orders}"
    records = asyncio.run(_ledger_records(fleet.redis.url, tasks))
    for task in tasks:
        recs = records[task]
        assert len(recs) == 1, (task, recs)
        rec = recs[0]
        key = f"{task}/{rec.key}"
        assert rec.state is State.SUCCEEDED, rec
        assert rec.result == {"order_id": key}
        assert orders[key] == 1, f"{key} is recorded as succeeded but the shop has {orders[key]} orders"
    assert sum(orders.values()) == len(tasks)
    # The outage hit the load: gateways refused with the typed error, the ledger raised.
    assert seen["gateway:409:side_effect_uncertain:ledger_down"] > 0, seen
    failed = [k for k in seen if k.startswith("gateway:5") or k == "gave_up"]
    assert not failed, f"{seen}\n{_errors_logged(fleet)}"
    assert seen["settled"] >= len(tasks) * 3, seen
    # The shared state went local during the outage and came back: metrics and logs say so.
    up = 'failover_state_backend_up{backend="redis"} 1.0'
    for gw in fleet.gateways:
        end = time.monotonic() + 15  # the probe back-off is at most 10 s
        while up not in gw.get("/metrics").text and time.monotonic() < end:
            gw.post("warm")  # a request with state calls: the one that finds Redis back
            time.sleep(0.2)
        metrics = gw.get("/metrics").text
        assert up in metrics, [line for line in metrics.splitlines() if "failover_state" in line]
        log = gw.log.read_text(errors="replace")
        # one outage, one switch each way: stale pooled connections must not flap it down again
        assert log.count("state backend redis unreachable") == 1, gw.name
        assert log.count("state backend redis reachable again") == 1, gw.name
    assert any(
        re.search(r'failover_state_fallbacks_total\{backend="redis"\} [1-9]', gw.get("/metrics").text)
        for gw in fleet.gateways
    )
