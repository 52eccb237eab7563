"""What an operator reads: access lines without ``None``, a reload at INFO, breaker retry times
as wall-clock timestamps on /admin/health, small USD amounts that do not print as $0.000000."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from datetime import datetime

import httpx
import pytest

from failover import Envelope, Price, Request, Route, Router, Unavailable
from failover.gateway import GatewaySettings, create_app
from failover.gateway._logs import ACCESS_LOGGER
from failover.gateway._signals import reload_on_sighup as _reload_on_sighup
from failover.policy import BreakerBoard, BreakerConfig, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import Kit, chat_body


async def test_access_lines_of_refused_requests_show_dashes_not_none(caplog: pytest.LogCaptureFixture) -> None:
    kit = Kit(open=True)
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        async with kit.client(key=None) as c:
            assert (await c.post("/v1/chat/completions", json=chat_body("nope"))).status_code == 404
            assert (await c.post("/v1/chat/completions", json={"model": "chat", "messages": []})).status_code == 400
            assert (await c.post("/v1/chat/completions", json=chat_body("chat"))).status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(lines) == 3
    for line in lines[:2]:
        assert "None" not in line
        assert " route=- " in line and " request_id=- " in line and " target=- " in line
    assert " route=chat " in lines[2] and " target=a " in lines[2]


async def test_a_reload_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    old, new = Kit(), Kit()
    app = create_app(old.router, old.settings)
    gw = app.state.gateway
    _reload_on_sighup(gw, lambda: (new.router, new.settings))
    try:
        with caplog.at_level(logging.INFO, logger="failover.gateway"):
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(200):
                if gw.router is new.router:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.01)  # the log line follows the swap
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
    (rec,) = [r for r in caplog.records if "configuration reloaded" in r.getMessage()]
    assert rec.levelno == logging.INFO


async def test_admin_health_shows_when_an_open_breaker_lets_a_probe_through_as_utc_time() -> None:
    x = FakeProvider("x", "openai", Script.always(Reply.server_error()))
    target = x.target(max_attempts=1, tokenizer="estimate")
    board = BreakerBoard(BreakerConfig(min_calls=2, window_size=2, open_duration=30.0))
    router = Router(
        [Route(name="r", primary=(target,))], transport=FakeNetwork(x), retry_budget=Unlimited(), breakers=board
    )
    for _ in range(2):
        with pytest.raises(Unavailable):
            await router.complete("r", Request.simple("hi"), Envelope(budget=5))
    app = create_app(router, GatewaySettings())  # open: loopback callers only, as the ASGI client is
    before = time.time()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        body = (await c.get("/admin/health")).json()
    after = time.time()
    (entry,) = [b for b in body["breakers"] if b["layer"] == "target"]
    assert entry["state"] == "open"
    at = entry["retry_at"]
    assert isinstance(at, str) and at.endswith("Z")
    when = datetime.fromisoformat(at).timestamp()
    assert 0 < entry["retry_in_s"] <= 30.0
    assert before + entry["retry_in_s"] - 1 <= when <= after + entry["retry_in_s"] + 1  # wall clock, not loop time
    closed = [b for b in body["breakers"] if b["state"] == "closed"]
    assert all(b["retry_at"] is None and b["retry_in_s"] is None for b in closed)


async def test_a_tiny_max_cost_is_readable_in_the_refusal() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("hi")))
    target = a.target(tokenizer="estimate", price=Price(input_per_mtok=1.0, output_per_mtok=2.0))
    router = Router([Route(name="r", primary=(target,))], transport=FakeNetwork(a), retry_budget=Unlimited())
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", Request.simple("hello there"), Envelope(budget=5, max_cost=1e-10))
    reason = ei.value.record.excluded[-1].reason
    assert "max_cost $0.0000000001" in reason and "$0.000000 " not in reason
    assert "$0.0000" in reason.split("exceeds")[0]  # the estimate too, with its significant digits
