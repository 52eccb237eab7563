"""The anthropic SDK over ``failover.httpx_client``: a thinking block one Claude model signed, sent
back in the next turn, goes only to that model. Its fallback (another Claude model, which would
refuse the signature) is sent the history without it, the attempt's record counting it; the
model that signed it gets it back byte for byte. Fake providers that record each request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

import failover
from failover import Route
from failover.integrations import last_record
from failover.testing import FakeNetwork, FakeProvider, Reply
from tests._sdk import fake_target, quiet_router

KEY = "sk-fake-provider"


@pytest.fixture
async def served() -> AsyncIterator[tuple[anthropic.AsyncAnthropic, dict[str, FakeProvider]]]:
    providers = {n: FakeProvider(n, "anthropic", model=f"claude-{n}", api_key=KEY) for n in ("ca", "cb")}
    targets = {n: fake_target(p, KEY) for n, p in providers.items()}
    router = quiet_router(
        [Route(name="claude", primary=(targets["ca"],), fallbacks=(targets["cb"],))], FakeNetwork(*providers.values())
    )
    client = anthropic.AsyncAnthropic(api_key="unused", http_client=failover.httpx_client(router), max_retries=0)
    async with client:
        yield client, providers
    await router.aclose()


async def _turn(client: anthropic.AsyncAnthropic, stream: bool, messages: Any) -> list[dict[str, Any]]:
    if stream:
        async with client.messages.stream(model="claude", max_tokens=256, messages=messages) as s:
            message = await s.get_final_message()
    else:
        message = await client.messages.create(model="claude", max_tokens=256, messages=messages)
    return [b.model_dump(exclude_none=True) for b in message.content]


async def _first_turn(
    client: anthropic.AsyncAnthropic, providers: dict[str, FakeProvider], stream: bool
) -> tuple[list[Any], list[dict[str, Any]]]:
    providers["ca"].load([Reply.ok("Hello.", reasoning="The user greets me.", redacted_thinking=True)])
    hello = {"role": "user", "content": "Hi"}
    content = await _turn(client, stream, [hello])
    thinking = [b for b in content if b["type"] in ("thinking", "redacted_thinking")]
    assert [b["type"] for b in thinking] == ["thinking", "redacted_thinking"]
    return [hello, {"role": "assistant", "content": content}, {"role": "user", "content": "And now?"}], thinking


@pytest.mark.parametrize("stream", [False, True])
async def test_the_fallback_claude_is_not_sent_the_thinking_the_failed_one_signed(
    served: tuple[anthropic.AsyncAnthropic, dict[str, FakeProvider]], stream: bool
) -> None:
    client, providers = served
    history, thinking = await _first_turn(client, providers, stream)
    providers["ca"].load([Reply.overloaded(), Reply.overloaded()])
    providers["cb"].load([Reply.ok("Still here.")])
    content = await _turn(client, stream, history)
    assert [b["text"] for b in content if b["type"] == "text"] == ["Still here."]

    (call,) = providers["cb"].calls
    sent = json.dumps(call.json)
    assert thinking[0]["signature"] not in sent and thinking[1]["data"] not in sent
    record = last_record()
    assert record is not None and record.target_used == "cb"
    assert (record.attempts[-1].target, record.attempts[-1].reasoning_stripped) == ("cb", 2)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_claude_that_signed_the_thinking_gets_it_back_byte_for_byte(
    served: tuple[anthropic.AsyncAnthropic, dict[str, FakeProvider]], stream: bool
) -> None:
    client, providers = served
    history, thinking = await _first_turn(client, providers, stream)
    providers["ca"].load([Reply.ok("Again.")])
    await _turn(client, stream, history)

    _, call = providers["ca"].calls
    (assistant,) = [m for m in dict(call.json or {})["messages"] if m["role"] == "assistant"]
    assert [b for b in assistant["content"] if b["type"] in ("thinking", "redacted_thinking")] == thinking
    record = last_record()
    assert record is not None and [a.reasoning_stripped for a in record.attempts] == [0]
    assert providers["cb"].calls == []
