"""Replies with reasoning, in each dialect's own shape, in-process and through the official SDKs.

``Reply.ok(..., reasoning=...)``: OpenAI ``reasoning_content`` (DeepSeek's shape), Anthropic
``thinking`` blocks with a signature (and a ``redacted_thinking`` block on request), Gemini
``thought`` parts with a ``thoughtSignature``. The SDK tests read them over FakeServer with
the openai, anthropic and google-genai SDKs, as a user's client would.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from failover.model import Dialect
from failover.testing import FakeNetwork, FakeProvider, FakeServer, Reply

from ._helpers import as_json, parse_sse, request, send, sse_data

pytestmark = pytest.mark.looptime

OA, AN, GE = Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI
THOUGHT = "The user wants Paris. I should call the weather tool."
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "Europe/Paris"})]
USER: Any = [{"role": "user", "content": "What is the weather in Paris?"}]


async def stream_body(p: FakeProvider) -> bytes:
    req = request(p, stream=True)
    resp = await FakeNetwork(p).send(req, connect_timeout=1, total_timeout=60)
    assert resp.status == 200
    return resp.body


def b64(text: str) -> bool:
    """A non-empty base64 token, as real signatures are."""
    try:
        return bool(base64.b64decode(text, validate=True))
    except ValueError:
        return False


# -- in-process: the wire shapes -------------------------------------------------------------------


async def test_openai_reasoning_content_deltas_come_before_the_answer() -> None:
    p = FakeProvider("p", OA, [Reply.ok("Sunny.", reasoning=THOUGHT)])
    events, _ = parse_sse(await stream_body(p))
    deltas = [json.loads(e.data)["choices"][0]["delta"] for e in events if e.data != "[DONE]"]
    reasoning = [d for d in deltas if d.get("reasoning_content")]
    assert "".join(d["reasoning_content"] for d in reasoning) == THOUGHT
    assert all(d["content"] is None for d in reasoning)  # DeepSeek sends a null content beside it
    first_text = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert max(deltas.index(d) for d in reasoning) < first_text
    assert "".join(d.get("content") or "" for d in deltas) == "Sunny."


async def test_openai_plain_body_carries_reasoning_content_and_reasoning_tokens() -> None:
    p = FakeProvider("p", OA, [Reply.ok("Sunny.", reasoning=THOUGHT, usage=(10, 30))])
    body = as_json(await send(p))
    message = body["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("Sunny.", THOUGHT)
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 14  # 54 characters / 4
    plain = as_json(await send(FakeProvider("q", OA, [Reply.ok("Sunny.")])))
    assert "reasoning_content" not in plain["choices"][0]["message"]
    assert plain["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


async def test_anthropic_thinking_block_streams_its_text_then_its_signature() -> None:
    p = FakeProvider("p", AN, [Reply.ok("Sunny.", reasoning=THOUGHT, redacted_thinking=True)])
    events, _ = parse_sse(await stream_body(p))
    data = [json.loads(e.data) for e in events if e.event != "ping"]
    starts = [d["content_block"] for d in data if d["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "redacted_thinking", "text"]
    assert starts[0] == {"type": "thinking", "thinking": "", "signature": ""}
    block0 = [d["delta"] for d in data if d["type"] == "content_block_delta" and d["index"] == 0]
    assert [d["type"] for d in block0[:-1]] == ["thinking_delta"] * (len(block0) - 1)
    assert "".join(d["thinking"] for d in block0[:-1]) == THOUGHT
    assert block0[-1]["type"] == "signature_delta" and b64(block0[-1]["signature"])
    assert not [d for d in data if d["type"] == "content_block_delta" and d["index"] == 1]  # redacted: whole
    assert b64(starts[1]["data"]) and starts[1]["data"] != block0[-1]["signature"]
    assert [e.event for e in events][:3] == ["message_start", "content_block_start", "ping"]


async def test_anthropic_plain_body_has_thinking_blocks_first() -> None:
    p = FakeProvider("p", AN, [Reply.ok("Sunny.", reasoning=THOUGHT, redacted_thinking=True, tool_calls=CALLS[:1])])
    content = as_json(await send(p))["content"]
    assert [b["type"] for b in content] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert content[0]["thinking"] == THOUGHT and b64(content[0]["signature"])
    without = as_json(await send(FakeProvider("q", AN, [Reply.ok("Sunny.", redacted_thinking=False)])))
    assert [b["type"] for b in without["content"]] == ["text"]


@pytest.mark.parametrize("calls", [CALLS, []], ids=["tool calls", "text only"])
async def test_gemini_thought_parts_and_the_signature_on_the_first_call_or_last_text(calls: list[Any]) -> None:
    p = FakeProvider("p", GE, [Reply.ok("It is sunny.", reasoning=THOUGHT, tool_calls=calls)])
    chunks = sse_data(await send(p, stream=True))
    parts = [part for c in chunks for part in c["candidates"][0]["content"]["parts"]]
    thoughts = [part for part in parts if part.get("thought")]
    assert "".join(part["text"] for part in thoughts) == THOUGHT
    assert parts[: len(thoughts)] == thoughts  # the thoughts come first
    signed = [i for i, part in enumerate(parts) if "thoughtSignature" in part]
    assert len(signed) == 1 and b64(parts[signed[0]]["thoughtSignature"])
    if calls:
        assert parts[signed[0]]["functionCall"]["name"] == "get_weather"
    else:
        assert signed[0] == len(parts) - 1 and parts[-1]["text"] == "sunny."
    usage = chunks[-1]["usageMetadata"]
    assert usage["thoughtsTokenCount"] == 14
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] + 14


async def test_gemini_plain_body_puts_the_thought_first() -> None:
    p = FakeProvider("p", GE, [Reply.ok("It is sunny.", reasoning=THOUGHT)])
    parts = as_json(await send(p))["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": THOUGHT, "thought": True}
    assert parts[1]["text"] == "It is sunny." and b64(parts[1]["thoughtSignature"])


@pytest.mark.parametrize("dialect", [OA, AN, GE])
async def test_reasoning_goes_with_the_stream_faults_and_truncation(dialect: Dialect) -> None:
    p = FakeProvider("p", dialect, [Reply.stall_after(50, 1, reasoning=THOUGHT), Reply.truncate(reasoning=THOUGHT)])
    stalled = (await stream_body(p)).decode()
    truncated = json.dumps(as_json(await send(p)))
    for shown in (stalled, truncated):
        assert "thought" in shown or "reasoning_content" in shown or "thinking" in shown
        assert "weather" in shown and "tool." in shown  # words of THOUGHT


@pytest.mark.parametrize(
    "spec",
    [
        "ok('hi', reasoning='thinking first')",
        "ok(reasoning='x', redacted_thinking=True, tool_calls=[('a', {})], interleave=True)",
        "stall_after(2, 5, reasoning='slow thoughts')",
        "truncate('cut', reasoning='long thoughts', redacted_thinking=True)",
    ],
)
def test_the_string_form_round_trips(spec: str) -> None:
    reply = Reply.parse(spec)
    assert reply.reasoning is not None or reply.redacted_thinking
    assert Reply.parse(reply.to_string()) == reply
    assert repr(reply) == f"Reply.{reply.to_string()}"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("ok(reasoning=3)", "Reply.reasoning must be a string"),
        ("ok(interleave='yes')", "Reply.interleave must be True or False"),
        ("ok(redacted_thinking=1)", "Reply.redacted_thinking must be True or False"),
    ],
)
def test_bad_options_are_named(spec: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Reply.parse(spec)


# -- through the official SDKs over loopback -------------------------------------------------------


@pytest.fixture
async def server() -> Any:
    providers = {d: FakeProvider(d.value, d) for d in (OA, AN, GE)}
    async with FakeServer(*providers.values()) as srv:
        yield srv, providers


async def test_openai_sdk_accumulates_reasoning_content(server: Any) -> None:
    srv, fakes = server
    fakes[OA].load([Reply.ok("Sunny.", reasoning=THOUGHT, split_bytes=5), Reply.ok("Sunny.", reasoning=THOUGHT)])
    async with openai.AsyncOpenAI(base_url=srv.base_url_for(fakes[OA]), api_key="sk-test", max_retries=0) as client:
        async with client.chat.completions.stream(model="deepseek-reasoner", messages=USER) as stream:
            final = await stream.get_final_completion()
        plain = await client.chat.completions.create(model="deepseek-reasoner", messages=USER)
    for message in (final.choices[0].message, plain.choices[0].message):
        assert message.content == "Sunny."
        assert getattr(message, "reasoning_content", None) == THOUGHT  # an extra field the SDK keeps
    assert plain.usage is not None and plain.usage.completion_tokens_details is not None
    assert plain.usage.completion_tokens_details.reasoning_tokens == 14


async def test_anthropic_sdk_rebuilds_thinking_and_redacted_blocks(server: Any) -> None:
    srv, fakes = server
    reply = Reply.ok("Sunny.", reasoning=THOUGHT, redacted_thinking=True, tool_calls=CALLS, split_bytes=9)
    fakes[AN].load([reply])
    async with (
        anthropic.AsyncAnthropic(base_url=srv.base_url_for(fakes[AN]), api_key="k", max_retries=0) as client,
        client.messages.stream(model="claude-sonnet-4-5", max_tokens=256, messages=USER) as stream,
    ):
        thinking = "".join([e.thinking async for e in stream if e.type == "thinking"])
        final = await stream.get_final_message()
    assert thinking == THOUGHT
    blocks = final.content
    assert [b.type for b in blocks] == ["thinking", "redacted_thinking", "text", "tool_use", "tool_use"]
    assert blocks[0].type == "thinking" and blocks[0].thinking == THOUGHT and b64(blocks[0].signature)
    assert blocks[1].type == "redacted_thinking" and b64(blocks[1].data)
    assert [(b.name, b.input) for b in blocks if b.type == "tool_use"] == CALLS
    assert final.stop_reason == "tool_use"


async def test_google_genai_sdk_reads_thought_parts_and_the_signature(server: Any) -> None:
    srv, fakes = server
    fakes[GE].load([Reply.ok("It is sunny.", reasoning=THOUGHT, tool_calls=CALLS, split_bytes=6)])
    client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=srv.base_url_for(fakes[GE])))
    parts: list[genai_types.Part] = []
    async for chunk in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
        assert chunk.candidates and chunk.candidates[0].content and chunk.candidates[0].content.parts
        parts.extend(chunk.candidates[0].content.parts)
    assert "".join(p.text or "" for p in parts if p.thought) == THOUGHT
    assert "".join(p.text or "" for p in parts if not p.thought) == "It is sunny."
    calls = [p for p in parts if p.function_call]
    assert [(p.function_call.name, p.function_call.args) for p in calls if p.function_call] == CALLS
    assert calls[0].thought_signature and calls[0].thought_signature.startswith(b"failover-fake-thinking")
    assert [p for p in parts if p.thought_signature] == calls[:1]
