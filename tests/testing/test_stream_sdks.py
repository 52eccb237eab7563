"""The official SDKs consume the fake's timed and faulty streams over FakeServer.

Virtual time (looptime): the SDKs' own sockets and timeouts run on the same loop clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from failover.testing import FakeProvider, FakeServer, Outcome, Reply
from tests._sdk import collect_text, leave_after

pytestmark = [pytest.mark.e2e, pytest.mark.looptime]

USER: Any = [{"role": "user", "content": "What is the weather in Paris?"}]  # the SDKs' TypedDicts
OPENAI_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]},
        },
    }
    for name, key in (("get_weather", "city"), ("get_time", "tz"))
]
ANTHROPIC_TOOLS: Any = [
    {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
]
# Mid-stream, the anthropic SDK lets its HTTP stack's read timeout escape unwrapped (httpx, or
# httpx2 in recent SDKs); before the headers it raises APITimeoutError.
SDK_TIMEOUTS: tuple[type[BaseException], ...] = (anthropic.APITimeoutError, httpx.TimeoutException)
with contextlib.suppress(ImportError):
    SDK_TIMEOUTS += (importlib.import_module("httpx2").TimeoutException,)
TWO_CALLS = [("get_weather", {"city": "Paris", "units": "celsius"}), ("get_time", {"tz": "Europe/Paris"})]


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeServer, FakeProvider, FakeProvider]]:
    o = FakeProvider("o", "openai")
    c = FakeProvider("c", "anthropic")
    async with FakeServer(o, c) as srv:
        yield srv, o, c


async def _settled(p: FakeProvider) -> None:
    for _ in range(500):
        if all(call.outcome is not Outcome.PENDING for call in p.calls):
            return
        await asyncio.sleep(0)
    raise AssertionError(f"still pending: {p.calls}")


def _openai(srv: FakeServer, p: FakeProvider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=srv.base_url_for(p), api_key="sk-test", max_retries=0)


def _anthropic(srv: FakeServer, p: FakeProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=srv.base_url_for(p), api_key="sk-ant-test", max_retries=0)


# -- OpenAI ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [None, 7])
async def test_openai_sdk_streams_text_and_usage_over_time(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider], split: int | None
) -> None:
    srv, o, _ = fakes
    o.load(
        [
            Reply.ok(
                "It is sunny in Paris.", usage=(11, 6), chunk_interval=0.5, heartbeat_interval=0.2, split_bytes=split
            )
        ]
    )
    loop = asyncio.get_running_loop()
    async with _openai(srv, o) as client:
        start = loop.time()
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        text, usage, arrivals = "", None, []
        async for chunk in stream:
            arrivals.append(round(loop.time() - start, 3))
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            usage = chunk.usage or usage
    assert text == "It is sunny in Paris."
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (11, 6)
    assert arrivals == [0.5 * i for i in range(len(arrivals))]  # [DONE] is not yielded
    await _settled(o)
    assert (o.calls[0].outcome, o.calls[0].events_sent) == (Outcome.COMPLETED, len(arrivals) + 1)


async def test_openai_sdk_assembles_two_streamed_tool_calls(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, o, _ = fakes
    o.load([Reply.ok(tool_calls=TWO_CALLS, chunk_interval=0.05, split_bytes=11)])
    async with (
        _openai(srv, o) as client,
        client.chat.completions.stream(model="gpt-4o-mini", messages=USER, tools=OPENAI_TOOLS) as stream,
    ):
        fragments = 0
        async for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                fragments += 1
        final = await stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls if c.type == "function"] == TWO_CALLS
    assert len({c.id for c in calls}) == 2
    assert final.choices[0].finish_reason == "tool_calls"
    assert fragments > 4  # the arguments arrived in fragments


async def test_openai_sdk_assembles_interleaved_parallel_tool_calls(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, o, _ = fakes
    calls = [*TWO_CALLS, ("get_weather", {"city": "Zürich"})]
    o.load([Reply.ok(tool_calls=calls, interleave=True, split_bytes=5)] * 2)
    async with _openai(srv, o) as client:
        async with client.chat.completions.stream(model="gpt-4o-mini", messages=USER, tools=OPENAI_TOOLS) as stream:
            final = await stream.get_final_completion()
        chunks = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
        indexes = [tc.index async for chunk in chunks for tc in chunk.choices[0].delta.tool_calls or ()]
    got = final.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in got if c.type == "function"] == calls
    assert indexes[:5] == [0, 0, 1, 0, 1]  # the fragments did interleave on the wire


@pytest.mark.parametrize(
    ("cause", "code"),
    [("overloaded", "server_is_overloaded"), ("rate_limit", "rate_limit_exceeded"), ("server_error", "server_error")],
)
async def test_openai_sdk_sees_the_mid_stream_error_code(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider], cause: str, code: str
) -> None:
    srv, o, _ = fakes
    o.load([Reply.error_event_after(2, cause=cause, text="one two three")])
    async with _openai(srv, o) as client:
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
        with pytest.raises(openai.APIError) as info:
            await collect_text(stream, [])
    assert info.value.code == code


async def test_openai_sdk_raises_on_a_mid_stream_error_payload(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, o, _ = fakes
    o.load([Reply.error_event_after(3, text="one two three four")])
    text: list[str] = []

    async def read(stream: openai.AsyncStream[Any]) -> None:
        async for chunk in stream:
            text.append(chunk.choices[0].delta.content or "")

    async with _openai(srv, o) as client:
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
        with pytest.raises(openai.APIError) as info:
            await read(stream)
    assert "".join(text) == "one two "  # the role chunk and two deltas came first
    assert "temporarily overloaded" in info.value.message
    assert isinstance(info.value.body, dict) and info.value.body["code"] == "server_is_overloaded"


async def test_openai_sdk_sees_a_dropped_stream_as_a_connection_error(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, o, _ = fakes
    o.load([Reply.drop_after(2, chunk_interval=1)])
    async with _openai(srv, o) as client:
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
        with pytest.raises(openai.APIConnectionError):
            _ = [chunk async for chunk in stream]
    await _settled(o)
    assert (o.calls[0].outcome, o.calls[0].events_sent) == (Outcome.RESET, 2)


async def test_openai_sdk_leaving_mid_stream_is_recorded_within_one_interval(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, o, _ = fakes
    o.load([Reply.ok(" ".join(f"w{i}" for i in range(30)), chunk_interval=0.5)])
    loop = asyncio.get_running_loop()
    async with _openai(srv, o) as client:
        stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
        await leave_after(stream, 4)
        left_at = loop.time()
        await _settled(o)
    (call,) = o.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.disconnected_at is not None and 0 <= call.disconnected_at - left_at < 0.5
    assert 4 <= call.events_sent < 34


# -- Anthropic -------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", [None, 7])
async def test_anthropic_sdk_streams_text_then_a_tool_use(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider], split: int | None
) -> None:
    srv, _, c = fakes
    c.load(
        [
            Reply.ok(
                "Let me check the weather.",
                tool_calls=[("get_weather", {"city": "Paris"})],
                chunk_interval=0.25,
                heartbeat_interval=0.1,
                split_bytes=split,
            )
        ]
    )
    deltas: list[str] = []
    async with (
        _anthropic(srv, c) as client,
        client.messages.stream(
            model="claude-haiku-4-5", max_tokens=256, messages=USER, tools=ANTHROPIC_TOOLS
        ) as stream,
    ):
        async for text in stream.text_stream:
            deltas.append(text)
        final = await stream.get_final_message()
    assert "".join(deltas) == "Let me check the weather." and len(deltas) == 5
    assert [b.type for b in final.content] == ["text", "tool_use"]
    text_block, tool = final.content
    assert text_block.type == "text" and text_block.text == "Let me check the weather."
    assert tool.type == "tool_use" and (tool.name, tool.input) == ("get_weather", {"city": "Paris"})
    assert tool.id.startswith("toolu_")
    assert (final.stop_reason, final.id, final.model) == ("tool_use", "msg_c_1", "claude-haiku-4-5")
    await _settled(c)
    assert c.calls[0].outcome is Outcome.COMPLETED


async def test_anthropic_sdk_raises_on_a_mid_stream_error_event(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, _, c = fakes
    c.load([Reply.error_event_after(4, text="Hello there, friend")])
    deltas: list[str] = []

    async def read(client: anthropic.AsyncAnthropic) -> None:
        async with client.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=USER) as stream:
            async for text in stream.text_stream:
                deltas.append(text)

    async with _anthropic(srv, c) as client:
        with pytest.raises(anthropic.APIStatusError) as info:
            await read(client)
    assert deltas == ["Hello "]  # message_start, content_block_start, ping, one delta, then the error
    body = info.value.body
    assert isinstance(body, dict) and body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert info.value.status_code == 200  # the error came inside a 200 stream


@pytest.mark.parametrize(
    ("cause", "type_"),
    [("overloaded", "overloaded_error"), ("rate_limit", "rate_limit_error"), ("server_error", "api_error")],
)
async def test_anthropic_sdk_sees_the_mid_stream_error_type(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider], cause: str, type_: str
) -> None:
    srv, _, c = fakes
    c.load([Reply.error_event_after(4, cause=cause, text="Hello there, friend")])
    async with _anthropic(srv, c) as client:
        with pytest.raises(anthropic.APIStatusError) as info:
            async with client.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=USER) as stream:
                await stream.get_final_message()
    body = info.value.body
    assert isinstance(body, dict) and body["error"]["type"] == type_


@pytest.mark.parametrize(
    ("cause", "code", "status"),
    [("overloaded", 503, "UNAVAILABLE"), ("rate_limit", 429, "RESOURCE_EXHAUSTED"), ("server_error", 500, "INTERNAL")],
)
async def test_google_genai_sdk_sees_the_mid_stream_error_code(cause: str, code: int, status: str) -> None:
    g = FakeProvider("g", "gemini", [Reply.error_event_after(2, cause=cause, text="one two three")])
    async with FakeServer(g) as srv:
        client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=srv.base_url_for(g)))
        text: list[str] = []

        async def read() -> None:
            async for chunk in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
                text.append(chunk.text or "")

        with pytest.raises(genai_errors.APIError) as info:
            await read()
    assert (info.value.code, info.value.status) == (code, status)
    assert text == ["one ", "two "]


async def test_anthropic_sdk_times_out_on_a_stall_and_the_server_sees_it_go(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, _, c = fakes
    c.load([Reply.stall_after(3, text="never finished")])
    client = anthropic.AsyncAnthropic(base_url=srv.base_url_for(c), api_key="k", max_retries=0, timeout=10.0)
    async with client:
        with pytest.raises(SDK_TIMEOUTS):
            async with client.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=USER) as stream:
                await stream.get_final_message()
        await _settled(c)
    (call,) = c.calls
    assert (call.outcome, call.events_sent) == (Outcome.CLIENT_DISCONNECTED, 3)
    assert call.disconnected_at is not None and call.disconnected_at - call.time == pytest.approx(10, abs=1e-3)
