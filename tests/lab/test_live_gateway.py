"""The live view served by the gateway: the setting, the admin key, what the endpoints return
(metadata only), the event stream, and the drain ending it."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.types import Message

from failover import ConfigError
from failover.gateway import create_app
from failover.gateway._settings import settings_from_dict
from tests.gateway._kit import ACME_KEY, ADMIN_KEY, PROVIDER_KEY, Kit, chat_body

# the account number is not all digits: a record's epoch timestamp (1796304242.466) once held "4242"
PROMPT = "PROMPT-CANARY my account number is QZ4242KV"
ANSWER = "ANSWER-CANARY your balance is 17"
ENDPOINTS = ("/lab/api/live", "/lab/api/live/meta", "/lab/api/live/stream", "/lab/api/live/req_x/scenario")


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# -- the setting ---------------------------------------------------------------------------------


def _settings(**gateway: Any) -> Any:
    return settings_from_dict({"admin": {"key_sha256": [sha("admin")]}, "lab": True, **gateway})


def test_the_setting_reads_next_to_the_lab_flag() -> None:
    assert settings_from_dict({"lab": True}).lab_live_keep is None  # off unless configured
    assert _settings(lab_live=True).lab_live_keep == 200
    assert _settings(lab_live={"keep": 50}).lab_live_keep == 50
    assert _settings(lab_live={"enabled": True, "keep": 5000}).lab_live_keep == 5000
    assert _settings(lab_live={"enabled": False, "keep": 50}).lab_live_keep is None
    assert _settings(lab_live=False).lab_live_keep is None


@pytest.mark.parametrize(
    ("gateway", "field", "words"),
    [
        ({"lab": False, "lab_live": True}, "gateway.lab_live", "set gateway.lab: true"),
        ({"admin": {}, "lab_live": True}, "gateway.lab_live", "gateway.admin.key_sha256"),
        ({"lab_live": {"keep": 0}}, "gateway.lab_live.keep", "greater than or equal to 1"),
        ({"lab_live": {"keep": 10**6}}, "gateway.lab_live.keep", "less than or equal to 5000"),
        ({"lab_live": {"keeep": 10}}, "gateway.lab_live.keeep", "did you mean 'keep'"),
        ({"lab_live": "yes please"}, "gateway.lab_live", "gateway.lab_live"),
    ],
)
def test_a_bad_setting_names_the_field_and_the_fix(gateway: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        _settings(**gateway)
    assert info.value.field == field
    assert words in str(info.value)


# -- the endpoints ---------------------------------------------------------------------------------


def _kit(keep: int | None = 50, *, lab: bool = True) -> tuple[Kit, Any]:
    kit = Kit({"a": [f"ok({ANSWER!r})"], "x": "rate_limit(retry_after=0.05)", "c": f"ok({ANSWER!r})"})
    settings = dataclasses.replace(kit.settings, lab_enabled=lab, lab_live_keep=keep)
    return kit, create_app(kit.router, settings)


def _client(app: Any, key: str | None = None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gateway", headers=headers, timeout=30
    )


async def _traffic(app: Any) -> None:
    """Requests as a client sends them: a direct answer, a fallback, a stream, an Anthropic one."""
    async with _client(app, ACME_KEY) as c:
        r = await c.post("/v1/chat/completions", json=chat_body("chat", PROMPT))
        assert r.status_code == 200 and ANSWER in r.text
        r = await c.post("/v1/chat/completions", json=chat_body("flaky", PROMPT))
        assert r.status_code == 200 and r.headers["x-failover-target"] == "c"
        r = await c.post("/v1/chat/completions", json=chat_body("chat", PROMPT, stream=True))
        assert r.status_code == 200 and "[DONE]" in r.text
        r = await c.post(
            "/v1/messages",
            json={"model": "chat", "max_tokens": 64, "messages": [{"role": "user", "content": PROMPT}]},
            headers={"anthropic-version": "2023-06-01"},
        )
        assert r.status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body("nope", PROMPT))
        assert r.status_code == 404  # refused before any routing: no record, not shown


async def test_off_unless_configured() -> None:
    _, app = _kit(keep=None)
    async with _client(app, ADMIN_KEY) as c:
        assert (await c.get("/lab/api/meta")).json()["live"] is False
        for path in ENDPOINTS:
            assert (await c.get(path)).status_code == 404
    _, app = _kit()
    async with _client(app) as c:
        assert (await c.get("/lab/api/meta")).json()["live"] is True


async def test_every_live_endpoint_needs_the_admin_key() -> None:
    _, app = _kit()
    await _traffic(app)
    for key, status, code in [(None, 401, "invalid_api_key"), ("not-a-key", 401, "invalid_api_key"),
                              (ACME_KEY, 403, "admin_only")]:  # fmt: skip
        async with _client(app, key) as c:
            for path in ENDPOINTS:
                r = await c.get(path)
                assert (r.status_code, r.json()["error"]["code"]) == (status, code), (key, path)
                assert PROMPT not in r.text and "req_" not in r.text
    async with _client(app, ADMIN_KEY) as c:
        assert (await c.get("/lab/api/live")).status_code == 200


async def test_the_records_are_the_gateways_requests_as_metadata_only() -> None:
    kit, app = _kit()
    await _traffic(app)
    async with _client(app, ADMIN_KEY) as c:
        r = await c.get("/lab/api/live")
        meta = (await c.get("/lab/api/live/meta")).json()
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    body = r.json()
    for secret in (PROMPT, ANSWER, PROVIDER_KEY, ACME_KEY, ADMIN_KEY, "QZ4242KV"):
        assert secret not in r.text
    recs = body["records"]
    assert [(x["route"], x["stream"], x["target_used"], x["workflow"]) for x in recs] == [
        ("chat", False, "a", "direct"),
        ("flaky", False, "c", "fallback"),
        ("chat", True, "a", "direct"),
        ("chat", False, "a", "direct"),
    ]
    assert [x["seq"] for x in recs] == [1, 2, 3, 4] and {x["tenant"] for x in recs} == {"acme"}
    flaky = recs[1]
    assert [(a["target"], a["outcome"], a["status"]) for a in flaky["attempts"]] == [
        ("x", "rate_limited", 429),
        ("x", "rate_limited", 429),
        ("c", "ok", 200),
    ]
    assert flaky["attempts"][0]["failure"]["retry_after"] == 0.05
    assert flaky["candidates"] == ["x", "c"] and flaky["status"] == 200
    assert body["keep"] == 50 == meta["keep"] and meta["routes"] == sorted(kit.router.routes)
    assert "fallback" in meta["workflows"] and "failed" in meta["outcomes"]
    async with _client(app, ADMIN_KEY) as c:
        only = (await c.get("/lab/api/live", params={"route": "flaky"})).json()["records"]
        bad = await c.get("/lab/api/live", params={"workflow": "sideways"})
    assert [x["request_id"] for x in only] == [flaky["request_id"]]
    assert bad.status_code == 400 and bad.json()["field"] == "workflow"


async def test_a_failed_request_is_kept_with_its_status() -> None:
    kit, app = _kit()
    kit.providers["s"].load("server_error(message='PROVIDER-WORDS quoting the prompt')")
    async with _client(app, ACME_KEY) as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo", PROMPT))
    assert r.status_code == 503 and "PROVIDER-WORDS" in r.text  # the client is told...
    async with _client(app, ADMIN_KEY) as c:
        (rec,) = (await c.get("/lab/api/live", params={"outcome": "failed"})).json()["records"]
    assert rec["status"] == 503 and rec["outcome"] == "provider_server_error" and rec["target_used"] is None
    assert "PROVIDER-WORDS" not in json.dumps(rec)  # ...the live view keeps only the kind and status
    assert all(set(a["failure"]) == {"kind", "phase", "status", "provider_code", "retry_after", "should_retry"}
               for a in rec["attempts"])  # fmt: skip


async def test_the_scenario_endpoint_replays_a_kept_request() -> None:
    _, app = _kit()
    await _traffic(app)
    async with _client(app, ADMIN_KEY) as c:
        recs = (await c.get("/lab/api/live", params={"route": "flaky"})).json()["records"]
        r = await c.get(f"/lab/api/live/{recs[0]['request_id']}/scenario")
        gone = await c.get("/lab/api/live/req_unknown/scenario")
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["mapping"] == {"a": "x", "b": "c"}
    async with _client(app) as c:  # what the page does with it: run it in the simulator
        sim = (await c.post("/lab/api/run", json={**body["settings"], "custom": body["custom"]})).json()
    assert [(a["target"], a["outcome"]) for a in sim["attempts"]] == [
        ("a", "rate_limited"),
        ("a", "rate_limited"),
        ("b", "ok"),
    ]
    assert sim["workflow"] == "fallback" and sim["calls"] == {"a": 2, "b": 1, "c": 0}
    assert gone.status_code == 404 and "not among the last 50" in gone.json()["error"]


# -- the event stream, driven as an ASGI server would ----------------------------------------------


class _Viewer:
    """A hand-made ASGI client of the live stream: reads what is sent, can leave."""

    def __init__(self, app: Any, query: str = "") -> None:
        self.app = app
        self.query = query
        self.left = asyncio.Event()
        self.chunks: asyncio.Queue[Message] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    async def _receive(self) -> Message:
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        await self.chunks.put(message)

    def open(self, key: str = ADMIN_KEY) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/lab/api/live/stream",
            "raw_path": b"/lab/api/live/stream",
            "query_string": self.query.encode(),
            "root_path": "",
            "headers": [(b"authorization", f"Bearer {key}".encode())],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        self.task = asyncio.ensure_future(self.app(scope, self._receive, self._send))

    async def events(self) -> AsyncIterator[tuple[str, Any]]:
        while True:
            msg = await asyncio.wait_for(self.chunks.get(), 5)
            if msg["type"] == "http.response.start":
                assert msg["status"] == 200
                assert (b"content-type", b"text/event-stream; charset=utf-8") in msg["headers"]
                assert not any(k == b"content-length" for k, _ in msg["headers"])  # it never ends by itself
                continue
            if not msg.get("more_body", False) and not msg.get("body"):
                return
            for block in msg["body"].decode().split("\n\n"):
                if block.startswith("event: "):
                    name, _, data = block.partition("\ndata: ")
                    yield name.removeprefix("event: "), json.loads(data)


async def _next(events: AsyncIterator[tuple[str, Any]]) -> tuple[str, Any]:
    return await events.__anext__()


async def test_the_stream_sends_a_snapshot_then_each_request_as_it_finishes() -> None:
    _, app = _kit()
    async with _client(app, ACME_KEY) as c:
        await c.post("/v1/chat/completions", json=chat_body("chat", PROMPT))
        viewer = _Viewer(app, "route=flaky")
        viewer.open()
        events = viewer.events()
        name, snap = await _next(events)
        assert name == "snapshot" and snap == {"keep": 50, "records": []}  # the filter applies
        await c.post("/v1/chat/completions", json=chat_body("chat", PROMPT))  # filtered out
        await c.post("/v1/chat/completions", json=chat_body("flaky", PROMPT))
        name, rec = await _next(events)
    assert name == "record" and rec["route"] == "flaky" and rec["seq"] == 3
    gw = app.state.gateway
    assert gw.records.viewers == 1
    viewer.left.set()  # the browser goes away: the stream ends and frees its slot at once
    assert viewer.task is not None
    await asyncio.wait_for(viewer.task, 5)
    assert gw.records.viewers == 0


async def test_the_drain_ends_every_stream() -> None:
    _, app = _kit()
    gw = app.state.gateway
    viewers = [_Viewer(app) for _ in range(3)]
    for v in viewers:
        v.open()
        assert (await _next(v.events()))[0] == "snapshot"
    assert gw.records.viewers == 3
    await gw.drain(1.0)
    for v in viewers:
        assert v.task is not None
        await asyncio.wait_for(v.task, 5)  # ended by the drain, without the client leaving
    assert gw.records.viewers == 0
    async with _client(app, ADMIN_KEY) as c:  # and no new one opens while it drains
        r = await c.get("/lab/api/live/stream")
    assert r.status_code == 503


async def test_the_gateways_lab_simulates_with_the_gateways_own_policies() -> None:
    kit, app = _kit(None)
    async with _client(app) as c:
        meta = (await c.get("/lab/api/meta")).json()
    backoff = kit.router.backoff
    assert meta["policies"]["source"] == "this gateway's config"
    assert meta["policies"]["backoff"] == {
        "base": backoff.base,
        "cap": backoff.cap,
        "max_retry_after": backoff.max_retry_after,
    }
