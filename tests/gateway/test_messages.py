"""``POST /v1/messages``: the official anthropic SDK against ONE real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
from starlette.applications import Starlette
from starlette.types import Message

from failover import Route, Router, Secret, Timeouts
from failover.gateway import GatewaySettings, Tenant, create_app, hash_key
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply
from tests._sdk import disconnected_call, leave_after

from ._kit import ACME_KEY, ALL, NO_HOLD, OTHER_KEY, PROVIDER_KEY, Kit, LeavingClient, ServerThread, chat_scope

pytestmark = pytest.mark.e2e

WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CLOCK: Any = {
    "name": "get_time",
    "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}},
}
HELLO: list[Any] = [{"role": "user", "content": "Hello"}]
TINY_KEY = "gw-tiny-key-0009"


def root(server: ServerThread) -> str:
    return f"http://127.0.0.1:{server.port}"


@pytest.fixture
async def client(served: tuple[Kit, ServerThread]) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=root(served[1]), api_key=ACME_KEY, max_retries=0, timeout=20) as c:
        yield c


# -------------------------------------------------------------------- plain answers


async def test_create_text(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["a"].load([Reply.ok("Hello from the gateway", usage=(9, 4))])
    msg = await client.messages.create(
        model="chat", max_tokens=64, messages=HELLO, extra_headers={"anthropic-version": "2023-06-01"}
    )
    assert msg.type == "message" and msg.role == "assistant"
    assert msg.model == kit.providers["a"].model != "chat"  # the model that answered, not the route
    assert msg.id.startswith("msg_")
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == "Hello from the gateway"  # type: ignore[union-attr]
    assert msg.stop_reason == "end_turn"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (9, 4)
    assert msg._request_id  # the SDK read request-id
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None and sent["messages"][-1] == {"role": "user", "content": "Hello"}
    assert sent["max_tokens"] == 64


def test_sync_client_with_system_and_bearer_auth(served: tuple[Kit, ServerThread]) -> None:
    kit, server = served
    kit.providers["a"].load([Reply.ok("Bonjour")])
    with anthropic.Anthropic(base_url=root(server), auth_token=ACME_KEY, max_retries=0, timeout=20) as c:
        msg = c.messages.create(
            model="chat",
            max_tokens=32,
            system=[{"type": "text", "text": "Answer in French."}],
            messages=HELLO,
            extra_body={"temperature": 0.2},  # this SDK version has no temperature parameter
        )
    assert msg.content[0].text == "Bonjour"  # type: ignore[union-attr]
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None
    assert sent["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert sent["temperature"] == 0.2


async def test_tools_and_a_tool_result_round_trip(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    t = kit.providers["t"]
    t.load([Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})]), Reply.ok("It is sunny in Paris")])
    first = await client.messages.create(model="tools", max_tokens=64, messages=HELLO, tools=[WEATHER])
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"city": "Paris"}
    follow_up: list[Any] = [
        *HELLO,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "22C, sunny"}]},
    ]
    second = await client.messages.create(
        model="tools", max_tokens=64, messages=follow_up, tools=[WEATHER], tool_choice={"type": "auto"}
    )
    assert second.content[0].text == "It is sunny in Paris"  # type: ignore[union-attr]
    sent = t.calls[-1].json
    assert sent is not None
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": use.id, "content": "22C, sunny"}
    assistant = sent["messages"][-2]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert sent["tool_choice"] == "auto"


async def test_claude_codes_max_tokens_above_the_targets_max_is_served_capped(
    kit: Kit, client: anthropic.AsyncAnthropic
) -> None:
    # Claude Code asks 32,000 and cannot choose another; the route's targets allow 4,096
    kit.providers["a"].load([Reply.ok("capped but served")])
    raw = await client.messages.with_raw_response.create(model="chat", max_tokens=32_000, messages=HELLO)
    msg = await raw.parse()
    assert raw.status_code == 200
    assert msg.content[0].text == "capped but served"  # type: ignore[union-attr]
    assert raw.headers["x-failover-max-tokens"] == "4096"
    assert raw.headers["x-failover-target"] == "a"
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None and sent["max_tokens"] == 4_096


async def test_a_request_within_the_targets_max_has_no_max_tokens_header(
    kit: Kit, client: anthropic.AsyncAnthropic
) -> None:
    raw = await client.messages.with_raw_response.create(model="chat", max_tokens=64, messages=HELLO)
    assert raw.status_code == 200 and "x-failover-max-tokens" not in raw.headers


async def test_max_tokens_policy_refuse_keeps_the_422(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    before = len(kit.providers["a"].calls)
    with pytest.raises(anthropic.UnprocessableEntityError) as exc:
        await client.messages.create(
            model="chat",
            max_tokens=32_000,
            messages=HELLO,
            extra_headers={"x-failover-max-tokens-policy": "refuse"},
        )
    assert exc.value.status_code == 422 and exc.value.error_code == "contract_failure"
    assert "max_tokens 32000 exceeds max output 4096" in exc.value.message
    assert len(kit.providers["a"].calls) == before  # nothing was sent upstream
    with pytest.raises(anthropic.BadRequestError) as bad:
        await client.messages.create(
            model="chat", max_tokens=8, messages=HELLO, extra_headers={"x-failover-max-tokens-policy": "clamp"}
        )
    assert "x-failover-max-tokens-policy" in bad.value.message


async def test_a_capped_stream_says_its_max_tokens_in_the_head(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["a"].load([Reply.ok("streamed, capped")])
    async with client.messages.stream(model="chat", max_tokens=32_000, messages=HELLO) as s:
        final = await s.get_final_message()
        assert s.response.headers["x-failover-max-tokens"] == "4096"
    assert final.content[0].text == "streamed, capped"  # type: ignore[union-attr]
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None and sent["max_tokens"] == 4_096


# -------------------------------------------------------------------- streams


async def test_stream_text_final_message(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["a"].load([Reply.ok("streamed words arrive one by one", usage=(3, 6))])
    async with client.messages.stream(model="chat", max_tokens=64, messages=HELLO) as s:
        pieces = [t async for t in s.text_stream]
        final = await s.get_final_message()
    assert len(pieces) > 1
    assert "".join(pieces) == "streamed words arrive one by one"
    assert final.content[0].text == "streamed words arrive one by one"  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 6 and final.usage.input_tokens == 3
    assert final.model == kit.providers["a"].model != "chat"  # message_start names the model that answered


async def test_stream_tool_use_final_message(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    calls = [("get_weather", {"city": "Lisbon"}), ("get_time", {"tz": "WET"})]
    kit.providers["t"].load([Reply.ok(tool_calls=calls)])
    async with client.messages.stream(model="tools", max_tokens=64, messages=HELLO, tools=[WEATHER, CLOCK]) as s:
        final = await s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == calls
    assert all(u.id for u in uses)
    assert final.stop_reason == "tool_use"


async def test_raw_stream_event_order(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["a"].load([Reply.ok("one two")])
    stream = await client.messages.create(model="chat", max_tokens=64, messages=HELLO, stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 1
    assert "content_block_delta" in kinds


async def test_failure_after_first_byte_is_an_error_event(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["s"].load([Reply.drop_after(2, text="one two three four five six"), Reply.ok("SPLICED")])
    stream = await client.messages.create(
        model="solo", max_tokens=64, messages=HELLO, stream=True, extra_headers=NO_HOLD
    )
    got: list[str] = []

    async def read() -> None:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                got.append(event.delta.text)

    with pytest.raises(anthropic.APIStatusError) as exc:
        await read()
    assert "".join(got) and "SPLICED" not in "".join(got)  # output had begun; nothing spliced on
    assert "partial_output" in exc.value.message
    assert exc.value.error_code == "partial_output"
    assert len(kit.providers["s"].calls) == 1


async def test_a_break_before_the_commit_point_is_rescued_in_the_sdk(
    kit: Kit, client: anthropic.AsyncAnthropic
) -> None:
    kit.providers["s"].load([Reply.drop_after(2, text="one two three four five six"), Reply.ok("whole answer")])
    before = len(kit.providers["s"].calls)
    async with client.messages.stream(model="solo", max_tokens=64, messages=HELLO) as stream:
        final = await stream.get_final_message()
    assert [b.text for b in final.content if b.type == "text"] == ["whole answer"]
    assert final.stop_reason == "end_turn"
    assert [c.outcome.value for c in kit.providers["s"].calls[before:]] == ["reset", "completed"]


async def test_client_disconnect_mid_stream_closes_upstream(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join(f"w{i}" for i in range(400)), chunk_interval=0.02)])
    before = len(a.calls)
    stream = await client.messages.create(
        model="chat", max_tokens=2048, messages=HELLO, stream=True, extra_headers=NO_HOLD
    )
    await leave_after(stream, 5)
    call = await disconnected_call(a, before)
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.events_sent < 100  # closed at once, not at the end of the 400 words


# -------------------------------------------------------------------- errors


async def test_errors_are_the_sdks_exception_classes(
    served: tuple[Kit, ServerThread], client: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.NotFoundError) as nf:
        await client.messages.create(model="no-such-route", max_tokens=8, messages=HELLO)
    assert nf.value.type == "not_found_error" and nf.value.error_code == "model_not_found"
    with pytest.raises(anthropic.PermissionDeniedError) as pd:
        await client.messages.create(model="secret", max_tokens=8, messages=HELLO)
    assert pd.value.type == "permission_error"
    with pytest.raises(anthropic.BadRequestError) as bad:
        await client.messages.create(model="chat", max_tokens=8, messages=HELLO, extra_body={"top_k": 5})
    assert bad.value.type == "invalid_request_error" and "top_k" in bad.value.message
    with pytest.raises(anthropic.BadRequestError) as header:
        await client.messages.create(
            model="chat", max_tokens=8, messages=HELLO, extra_headers={"x-failover-max-attempts": "lots"}
        )
    assert "x-failover-max-attempts" in header.value.message
    with pytest.raises(anthropic.RequestTooLargeError) as big:
        await client.messages.create(model="chat", max_tokens=8, messages=[{"role": "user", "content": "x" * 70_000}])
    assert str(big.value.type) == "request_too_large"  # the API docs type, newer than the SDK's ErrorType
    assert big.value.error_code == "request_too_large"
    async with anthropic.AsyncAnthropic(base_url=root(served[1]), api_key="wrong", max_retries=0) as c:
        with pytest.raises(anthropic.AuthenticationError) as auth:
            await c.messages.create(model="chat", max_tokens=8, messages=HELLO)
    assert auth.value.type == "authentication_error"
    async with anthropic.AsyncAnthropic(base_url=root(served[1]), api_key=OTHER_KEY, max_retries=0) as c:
        with pytest.raises(anthropic.PermissionDeniedError):
            await c.messages.create(model="chat", max_tokens=8, messages=HELLO)


async def test_missing_key_names_x_api_key(served: tuple[Kit, ServerThread]) -> None:
    async with httpx.AsyncClient(base_url=root(served[1])) as c:
        r = await c.post("/v1/messages", json={"model": "chat", "max_tokens": 8, "messages": HELLO})
    assert r.status_code == 401
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    assert "x-api-key" in body["error"]["message"]


async def test_503_with_retry_after(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["s"].load("rate_limit(retry_after=30)")
    with pytest.raises(anthropic.ServiceUnavailableError) as exc:
        await client.messages.create(
            model="solo", max_tokens=8, messages=HELLO, extra_headers={"x-failover-deadline-ms": "2000"}
        )
    assert exc.value.status_code == 503
    assert exc.value.response.headers["retry-after"] == "30"
    assert exc.value.error_code == "rate_limited"
    assert exc.value.type == "overloaded_error"
    assert exc.value.request_id == exc.value.response.headers["x-failover-request-id"]


async def test_overload_is_529(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["s"].load("overloaded")
    with pytest.raises(anthropic.OverloadedError) as exc:
        await client.messages.create(model="solo", max_tokens=8, messages=HELLO)
    assert exc.value.status_code == 529
    # the gateway already retried and knows no moment to come back: not "overloaded_error",
    # which Claude Code retries whatever x-should-retry says
    assert exc.value.type == "api_error"
    assert exc.value.response.headers["x-should-retry"] == "false"
    assert "retry-after" not in exc.value.response.headers
    assert exc.value.error_code == "provider_overloaded"
    with pytest.raises(anthropic.OverloadedError):  # a stream that fails before its first byte: the same answer
        async with client.messages.stream(model="solo", max_tokens=8, messages=HELLO) as s:
            await s.get_final_message()


async def test_504_on_deadline(kit: Kit, client: anthropic.AsyncAnthropic) -> None:
    kit.providers["s"].load("hang")
    with pytest.raises(anthropic.GatewayTimeoutError) as exc:
        await client.messages.create(
            model="solo", max_tokens=8, messages=HELLO, extra_headers={"x-failover-deadline-ms": "300"}
        )
    assert exc.value.status_code == 504
    assert exc.value.type == "timeout_error"
    assert exc.value.error_code == "deadline_exhausted"


async def test_upstream_misconfiguration_is_502_and_secret_free(
    kit: Kit, client: anthropic.AsyncAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(anthropic.APIStatusError) as exc:
        await client.messages.create(model="misconfigured", max_tokens=8, messages=HELLO)
    assert exc.value.status_code == 502 and exc.value.type == "api_error"
    assert PROVIDER_KEY not in exc.value.response.text
    assert PROVIDER_KEY not in json.dumps(dict(exc.value.response.headers))
    assert PROVIDER_KEY not in caplog.text and ACME_KEY not in caplog.text


# -------------------------------------------------------------------- failover across dialects


def mixed() -> tuple[Starlette, dict[str, FakeProvider]]:
    """Route ``mixed``: an Anthropic-dialect primary, an OpenAI-dialect fallback; tenant
    ``tiny`` may send one request a minute."""
    providers = {
        "claude": FakeProvider("claude", "anthropic", api_key=PROVIDER_KEY),
        "gpt": FakeProvider("gpt", "openai", api_key=PROVIDER_KEY),
    }
    targets = {
        n: p.target(
            api_key=Secret(PROVIDER_KEY),
            capabilities=ALL,
            timeouts=Timeouts(connect=2, first_event=5, idle=5, total=10, min_useful=0.05),
            max_attempts=1,
            tokenizer="estimate",
        )
        for n, p in providers.items()
    }
    router = Router(
        [Route(name="mixed", primary=(targets["claude"],), fallbacks=(targets["gpt"],))],
        transport=FakeNetwork(*providers.values()),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.01, cap=0.05),
        rng=random.Random(1),
        breakers=NoBreakers(),
    )
    settings = GatewaySettings(
        tenants=(
            Tenant(name="acme", key_hashes=(hash_key(ACME_KEY),)),
            Tenant(name="tiny", key_hashes=(hash_key(TINY_KEY),), rpm=1),
        )
    )
    return create_app(router, settings), providers


@pytest.fixture(scope="module")
def mixed_served() -> Iterator[tuple[dict[str, FakeProvider], ServerThread]]:
    app, providers = mixed()
    with ServerThread(app) as server:
        yield providers, server


async def test_failover_to_an_openai_target_answers_in_anthropic_format(
    mixed_served: tuple[dict[str, FakeProvider], ServerThread],
) -> None:
    providers, server = mixed_served
    providers["claude"].load("overloaded")
    providers["gpt"].load([Reply.ok("answered by gpt"), Reply.ok(tool_calls=[("get_weather", {"city": "Oslo"})])])
    async with anthropic.AsyncAnthropic(base_url=root(server), api_key=ACME_KEY, max_retries=0) as c:
        raw = await c.messages.with_raw_response.create(model="mixed", max_tokens=32, messages=HELLO)
        msg = await raw.parse()
        assert raw.headers["x-failover-target"] == "gpt"
        assert raw.headers["x-failover-recovered"] == "true"
        assert msg.content[0].text == "answered by gpt"  # type: ignore[union-attr]
        assert msg.stop_reason == "end_turn"
        async with c.messages.stream(model="mixed", max_tokens=32, messages=HELLO, tools=[WEATHER]) as s:
            final = await s.get_final_message()
    (use,) = final.content
    assert use.type == "tool_use" and use.input == {"city": "Oslo"}
    assert final.stop_reason == "tool_use"
    assert [c.kind for c in providers["claude"].calls][-2:] == ["overloaded", "overloaded"]
    upstream = providers["gpt"].calls[-1]
    assert upstream.path.endswith("/chat/completions")  # the OpenAI dialect carried the Anthropic request


async def test_tenant_rate_limit_is_429(mixed_served: tuple[dict[str, FakeProvider], ServerThread]) -> None:
    providers, server = mixed_served
    providers["claude"].load("ok")
    async with anthropic.AsyncAnthropic(base_url=root(server), api_key=TINY_KEY, max_retries=0) as c:
        await c.messages.create(model="mixed", max_tokens=8, messages=HELLO)
        with pytest.raises(anthropic.RateLimitError) as exc:
            await c.messages.create(model="mixed", max_tokens=8, messages=HELLO)
    assert exc.value.type == "rate_limit_error"
    assert exc.value.error_code == "rate_limit_exceeded"


# -------------------------------------------------------------------- in-process ASGI


async def test_drain_cut_ends_the_stream_with_an_error_event() -> None:
    kit = Kit({"a": [Reply.ok(" ".join(f"w{i}" for i in range(200)), chunk_interval=0.05)]})
    body = {"model": "chat", "max_tokens": 512, "stream": True, "messages": HELLO}
    scope = {**chat_scope(hold_tokens=0), "path": "/v1/messages", "raw_path": b"/v1/messages"}
    received: list[Message] = []
    first = asyncio.Event()

    async def receive() -> Message:
        if not received:
            received.append({"type": "http.request"})
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        await asyncio.Event().wait()  # the client stays
        raise AssertionError

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            first.set()

    gw = kit.app.state.gateway
    serving = asyncio.create_task(kit.app(scope, receive, send))
    await asyncio.wait_for(first.wait(), 5)
    assert await gw.drain(0.01, grace=5) == 1
    await asyncio.wait_for(serving, 5)
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    assert text.rstrip().endswith("}")
    last = text.strip().split("\n\n")[-1]
    assert last.startswith("event: error\n")
    error = json.loads(last.split("data: ", 1)[1])
    assert error["error"]["type"] == "overloaded_error"
    assert error["error"]["details"]["error_code"] == "shutting_down"
    (call,) = kit.providers["a"].calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED


async def test_client_disconnect_asgi_closes_the_upstream_at_once() -> None:
    kit = Kit({"a": [Reply.ok(" ".join(f"w{i}" for i in range(200)), chunk_interval=0.05)]})
    leaver = LeavingClient({"model": "chat", "max_tokens": 512, "stream": True, "messages": HELLO})
    scope = {**chat_scope(hold_tokens=0), "path": "/v1/messages", "raw_path": b"/v1/messages"}
    await asyncio.wait_for(kit.app(scope, leaver.receive, leaver.send), timeout=5)
    (call,) = kit.providers["a"].calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    # closed at once, not at the end of the 200 words (10 s): real time, so with room for a
    # busy machine (the agent-runtime tests run beside this one in CI)
    assert call.events_sent < 100
    assert leaver.messages[0]["status"] == 200


# -------------------------------------------------------------------- count_tokens


async def test_count_tokens_is_the_count_failover_uses_and_calls_no_provider(
    kit: Kit, client: anthropic.AsyncAnthropic
) -> None:
    from failover.inbound import anthropic as inbound
    from failover.tokens import counter_for

    calls_before = {name: len(p.calls) for name, p in kit.providers.items()}
    body: dict[str, Any] = {
        "model": "chat",
        "messages": [*HELLO, {"role": "assistant", "content": "Hi"}],
        "tools": [WEATHER],
    }
    counted = await client.messages.count_tokens(**body)
    target = kit.router.routes["chat"].primary[0]
    expected = counter_for(target).count(inbound.to_request(inbound.parse_body({**body, "max_tokens": 1})))
    assert counted.input_tokens == expected > 0
    shorter = await client.messages.count_tokens(model="chat", messages=HELLO)
    assert 0 < shorter.input_tokens < counted.input_tokens  # the tools and the extra turn count
    assert {name: len(p.calls) for name, p in kit.providers.items()} == calls_before


async def test_count_tokens_refuses_like_messages(served: tuple[Kit, ServerThread]) -> None:
    _, server = served
    async with anthropic.AsyncAnthropic(base_url=root(server), api_key=OTHER_KEY, max_retries=0, timeout=20) as other:
        with pytest.raises(anthropic.NotFoundError) as nf:  # another tenant's route does not exist for this key
            await other.messages.count_tokens(model="chat", messages=HELLO)
    assert "chat" in nf.value.message
    async with anthropic.AsyncAnthropic(base_url=root(server), api_key="gw-wrong-key", max_retries=0) as wrong:
        with pytest.raises(anthropic.AuthenticationError):
            await wrong.messages.count_tokens(model="chat", messages=HELLO)
    async with anthropic.AsyncAnthropic(base_url=root(server), api_key=ACME_KEY, max_retries=0) as acme:
        with pytest.raises(anthropic.BadRequestError) as bad:
            await acme.messages.count_tokens(model="chat", messages=[{"role": "user", "content": [{"type": "nope"}]}])  # type: ignore[list-item]
    assert "messages[0].content[0]" in bad.value.message


# -------------------------------------------------------------------- models, in Anthropic's format


async def test_the_anthropic_sdk_lists_and_retrieves_the_routes_its_key_may_use(
    kit: Kit, client: anthropic.AsyncAnthropic
) -> None:
    page = await client.models.list()
    listed = [m.id for m in page.data]
    allowed = [name for name in kit.router.routes if name != "secret"]  # acme may not use "secret"
    assert listed == allowed and page.has_more is False
    assert page.first_id == allowed[0] and page.last_id == allowed[-1]
    chat = await client.models.retrieve("chat")
    target = kit.router.routes["chat"].primary[0]
    assert (chat.id, chat.type, chat.lifecycle) == ("chat", "model", "active")
    assert (chat.max_input_tokens, chat.max_tokens) == (target.context_window, target.max_output_tokens)
    with pytest.raises(anthropic.NotFoundError):
        await client.models.retrieve("secret")


async def test_an_openai_client_still_gets_openais_model_list(kit: Kit) -> None:
    async with kit.client() as http:
        body = (await http.get("/v1/models")).json()
    assert body["object"] == "list" and {m["object"] for m in body["data"]} == {"model"}
