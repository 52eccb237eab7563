"""The official openai SDK against ONE real uvicorn server on a loopback port."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import openai
import pydantic
import pytest

from failover.testing import Outcome, Reply
from tests._sdk import HELLO, WEATHER_TOOL, collect_text, disconnected_call, leave_after

from ._kit import ACME_KEY, NO_HOLD, OTHER_KEY, PROVIDER_KEY, Kit, ServerThread

pytestmark = pytest.mark.e2e


@pytest.fixture
async def client(served: tuple[Kit, ServerThread]) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key=ACME_KEY, max_retries=0, timeout=20) as c:
        yield c


async def test_plain_chat(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["a"].load([Reply.ok("Hello from the gateway", usage=(9, 4))])
    resp = await client.chat.completions.create(model="chat", messages=HELLO)
    assert resp.choices[0].message.content == "Hello from the gateway"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == kit.providers["a"].model != "chat"  # the model that answered, not the route
    assert resp.usage is not None and resp.usage.total_tokens == 13
    assert resp._request_id  # the SDK read x-request-id


async def test_structured_output(kit: Kit, client: openai.AsyncOpenAI) -> None:
    class Answer(pydantic.BaseModel):
        answer: str
        confidence: float

    kit.providers["a"].load([Reply.ok(json={"answer": "42", "confidence": 0.9})])
    resp = await client.chat.completions.parse(model="chat", messages=HELLO, response_format=Answer)
    parsed = resp.choices[0].message.parsed
    assert parsed == Answer(answer="42", confidence=0.9)


async def test_tools(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["t"].load([Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])])
    resp = await client.chat.completions.create(model="tools", messages=HELLO, tools=[WEATHER_TOOL])
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]


async def test_streaming_text(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["a"].load([Reply.ok("streamed words arrive one by one", usage=(3, 6))])
    stream = await client.chat.completions.create(
        model="chat",
        messages=HELLO,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
    assert text == "streamed words arrive one by one"
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == 6


async def test_streaming_tool_calls(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["t"].load([Reply.ok(tool_calls=[("get_weather", {"city": "Lisbon"})])])
    async with client.chat.completions.stream(model="tools", messages=HELLO, tools=[WEATHER_TOOL]) as s:
        final = await s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert calls is not None
    assert calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Lisbon"}
    assert final.choices[0].finish_reason == "tool_calls"


async def test_failover_visible_in_headers(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["x"].load("overloaded")
    raw = await client.chat.completions.with_raw_response.create(model="flaky", messages=HELLO)
    assert raw.headers["x-failover-target"] == "c"
    assert raw.headers["x-failover-recovered"] == "true"
    assert int(raw.headers["x-failover-attempts"]) >= 2
    assert raw.parse().choices[0].message.content == "ok from c"


async def test_503_with_retry_after(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["s"].load("rate_limit(retry_after=30)")
    with pytest.raises(openai.APIStatusError) as exc:
        await client.chat.completions.create(
            model="solo",
            messages=HELLO,
            extra_headers={"x-failover-deadline-ms": "2000"},
        )
    assert exc.value.status_code == 503
    assert exc.value.response.headers["retry-after"] == "30"
    assert isinstance(exc.value.body, dict) and exc.value.body["code"] == "rate_limited"


async def test_504_on_deadline(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["s"].load("hang")
    with pytest.raises(openai.APIStatusError) as exc:
        await client.chat.completions.create(
            model="solo",
            messages=HELLO,
            extra_headers={"x-failover-deadline-ms": "300"},
        )
    assert exc.value.status_code == 504


async def test_errors_are_the_sdks_exception_classes(
    served: tuple[Kit, ServerThread], client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="no-such-route", messages=HELLO)
    with pytest.raises(openai.PermissionDeniedError):
        await client.chat.completions.create(model="secret", messages=HELLO)
    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(
            model="chat",
            messages=HELLO,
            extra_headers={"x-failover-max-attempts": "lots"},
        )
    assert "x-failover-max-attempts" in bad.value.message
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key="wrong", max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError):
            await c.chat.completions.create(model="chat", messages=HELLO)
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key=OTHER_KEY, max_retries=0) as c:
        models = await c.models.list()
        assert [m.id for m in models.data] == ["secret"]


async def test_failure_after_first_byte_raises_in_the_sdk(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["s"].load([Reply.drop_after(2, text="one two three four five six")])
    stream = await client.chat.completions.create(model="solo", messages=HELLO, stream=True, extra_headers=NO_HOLD)
    got: list[str] = []
    with pytest.raises(openai.APIError) as exc:
        await collect_text(stream, got)
    assert "".join(got)  # output had begun
    assert "partial_output" in exc.value.message


async def test_client_disconnect_mid_stream_closes_upstream(kit: Kit, client: openai.AsyncOpenAI) -> None:
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join(f"w{i}" for i in range(400)), chunk_interval=0.02)])
    before = len(a.calls)
    stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True, extra_headers=NO_HOLD)
    await leave_after(stream, 3)
    call = await disconnected_call(a, before)
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.events_sent < 100  # closed at once, not at the end of the 400 words


async def test_secrets_never_logged_or_returned(
    kit: Kit, client: openai.AsyncOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(openai.APIStatusError) as exc:
        await client.chat.completions.create(model="misconfigured", messages=HELLO)
    assert exc.value.status_code == 502
    assert PROVIDER_KEY not in exc.value.response.text
    assert PROVIDER_KEY not in json.dumps(dict(exc.value.response.headers))
    await client.chat.completions.create(model="chat", messages=HELLO)
    assert "failover.gateway" in caplog.text  # the server thread's log lines were captured
    assert PROVIDER_KEY not in caplog.text
    assert ACME_KEY not in caplog.text
