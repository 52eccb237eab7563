"""The pydantic-ai model end to end: a 429 on the primary, the equivalent target answers, through Agent.run."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.exceptions import ModelServerError
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart

from failover import Envelope, FailureKind, Unavailable
from failover.integrations.pydantic_ai import FailoverModel
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import ALL, C, router, target

pytestmark = pytest.mark.looptime


class Forecast(BaseModel):
    city: str
    sky: str


def setup(a_replies: Script, *b_replies: Reply) -> tuple[FailoverModel, FakeProvider, FakeProvider]:
    """Primary a and its equivalent b (same model, another pool; both OpenAI dialect)."""
    a = FakeProvider("a", "openai", a_replies)
    b = FakeProvider("b", "openai", list(b_replies))
    caps = ALL | {C.STREAMING}
    r = router([target(a, key="m", caps=caps), target(b, key="m", caps=caps)], [], a, b)
    return FailoverModel(r, "r", envelope=Envelope(budget=10, max_attempts=3)), a, b


def weather_agent(model: FailoverModel) -> Agent[None, Forecast]:
    agent = Agent(model, output_type=Forecast, instructions="Answer with a forecast.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


async def test_agent_run_with_a_tool_call_and_structured_output_fails_over() -> None:
    model, a, b = setup(
        Script.always(Reply.rate_limit(retry_after=30)),
        Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})], usage=(40, 8)),
        Reply.ok(tool_calls=[("final_result", {"city": "Paris", "sky": "sunny"})], usage=(60, 9)),
    )
    result = await weather_agent(model).run("Weather in Paris?")

    assert result.output == Forecast(city="Paris", sky="sunny")
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert len(responses) == 2
    first, second = responses
    (call,) = [p for p in first.parts if isinstance(p, ToolCallPart)]
    assert (call.tool_name, call.args_as_dict()) == ("get_weather", {"city": "Paris"})
    assert (first.usage.input_tokens, first.usage.output_tokens) == (40, 8)
    assert first.finish_reason == "tool_call" and first.provider_name == "failover"
    rec = first.provider_details and first.provider_details["failover"]
    assert rec and (rec["workflow"], rec["target_used"], rec["recovered"]) == ("retry_failover", "b", True)
    assert [(x["target"], x["outcome"]) for x in rec["attempts"]] == [("a", "rate_limited"), ("b", "ok")]
    # the 429 cooled a's key + model down: the second model request goes straight to b
    rec2 = second.provider_details and second.provider_details["failover"]
    assert rec2 and [x["target"] for x in rec2["attempts"]] == ["b"]
    assert any(e["target"] == "a" and "cool" in e["reason"] for e in rec2["excluded"])
    assert result.usage.input_tokens == 100 and result.usage.requests == 2

    assert [c.kind for c in a.calls] == ["rate_limit"]
    assert [c.kind for c in b.calls] == ["ok", "ok"]
    sent = b.calls[1].json  # the tool result and the instructions reached the model
    assert sent is not None
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert sent["messages"][0]["content"] == "Answer with a forecast."
    assert sent["messages"][3]["content"] == "sunny in Paris"
    assert {t["function"]["name"] for t in sent["tools"]} == {"get_weather", "final_result"}
    assert sent["tool_choice"] == "required"  # text is not an acceptable output here
    tool_returns = [p for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    assert [p.content for p in tool_returns if p.tool_name == "get_weather"] == ["sunny in Paris"]


async def test_native_output_is_the_routes_json_schema() -> None:
    model, a, b = setup(Script.always(Reply.overloaded()), Reply.ok(json={"city": "Oslo", "sky": "grey"}))
    agent = Agent(model, output_type=NativeOutput(Forecast))
    result = await agent.run("Oslo?")
    assert result.output == Forecast(city="Oslo", sky="grey")
    sent = b.calls[0].json
    assert sent is not None and sent["response_format"]["type"] == "json_schema"
    assert set(sent["response_format"]["json_schema"]["schema"]["properties"]) == {"city", "sky"}
    assert (len(a.calls), len(b.calls)) == (1, 1)


async def test_run_stream_streams_text_from_the_failover_target() -> None:
    model, a, b = setup(Script.always(Reply.overloaded()), Reply.ok("one two three"))
    agent = Agent(model)
    async with agent.run_stream("count") as run:
        pieces = [t async for t in run.stream_text(delta=True, debounce_by=None)]
    assert "".join(pieces) == "one two three" and len(pieces) >= 3
    last = run.all_messages()[-1]
    assert isinstance(last, ModelResponse) and last.provider_details is not None
    assert last.provider_details["failover"]["target_used"] == "b"
    assert last.usage.output_tokens > 0
    assert (len(a.calls), len(b.calls)) == (1, 1) and b.calls[0].stream


async def test_no_answer_is_a_model_api_error_caused_by_unavailable() -> None:
    model, a, b = setup(Script.always(Reply.server_error()), Reply.server_error())
    with pytest.raises(ModelServerError) as info:
        await Agent(model).run("hi")
    cause = info.value.__cause__
    assert isinstance(cause, Unavailable) and cause.reason is FailureKind.PROVIDER_SERVER_ERROR
    assert [x.target for x in cause.record.attempts] == ["a", "b"]
    assert (len(a.calls), len(b.calls)) == (1, 1)
    assert info.value.provider_error_code == "provider_server_error"


async def test_run_stream_through_a_tool_call() -> None:
    model, _, b = setup(
        Script.always(Reply.overloaded()),
        Reply.ok(tool_calls=[("get_weather", {"city": "Rome"})]),
        Reply.ok("Sunny in Rome."),
    )
    agent = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    async with agent.run_stream("Weather in Rome?") as run:
        text = await run.get_output()
    assert text == "Sunny in Rome."
    calls = [p for m in run.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolCallPart)]
    assert [(c.tool_name, c.args_as_dict()) for c in calls] == [("get_weather", {"city": "Rome"})]
    assert [c.stream for c in b.calls] == [True, True]


async def test_model_name_is_the_model_that_answered_plain_and_streamed() -> None:
    """A ModelResponse's ``model_name`` (what pydantic-ai prices usage by) is the model of the
    target that answered: the equivalent's own model name after a 503 on the primary."""
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()), model="deploy-a")
    b = FakeProvider("b", "openai", [Reply.ok("plain answer"), Reply.ok("streamed answer")], model="deploy-b")
    caps = ALL | {C.STREAMING}
    r = router([target(a, key="m", caps=caps), target(b, key="m", caps=caps)], [], a, b)
    model = FailoverModel(r, "r", envelope=Envelope(budget=10, max_attempts=3))
    plain = await Agent(model).run("hi")
    async with Agent(model).run_stream("hi") as run:
        assert "".join([t async for t in run.stream_text(delta=True, debounce_by=None)]) == "streamed answer"
    for result in (plain, run):
        last = result.all_messages()[-1]
        assert isinstance(last, ModelResponse) and last.model_name == "deploy-b"
        assert last.provider_details is not None and last.provider_details["failover"]["route"] == "r"
    assert model.model_name == "failover:r"  # the Model itself is still named after its route
