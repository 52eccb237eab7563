"""The OpenAI Agents SDK, with its default Responses model, through ``POST /v1/responses`` of ONE
real uvicorn server on loopback: an agent turn with a tool call, plain and streamed, and an
outage of the primary behind the endpoint."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import openai
import pytest
from agents import Agent, OpenAIProvider, RunConfig, Runner, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from openai.types.responses import ResponseFunctionToolCall, ResponseTextDeltaEvent

from failover.testing import Reply

from ._kit import ACME_KEY, Kit, ServerThread

pytestmark = pytest.mark.e2e


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
async def provider(served: tuple[Kit, ServerThread]) -> AsyncIterator[OpenAIProvider]:
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key=ACME_KEY) as client:  # the SDK's defaults
        yield OpenAIProvider(openai_client=client)  # the Agents SDK's default provider: the Responses API


def config(provider: OpenAIProvider) -> RunConfig:
    return RunConfig(model_provider=provider, tracing_disabled=True)


def tool_turn() -> list[Reply]:
    return [Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})]), Reply.ok("It is sunny in Paris.")]


async def test_an_agent_turn_with_a_tool_call(kit: Kit, provider: OpenAIProvider) -> None:
    assert isinstance(provider.get_model("tools"), OpenAIResponsesModel)
    t = kit.providers["t"]
    t.load(tool_turn())
    before = len(t.calls)
    agent = Agent(name="forecaster", instructions="Answer briefly.", model="tools", tools=[get_weather])
    result = await Runner.run(agent, "Weather in Paris?", run_config=config(provider))

    assert result.final_output == "It is sunny in Paris."
    first, second = result.raw_responses
    assert second.output and not [i for i in second.output if isinstance(i, ResponseFunctionToolCall)]
    (call,) = [i for i in first.output if isinstance(i, ResponseFunctionToolCall)]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert first.response_id and first.response_id.startswith("resp_")
    # the second request carried the whole turn: the instructions, the call and the tool's output
    first_sent, second_sent = (c.json for c in t.calls[before:])
    assert first_sent is not None and second_sent is not None
    assert first_sent["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assistant = next(m for m in second_sent["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["id"] == call.call_id
    tool = next(m for m in second_sent["messages"] if m["role"] == "tool")
    assert (tool["tool_call_id"], tool["content"]) == (call.call_id, "sunny in Paris")


async def test_a_streamed_agent_turn_with_a_tool_call(kit: Kit, provider: OpenAIProvider) -> None:
    kit.providers["t"].load(tool_turn())
    agent = Agent(name="forecaster", instructions="Answer briefly.", model="tools", tools=[get_weather])
    result = Runner.run_streamed(agent, "Weather in Paris?", run_config=config(provider))
    text = ""
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            text += event.data.delta
    assert text == result.final_output == "It is sunny in Paris."
    assert len(result.raw_responses) == 2


async def test_the_agent_runs_through_an_outage_of_the_primary(kit: Kit, provider: OpenAIProvider) -> None:
    kit.providers["x"].load("overloaded")  # route flaky: x is down, the approved fallback c (Gemini) answers
    result = await Runner.run(Agent(name="a", model="flaky"), "Hi", run_config=config(provider))
    assert result.final_output == "ok from c"
    assert [c.kind for c in kit.providers["x"].calls[-2:]] == ["overloaded", "overloaded"]
