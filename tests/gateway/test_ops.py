"""Operations: /readyz, /metrics, JSON access logs, graceful drain at shutdown (ASGI lifespan)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
from typing import Any

import httpx
from starlette.types import Message

from failover.gateway import create_app
from failover.gateway._logs import ACCESS_LOGGER, JsonFormatter
from failover.testing import Reply
from failover.testing._provider import Outcome

from ._kit import ACME_KEY, ADMIN_KEY, PROVIDER_KEY, Kit, chat_body, chat_scope


def _client(app: Any, key: str | None = ACME_KEY) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway", headers=headers)


async def test_readyz_and_healthz() -> None:
    kit = Kit()
    async with _client(kit.app, key=None) as c:
        r = await c.get("/readyz")
        assert r.status_code == 200 and r.json() == {"status": "ready"}
        kit.app.state.gateway.draining = True
        r = await c.get("/readyz")
        assert r.status_code == 503 and r.json() == {"status": "draining"}
        assert (await c.get("/healthz")).status_code == 200  # alive while draining


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{want}}} not in metrics")


async def test_metrics_count_requests_attempts_recoveries_and_failures() -> None:
    kit = Kit({"x": ["overloaded"], "s": [Reply.hang()]})
    async with kit.client() as c:
        assert (await c.post("/v1/chat/completions", json=chat_body())).status_code == 200
        assert (await c.post("/v1/chat/completions", json=chat_body("flaky"))).status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body("solo"), headers={"x-failover-deadline-ms": "200"})
        assert r.status_code == 504
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"x-failover-max-cost": "1e-12"})
        assert r.status_code == 422 and r.headers["x-failover-attempts"] == "0"
        assert (await c.post("/v1/chat/completions", json=chat_body("no-such-route"))).status_code == 404
        assert (await c.get("/metrics")).status_code == 403  # a tenant key is not an admin key
    async with _client(kit.app, key=None) as c:
        assert (await c.get("/metrics")).status_code == 401
    async with _client(kit.app, key=ADMIN_KEY) as c:
        r = await c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    m = r.text
    assert _sample(m, "failover_gateway_requests_total", route="chat", status="200") == 1
    assert _sample(m, "failover_gateway_requests_total", route="flaky", status="200") == 1
    assert _sample(m, "failover_gateway_requests_total", route="solo", status="504") == 1
    assert _sample(m, "failover_gateway_requests_total", route="-", status="404") == 1
    assert _sample(m, "failover_attempts_total", target="a", outcome="ok") == 1
    assert _sample(m, "failover_attempts_total", target="x", outcome="provider_overloaded") == 1
    assert _sample(m, "failover_attempts_total", target="x", outcome="ok") == 1  # the replay answered
    assert _sample(m, "failover_attempts_total", target="s", outcome="timeout:total") == 1
    assert (
        _sample(m, "failover_recoveries_total", route="flaky", workflow="retry_failover", reason="provider_overloaded")
        == 1
    )
    assert _sample(m, "failover_deadline_exhausted_total", route="solo") == 1
    assert _sample(m, "failover_no_eligible_candidate_total", route="chat") == 1
    model = kit.router.routes["chat"].primary[0].model
    genai = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "openai", "gen_ai_request_model": model}
    assert _sample(m, "gen_ai_client_token_usage_sum", **genai, gen_ai_token_type="output", failover_target="a") > 0
    assert _sample(m, "failover_cost_usd_total", route="chat", tenant="acme") > 0
    assert _sample(m, "failover_gateway_in_flight") == 0
    assert PROVIDER_KEY not in m and ACME_KEY not in m


async def test_metrics_show_breaker_states_and_can_be_public() -> None:
    kit = Kit()
    from failover.policy import BreakerBoard

    kit.router.breakers = BreakerBoard()
    app = create_app(kit.router, dataclasses.replace(kit.settings, metrics_require_admin_key=False))
    async with _client(app) as c:
        assert (await c.post("/v1/chat/completions", json=chat_body())).status_code == 200
    async with _client(app, key=None) as c:
        r = await c.get("/metrics")
    assert r.status_code == 200
    assert "failover_breaker_state{" in r.text and 'state="closed"} 1.0' in r.text


async def test_metrics_can_be_switched_off() -> None:
    kit = Kit()
    app = create_app(kit.router, dataclasses.replace(kit.settings, metrics_enabled=False))
    async with _client(app, key=ADMIN_KEY) as c:
        assert (await c.get("/metrics")).status_code == 404


async def test_json_access_log_one_line_per_request_without_secrets() -> None:
    kit = Kit({"x": ["overloaded"]})
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(ACCESS_LOGGER)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with kit.client() as c:
            r = await c.post("/v1/chat/completions", json=chat_body("flaky"), headers={"x-failover-request-id": "r-1"})
            assert r.status_code == 200
            r = await c.post("/v1/chat/completions", json=chat_body("secret"))
            assert r.status_code == 403
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2
    ok, refused = lines
    assert ok["request_id"] == "r-1" and ok["tenant"] == "acme" and ok["route"] == "flaky"
    assert ok["status"] == 200 and ok["target"] == "x" and ok["attempts"] == 2 and ok["recovered"] is True
    assert ok["elapsed_ms"] > 0 and ok["cost_usd"] > 0 and ok["level"] == "info"
    assert refused["status"] == 403 and refused["code"] == "route_not_allowed"
    text = out.getvalue()
    assert ACME_KEY not in text and PROVIDER_KEY not in text


class _Lifespan:
    """Drives an app's ASGI lifespan by hand."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.outbox: asyncio.Queue[Message] = asyncio.Queue()

    async def start(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self.task = asyncio.create_task(self.app(scope, self.inbox.get, self.outbox.put))
        await self.inbox.put({"type": "lifespan.startup"})
        assert (await self.outbox.get())["type"] == "lifespan.startup.complete"

    async def stop(self) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        assert (await self.outbox.get())["type"] == "lifespan.shutdown.complete"
        await self.task


class _StayingClient:
    """An ASGI client that never leaves; it notes when the first body bytes arrive."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = json.dumps(body).encode()
        self.sent = False
        self.first = asyncio.Event()
        self.messages: list[Message] = []

    async def receive(self) -> Message:
        if not self.sent:
            self.sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        self.messages.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            self.first.set()


async def test_shutdown_drains_then_cuts_a_long_stream_and_closes_its_upstream() -> None:
    words = " ".join(f"w{i}" for i in range(400))
    kit = Kit({"a": [Reply.ok(words, chunk_interval=0.05)]})
    app = create_app(kit.router, dataclasses.replace(kit.settings, drain_seconds=0.3))
    life = _Lifespan(app)
    await life.start()
    client = _StayingClient(chat_body(stream=True))
    streaming = asyncio.create_task(app(chat_scope(), client.receive, client.send))
    await asyncio.wait_for(client.first.wait(), 5)
    stopping = asyncio.create_task(life.stop())
    await asyncio.sleep(0.05)
    async with _client(app) as c:
        assert (await c.get("/readyz")).status_code == 503
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 503 and r.json()["error"]["code"] == "shutting_down"
        assert r.headers["retry-after"] == "1"
    assert not streaming.done()  # still draining
    await asyncio.wait_for(stopping, 5)
    assert streaming.done()
    last = client.messages[-1]
    assert last["more_body"] is False
    assert b'"code":"shutting_down"' in last["body"] and b"[DONE]" not in last["body"]
    (call,) = kit.providers["a"].calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED  # the upstream stream was closed
    assert call.events_sent < 100


async def test_shutdown_lets_short_requests_finish() -> None:
    kit = Kit({"a": [Reply.ok("done", latency=0.2)]})
    app = create_app(kit.router, dataclasses.replace(kit.settings, drain_seconds=5))
    life = _Lifespan(app)
    await life.start()
    async with _client(app) as c:
        pending = asyncio.create_task(c.post("/v1/chat/completions", json=chat_body()))
        await asyncio.sleep(0.05)
        await life.stop()
        r = await pending
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "done"


class _SpyRouterClose:
    def __init__(self, router: Any) -> None:
        self.closed = asyncio.Event()
        original = router.aclose

        async def aclose() -> None:
            await original()
            self.closed.set()

        router.aclose = aclose


async def test_reload_swaps_the_router_and_old_streams_finish_on_the_old_one() -> None:
    import os
    import signal

    old_kit = Kit({"a": [Reply.ok(" ".join(f"old{i}" for i in range(20)), chunk_interval=0.02)]})
    new_kit = Kit({"a": [Reply.ok("from the new config")]})
    spy = _SpyRouterClose(old_kit.router)
    calls: list[int] = []

    def reload() -> tuple[Any, Any]:
        calls.append(1)
        return new_kit.router, new_kit.settings

    app = create_app(old_kit.router, old_kit.settings, reload=reload)
    gw = app.state.gateway
    life = _Lifespan(app)
    await life.start()
    client = _StayingClient(chat_body(stream=True))
    # hold_tokens=0: the stream's first byte goes out at once, so the reload finds it in flight
    streaming = asyncio.create_task(app(chat_scope(hold_tokens=0), client.receive, client.send))
    await asyncio.wait_for(client.first.wait(), 5)
    os.kill(os.getpid(), signal.SIGHUP)
    for _ in range(100):
        if gw.router is new_kit.router:
            break
        await asyncio.sleep(0.01)
    assert calls == [1] and gw.router is new_kit.router
    async with _client(app) as c:
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.json()["choices"][0]["message"]["content"] == "from the new config"
    assert not spy.closed.is_set()  # the old router still serves its stream
    await asyncio.wait_for(streaming, 5)
    body = b"".join(m.get("body", b"") for m in client.messages if m["type"] == "http.response.body")
    assert b"old19" in body and body.endswith(b"data: [DONE]\n\n")  # finished whole, on the old router
    await asyncio.wait_for(spy.closed.wait(), 2)  # then the old router was closed
    await life.stop()


async def test_a_failed_reload_keeps_serving() -> None:
    kit = Kit()
    app = create_app(kit.router, kit.settings)
    gw = app.state.gateway

    from failover.gateway._signals import reload_on_sighup as _reload_on_sighup
    from failover.model import ConfigError

    def broken() -> tuple[Any, Any]:
        raise ConfigError("routes.chat", "bad", "fix it")

    _reload_on_sighup(gw, broken)
    import os
    import signal

    os.kill(os.getpid(), signal.SIGHUP)
    await asyncio.sleep(0.1)
    assert gw.router is kit.router
    asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)


async def test_the_lab_is_mounted_only_when_switched_on() -> None:
    kit = Kit()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=kit.app), base_url="http://gw") as c:
        assert (await c.get("/lab/")).status_code == 404
    app = create_app(kit.router, dataclasses.replace(kit.settings, lab_enabled=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        page = await c.get("/lab/")
        assert page.status_code == 200 and "failover lab" in page.text
        run = await c.post("/lab/api/run", json={"scenario": "timeout", "capability": "vision", "budget": 3})
        assert run.status_code == 200
        assert run.json()["target_used"] == "c"


def test_a_json_log_line_stays_strict_json_with_a_non_finite_field() -> None:
    """A cost or latency that came out NaN or infinite is written as a string: a log pipeline
    reading strict JSON never drops the line."""
    record = logging.LogRecord("failover.access", logging.INFO, __file__, 1, "request", None, None)
    record.failover = {"cost_usd": float("nan"), "latencies": [0.25, float("inf")], "route": "chat"}

    def refuse(token: str) -> object:
        raise AssertionError(f"{token} written into a JSON log line")

    line = json.loads(JsonFormatter().format(record), parse_constant=refuse)
    assert line["cost_usd"] == "nan" and line["latencies"] == [0.25, "inf"] and line["route"] == "chat"
