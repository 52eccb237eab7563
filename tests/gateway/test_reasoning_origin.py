"""The reasoning a client of its own dialect is handed raw goes back only to the model that wrote it.

Codex asks ``/v1/responses`` for ``reasoning.encrypted_content`` and sends every reasoning item
back on the next turn; Claude Code sends its thinking blocks back to ``/v1/messages``. Both get
the blocks of a model of their own dialect byte for byte, so the blocks they send back name no
origin: the gateway remembers who wrote them. When the model that wrote them fails on the next
turn, the fallback (another model of the same dialect, which would refuse them) is sent the
history without them, and its attempt's record counts them; when it answers, it gets its own
blocks back unchanged. Fake providers that record each request, in process.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from failover import Route, RouteRecord
from failover.gateway import GatewaySettings, create_app
from failover.testing import FakeNetwork, FakeProvider, Reply
from tests._sdk import fake_target, quiet_router

from ._kit import PROVIDER_KEY

pytestmark = pytest.mark.e2e

INCLUDE = ["reasoning.encrypted_content"]
FAIL = [Reply.overloaded(), Reply.overloaded()]  # the model that wrote the reasoning, on the next turn


class _Records:
    """The RouteRecord of every finished request (the gateway's live-view sink)."""

    def __init__(self) -> None:
        self.seen: list[RouteRecord] = []

    def add(self, record: RouteRecord, *, status: int, tenant: str | None, stream: bool) -> None:
        self.seen.append(record)

    def close(self) -> None:
        pass


class Served:
    """Two models of each dialect: ``a`` then ``b`` (Responses), ``ca`` then ``cb`` (Anthropic)."""

    def __init__(self) -> None:
        dialects = {"a": "openai-responses", "b": "openai-responses", "ca": "anthropic", "cb": "anthropic"}
        self.providers = {n: FakeProvider(n, d, model=f"model-{n}", api_key=PROVIDER_KEY) for n, d in dialects.items()}
        targets = {n: fake_target(p, PROVIDER_KEY) for n, p in self.providers.items()}
        routes = [
            Route(name="codex", primary=(targets["a"],), fallbacks=(targets["b"],)),
            Route(name="claude", primary=(targets["ca"],), fallbacks=(targets["cb"],)),
        ]
        self.app = create_app(quiet_router(routes, FakeNetwork(*self.providers.values())), GatewaySettings())
        self.records = _Records()
        self.app.state.gateway.records = self.records

    def sent(self, provider: str) -> list[dict[str, Any]]:
        """The bodies ``provider`` received, in order."""
        return [dict(call.json or {}) for call in self.providers[provider].calls if call.json is not None]

    def last_record(self) -> RouteRecord:
        return self.records.seen[-1]


@pytest.fixture
async def served() -> AsyncIterator[tuple[Served, httpx.AsyncClient]]:
    s = Served()
    transport = httpx.ASGITransport(app=s.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=30) as client:
        yield s, client


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """An SSE body as (event, data) pairs."""
    out = []
    for chunk in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event", ""), json.loads(lines["data"])))
    return out


async def _respond(client: httpx.AsyncClient, stream: bool, input: Any) -> list[dict[str, Any]]:
    """A Codex-like ``/v1/responses`` turn: the response's output items."""
    body = {"model": "codex", "input": input, "include": INCLUDE, "reasoning": {"summary": "auto"}, "stream": stream}
    r = await client.post("/v1/responses", json=body)
    assert r.status_code == 200, r.text
    if not stream:
        return list(r.json()["output"])
    (done,) = [data for name, data in _events(r.text) if name == "response.completed"]
    return list(done["response"]["output"])


async def _message(client: httpx.AsyncClient, stream: bool, messages: Any) -> list[dict[str, Any]]:
    """A Claude-Code-like ``/v1/messages`` turn: the answer's content blocks."""
    body = {"model": "claude", "max_tokens": 512, "messages": messages, "stream": stream}
    r = await client.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    if not stream:
        return list(r.json()["content"])
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in _events(r.text):
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            for field in ("thinking", "signature", "text"):
                if field in delta:
                    block[field] = block.get(field, "") + delta[field]
    return [blocks[i] for i in sorted(blocks)]


async def _codex_turn_one(s: Served, client: httpx.AsyncClient, stream: bool) -> tuple[list[Any], str]:
    s.providers["a"].load([Reply.ok("Hello.", reasoning="The user greets me.")])
    output = await _respond(client, stream, "Hi")
    (item,) = [i for i in output if i["type"] == "reasoning"]
    encrypted = item["encrypted_content"]
    assert encrypted and not encrypted.startswith("failover.")  # model-a's own, handed out raw
    return [{"role": "user", "content": "Hi"}, *output, {"role": "user", "content": "And now?"}], encrypted


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_fallback_to_another_model_is_not_sent_the_reasoning_of_the_one_that_failed(
    served: tuple[Served, httpx.AsyncClient], stream: bool
) -> None:
    s, client = served
    history, encrypted = await _codex_turn_one(s, client, stream)
    s.providers["a"].load(FAIL)
    s.providers["b"].load([Reply.ok("Still here.")])
    output = await _respond(client, stream, history)
    assert [i["content"][0]["text"] for i in output if i["type"] == "message"] == ["Still here."]

    (body,) = s.sent("b")
    assert encrypted not in json.dumps(body)  # model-b would refuse model-a's encrypted reasoning
    assert not [i for i in body["input"] if i.get("type") == "reasoning"]
    record = s.last_record()
    assert record.target_used == "b"
    assert [(a.target, a.reasoning_stripped) for a in record.attempts][-1] == ("b", 1)


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_the_model_that_wrote_the_reasoning_gets_it_back_byte_for_byte(
    served: tuple[Served, httpx.AsyncClient], stream: bool
) -> None:
    s, client = served
    history, encrypted = await _codex_turn_one(s, client, stream)
    s.providers["a"].load([Reply.ok("Again.")])
    await _respond(client, stream, history)

    _, body = s.sent("a")
    (item,) = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert item["encrypted_content"] == encrypted
    assert [a.reasoning_stripped for a in s.last_record().attempts] == [0]
    assert s.sent("b") == []


async def _claude_turn_one(s: Served, client: httpx.AsyncClient, stream: bool) -> tuple[list[Any], list[Any]]:
    s.providers["ca"].load([Reply.ok("Hello.", reasoning="The user greets me.", redacted_thinking=True)])
    hello = {"role": "user", "content": "Hi"}
    content = await _message(client, stream, [hello])
    thinking = [b for b in content if b["type"] in ("thinking", "redacted_thinking")]
    assert [b["type"] for b in thinking] == ["thinking", "redacted_thinking"]
    assert not thinking[0]["signature"].startswith("failover.")  # model-ca's own, handed out raw
    history = [hello, {"role": "assistant", "content": content}, {"role": "user", "content": "And now?"}]
    return history, thinking


@pytest.mark.parametrize("stream", [False, True])
async def test_messages_fallback_to_another_claude_is_not_sent_the_thinking_the_first_one_signed(
    served: tuple[Served, httpx.AsyncClient], stream: bool
) -> None:
    s, client = served
    history, thinking = await _claude_turn_one(s, client, stream)
    s.providers["ca"].load(FAIL)
    s.providers["cb"].load([Reply.ok("Still here.")])
    content = await _message(client, stream, history)
    assert [b["text"] for b in content if b["type"] == "text"] == ["Still here."]

    (body,) = s.sent("cb")
    sent = json.dumps(body)
    assert thinking[0]["signature"] not in sent and thinking[1]["data"] not in sent
    blocks = [b["type"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert "thinking" not in blocks and "redacted_thinking" not in blocks
    record = s.last_record()
    assert record.target_used == "cb"
    assert [(a.target, a.reasoning_stripped) for a in record.attempts][-1] == ("cb", 2)


@pytest.mark.parametrize("stream", [False, True])
async def test_messages_the_claude_that_signed_the_thinking_gets_it_back_byte_for_byte(
    served: tuple[Served, httpx.AsyncClient], stream: bool
) -> None:
    s, client = served
    history, thinking = await _claude_turn_one(s, client, stream)
    s.providers["ca"].load([Reply.ok("Again.")])
    await _message(client, stream, history)

    _, body = s.sent("ca")
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [b for b in assistant["content"] if b["type"] in ("thinking", "redacted_thinking")] == thinking
    assert [a.reasoning_stripped for a in s.last_record().attempts] == [0]
    assert s.sent("cb") == []


async def test_a_client_history_the_gateway_did_not_hand_out_still_goes_to_any_model_of_its_dialect(
    served: tuple[Served, httpx.AsyncClient],
) -> None:
    """Reasoning of unknown origin (another worker's, or from before a restart): as before."""
    s, client = served
    s.providers["a"].load(FAIL)
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-someone-elses"}
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]}
    history = [{"role": "user", "content": "Hi"}, item, said, {"role": "user", "content": "And now?"}]
    await _respond(client, False, history)

    (body,) = s.sent("b")
    assert [i["encrypted_content"] for i in body["input"] if i.get("type") == "reasoning"] == ["gAAAAB-someone-elses"]
    assert s.last_record().attempts[-1].reasoning_stripped == 0
