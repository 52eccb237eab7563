"""The OpenAI Agents SDK model end to end: a 503 on the primary, the fallback answers, through Runner.run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.exceptions import UserError
from openai.types.responses import ResponseFunctionToolCall, ResponseTextDeltaEvent
from pydantic import BaseModel

from failover import Envelope, FailureKind, Unavailable
from failover.integrations.agents import FailoverModel, FailoverProvider
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import ALL, C, router, target

pytestmark = pytest.mark.looptime


class Forecast(BaseModel):
    city: str
    sky: str


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def setup(*b_replies: Reply) -> tuple[FailoverProvider, FakeProvider, FakeProvider]:
    """Primary a (OpenAI dialect) answers 503; the approved fallback b (Anthropic dialect) answers."""
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()))
    b = FakeProvider("b", "anthropic", list(b_replies))
    caps = ALL | {C.STREAMING}
    r = router([target(a, caps=caps)], [target(b, caps=caps)], a, b)
    return FailoverProvider(r, envelope=Envelope(budget=10, max_attempts=3)), a, b


def run_config(provider: FailoverProvider) -> RunConfig:
    return RunConfig(model_provider=provider, tracing_disabled=True)


async def test_runner_run_with_a_tool_round_trip_and_structured_output() -> None:
    provider, a, b = setup(
        Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})], usage=(50, 10)),
        Reply.ok(json={"city": "Paris", "sky": "sunny"}, usage=(70, 12)),
    )
    agent = Agent(name="forecaster", instructions="Forecast.", model="r", tools=[get_weather], output_type=Forecast)
    result = await Runner.run(agent, "Weather in Paris?", run_config=run_config(provider))

    assert result.final_output == Forecast(city="Paris", sky="sunny")
    first, second = result.raw_responses
    (call,) = [i for i in first.output if isinstance(i, ResponseFunctionToolCall)]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.requests) == (50, 10, 1)
    assert result.context_wrapper.usage.input_tokens == 120

    model = provider.get_model("r")
    assert isinstance(model, FailoverModel)
    rec1, rec2 = model.record_for(first.request_id), model.record_for(second.request_id)
    assert rec1 is not None and rec2 is not None and rec1.request_id != rec2.request_id
    assert (rec1.workflow.value, rec1.target_used, rec1.recovered) == ("fallback", "b", True)
    assert [(x.target, x.outcome) for x in rec1.attempts] == [("a", "provider_overloaded"), ("b", "ok")]
    assert model.last_record is rec2

    assert [c.kind for c in a.calls] == ["overloaded", "overloaded"]
    assert [c.kind for c in b.calls] == ["ok", "ok"]
    sent = b.calls[1].json  # the Anthropic-dialect body: instructions, the tool call and its result, the schema
    assert sent is not None and "Forecast." in str(sent["system"])
    blocks = [blk for m in sent["messages"] if isinstance(m["content"], list) for blk in m["content"]]
    assert {"tool_use", "tool_result"} <= {blk["type"] for blk in blocks}
    assert "sunny in Paris" in str([blk for blk in blocks if blk["type"] == "tool_result"])
    assert set(sent["output_config"]["format"]["schema"]["properties"]) == {"city", "sky"}


async def test_run_streamed_delivers_text_deltas() -> None:
    provider, a, b = setup(Reply.ok("one two three"))
    agent = Agent(name="counter", model="r")
    result = Runner.run_streamed(agent, "count", run_config=run_config(provider))
    raw = [e.data async for e in result.stream_events() if e.type == "raw_response_event"]
    deltas = [d.delta for d in raw if isinstance(d, ResponseTextDeltaEvent)]
    # response.created and response.completed name the fallback's model (what answered), not the route "r"
    named = {d.type: d.response.model for d in raw if d.type in ("response.created", "response.completed")}
    assert named == {"response.created": b.model, "response.completed": b.model}
    assert "".join(deltas) == "one two three" and len(deltas) >= 3
    assert result.final_output == "one two three"
    model = provider.get_model("r")
    assert isinstance(model, FailoverModel) and model.last_record is not None
    assert model.last_record.target_used == "b"
    assert (len(a.calls), len(b.calls)) == (1, 1) and b.calls[0].stream


async def test_no_answer_raises_unavailable_out_of_runner_run() -> None:
    provider, a, b = setup(Reply.server_error())
    with pytest.raises(Unavailable) as info:
        await Runner.run(Agent(name="x", model="r"), "hi", run_config=run_config(provider))
    assert info.value.reason is FailureKind.PROVIDER_SERVER_ERROR
    assert [x.target for x in info.value.record.attempts] == ["a", "b"]
    assert (len(a.calls), len(b.calls)) == (1, 1)  # the SDK did not retry on top of the router


def test_an_unknown_route_names_the_configured_ones() -> None:
    provider, _, _ = setup()
    with pytest.raises(UserError, match="configured routes: r"):
        provider.get_model("gpt-4o")


def test_importing_failover_imports_no_framework() -> None:
    code = (
        "import sys, failover, failover.integrations; "
        "loaded = [m for m in ('agents', 'pydantic_ai', 'langchain_core') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


async def test_run_streamed_with_a_tool_round_trip() -> None:
    provider, _, b = setup(
        Reply.ok(tool_calls=[("get_weather", {"city": "Rome"})]),
        Reply.ok("Sunny in Rome."),
    )
    agent = Agent(name="w", model="r", tools=[get_weather])
    result = Runner.run_streamed(agent, "Weather in Rome?", run_config=run_config(provider))
    kinds = [e.item.type async for e in result.stream_events() if e.type == "run_item_stream_event"]
    assert "tool_call_item" in kinds and "tool_call_output_item" in kinds
    assert result.final_output == "Sunny in Rome."
    call = next(i for i in result.raw_responses[0].output if isinstance(i, ResponseFunctionToolCall))
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Rome"})
    assert [c.stream for c in b.calls] == [True, True]
    sent = b.calls[1].json
    assert sent is not None and "sunny in Rome" in json.dumps(sent["messages"])
