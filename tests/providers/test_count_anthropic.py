"""Anthropic token counting: POST /v1/messages/count_tokens, and count_exactly over it."""

from __future__ import annotations

import asyncio

import pytest

from failover.model import (
    Dialect,
    Failure,
    FailureKind,
    Message,
    Reasoning,
    Request,
    ResponseFormat,
    Tool,
    ToolCall,
    ToolChoice,
)
from failover.providers import AnthropicDialect
from failover.testing import FakeNetwork, FakeProvider
from failover.tokens import count_exactly, counts_remotely
from failover.transport._types import HttpResponse, TransportError

from ..tokens._transports import Canned, Raising
from ._wire import target

D = AnthropicDialect()
T = target(Dialect.ANTHROPIC, query=(("beta", "true"),), headers=(("anthropic-beta", "x-2025"),))

FULL = Request(
    messages=(Message.system("Be brief."), Message.user("What is the weather in Paris?")),
    tools=(Tool(name="get_weather", description="Weather now", parameters={"type": "object", "properties": {}}),),
    tool_choice=ToolChoice(mode="auto"),
    response_format=ResponseFormat.json_schema({"type": "object"}),
    max_tokens=256,
    temperature=0.2,
    top_p=0.9,
    stop=("END",),
)


def test_build_count_posts_the_prompt_fields_of_the_messages_body() -> None:
    http = D.build_count(T, FULL)
    assert http.method == "POST"
    assert http.url == "https://api.anthropic.com/v1/messages/count_tokens?beta=true"
    assert http.json is not None
    full = D.build(T, FULL).json
    assert full is not None
    # The prompt's fields, exactly as the Messages request carries them...
    prompt = ("model", "messages", "system", "tools", "tool_choice", "output_config")
    assert dict(http.json) == {k: full[k] for k in prompt}
    # ...and none of what count_tokens rejects.
    for rejected in ("max_tokens", "stream", "temperature", "top_p", "stop_sequences"):
        assert rejected not in http.json


def test_build_count_carries_thinking_as_the_message_does() -> None:
    # A tool loop with thinking on: the count is asked with the same thinking setting, so the
    # history's thinking blocks count as they will when the message is sent.
    call = ToolCall(id="toolu_1", name="get_weather", arguments="{}", parsed={})
    signed = Reasoning(text="t", signature="s", source="anthropic")
    request = Request(
        messages=(
            Message.user("Weather?"),
            Message.assistant(tool_calls=(call,), reasoning=(signed,)),
            Message.tool("toolu_1", "18C"),
        ),
        max_tokens=32000,
        reasoning_effort="medium",
    )
    http = D.build_count(T, request)
    assert http.json is not None
    assert http.json["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert http.json["messages"][1]["content"][0] == {"type": "thinking", "thinking": "t", "signature": "s"}
    assert "max_tokens" not in http.json


def test_build_count_sends_the_same_headers_as_a_message() -> None:
    http = D.build_count(T, Request.simple("hi"))
    assert http.headers == D.build(T, Request.simple("hi")).headers
    assert http.headers["x-api-key"] == "sk-test-KEY-123"
    assert http.headers["anthropic-version"] == "2023-06-01"
    assert http.headers["anthropic-beta"] == "x-2025"


def test_build_count_leaves_build_unchanged() -> None:
    before = D.build(T, FULL)
    D.build_count(T, FULL)
    assert D.build(T, FULL) == before
    assert before.json is not None and before.json["max_tokens"] == 256


def test_parse_count_reads_input_tokens() -> None:
    resp = HttpResponse(status=200, headers={}, body=b'{"input_tokens": 2095}')
    assert D.parse_count(T, resp) == 2095


@pytest.mark.parametrize("body", [b"{}", b'{"input_tokens": "12"}', b'{"input_tokens": -1}', b"not json", b"[]"])
def test_parse_count_rejects_a_200_without_a_count(body: bytes) -> None:
    f = D.parse_count(T, HttpResponse(status=200, headers={}, body=body))
    assert isinstance(f, Failure)
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR


def test_parse_count_classifies_errors_like_messages() -> None:
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},"request_id":"req_9"}'
    f = D.parse_count(T, HttpResponse(status=429, headers={"retry-after": "3"}, body=body))
    assert isinstance(f, Failure)
    assert f.kind is FailureKind.RATE_LIMITED
    assert f.retry_after == 3
    assert f.provider_request_id == "req_9"


def test_parse_count_redacts_the_key_from_error_messages() -> None:
    body = b'{"type":"error","error":{"type":"authentication_error","message":"bad key sk-test-KEY-123"}}'
    f = D.parse_count(T, HttpResponse(status=401, headers={}, body=body))
    assert isinstance(f, Failure)
    assert "sk-test-KEY-123" not in f.message


# ------------------------------------------------------------------ count_exactly


async def test_a_200_from_the_fake_provider_gives_the_number() -> None:
    p = FakeProvider("claude", "anthropic")
    t = p.target(context_window=200_000)
    request = Request.simple("x" * 400, system="s" * 40)
    n = await count_exactly(t, request, FakeNetwork(p), timeout=1.0)
    assert n == 110  # the fake counts characters / 4 over system and messages
    (call,) = p.calls
    assert call.path == "/v1/messages/count_tokens"
    assert call.json is not None and "max_tokens" not in call.json
    assert call.scripted is False  # counting does not use up a scripted reply


@pytest.mark.looptime
async def test_a_timeout_gives_none_at_the_timeout() -> None:
    p = FakeProvider("claude", "anthropic", latency=5.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await count_exactly(p.target(), Request.simple("hi"), FakeNetwork(p), timeout=0.5) is None
    assert loop.time() - t0 == pytest.approx(0.5)


async def test_a_500_gives_none() -> None:
    net = Canned(500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
    assert await count_exactly(T, Request.simple("hi"), net, timeout=1.0) is None
    assert net.requests[0].url.endswith("/messages/count_tokens?beta=true")


async def test_an_unknown_path_gives_none() -> None:
    # An OpenAI-compatible server has no count endpoint: its 404 is a failed count, nothing more.
    p = FakeProvider("compat", "openai")
    t = p.target(dialect=Dialect.ANTHROPIC, base_url=p.base_url)
    assert await count_exactly(t, Request.simple("hi"), FakeNetwork(p), timeout=1.0) is None


@pytest.mark.parametrize(
    "exc", [TransportError("connect", "refused"), TransportError("total", "slow"), RuntimeError("a bug")]
)
async def test_a_failed_send_gives_none(exc: Exception) -> None:
    assert await count_exactly(T, Request.simple("hi"), Raising(exc), timeout=1.0) is None


async def test_the_timeout_bounds_connect_and_total() -> None:
    net = Canned(200, {"input_tokens": 7})
    assert await count_exactly(T, Request.simple("hi"), net, timeout=0.25) == 7
    assert net.timeouts == [(0.25, 0.25)]


async def test_no_time_means_no_count() -> None:
    net = Canned(200, {"input_tokens": 7})
    assert await count_exactly(T, Request.simple("hi"), net, timeout=0.0) is None
    assert net.requests == []


async def test_cancellation_propagates() -> None:
    p = FakeProvider("claude", "anthropic", latency=5.0)
    task = asyncio.ensure_future(count_exactly(p.target(), Request.simple("hi"), FakeNetwork(p), timeout=10))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_openai_does_not_count_remotely() -> None:
    assert counts_remotely(T)
    assert not counts_remotely(target(Dialect.OPENAI))
