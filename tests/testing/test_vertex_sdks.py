"""The official Vertex clients, at their default settings, parse the fault kit's Vertex answers:
google-genai with ``vertexai=True`` and anthropic's ``AsyncAnthropicVertex``, pointed at the
loopback fake, streams and errors included. What they send is what the fake checks: the
model in the path, Claude's body without ``model`` and with ``anthropic_version``, a bearer
token and no API key."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import google.oauth2.credentials
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from failover.testing import FakeProvider, FakeServer, Reply

pytestmark = [pytest.mark.e2e, pytest.mark.looptime]

TOKEN = "ya29.static-test-token"
USER: Any = [{"role": "user", "content": "What is the weather in Paris?"}]
CLAUDE = "claude-haiku-4-5@20251001"


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeServer, FakeProvider, FakeProvider]]:
    g = FakeProvider("g", "gemini", api_key=TOKEN, model="gemini-2.5-flash-001")
    c = FakeProvider("c", "anthropic", api_key=TOKEN)
    async with FakeServer(g, c) as srv:
        yield srv, g, c


def gemini_client(srv: FakeServer, g: FakeProvider, token: str = TOKEN) -> genai.Client:
    return genai.Client(
        vertexai=True,
        project="my-project",
        location="us-central1",
        credentials=google.oauth2.credentials.Credentials(token=token),
        http_options=genai_types.HttpOptions(base_url=srv.url_for(g)),
    )


def claude_client(srv: FakeServer, c: FakeProvider, token: str = TOKEN) -> anthropic.AsyncAnthropicVertex:
    return anthropic.AsyncAnthropicVertex(
        project_id="my-project", region="us-east5", access_token=token, base_url=f"{srv.url_for(c)}/v1"
    )


async def test_google_genai_on_vertex_reads_an_answer_and_a_tool_call(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, g, _ = fakes
    g.load([Reply.ok("It is sunny.", usage=(11, 4)), Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])])
    client = gemini_client(srv, g)
    done = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="Weather in Paris?")
    assert done.text == "It is sunny." and done.model_version == "gemini-2.5-flash-001"
    assert done.usage_metadata is not None and done.usage_metadata.prompt_token_count == 11
    called = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="Weather in Paris?")
    assert called.function_calls is not None
    assert [(f.name, f.args) for f in called.function_calls] == [("get_weather", {"city": "Paris"})]
    first = g.calls[0]
    assert first.path.endswith(
        "/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
    )
    assert first.model == "gemini-2.5-flash" and first.headers["authorization"] == "***"
    assert "x-goog-api-key" not in first.headers


async def test_google_genai_on_vertex_streams(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, g, _ = fakes
    g.load(["ok('streamed from vertex')"])
    client = gemini_client(srv, g)
    text = [
        c.text or ""
        async for c in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
    ]
    assert "".join(text) == "streamed from vertex" and len(text) > 1
    assert g.calls[0].path.endswith(":streamGenerateContent") and g.calls[0].query == "alt=sse"


async def test_google_genai_on_vertex_counts(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, g, _ = fakes
    counted = await gemini_client(srv, g).aio.models.count_tokens(model="gemini-2.5-flash", contents="x" * 400)
    assert counted.total_tokens == 100
    assert g.calls[0].path.endswith("publishers/google/models/gemini-2.5-flash:countTokens")


@pytest.mark.parametrize(
    ("reply", "code", "status"),
    [
        (Reply.rate_limit(retry_after=3), 429, "RESOURCE_EXHAUSTED"),
        (Reply.quota(), 403, "PERMISSION_DENIED"),
        (Reply.not_found(), 404, "NOT_FOUND"),
        (Reply.overloaded(), 503, "UNAVAILABLE"),
    ],
)
async def test_google_genai_on_vertex_raises_googles_errors(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider], reply: Reply, code: int, status: str
) -> None:
    srv, g, _ = fakes
    g.load([reply])
    with pytest.raises(genai_errors.APIError) as info:
        await gemini_client(srv, g).aio.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert (info.value.code, info.value.status) == (code, status)


async def test_google_genai_with_a_wrong_token_gets_unauthenticated(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, g, _ = fakes
    with pytest.raises(genai_errors.ClientError) as info:
        await gemini_client(srv, g, token="ya29.wrong").aio.models.generate_content(
            model="gemini-2.5-flash", contents="hi"
        )
    assert (info.value.code, info.value.status) == (401, "UNAUTHENTICATED")
    assert g.calls[0].scripted is False and g.position == 0  # refused before the script


async def test_anthropic_vertex_reads_an_answer(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, _, c = fakes
    c.load([Reply.ok("It is sunny.", usage=(11, 4))])
    async with claude_client(srv, c) as client:
        done = await client.messages.create(model=CLAUDE, max_tokens=64, messages=USER)
    assert [b.text for b in done.content if b.type == "text"] == ["It is sunny."]
    assert done.model == CLAUDE and done.stop_reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens) == (11, 4)
    call = c.calls[0]
    assert call.path.endswith(
        f"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/{CLAUDE}:rawPredict"
    )
    assert call.json is not None and "model" not in call.json and "anthropic_version" in call.json
    assert call.headers["authorization"] == "***" and "x-api-key" not in call.headers


async def test_anthropic_vertex_streams_text_and_a_tool_call(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, _, c = fakes
    c.load(["ok('streamed from vertex')", Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])])
    tools: Any = [
        {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    ]
    async with claude_client(srv, c) as client:
        async with client.messages.stream(model=CLAUDE, max_tokens=64, messages=USER) as stream:
            text = [t async for t in stream.text_stream]
        assert "".join(text) == "streamed from vertex" and len(text) > 1
        async with client.messages.stream(model=CLAUDE, max_tokens=64, messages=USER, tools=tools) as stream:
            final = await stream.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [("get_weather", {"city": "Paris"})]
    assert final.stop_reason == "tool_use"
    assert all(x.path.endswith(f"{CLAUDE}:streamRawPredict") and x.stream for x in c.calls)


async def test_anthropic_vertex_counts(fakes: tuple[FakeServer, FakeProvider, FakeProvider]) -> None:
    srv, _, c = fakes
    async with claude_client(srv, c) as client:
        counted = await client.messages.count_tokens(model=CLAUDE, messages=[{"role": "user", "content": "x" * 400}])
    assert counted.input_tokens > 0
    call = c.calls[0]
    assert call.path.endswith("publishers/anthropic/models/count-tokens:rawPredict")
    assert call.json is not None and call.json["model"] == CLAUDE


@pytest.mark.parametrize(
    ("reply", "error", "status", "envelope"),
    [
        # Google's front end: the SDK sees Google's envelope in the body
        (Reply.rate_limit(), anthropic.RateLimitError, 429, "google"),
        (Reply.not_found(), anthropic.NotFoundError, 404, "google"),
        # Claude itself: Anthropic's envelope
        (Reply.overloaded(), anthropic.APIStatusError, 529, "anthropic"),
        (Reply.invalid("messages: at least one message is required"), anthropic.BadRequestError, 400, "anthropic"),
    ],
)
async def test_anthropic_vertex_sees_both_envelopes(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider], reply: Reply, error: type, status: int, envelope: str
) -> None:
    srv, _, c = fakes
    c.load([reply] * 3)  # the SDK retries 429 and 529 twice by default
    async with claude_client(srv, c) as client:
        with pytest.raises(error) as info:
            await client.messages.create(model=CLAUDE, max_tokens=64, messages=USER)
    assert info.value.status_code == status
    body = json.loads(info.value.response.content)
    assert ("status" in body["error"]) is (envelope == "google")
    assert (body.get("type") == "error") is (envelope == "anthropic")


async def test_anthropic_vertex_with_a_wrong_token_gets_googles_401(
    fakes: tuple[FakeServer, FakeProvider, FakeProvider],
) -> None:
    srv, _, c = fakes
    async with claude_client(srv, c, token="ya29.wrong") as client:
        with pytest.raises(anthropic.AuthenticationError) as info:
            await client.messages.create(model=CLAUDE, max_tokens=64, messages=USER)
    assert json.loads(info.value.response.content)["error"]["status"] == "UNAUTHENTICATED"
    assert c.position == 0
