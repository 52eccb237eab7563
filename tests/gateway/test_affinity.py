"""The affinity key a caller names reaches ``Envelope.affinity_key``: ``x-failover-session``, else
the body's ``prompt_cache_key``, ``user`` or Anthropic ``metadata.user_id``; per tenant; never upstream."""

from __future__ import annotations

from typing import Any

import pytest

from failover.model import Envelope

from ._kit import Kit, chat_body


def spied(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> list[Envelope]:
    seen: list[Envelope] = []
    complete = kit.router.complete

    async def spy(route: str, request: Any, envelope: Envelope, **kwargs: Any) -> Any:
        seen.append(envelope)
        return await complete(route, request, envelope, **kwargs)

    monkeypatch.setattr(kit.router, "complete", spy)
    return seen


async def post(kit: Kit, path: str, body: dict[str, Any], headers: dict[str, Any] | None = None) -> Any:
    async with kit.client() as c:
        return await c.post(path, json=body, headers=headers or {})


MESSAGES = {"model": "chat", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
RESPONSES = {"model": "chat", "input": "Hi"}


@pytest.mark.parametrize(
    ("path", "body", "headers", "key"),
    [
        ("/v1/chat/completions", chat_body(), {"x-failover-session": "sess-1"}, "acme:sess-1"),
        ("/v1/chat/completions", chat_body(prompt_cache_key="pck", user="u"), {}, "acme:pck"),
        ("/v1/chat/completions", chat_body(user="u-7"), {}, "acme:u-7"),
        ("/v1/chat/completions", chat_body(prompt_cache_key="pck"), {"x-failover-session": "s"}, "acme:s"),
        ("/v1/chat/completions", chat_body(), {}, None),
        ("/v1/responses", {**RESPONSES, "prompt_cache_key": "pck"}, {}, "acme:pck"),
        ("/v1/responses", {**RESPONSES, "user": "u-9"}, {}, "acme:u-9"),
        ("/v1/messages", {**MESSAGES, "metadata": {"user_id": "claude-session"}}, {}, "acme:claude-session"),
        ("/v1/messages", MESSAGES, {"x-failover-session": "日本-1"}, "acme:日本-1"),
    ],
)
async def test_the_named_key_reaches_the_envelope(
    monkeypatch: pytest.MonkeyPatch, path: str, body: dict[str, Any], headers: dict[str, str], key: str | None
) -> None:
    kit = Kit()
    seen = spied(kit, monkeypatch)
    resp = await post(kit, path, body, {k: v.encode() for k, v in headers.items()})
    assert resp.status_code == 200, resp.text
    assert [e.affinity_key for e in seen] == [key]


async def test_the_session_header_is_not_sent_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    kit = Kit()
    resp = await post(kit, "/v1/chat/completions", chat_body("solo"), {"x-failover-session": "sess-1"})
    assert resp.status_code == 200
    calls = kit.providers["s"].calls
    assert calls and all("x-failover-session" not in {k.lower() for k in c.headers} for c in calls)


async def test_without_tenants_the_key_is_the_callers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    kit = Kit(open=True)
    seen = spied(kit, monkeypatch)
    async with kit.client(None) as c:
        resp = await c.post("/v1/chat/completions", json=chat_body(), headers={"x-failover-session": "sess-1"})
    assert resp.status_code == 200
    assert seen[0].affinity_key == "sess-1"


async def test_a_long_or_unprintable_body_value_is_used_by_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    kit = Kit()
    seen = spied(kit, monkeypatch)
    for user in ("u" * 300, "line\nbreak"):
        assert (await post(kit, "/v1/chat/completions", chat_body(user=user))).status_code == 200
    keys = [e.affinity_key or "" for e in seen]
    assert all(k.startswith("acme:sha256-") and len(k) == len("acme:sha256-") + 32 for k in keys)
    assert keys[0] != keys[1]


@pytest.mark.parametrize("value", ["x" * 257, "   ", "tab\there"])
async def test_a_bad_session_header_is_a_400_naming_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    kit = Kit()
    seen = spied(kit, monkeypatch)
    resp = await post(kit, "/v1/chat/completions", chat_body(), {"x-failover-session": value})
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "invalid_header" and error["param"] == "x-failover-session"
    assert "256 printable characters" in error["message"] and "Fix:" in error["message"]
    assert seen == []
