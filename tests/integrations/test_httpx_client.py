"""The official openai and anthropic SDKs, unchanged, calling through ``failover.httpx_client``.

Every test makes the SDK's own calls; the fake providers behind the Router are in-process
(FakeNetwork), so the only HTTP is the SDK's request reaching our transport. Timing tests
run on virtual loop time.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pydantic
import pytest

import failover
from failover import Envelope, Router, RouteRecord, SyncRouter
from failover.integrations import last_record
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply
from tests._sdk import (
    HELLO,
    WEATHER_TOOL,
    WEATHER_TOOL_ANTHROPIC,
    RouteTable,
    collect_text,
    fake_target,
    leave_after,
    quiet_router,
    table_routes,
)

KEY = "sk-live-PROVIDER-SECRET-91be77c0a3"

# route -> (primary, fallbacks); a/s/t speak OpenAI, b/z speak Anthropic
ROUTES: RouteTable = {
    "chat": (("a",), ("b",)),
    "claude": (("b",), ("a",)),
    "solo": (("s",), ()),
    "tools": (("t",), ()),
    "zolo": (("z",), ()),
}
DIALECTS = {"a": "openai", "b": "anthropic", "s": "openai", "t": "openai", "z": "anthropic"}


class Kit:
    def __init__(self) -> None:
        self.providers = {n: FakeProvider(n, d, api_key=KEY) for n, d in DIALECTS.items()}
        targets = {n: fake_target(p, KEY) for n, p in self.providers.items()}
        self.routes = table_routes(ROUTES, targets)

    def router(self) -> Router:
        return quiet_router(self.routes, FakeNetwork(*self.providers.values()))


@pytest.fixture
def kit() -> Kit:
    return Kit()


def oai(router: Router, route: str | None = "chat", **kw: Any) -> openai.AsyncOpenAI:
    http = failover.httpx_client(router, route=route, **kw)
    return openai.AsyncOpenAI(api_key="unused", http_client=http, max_retries=0)


def claude(router: Router, route: str | None = "claude", **kw: Any) -> anthropic.AsyncAnthropic:
    http = failover.httpx_client(router, route=route, **kw)
    return anthropic.AsyncAnthropic(api_key="unused", http_client=http, max_retries=0)


# -- openai ---------------------------------------------------------------------------------------


async def test_openai_chat(kit: Kit) -> None:
    kit.providers["a"].load([Reply.ok("Hello from a", usage=(9, 4))])
    async with oai(kit.router()) as client:
        raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=HELLO)
        resp = raw.parse()
    assert isinstance(resp, openai.types.chat.ChatCompletion)
    assert resp.choices[0].message.content == "Hello from a"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == kit.providers["a"].model == "gpt-4o-mini"  # the model of the target that answered
    assert resp.id.startswith("chatcmpl-")
    assert resp.usage is not None and (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (9, 4)
    assert raw.headers["x-failover-target"] == "a"
    assert raw.headers["x-failover-attempts"] == "1"
    assert resp._request_id == raw.headers["x-failover-request-id"]  # the SDK reads x-request-id
    record = last_record()
    assert record is not None and record.request_id == raw.headers["x-failover-request-id"]


async def test_openai_stream_with_usage(kit: Kit) -> None:
    kit.providers["a"].load([Reply.ok("streamed words arrive one by one", usage=(3, 6))])
    async with oai(kit.router()) as client:
        stream = await client.chat.completions.create(
            model="chat", messages=HELLO, stream=True, stream_options={"include_usage": True}
        )
        text, finish, usage = "", None, None
        async for chunk in stream:
            assert isinstance(chunk, openai.types.chat.ChatCompletionChunk)
            usage = chunk.usage or usage
            for ch in chunk.choices:
                text += ch.delta.content or ""
                finish = ch.finish_reason or finish
    assert text == "streamed words arrive one by one"
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == 6
    record = last_record()
    assert record is not None and record.target_used == "a"


async def test_openai_tools_plain_and_streamed(kit: Kit) -> None:
    t = kit.providers["t"]
    t.load([Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])] * 2)
    async with oai(kit.router(), route="tools") as client:
        resp = await client.chat.completions.create(model="m", messages=HELLO, tools=[WEATHER_TOOL])
        async with client.chat.completions.stream(model="m", messages=HELLO, tools=[WEATHER_TOOL]) as s:
            final = await s.get_final_completion()
    for r in (resp, final):
        assert r.choices[0].finish_reason == "tool_calls"
        calls = r.choices[0].message.tool_calls
        assert calls is not None and len(calls) == 1
        assert calls[0].function.name == "get_weather"  # type: ignore[union-attr]
        assert json.loads(calls[0].function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    sent = t.calls[0].json
    assert sent is not None and sent["tools"][0]["function"]["name"] == "get_weather"  # the tool reached the provider


async def test_openai_structured_output(kit: Kit) -> None:
    class Answer(pydantic.BaseModel):
        answer: str
        confidence: float

    kit.providers["a"].load([Reply.ok(json={"answer": "42", "confidence": 0.9})])
    async with oai(kit.router()) as client:
        resp = await client.chat.completions.parse(model="chat", messages=HELLO, response_format=Answer)
    assert resp.choices[0].message.parsed == Answer(answer="42", confidence=0.9)
    sent = kit.providers["a"].calls[0].json
    assert sent is not None
    fmt = sent["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Answer"


async def test_failover_to_anthropic_answered_in_openai_types(kit: Kit) -> None:
    kit.providers["a"].load("overloaded")
    kit.providers["b"].load([Reply.ok("Bonjour from b", usage=(5, 3))] * 2)
    records: list[RouteRecord] = []
    async with oai(kit.router(), on_record=records.append) as client:
        raw = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
        resp = raw.parse()
        stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True)
        chunks = [chunk async for chunk in stream]
        streamed = "".join([ch.delta.content or "" for chunk in chunks for ch in chunk.choices])
    assert isinstance(resp, openai.types.chat.ChatCompletion)
    assert resp.choices[0].message.content == "Bonjour from b"
    # model: the fallback's model (what answered and is billed), in the body and every chunk; not the route
    assert resp.model == kit.providers["b"].model != "chat"
    assert {chunk.model for chunk in chunks} == {kit.providers["b"].model}
    assert raw.headers["x-failover-route"] == "chat"
    assert resp.usage is not None and resp.usage.total_tokens == 8
    assert streamed == "Bonjour from b"
    assert raw.headers["x-failover-target"] == "b"
    assert raw.headers["x-failover-recovered"] == "true"
    assert raw.headers["x-failover-workflow"] == "fallback"
    assert [r.target_used for r in records] == ["b", "b"]
    assert all(call.path.endswith("/messages") for call in kit.providers["b"].calls)  # Anthropic wire upstream


# -- anthropic --------------------------------------------------------------------------------------


async def test_anthropic_messages_create_and_stream(kit: Kit) -> None:
    kit.providers["b"].load([Reply.ok("Hi from b", usage=(7, 3)), Reply.ok("streamed by b")])
    async with claude(kit.router()) as client:
        raw = await client.messages.with_raw_response.create(model="claude", max_tokens=100, messages=HELLO)
        msg = await raw.parse()
        async with client.messages.stream(model="claude", max_tokens=100, messages=HELLO) as s:
            pieces = [t async for t in s.text_stream]
            final = await s.get_final_message()
    assert isinstance(msg, anthropic.types.Message)
    assert msg.content[0].type == "text" and msg.content[0].text == "Hi from b"
    assert msg.stop_reason == "end_turn"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (7, 3)
    assert raw.headers["x-failover-target"] == "b"
    assert "".join(pieces) == "streamed by b"
    assert final.stop_reason == "end_turn"


async def test_anthropic_max_tokens_above_the_targets_max_is_served_capped_and_said(kit: Kit) -> None:
    kit.providers["b"].load([Reply.ok("plain, capped"), Reply.ok("streamed, capped")])
    http = failover.httpx_client(kit.router(), route="claude")
    async with anthropic.AsyncAnthropic(api_key="unused", http_client=http, max_retries=0, timeout=20) as client:
        raw = await client.messages.with_raw_response.create(model="claude", max_tokens=32_000, messages=HELLO)
        msg = await raw.parse()
        async with client.messages.stream(model="claude", max_tokens=32_000, messages=HELLO) as s:
            final = await s.get_final_message()
            streamed = s.response.headers.get("x-failover-max-tokens")
    assert msg.content[0].type == "text" and msg.content[0].text == "plain, capped"
    assert final.content[0].type == "text" and final.content[0].text == "streamed, capped"
    assert raw.headers["x-failover-max-tokens"] == streamed == "4096"
    assert [c.json["max_tokens"] for c in kit.providers["b"].calls if c.json is not None] == [4_096, 4_096]


async def test_anthropic_tools(kit: Kit) -> None:
    kit.providers["b"].load([Reply.ok(tool_calls=[("get_weather", {"city": "Oslo"})])] * 2)
    async with claude(kit.router()) as client:
        msg = await client.messages.create(
            model="claude", max_tokens=100, messages=HELLO, tools=[WEATHER_TOOL_ANTHROPIC]
        )
        async with client.messages.stream(
            model="claude", max_tokens=100, messages=HELLO, tools=[WEATHER_TOOL_ANTHROPIC]
        ) as s:
            final = await s.get_final_message()
    for m in (msg, final):
        assert m.stop_reason == "tool_use"
        (block,) = [b for b in m.content if b.type == "tool_use"]
        assert block.name == "get_weather"
        assert block.input == {"city": "Oslo"}


async def test_failover_to_openai_answered_in_anthropic_types(kit: Kit) -> None:
    kit.providers["b"].load("overloaded")
    kit.providers["a"].load([Reply.ok("answered by a")] * 2)
    async with claude(kit.router()) as client:
        raw = await client.messages.with_raw_response.create(model="claude", max_tokens=64, messages=HELLO)
        msg = await raw.parse()
        async with client.messages.stream(model="claude", max_tokens=64, messages=HELLO) as s:
            events = [e async for e in s]
            final = await s.get_final_message()
            stream_headers = s.response.headers
    assert isinstance(msg, anthropic.types.Message)
    assert msg.content[0].type == "text" and msg.content[0].text == "answered by a"
    assert raw.headers["x-failover-target"] == "a"
    # model: the fallback's model, plain and in the stream's message_start; the route in x-failover-route
    started = [e.message.model for e in events if e.type == "message_start"]
    assert msg.model == final.model == kit.providers["a"].model != "claude" and started == [msg.model]
    assert raw.headers["x-failover-route"] == stream_headers["x-failover-route"] == "claude"
    assert kit.providers["a"].calls[0].path.endswith("/chat/completions")  # OpenAI wire upstream


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.looptime
async def test_errors_are_the_sdks_exception_classes(kit: Kit) -> None:
    kit.providers["s"].load("rate_limit(retry_after=30)")
    kit.providers["z"].load("rate_limit(retry_after=30)")
    router = kit.router()
    async with oai(router, route="solo") as client:
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(
                model="m", messages=HELLO, extra_headers={"x-failover-deadline-ms": "2000"}
            )
        with pytest.raises(openai.BadRequestError) as bad_body:
            await client.chat.completions.create(model="m", messages=HELLO, n=2)
        with pytest.raises(openai.BadRequestError) as bad_header:
            await client.chat.completions.create(
                model="m", messages=HELLO, extra_headers={"x-failover-max-attempts": "lots"}
            )
        with pytest.raises(openai.NotFoundError) as unsupported:
            await client.models.list()
    assert limited.value.response.headers["retry-after"] == "30"
    assert limited.value.response.headers["x-should-retry"] == "false"
    assert isinstance(limited.value.body, dict) and limited.value.body["code"] == "rate_limited"
    assert "n" in bad_body.value.message
    assert "x-failover-max-attempts" in bad_header.value.message
    assert "/chat/completions" in unsupported.value.message and "fallthrough" in unsupported.value.message
    async with claude(router, route="zolo") as ac:
        with pytest.raises(anthropic.RateLimitError):
            await ac.messages.create(
                model="m", max_tokens=10, messages=HELLO, extra_headers={"x-failover-deadline-ms": "2000"}
            )
        with pytest.raises(anthropic.BadRequestError):
            await ac.messages.create(model="m", max_tokens=10, messages=[])
        with pytest.raises(anthropic.NotFoundError) as count:
            await ac.messages.count_tokens(model="m", messages=HELLO)
    assert "/v1/messages/count_tokens" in count.value.message and "POST /v1/messages" in count.value.message
    assert isinstance(count.value.body, dict) and count.value.body["type"] == "error"  # Anthropic's error shape
    async with oai(router, route=None) as client:  # the body's model must name a route
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.chat.completions.create(model="gpt-4o", messages=HELLO)
    assert "chat, claude, solo, tools, zolo" in unknown.value.message


@pytest.mark.looptime
async def test_deadline_is_a_504_and_takes_the_deadline(kit: Kit) -> None:
    kit.providers["s"].load("hang")
    kit.providers["z"].load("hang")
    router = kit.router()
    loop = asyncio.get_running_loop()
    async with oai(router, route="solo", deadline=3) as client:
        t0 = loop.time()
        with pytest.raises(openai.InternalServerError) as exc:
            await client.chat.completions.create(model="m", messages=HELLO)
        assert exc.value.status_code == 504
        assert loop.time() - t0 == pytest.approx(3, abs=0.1)  # the client's deadline, not the SDK's 600 s
        # the gateway's retry headers (one function for both): never retry on your own, no Retry-After
        assert exc.value.response.headers["x-should-retry"] == "false"
        assert "retry-after" not in exc.value.response.headers
    async with claude(router, route="zolo", deadline=2) as ac:
        with pytest.raises(anthropic.GatewayTimeoutError):
            await ac.messages.create(model="m", max_tokens=10, messages=HELLO)


async def test_sdk_retries_never_nest(kit: Kit) -> None:
    """max_retries left on: x-should-retry: false stops the SDK; the router's attempts are all there are."""
    s = kit.providers["s"]
    s.load("server_error")
    http = failover.httpx_client(kit.router(), route="solo", max_attempts=2)
    async with openai.AsyncOpenAI(api_key="unused", http_client=http, max_retries=3) as client:
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="m", messages=HELLO)
    assert len(s.calls) == 2  # the router's two attempts, no SDK retry on top


async def test_partial_output_raises_in_the_sdk(kit: Kit) -> None:
    kit.providers["s"].load([Reply.drop_after(2, text="one two three four five six")])
    async with oai(kit.router(), route="solo", envelope=Envelope(hold_tokens=0)) as client:
        stream = await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        got: list[str] = []
        with pytest.raises(openai.APIError) as exc:
            await collect_text(stream, got)
    assert "".join(got)
    assert "partial_output" in exc.value.message
    record = last_record()
    assert record is not None and record.target_used is None


async def test_partial_output_raises_in_the_anthropic_sdk(kit: Kit) -> None:
    kit.providers["z"].load([Reply.drop_after(6, text="one two three four five six")])  # past message_start
    async with claude(kit.router(), route="zolo", envelope=Envelope(hold_tokens=0)) as client:
        got: list[str] = []

        async def read() -> None:
            async with client.messages.stream(model="m", max_tokens=50, messages=HELLO) as s:
                async for text in s.text_stream:
                    got.append(text)

        with pytest.raises(anthropic.APIStatusError) as exc:
            await read()
    assert "".join(got)
    assert "partial_output" in exc.value.message


async def test_a_cut_before_the_commit_point_is_rescued_in_both_sdks(kit: Kit) -> None:
    # the default hold keeps a short answer whole: the cut reached nobody and the replay answers
    kit.providers["s"].load([Reply.drop_after(2, text="one two three four five six"), Reply.ok("whole answer")])
    async with oai(kit.router(), route="solo") as client:
        stream = await client.chat.completions.create(model="m", messages=HELLO, stream=True)
        got: list[str] = []
        await collect_text(stream, got)
    assert "".join(got) == "whole answer"
    kit.providers["z"].load([Reply.drop_after(6, text="one two three four five six"), Reply.ok("whole answer")])
    async with (
        claude(kit.router(), route="zolo") as client,
        client.messages.stream(model="m", max_tokens=50, messages=HELLO) as s,
    ):
        final = await s.get_final_message()
    assert [b.text for b in final.content if b.type == "text"] == ["whole answer"]
    record = last_record()
    assert record is not None and [a.outcome for a in record.attempts] == ["transport_transient", "ok"]


async def test_secrets_never_in_errors(kit: Kit, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    kit.providers["s"].load([Reply.unauthorized(message=f"Incorrect API key provided: {KEY}")])
    async with oai(kit.router(), route="solo") as client:
        with pytest.raises(openai.AuthenticationError) as exc:
            await client.chat.completions.create(model="m", messages=HELLO)
    assert KEY not in exc.value.response.text
    assert KEY not in caplog.text


# -- cancellation -----------------------------------------------------------------------------------


@pytest.mark.looptime
async def test_closing_the_sdk_stream_closes_upstream(kit: Kit) -> None:
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join(f"w{i}" for i in range(400)), chunk_interval=0.02)])
    async with oai(kit.router(), envelope=Envelope(hold_tokens=0)) as client:  # each word shown as it comes
        stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True)
        await leave_after(stream, 3)
        await asyncio.sleep(0.1)
    (call,) = a.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.events_sent < 20  # closed at once, not at the end of the 400 words


@pytest.mark.looptime
async def test_cancelling_an_sdk_call_cancels_the_upstream_call(kit: Kit) -> None:
    s = kit.providers["s"]
    s.load("hang")
    async with oai(kit.router(), route="solo") as client:
        task = asyncio.ensure_future(client.chat.completions.create(model="m", messages=HELLO))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)
    (call,) = s.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED


# -- sync clients -----------------------------------------------------------------------------------


@pytest.fixture
def sync_router(kit: Kit) -> Iterator[SyncRouter]:
    with SyncRouter(kit.router) as router:
        yield router


def test_sync_openai(kit: Kit, sync_router: SyncRouter) -> None:
    kit.providers["a"].load("overloaded")
    kit.providers["b"].load([Reply.ok("sync answer"), Reply.ok("sync stream")])
    http = failover.sync_httpx_client(sync_router, route="chat")
    with openai.OpenAI(api_key="unused", http_client=http, max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
        assert raw.parse().choices[0].message.content == "sync answer"
        assert raw.headers["x-failover-target"] == "b"
        assert (last_record() or pytest.fail("no record")).target_used == "b"
        stream = client.chat.completions.create(model="chat", messages=HELLO, stream=True)
        assert "".join(ch.delta.content or "" for chunk in stream for ch in chunk.choices) == "sync stream"


def test_sync_anthropic(kit: Kit, sync_router: SyncRouter) -> None:
    kit.providers["b"].load([Reply.ok("sync claude"), Reply.ok("streamed sync claude")])
    http = failover.sync_httpx_client(sync_router, route="claude")
    with anthropic.Anthropic(api_key="unused", http_client=http, max_retries=0) as client:
        msg = client.messages.create(model="claude", max_tokens=50, messages=HELLO)
        assert msg.content[0].type == "text" and msg.content[0].text == "sync claude"
        with client.messages.stream(model="claude", max_tokens=50, messages=HELLO) as s:
            assert "".join(s.text_stream) == "streamed sync claude"


def test_sync_stream_close_closes_upstream(kit: Kit, sync_router: SyncRouter) -> None:
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join(f"w{i}" for i in range(400)), chunk_interval=0.01)])
    http = failover.sync_httpx_client(sync_router, route="chat")
    with openai.OpenAI(api_key="unused", http_client=http, max_retries=0) as client:
        stream = client.chat.completions.create(model="chat", messages=HELLO, stream=True)
        for i, _ in enumerate(stream):
            if i == 2:
                break
        stream.close()
    (call,) = a.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.events_sent < 200


def test_sync_client_needs_a_sync_router(kit: Kit) -> None:
    with pytest.raises(TypeError, match="SyncRouter"):
        failover.sync_httpx_client(kit.router(), route="chat")  # type: ignore[call-overload]
    with pytest.raises(failover.UnknownRoute, match="chat, claude"):
        failover.httpx_client(kit.router(), route="nope")
    with pytest.raises(ValueError, match="deadline"):
        failover.httpx_client(kit.router(), route="chat", deadline=-1)


# -- routing, envelope, module choice ---------------------------------------------------------------


async def test_route_from_the_body_model_and_envelope_headers(kit: Kit) -> None:
    kit.providers["b"].load([Reply.ok("claude via openai sdk")])
    s = kit.providers["s"]
    s.load("server_error")
    async with oai(kit.router(), route=None, max_attempts=2) as client:
        resp = await client.chat.completions.create(model="claude", messages=HELLO)
        assert resp.choices[0].message.content == "claude via openai sdk"
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(
                model="solo",
                messages=HELLO,
                extra_headers={"x-failover-max-attempts": "1", "x-failover-request-id": "mine-42"},
            )
    assert len(s.calls) == 1  # the header's one attempt, not the client's two
    record = last_record()
    assert record is not None and record.request_id == "mine-42" and record.route == "solo"


async def test_an_sdk_retry_is_warned_about_once(kit: Kit, caplog: pytest.LogCaptureFixture) -> None:
    kit.providers["a"].load("ok")
    async with oai(kit.router()) as client:
        for _ in range(2):
            await client.chat.completions.create(
                model="chat", messages=HELLO, extra_headers={"x-stainless-retry-count": "1"}
            )
    warnings = [r for r in caplog.records if "max_retries=0" in r.getMessage()]
    assert len(warnings) == 1


async def test_fallthrough_serves_other_paths(kit: Kit) -> None:
    import httpx2

    def models(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, json={"object": "list", "data": [{"id": "m1", "object": "model", "created": 0, "owned_by": "x"}]}
        )

    async with oai(kit.router(), fallthrough=httpx2.MockTransport(models)) as client:
        page = await client.models.list()
    assert [m.id for m in page.data] == ["m1"]


async def test_legacy_httpx_module(kit: Kit) -> None:
    import httpx

    kit.providers["a"].load([Reply.ok("over legacy httpx"), Reply.ok("streamed over legacy httpx")])
    http = failover.httpx_client(kit.router(), route="chat", http_module="httpx")
    assert isinstance(http, httpx.AsyncClient)
    # openai accepts an httpx client at run time; its annotation names only httpx2
    async with openai.AsyncOpenAI(api_key="unused", http_client=http, max_retries=0) as client:  # type: ignore[arg-type]
        resp = await client.chat.completions.create(model="chat", messages=HELLO)
        stream = await client.chat.completions.create(model="chat", messages=HELLO, stream=True)
        text = "".join([ch.delta.content or "" async for chunk in stream for ch in chunk.choices])
    assert resp.choices[0].message.content == "over legacy httpx"
    assert text == "streamed over legacy httpx"


@pytest.mark.looptime
async def test_anthropic_overloaded_is_overloaded_error(kit: Kit) -> None:
    kit.providers["z"].load("overloaded")
    async with claude(kit.router(), route="zolo", max_attempts=1) as client:
        with pytest.raises(anthropic.OverloadedError) as exc:
            await client.messages.create(model="m", max_tokens=10, messages=HELLO)
    assert exc.value.response.headers["x-should-retry"] == "false"
    assert exc.value.response.headers["x-failover-retryable"] == "true"


def test_the_drop_in_imports_no_server_and_no_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, failover\n"
        "assert 'failover.integrations._httpx' not in sys.modules\n"
        "failover.httpx_client\n"
        "bad = [m for m in ('starlette', 'uvicorn', 'openai', 'anthropic', 'httpx2') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_the_affinity_key_reaches_the_envelope(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process as through the gateway: x-failover-session, else the body's prompt_cache_key."""
    router = kit.router()
    seen: list[Envelope] = []
    complete = router.complete

    async def spy(route: str, request: Any, envelope: Envelope, **kw: Any) -> Any:
        seen.append(envelope)
        return await complete(route, request, envelope, **kw)

    monkeypatch.setattr(router, "complete", spy)
    async with oai(router) as client:
        await client.chat.completions.create(model="chat", messages=HELLO, prompt_cache_key="pck")
        await client.chat.completions.create(
            model="chat", messages=HELLO, prompt_cache_key="pck", extra_headers={"x-failover-session": "s-1"}
        )
        await client.chat.completions.create(model="chat", messages=HELLO)
    assert [e.affinity_key for e in seen] == ["pck", "s-1", None]
