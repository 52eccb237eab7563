"""Gemini token counting: POST /v1beta/models/{model}:countTokens, and count_exactly over it."""

from __future__ import annotations

import asyncio

import pytest

from failover.model import Dialect, Failure, FailureKind, Message, Request, ResponseFormat, Tool, ToolChoice
from failover.providers import GeminiDialect
from failover.testing import FakeNetwork, FakeProvider
from failover.tokens import count_exactly
from failover.transport._types import HttpResponse

from ..tokens._transports import Canned
from ._wire import target

D = GeminiDialect()
T = target(Dialect.GEMINI, model="models/gemini-2.5-pro", query=(("alt", "json"),))

URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:countTokens?alt=json"


def test_contents_alone_are_sent_as_contents() -> None:
    request = Request(messages=(Message.user("Hello"), Message.assistant("Hi"), Message.user("Count me")))
    http = D.build_count(T, request)
    assert http.method == "POST"
    assert http.url == URL
    full = D.build(T, request).json
    assert full is not None
    assert http.json == {"contents": full["contents"]}


def test_system_tools_and_config_are_sent_as_a_whole_generate_content_request() -> None:
    request = Request(
        messages=(Message.system("Be brief."), Message.user("Weather in Paris?")),
        tools=(Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}}),),
        tool_choice=ToolChoice(mode="required"),
        response_format=ResponseFormat.json_schema({"type": "object"}),
        max_tokens=100,
    )
    http = D.build_count(T, request)
    assert http.url == URL
    full = D.build(T, request).json
    assert full is not None
    assert http.json == {"generateContentRequest": {"model": "models/gemini-2.5-pro", **full}}
    inner = http.json["generateContentRequest"]
    assert inner["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert inner["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert "contents" not in http.json  # contents is ignored beside generateContentRequest: send one


def test_build_count_sends_the_same_headers_as_a_generation() -> None:
    http = D.build_count(T, Request.simple("hi"))
    assert http.headers == D.build(T, Request.simple("hi")).headers
    assert http.headers["x-goog-api-key"] == "sk-test-KEY-123"


def test_parse_count_reads_total_tokens() -> None:
    body = b'{"totalTokens": 31, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}]}'
    assert D.parse_count(T, HttpResponse(status=200, headers={}, body=body)) == 31


@pytest.mark.parametrize("body", [b"{}", b'{"totalTokens": 1.5}', b'{"totalTokens": true}', b"<html>", b"[]"])
def test_parse_count_rejects_a_200_without_a_count(body: bytes) -> None:
    f = D.parse_count(T, HttpResponse(status=200, headers={}, body=body))
    assert isinstance(f, Failure)
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR


def test_parse_count_classifies_errors_like_generations() -> None:
    body = (
        b'{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",'
        b' "status": "RESOURCE_EXHAUSTED"}}'
    )
    f = D.parse_count(T, HttpResponse(status=429, headers={}, body=body))
    assert isinstance(f, Failure)
    assert f.kind is FailureKind.RATE_LIMITED


def test_parse_count_reads_an_error_in_a_200() -> None:
    body = b'{"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}'
    f = D.parse_count(T, HttpResponse(status=200, headers={}, body=body))
    assert isinstance(f, Failure)
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR


# ------------------------------------------------------------------ count_exactly


async def test_a_200_from_the_fake_provider_gives_the_number() -> None:
    p = FakeProvider("gem", "gemini")
    t = p.target()
    request = Request.simple("y" * 399, system="z" * 41, max_tokens=50)  # wrapped: system + config
    assert await count_exactly(t, request, FakeNetwork(p), timeout=1.0) == 110
    (call,) = p.calls
    assert call.path == f"/v1beta/models/{p.model}:countTokens"
    assert call.json is not None and set(call.json) == {"generateContentRequest"}
    assert call.scripted is False


async def test_plain_contents_from_the_fake_provider() -> None:
    p = FakeProvider("gem", "gemini")
    assert await count_exactly(p.target(), Request.simple("q" * 8), FakeNetwork(p), timeout=1.0) == 2


@pytest.mark.looptime
async def test_a_timeout_gives_none_at_the_timeout() -> None:
    p = FakeProvider("gem", "gemini", latency=3.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await count_exactly(p.target(), Request.simple("hi"), FakeNetwork(p), timeout=0.2) is None
    assert loop.time() - t0 == pytest.approx(0.2)


async def test_a_500_gives_none() -> None:
    net = Canned(500, {"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}})
    assert await count_exactly(T, Request.simple("hi"), net, timeout=1.0) is None
    assert net.requests[0].url == URL


async def test_a_model_that_does_not_exist_gives_none() -> None:
    net = Canned(404, {"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}})
    assert await count_exactly(T, Request.simple("hi"), net, timeout=1.0) is None
