"""The official SDKs parse the fake's answers: the fakes speak the real dialects."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest

from failover.testing import FakeProvider, FakeServer, Reply

pytestmark = pytest.mark.e2e

USER: Any = [{"role": "user", "content": "What is the weather in Paris?"}]  # the SDKs' TypedDicts


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeServer, FakeProvider, FakeProvider]]:
    o = FakeProvider("o", "openai", model="gpt-4o-mini-2024-07-18")
    c = FakeProvider("c", "anthropic")
    async with FakeServer(o, c) as srv:
        yield srv, o, c


def _openai(srv: FakeServer, p: FakeProvider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=srv.base_url_for(p), api_key="sk-test", max_retries=0)


def _anthropic(srv: FakeServer, p: FakeProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=srv.base_url_for(p), api_key="sk-ant-test", max_retries=0)


async def test_openai_sdk_reads_text_and_usage(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, o, _ = fakes
    o.load([Reply.ok("It is sunny.", usage=(11, 4))])
    async with _openai(srv, o) as client:
        done = await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert done.choices[0].message.content == "It is sunny."
    assert done.choices[0].finish_reason == "stop"
    assert done.model == "gpt-4o-mini-2024-07-18"
    assert done.usage is not None and (done.usage.prompt_tokens, done.usage.completion_tokens) == (11, 4)
    assert o.calls[0].headers["authorization"] == "***"


async def test_openai_sdk_reads_tool_calls(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, o, _ = fakes
    o.load([Reply.ok(tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})])])
    async with _openai(srv, o) as client:
        done = await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    calls = done.choices[0].message.tool_calls or []
    assert all(c.type == "function" for c in calls)
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls if c.type == "function"] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"tz": "CET"}),
    ]
    assert done.choices[0].finish_reason == "tool_calls"


async def test_openai_sdk_raises_rate_limit_error(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, o, _ = fakes
    o.load([Reply.rate_limit(retry_after=2)])
    async with _openai(srv, o) as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert info.value.status_code == 429
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.request_id == "req_o_1"


async def test_openai_sdk_streams(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, o, _ = fakes
    o.load(["ok('streamed over sse')"])
    async with _openai(srv, o) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, usage = "", None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            usage = chunk.usage or usage
    assert text == "streamed over sse"
    assert usage is not None and usage.completion_tokens == 5


async def test_openai_sdk_sees_a_refusal(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, o, _ = fakes
    o.load(["refuse('No.')", "quota"])
    async with _openai(srv, o) as client:
        done = await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
        assert (done.choices[0].message.refusal, done.choices[0].message.content) == ("No.", None)
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert info.value.code == "insufficient_quota"


async def test_anthropic_sdk_reads_a_message(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, _, c = fakes
    c.load(["ok('Sunny.')", Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])])
    async with _anthropic(srv, c) as client:
        msg = await client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=USER)
        tool = await client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=USER)
    assert msg.content[0].type == "text" and msg.content[0].text == "Sunny."
    assert (msg.stop_reason, msg.model, msg.id) == ("end_turn", "claude-haiku-4-5", "msg_c_1")
    assert msg.usage.output_tokens == 2
    block = tool.content[0]
    assert block.type == "tool_use" and (block.name, block.input) == ("get_weather", {"city": "Paris"})
    assert tool.stop_reason == "tool_use"
    assert c.calls[0].path == "/v1/messages"
    sent = c.calls[0].headers
    assert "sk-ant-test" not in str(sent)
    assert sent.get("x-api-key", sent.get("authorization")) == "***"  # where the SDK version puts the key


async def test_anthropic_sdk_raises_on_529(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, _, c = fakes
    c.load(["overloaded", "rate_limit(retry_after=3)"])
    async with _anthropic(srv, c) as client:
        with pytest.raises(anthropic.InternalServerError) as info:
            await client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=USER)
        overloaded = getattr(anthropic, "OverloadedError", anthropic.InternalServerError)
        assert isinstance(info.value, overloaded)
        assert info.value.status_code == 529
        assert info.value.request_id == "req_c_1"
        with pytest.raises(anthropic.RateLimitError) as limited:
            await client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=USER)
    assert limited.value.response.headers["retry-after"] == "3"


async def test_anthropic_sdk_streams(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, _, c = fakes
    c.load(["ok('word by word')"])
    async with (
        _anthropic(srv, c) as client,
        client.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=USER) as stream,
    ):
        text = await stream.get_final_text()
        final = await stream.get_final_message()
    assert text == "word by word"
    assert final.stop_reason == "end_turn"
