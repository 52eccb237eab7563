"""Reasoning in the framework adapters, each read by the framework's own machinery: the OpenAI
Agents SDK's Runner (its Chat Completions converter and stream handler), pydantic-ai's Agent (its
parts manager) and LangChain's messages (chunks added up). Each must end with the answer failover
records, and a tool loop must give the model its own signed thinking back on the next turn.

The upstream is scripted (tests/_scripted.py): a Claude target answers with a signed thinking
block and a redacted one, then a tool call; the next turn answers in text.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner, function_tool
from agents.exceptions import ModelBehaviorError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from openai.types.responses import ResponseReasoningItem
from pydantic_ai import Agent as PaiAgent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ThinkingPart, ToolCallPart, UserPromptPart

from failover import Route
from failover.integrations import agents as agents_adapter
from failover.integrations.langchain import FailoverChatModel
from failover.integrations.pydantic_ai import FailoverModel as PaiModel
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
)
from tests._scripted import Answer, Upstream, scripted_router, scripted_target

CLAUDE = scripted_target("claude", "anthropic")
SIGNED = Reasoning(text="The user wants Rome's weather.", signature="EqQBsig==", source="anthropic", origin=CLAUDE.key)
REDACTED = Reasoning(redacted="REDACTED==", source="anthropic", origin=CLAUDE.key)
CALL = ToolCall(id="toolu_1", name="get_weather", arguments='{"city":"Rome"}', parsed={"city": "Rome"})
FIRST = Response(reasoning=(SIGNED, REDACTED), tool_calls=(CALL,), stop_reason=StopReason.TOOL_USE)
SECOND = Response(
    text="Sunny in Rome.",
    reasoning=(Reasoning(text="Done.", signature="EqQBdone==", source="anthropic", origin=CLAUDE.key),),
    stop_reason=StopReason.END_TURN,
)


def streamed(resp: Response) -> list[StreamEvent]:
    """``resp`` as a dialect streams it: each block's text in two pieces, the call in two fragments."""
    events: list[StreamEvent] = []
    for i, b in enumerate(resp.reasoning):
        half = len(b.text) // 2
        events += [ReasoningDelta(index=i, text=p) for p in (b.text[:half], b.text[half:]) if p]
        events.append(ReasoningDone(index=i, block=b))
    if resp.text:
        events.append(TextDelta(text=resp.text))
    for i, c in enumerate(resp.tool_calls):
        events += [ToolCallStart(index=i, id=c.id, name=c.name), ToolCallDelta(index=i, arguments=c.arguments[:5])]
        events += [ToolCallDelta(index=i, arguments=c.arguments[5:]), ToolCallDone(index=i, call=c)]
    return events


def upstream(*answers: Response) -> Upstream:
    up = Upstream()
    up.load("claude", *(Answer(streamed(a), a) for a in answers))
    return up


GEM = scripted_target("gem", "gemini")
DS = scripted_target("ds", "openai")


def router(up: Upstream) -> Any:
    """Route r: Claude; g: a Gemini model; d: a Chat Completions model."""
    routes = [Route(name="r", primary=(CLAUDE,)), Route(name="g", primary=(GEM,)), Route(name="d", primary=(DS,))]
    return scripted_router(up, routes)


def kept(up: Upstream, target: str) -> list[tuple[Reasoning, ...]]:
    """The reasoning of each assistant message in the last request ``target`` was sent."""
    return [m.reasoning for m in up.requests[target][-1].messages if m.role == "assistant"]


def sent_back(up: Upstream) -> list[tuple[Reasoning, ...]]:
    """The reasoning of each assistant message the second request carried to Claude."""
    return [m.reasoning for m in up.requests["claude"][1].messages if m.role == "assistant"]


def _data(text: str, signature: str | None, redacted: str | None) -> dict[str, Any]:
    """A block as the adapters keep it on a framework's message."""
    return {"text": text, "signature": signature, "redacted": redacted, "source": "anthropic", "origin": CLAUDE.key}


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


# -- OpenAI Agents SDK ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_agents_reasoning_items_and_claudes_thinking_back_in_the_tool_loop(stream: bool) -> None:
    up = upstream(FIRST, SECOND)
    agent = AgentsAgent(name="w", model=agents_adapter.FailoverModel(router(up), "r"), tools=[get_weather])
    config = RunConfig(tracing_disabled=True)
    summaries: list[str] = []
    if stream:
        run = Runner.run_streamed(agent, "Weather in Rome?", run_config=config)
        async for e in run.stream_events():
            if e.type == "raw_response_event" and e.data.type == "response.reasoning_summary_text.delta":
                summaries.append(e.data.delta)
        output, raw = run.final_output, run.raw_responses
    else:
        result = await Runner.run(agent, "Weather in Rome?", run_config=config)
        output, raw = result.final_output, result.raw_responses
    assert output == "Sunny in Rome."
    (item,) = [i for i in raw[0].output if isinstance(i, ResponseReasoningItem)]
    assert [s.text for s in item.summary] == [SIGNED.text]  # the SDK's own reading of reasoning_content
    assert item.provider_data["failover_reasoning"] == [  # type: ignore[attr-defined]
        _data(SIGNED.text, "EqQBsig==", None),
        _data("", None, "REDACTED=="),
    ]
    if stream:
        assert "".join(summaries) == SIGNED.text + "Done."
    assert sent_back(up) == [(SIGNED, REDACTED)]  # exactly as Claude wrote them: its tool loop goes on


async def test_agents_stream_whose_call_changed_under_it_is_a_model_behavior_error() -> None:
    frozen = ToolCall(id="toolu_1", name="get_weather", arguments='{"ci', parsed=None)
    events: list[StreamEvent] = [
        ToolCallStart(index=0, id="toolu_1", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city"'),
        ToolCallDone(index=0, call=frozen),
    ]
    up = Upstream()
    up.load("claude", Answer(events, FIRST))
    agent = AgentsAgent(name="w", model=agents_adapter.FailoverModel(router(up), "r"), tools=[get_weather])
    run = Runner.run_streamed(agent, "Weather in Rome?", run_config=RunConfig(tracing_disabled=True))
    with pytest.raises(ModelBehaviorError, match="differ from the fragments"):
        async for _ in run.stream_events():
            pass


# -- pydantic-ai ---------------------------------------------------------------------------------------


def _pai_agent(up: Upstream) -> PaiAgent[None, str]:
    agent: PaiAgent[None, str] = PaiAgent(PaiModel(router(up), "r"))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


THINKING = [
    ThinkingPart(
        SIGNED.text,
        signature="EqQBsig==",
        provider_name="failover",
        provider_details={"source": "anthropic", "origin": CLAUDE.key},
    ),
    ThinkingPart(
        "",
        id="redacted_thinking",
        signature="REDACTED==",
        provider_name="failover",
        provider_details={"source": "anthropic", "origin": CLAUDE.key},
    ),
]


@pytest.mark.parametrize("stream", [False, True])
async def test_pydantic_ai_thinking_parts_and_claudes_thinking_back_in_the_tool_loop(stream: bool) -> None:
    up = upstream(FIRST, SECOND)
    agent = _pai_agent(up)
    if stream:
        async with agent.run_stream("Weather in Rome?") as run:
            assert await run.get_output() == "Sunny in Rome."
        messages = run.all_messages()
    else:
        result = await agent.run("Weather in Rome?")
        assert result.output == "Sunny in Rome."
        messages = result.all_messages()
    first = next(m for m in messages if isinstance(m, ModelResponse))
    thinking = [p for p in first.parts if isinstance(p, ThinkingPart)]
    keep = ("content", "id", "signature", "provider_name", "provider_details")
    assert [[getattr(p, k) for k in keep] for p in thinking] == [[getattr(p, k) for k in keep] for p in THINKING]
    (call,) = [p for p in first.parts if isinstance(p, ToolCallPart)]
    assert (call.tool_name, call.args_as_dict(), call.tool_call_id) == ("get_weather", {"city": "Rome"}, "toolu_1")
    assert sent_back(up) == [(SIGNED, REDACTED)]


async def test_pydantic_ai_history_from_other_models_keeps_its_format() -> None:
    """Thinking parts of other pydantic-ai models keep their format, so each target gets its own."""
    up = upstream(SECOND)
    up.load("gem", Answer(streamed(SECOND), SECOND))
    up.load("ds", Answer(streamed(SECOND), SECOND))
    history = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(
            parts=[
                ThinkingPart("claude's own", signature="EqQBx", provider_name="anthropic"),
                ThinkingPart("", id="redacted_thinking", signature="DATA", provider_name="anthropic"),
                ThinkingPart("gemini's", signature="g-sig", provider_name="google-gla"),
                ThinkingPart("a chat model's"),
                TextPart("Hello."),
            ]
        ),
    ]
    results = {}
    for route in ("r", "g", "d"):
        agent: PaiAgent[None, str] = PaiAgent(PaiModel(router(up), route))
        results[route] = await agent.run("And now?", message_history=history)
    assert kept(up, "claude") == [
        (
            Reasoning(text="claude's own", signature="EqQBx", source="anthropic"),
            Reasoning(redacted="DATA", source="anthropic"),
        )
    ]
    assert kept(up, "gem") == [(Reasoning(text="gemini's", signature="g-sig", source="gemini"),)]
    assert kept(up, "ds") == [(Reasoning(text="a chat model's", source="openai"),)]
    last = results["r"].all_messages()[-1]
    assert isinstance(last, ModelResponse) and last.provider_details is not None
    assert [a["reasoning_stripped"] for a in last.provider_details["failover"]["attempts"]] == [2]


async def test_pydantic_ai_stream_whose_call_changed_under_it_is_unexpected_behavior() -> None:
    up = Upstream()
    frozen = ToolCall(id="toolu_1", name="get_weather", arguments="{", parsed=None)
    events: list[StreamEvent] = [ToolCallStart(index=0, id="toolu_1", name="get_weather")]
    events += [ToolCallDelta(index=0, arguments='{"c'), ToolCallDone(index=0, call=frozen)]
    up.load("claude", Answer(events, FIRST))
    with pytest.raises(UnexpectedModelBehavior, match="differ from the fragments"):
        async with _pai_agent(up).run_stream("Weather in Rome?") as run:
            await run.get_output()


# -- LangChain -----------------------------------------------------------------------------------------

TOOL: Any = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


async def test_langchain_reasoning_in_additional_kwargs_chunks_add_up_and_go_back() -> None:
    up = upstream(FIRST, SECOND)
    model = FailoverChatModel(router=router(up), route="r").bind_tools([TOOL])
    msg = await model.ainvoke("Weather in Rome?")
    assert isinstance(msg, AIMessage)
    assert msg.additional_kwargs == {
        "reasoning_content": SIGNED.text,
        "failover_reasoning": [
            {
                "text": SIGNED.text,
                "signature": "EqQBsig==",
                "redacted": None,
                "source": "anthropic",
                "origin": CLAUDE.key,
            },
            {"text": "", "signature": None, "redacted": "REDACTED==", "source": "anthropic", "origin": CLAUDE.key},
        ],
    }
    assert msg.content_blocks[0] == {"type": "reasoning", "reasoning": SIGNED.text}  # LangChain's standard block
    up.load("claude", Answer(streamed(FIRST), FIRST), Answer(streamed(SECOND), SECOND))
    chunks = [c async for c in model.astream("Weather in Rome?")]
    whole = chunks[0]
    for c in chunks[1:]:
        whole = whole + c
    assert whole.additional_kwargs == msg.additional_kwargs
    assert [(c["name"], c["args"], c["id"]) for c in whole.tool_calls] == [("get_weather", {"city": "Rome"}, "toolu_1")]
    history = [HumanMessage("Weather in Rome?"), msg, ToolMessage("sunny", tool_call_id="toolu_1")]
    await FailoverChatModel(router=router(up), route="r").ainvoke(history)
    assert sent_back(up) == [(SIGNED, REDACTED)]


async def test_langchain_reasoning_content_of_another_model_goes_back_as_text() -> None:
    up = Upstream()
    up.load("ds", Answer(streamed(SECOND), SECOND))
    up.load("claude", Answer(streamed(SECOND), SECOND))
    other = AIMessage("Hello.", additional_kwargs={"reasoning_content": "a chat model's"})
    history = [HumanMessage("hi"), other, HumanMessage("and?")]
    await FailoverChatModel(router=router(up), route="d").ainvoke(history)
    assert kept(up, "ds") == [(Reasoning(text="a chat model's", source="openai"),)]
    answer = await FailoverChatModel(router=router(up), route="r").ainvoke(history)
    assert kept(up, "claude") == [()]  # Claude cannot read it: left out, and the record says so
    assert [a["reasoning_stripped"] for a in answer.response_metadata["failover"]["attempts"]] == [1]
