"""Reasoning through the gateway and the in-process SDK drop-in, read by the official openai and
anthropic SDKs at their default settings: what each SDK assembles equals the answer failover
records, a client's history comes back with the right source and is stripped per target, live
reasoning is a header away, and a dialect whose answer changed under the stream ends it loudly.

The upstream is scripted (tests/_scripted.py): each attempt streams the failover events a test
gives, so the events reasoning dialects emit can be driven before their parsers exist.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import openai
import pytest

import failover
from failover import Route, RouteRecord
from failover.gateway import GatewaySettings, create_app
from failover.inbound.anthropic import client_signature
from failover.integrations import last_record
from failover.model import (
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
)
from tests._scripted import CUT, Answer, Upstream, scripted_router, scripted_target

from ._kit import ServerThread

pytestmark = pytest.mark.e2e

HELLO: Any = [{"role": "user", "content": "What is 2+2?"}]
CLAUDE = scripted_target("claude", "anthropic")
GEM = scripted_target("gem", "gemini")
DS = scripted_target("ds", "openai", model="deepseek-reasoner")
ROUTES = [
    Route(name="think", primary=(CLAUDE,), fallbacks=(GEM,)),
    Route(name="deep", primary=(DS,)),
]
WEATHER: Any = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
WEATHER_ANTHROPIC: Any = {"name": "get_weather", "input_schema": {"type": "object"}}


def thought(text: str, target: failover.Target, signature: str | None = None) -> Reasoning:
    """A reasoning block as the target's dialect parser records it (its format, its origin)."""
    source = target.dialect.value
    sig = signature if signature is not None else (None if source == "openai" else f"sig-{len(text)}")
    return Reasoning(text=text, signature=sig, source=source, origin=target.key)


def streamed(resp: Response, *, pieces: int = 3) -> list[StreamEvent]:
    """``resp`` as a dialect streams it: each block's text in pieces then done, text, calls."""
    events: list[StreamEvent] = []
    for i, block in enumerate(resp.reasoning):
        step = max(1, len(block.text) // pieces)
        events += [ReasoningDelta(index=i, text=block.text[j : j + step]) for j in range(0, len(block.text), step)]
        events.append(ReasoningDone(index=i, block=block))
    if resp.text:
        events.append(TextDelta(text=resp.text))
    for i, call in enumerate(resp.tool_calls):
        events.append(ToolCallStart(index=i, id=call.id, name=call.name))
        events.append(ToolCallDelta(index=i, arguments=call.arguments))
        events.append(ToolCallDone(index=i, call=call))
    return events


UPSTREAM = Upstream()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    app = create_app(scripted_router(UPSTREAM, ROUTES), GatewaySettings())  # open: no tenant keys
    with ServerThread(app) as srv:
        yield srv


class Clients:
    """The two official SDK clients of one kind: over the gateway, or in-process (the drop-in)."""

    def __init__(self, kind: str, base_url: str | None) -> None:
        self.kind = kind
        if base_url is not None:
            self.openai = openai.AsyncOpenAI(base_url=base_url, api_key="gw-key")
            self.anthropic = anthropic.AsyncAnthropic(base_url=base_url.removesuffix("/v1"), api_key="gw-key")
        else:
            router = scripted_router(UPSTREAM, ROUTES)
            self.openai = openai.AsyncOpenAI(api_key="unused", http_client=failover.httpx_client(router))
            self.anthropic = anthropic.AsyncAnthropic(api_key="unused", http_client=failover.httpx_client(router))

    def record(self) -> RouteRecord | None:
        """The RouteRecord of the last call (the drop-in keeps it; the gateway sends a summary)."""
        return last_record() if self.kind == "drop-in" else None


@pytest.fixture(params=["gateway", "drop-in"])
async def clients(request: pytest.FixtureRequest) -> AsyncIterator[Clients]:
    base = request.getfixturevalue("server").base_url if request.param == "gateway" else None
    c = Clients(request.param, base)
    yield c
    await c.openai.close()
    await c.anthropic.close()


ANSWER = Response(
    text="4",
    reasoning=(thought("Two plus two ", DS), thought("is four.", DS)),
    tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"}),),
    stop_reason=StopReason.TOOL_USE,
    usage=Usage(input_tokens=12, output_tokens=30, reasoning_tokens=20),
)


async def test_openai_sdk_reads_reasoning_content_plain_and_streamed(clients: Clients) -> None:
    UPSTREAM.load("ds", Answer(streamed(ANSWER), ANSWER))
    plain = await clients.openai.chat.completions.create(model="deep", messages=HELLO, tools=[WEATHER])
    message = plain.choices[0].message
    assert message.reasoning_content == ANSWER.reasoning_text  # type: ignore[attr-defined]  # an extra field
    assert message.content == "4"
    async with clients.openai.chat.completions.stream(model="deep", messages=HELLO, tools=[WEATHER]) as s:
        deltas = [e.chunk.choices[0].delta for e in [x async for x in s] if e.type == "chunk" and e.chunk.choices]
        final = await s.get_final_completion()
    # the SDK keeps an unknown field as an extra, on each delta and on the message it assembles
    assert (
        "".join(d.model_extra.get("reasoning_content", "") for d in deltas if d.model_extra) == "Two plus two is four."
    )
    got = final.choices[0]
    assert (got.message.content, got.message.model_extra, got.finish_reason) == (
        "4",
        {"reasoning_content": ANSWER.reasoning_text},
        "tool_calls",
    )
    calls = [(c.id, c.function.name, c.function.arguments) for c in got.message.tool_calls or []]
    assert calls == [(c.id, c.name, c.arguments) for c in ANSWER.tool_calls]


async def test_anthropic_sdk_assembles_thinking_blocks_from_the_stream(clients: Clients) -> None:
    signed = thought("Let me add them.", CLAUDE)
    redacted = Reasoning(redacted="REDACTED-DATA", source="anthropic", origin=CLAUDE.key)
    answer = Response(text="4", reasoning=(signed, redacted), stop_reason=StopReason.END_TURN)
    UPSTREAM.load("claude", Answer(streamed(answer), answer))
    async with clients.anthropic.messages.stream(model="think", max_tokens=2048, messages=HELLO) as s:
        final = await s.get_final_message()
    blocks = [b.to_dict() for b in final.content]
    assert blocks == [
        {"type": "thinking", "thinking": "Let me add them.", "signature": "sig-16"},
        {"type": "redacted_thinking", "data": "REDACTED-DATA"},
        {"type": "text", "text": "4"},
    ]
    plain = await clients.anthropic.messages.create(model="think", max_tokens=2048, messages=HELLO)
    assert [b.to_dict() for b in plain.content] == blocks


async def test_a_fallbacks_thinking_carries_a_failover_signature_and_its_history_goes_back_to_it_only(
    clients: Clients,
) -> None:
    """A Gemini fallback's thought reaches an Anthropic client as a thinking block with a signature
    failover issued; sent back in the history, it goes to Gemini only, the Anthropic block to
    Claude only, and the record counts what each attempt left out."""
    gem_thought = thought("Gemini thinks.", GEM, signature="gemini-thought-signature")
    call = ToolCall(id="call_9", name="get_weather", arguments='{"city":"Rome"}', parsed={"city": "Rome"})
    first = Response(reasoning=(gem_thought,), tool_calls=(call,), stop_reason=StopReason.TOOL_USE)
    UPSTREAM.load("claude", Answer(fail=CUT))
    UPSTREAM.load("gem", Answer(streamed(first), first), Answer(streamed(ANSWER_GEM), ANSWER_GEM))
    tools = [WEATHER_ANTHROPIC]
    async with clients.anthropic.messages.stream(model="think", max_tokens=999, messages=HELLO, tools=tools) as s:
        turn = await s.get_final_message()
    thinking = turn.content[0]
    assert thinking.type == "thinking" and thinking.signature == client_signature(gem_thought)
    claude_block = {"type": "thinking", "thinking": "Claude thought.", "signature": "EqQBreal"}
    history = [
        *HELLO,
        {"role": "assistant", "content": [claude_block, {"type": "text", "text": "Let me check."}]},
        {"role": "user", "content": "And Rome?"},
        {"role": "assistant", "content": [b.to_dict() for b in turn.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_9", "content": "sunny"}]},
    ]
    await clients.anthropic.messages.create(model="think", max_tokens=999, messages=history, tools=tools)
    sent_claude = [m.reasoning for m in UPSTREAM.requests["claude"][-1].messages if m.reasoning]
    sent_gem = [m.reasoning for m in UPSTREAM.requests["gem"][-1].messages if m.reasoning]
    assert sent_claude == [(Reasoning(text="Claude thought.", signature="EqQBreal", source="anthropic"),)]
    assert sent_gem == [(gem_thought,)]  # its own signature, source and origin, read back
    record = clients.record()
    if record is not None:  # each attempt left out the one block its target cannot read
        assert {a.target for a in record.attempts} == {"claude", "gem"}
        assert all(a.reasoning_stripped == 1 for a in record.attempts)


ANSWER_GEM = Response(text="Sunny in Rome.", reasoning=(thought("Good.", GEM),), stop_reason=StopReason.END_TURN)


async def test_openai_history_reasoning_goes_to_openai_targets_only(clients: Clients) -> None:
    UPSTREAM.load("claude", Answer(fail=CUT))
    UPSTREAM.load("gem", Answer(streamed(ANSWER_GEM), ANSWER_GEM))
    history = [*HELLO, {"role": "assistant", "content": "4", "reasoning_content": "I added."}, HELLO[0]]
    await clients.openai.chat.completions.create(model="think", messages=history)
    assert all(not m.reasoning for m in UPSTREAM.requests["claude"][-1].messages)
    assert all(not m.reasoning for m in UPSTREAM.requests["gem"][-1].messages)
    UPSTREAM.load("ds", Answer(streamed(ANSWER_GEM), ANSWER_GEM))
    await clients.openai.chat.completions.create(model="deep", messages=history)
    (kept,) = [m.reasoning for m in UPSTREAM.requests["ds"][-1].messages if m.reasoning]
    assert kept == (Reasoning(text="I added.", source="openai"),)


async def read_reasoning(stream: AsyncIterator[Any], into: list[str]) -> None:
    """Read an openai SDK chat stream to its end, keeping each delta's reasoning_content."""
    async for chunk in stream:
        into += [(c.delta.model_extra or {}).get("reasoning_content", "") for c in chunk.choices]


async def final_completion(client: openai.AsyncOpenAI, **params: Any) -> Any:
    """What the openai SDK's stream helper assembles."""
    async with client.chat.completions.stream(**params) as s:
        return await s.get_final_completion()


async def final_message(client: anthropic.AsyncAnthropic, **params: Any) -> anthropic.types.Message:
    """What the anthropic SDK's stream helper assembles."""
    async with client.messages.stream(**params) as s:
        return await s.get_final_message()


THINKING_THEN_CUT = Answer(
    [ReasoningDelta(index=0, text="Hmm, let me"), ReasoningDelta(index=0, text=" think...")], fail=CUT
)


async def test_reasoning_waits_for_the_answer_unless_the_client_asks_for_it_live(clients: Clients) -> None:
    recovered = Response(text="4", reasoning=(thought("Four.", DS),))
    UPSTREAM.load("ds", THINKING_THEN_CUT, Answer(streamed(recovered), recovered))
    async with clients.openai.chat.completions.stream(model="deep", messages=HELLO) as s:
        final = await s.get_final_completion()
    # the failure while thinking was retried: the client never saw the abandoned thoughts
    assert final.choices[0].message.model_extra == {"reasoning_content": "Four."}
    assert final.choices[0].message.content == "4"

    UPSTREAM.load("ds", THINKING_THEN_CUT, Answer(streamed(recovered), recovered))
    seen: list[str] = []
    headers = {"x-failover-live-reasoning": "true", "x-failover-hold-tokens": "0"}
    stream = await clients.openai.chat.completions.create(
        model="deep", messages=HELLO, stream=True, extra_headers=headers
    )
    with pytest.raises(openai.APIError) as err:
        await read_reasoning(stream, seen)
    assert "".join(seen) == "Hmm, let me think..."  # shown live, so the cut could not be retried
    assert "partial_output" in str(err.value)


async def test_a_live_reasoning_header_that_is_not_a_boolean_is_a_400_naming_it(clients: Clients) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        await clients.anthropic.messages.create(
            model="think",
            max_tokens=99,
            messages=HELLO,
            stream=True,
            extra_headers={"x-failover-live-reasoning": "sometimes"},
        )
    assert "x-failover-live-reasoning" in str(err.value)


async def test_a_call_that_changed_under_the_stream_ends_it_with_an_error_not_another_answer(clients: Clients) -> None:
    """The issue's frozen call: the dialect finished call 0 with arguments that do not extend the
    fragments the client was sent. Both SDKs get an error, never the other arguments."""
    frozen = ToolCall(id="call_0", name="get_weather", arguments='{"city": ', parsed=None)
    fine = ToolCall(id="call_0", name="get_weather", arguments='{"city": "Paris"}', parsed={"city": "Paris"})
    events: list[StreamEvent] = [
        ToolCallStart(index=0, id="call_0", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city": "Pa'),
        ToolCallDone(index=0, call=frozen),
    ]
    answer = Response(tool_calls=(fine,), stop_reason=StopReason.TOOL_USE)
    UPSTREAM.load("ds", Answer(events, answer))
    with pytest.raises(openai.APIError) as err:
        await final_completion(clients.openai, model="deep", messages=HELLO, tools=[WEATHER])
    assert "stream_mismatch" in str(err.value)
    UPSTREAM.load("claude", Answer(events, answer))
    params = {"model": "think", "max_tokens": 99, "messages": HELLO, "tools": [WEATHER_ANTHROPIC]}
    with pytest.raises(anthropic.APIStatusError) as aerr:
        await final_message(clients.anthropic, **params)
    assert "stream_mismatch" in str(aerr.value)
