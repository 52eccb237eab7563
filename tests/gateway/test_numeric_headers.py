"""Number headers over HTTP: ASCII digits only, a 400 naming the header otherwise, and the value
echoed as the client sent it (a UTF-8 value is not shown as its latin-1 reading)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.types import Message

from failover import Route
from failover.gateway import GatewaySettings, create_app
from failover.gateway._body import read_body
from failover.testing import FakeNetwork, FakeProvider
from tests._sdk import fake_target, quiet_router

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def app() -> Any:
    provider = FakeProvider("a", "openai", api_key="sk-num-1")
    router = quiet_router([Route(name="chat", primary=(fake_target(provider, "sk-num-1"),))], FakeNetwork(provider))
    return create_app(router, GatewaySettings())


async def _post(app: Any, headers: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        return await c.post("/v1/chat/completions", json=CHAT, headers=headers)


@pytest.mark.parametrize("value", ["1_000", "+1000", "1e3", "1000.0", "inf"])
async def test_a_deadline_python_would_read_is_a_400_naming_the_header(app: Any, value: str) -> None:
    r = await _post(app, {"x-failover-deadline-ms": value})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "x-failover-deadline-ms" and error["code"] == "invalid_header"
    assert repr(value) in error["message"]


async def test_a_utf8_header_value_is_echoed_as_sent(app: Any) -> None:
    sent = "schnell-ünd-sofört"
    r = await _post(app, {"x-failover-side-effects": sent.encode("utf-8")})
    assert r.status_code == 400, r.text
    assert repr(sent) in r.json()["error"]["message"]


async def test_a_digit_of_another_script_in_content_length_is_not_read_as_a_number() -> None:
    async def receive() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    body = await read_body(GatewaySettings(max_body_bytes=10), receive, {"content-length": "²"})
    assert body == b"{}"
