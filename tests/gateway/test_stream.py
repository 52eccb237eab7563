"""Streaming: SSE chunks from Router.stream events, failures before / after the first byte, disconnects."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from failover.testing import Outcome, Reply

from ._kit import NO_HOLD, Kit, LeavingClient, chat_body, chat_scope


def events(text: str) -> list[Any]:
    out: list[Any] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def test_text_stream_in_chunk_format() -> None:
    kit = Kit({"a": [Reply.ok("one two three", usage=(5, 3))]})
    body = chat_body(stream=True, stream_options={"include_usage": True})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=body, headers={"x-failover-request-id": "s-1"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["x-failover-request-id"] == "s-1"
    evs = events(r.text)
    assert evs[-1] == "[DONE]"
    chunks = evs[:-1]
    model = kit.providers["a"].model  # every chunk names the model that answered, not the route
    assert model != "chat" and all(ch["object"] == "chat.completion.chunk" and ch["model"] == model for ch in chunks)
    assert r.headers["x-failover-route"] == "chat"
    assert len({ch["id"] for ch in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks if ch["choices"])
    assert text == "one two three"
    finish = [ch for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"]]
    assert [f["choices"][0]["finish_reason"] for f in finish] == ["stop"]
    assert finish[0]["x_failover"]["target"] == "a"
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["prompt_tokens"] == 5 and usage["usage"]["completion_tokens"] == 3


async def test_stream_without_include_usage_has_no_usage_chunk() -> None:
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body(stream=True))
    chunks = events(r.text)[:-1]
    assert all(ch["choices"] for ch in chunks)
    assert all("usage" not in ch for ch in chunks)


async def test_tool_call_stream_deltas_by_index() -> None:
    kit = Kit({"t": [Reply.ok(tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})])]})
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
    ]
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("tools", stream=True, tools=tools))
    chunks = events(r.text)[:-1]
    calls: dict[int, dict[str, Any]] = {}
    for ch in chunks:
        for tc in ch["choices"][0]["delta"].get("tool_calls", []):
            slot = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            if "id" in tc:
                assert slot["id"] is None, "id only on the first delta of a call"
                slot["id"] = tc["id"]
                slot["name"] = tc["function"]["name"]
            slot["arguments"] += tc["function"].get("arguments", "")
    assert sorted(calls) == [0, 1]
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert calls[1]["name"] == "get_time" and json.loads(calls[1]["arguments"]) == {"tz": "CET"}
    assert all(c["id"] for c in calls.values())
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_failure_before_the_first_byte_is_a_normal_error_response() -> None:
    kit = Kit({"s": Reply.rate_limit(retry_after=30)})
    async with kit.client() as c:
        r = await c.post(
            "/v1/chat/completions", json=chat_body("solo", stream=True), headers={"x-failover-deadline-ms": "2000"}
        )
    assert r.status_code == 503
    assert r.headers["content-type"] == "application/json"
    assert r.headers["retry-after"] == "30"
    assert r.json()["error"]["code"] == "rate_limited"


async def test_failover_before_the_first_byte_is_invisible() -> None:
    kit = Kit({"x": Reply.overloaded()})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("flaky", stream=True))
    assert r.status_code == 200
    chunks = events(r.text)[:-1]
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert text == "ok from c"
    assert chunks[-1]["x_failover"]["recovered"] is True


async def test_failure_after_output_ends_with_an_error_event_never_a_splice() -> None:
    kit = Kit({"s": [Reply.drop_after(3, text="alpha beta gamma delta epsilon zeta"), Reply.ok("SPLICED")]})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo", stream=True), headers=NO_HOLD)
    assert r.status_code == 200
    evs = events(r.text)
    assert "[DONE]" not in evs
    last = evs[-1]
    assert last["error"]["code"] == "partial_output"
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in evs[:-1])
    assert text and "SPLICED" not in text
    assert len(kit.providers["s"].calls) == 1  # nothing was retried after output began


async def test_a_break_before_the_commit_point_is_rescued_with_one_whole_answer() -> None:
    # by default a short answer is held whole: the cut reached nobody, so the replay's answer is
    # the only one the client sees, under one id, ending with [DONE]
    kit = Kit({"s": [Reply.drop_after(3, text="alpha beta gamma delta epsilon zeta"), Reply.ok("whole answer")]})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo", stream=True))
    assert r.status_code == 200
    evs = events(r.text)
    assert evs[-1] == "[DONE]"
    chunks = evs[:-1]
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in chunks if e["choices"])
    assert text == "whole answer"
    assert len({e["id"] for e in chunks}) == 1
    assert len(kit.providers["s"].calls) == 2


async def test_client_disconnect_mid_stream_closes_the_upstream_at_once() -> None:
    words = " ".join(f"w{i}" for i in range(200))
    kit = Kit({"a": [Reply.ok(words, chunk_interval=0.05)]})
    client = LeavingClient(chat_body(stream=True))
    await asyncio.wait_for(kit.app(chat_scope(hold_tokens=0), client.receive, client.send), timeout=5)
    (call,) = kit.providers["a"].calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    # stopped at once, not after the 200 words (10 s): real time, so with room for a busy
    # machine (the agent-runtime tests run beside this one in CI)
    assert call.events_sent < 100
    assert client.messages[0]["status"] == 200


async def test_client_disconnect_during_a_plain_call_cancels_it() -> None:
    kit = Kit({"a": [Reply.hang()]})
    client = LeavingClient(chat_body())

    async def leave() -> None:
        await asyncio.sleep(0.1)
        client.gone.set()

    leaving = asyncio.create_task(leave())
    await asyncio.wait_for(kit.app(chat_scope(), client.receive, client.send), timeout=5)
    await leaving
    (call,) = kit.providers["a"].calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert client.messages == []  # nobody to answer
