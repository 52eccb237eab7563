"""The LangChain chat model end to end: a 503 on the primary, the fallback answers, in LangChain's types."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from failover import Envelope, FailureKind, SyncRouter, Unavailable
from failover.integrations.langchain import FailoverChatModel
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import ALL, C, router, target

pytestmark = pytest.mark.looptime


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class Forecast(BaseModel):
    city: str
    sky: str


def setup(*b_replies: Reply) -> tuple[FailoverChatModel, FakeProvider, FakeProvider]:
    """Primary a (OpenAI dialect) is overloaded (503); the approved fallback b (Anthropic dialect) answers."""
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()))
    b = FakeProvider("b", "anthropic", list(b_replies))
    caps = ALL | {C.STREAMING}
    r = router([target(a, caps=caps)], [target(b, caps=caps)], a, b)
    model = FailoverChatModel(router=r, route="r", envelope=Envelope(budget=10, max_attempts=3), max_tokens=200)
    return model, a, b


async def test_a_tool_round_trip_fails_over_and_reports_the_record() -> None:
    model, a, b = setup(
        Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})], usage=(30, 7)),
        Reply.ok("It is sunny in Paris.", usage=(45, 6)),
    )
    with_tools = model.bind_tools([get_weather])
    question = HumanMessage("Weather in Paris?")

    first = await with_tools.ainvoke([question])
    assert first.content == ""
    (call,) = first.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"}) and call["id"]
    assert first.usage_metadata is not None
    assert (first.usage_metadata["input_tokens"], first.usage_metadata["output_tokens"]) == (30, 7)
    assert first.response_metadata["finish_reason"] == "tool_calls"
    rec = first.response_metadata["failover"]
    assert first.response_metadata["model_name"] == rec["model_used"] == b.model  # the model that answered
    assert (rec["workflow"], rec["target_used"], rec["recovered"], rec["outcome"]) == ("fallback", "b", True, "ok")
    assert [(x["target"], x["outcome"]) for x in rec["attempts"]] == [("a", "provider_overloaded"), ("b", "ok")]

    result = get_weather.invoke(call["args"])
    second = await with_tools.ainvoke([question, first, ToolMessage(result, tool_call_id=call["id"])])
    assert second.content == "It is sunny in Paris." and second.tool_calls == []
    assert second.response_metadata["failover"]["target_used"] == "b"
    assert second.response_metadata["failover"]["request_id"] != rec["request_id"]  # a fresh id per call

    assert [c.kind for c in a.calls] == ["overloaded", "overloaded"]
    assert [c.kind for c in b.calls] == ["ok", "ok"]
    sent = b.calls[1].json  # the Anthropic-dialect body the fallback received carries the tool result
    assert sent is not None
    blocks = [blk for m in sent["messages"] for blk in (m["content"] if isinstance(m["content"], list) else [])]
    assert {"tool_use", "tool_result"} <= {blk["type"] for blk in blocks}
    assert any(blk.get("content") == "sunny in Paris" or "sunny in Paris" in str(blk.get("content")) for blk in blocks)
    assert [t["name"] for t in sent["tools"]] == ["get_weather"]


async def test_structured_output_is_the_routes_json_schema() -> None:
    model, a, b = setup(Reply.ok(json={"city": "Oslo", "sky": "grey"}))
    forecast = await model.with_structured_output(Forecast).ainvoke("Forecast for Oslo?")
    assert forecast == Forecast(city="Oslo", sky="grey")
    assert (len(a.calls), len(b.calls)) == (1, 1)
    body = b.calls[0].json
    assert body is not None  # the schema reached the fallback as Anthropic's native structured output
    schema = body["output_config"]["format"]["schema"]
    assert set(schema["properties"]) == {"city", "sky"}


async def test_astream_yields_text_then_the_record() -> None:
    model, a, b = setup(Reply.ok("one two three"))
    chunks = [c async for c in model.astream("count")]
    text = "".join(str(c.content) for c in chunks)
    assert text == "one two three"
    assert len([c for c in chunks if c.content]) >= 3  # word by word, not one blob
    last = chunks[-1]
    assert last.response_metadata["failover"]["target_used"] == "b"
    # model_name: the fallback's model (what answered), not the route
    assert last.response_metadata["model_name"] == b.model and last.response_metadata["failover"]["route"] == "r"
    assert last.usage_metadata is not None and last.usage_metadata["output_tokens"] > 0
    assert (len(a.calls), len(b.calls)) == (1, 1) and b.calls[0].stream


async def test_no_answer_raises_unavailable_through_ainvoke() -> None:
    model, a, b = setup(Reply.server_error())
    with pytest.raises(Unavailable) as info:
        await model.ainvoke("hi")
    assert info.value.reason is FailureKind.PROVIDER_SERVER_ERROR
    assert [x.target for x in info.value.record.attempts] == ["a", "b"]
    assert (len(a.calls), len(b.calls)) == (1, 1)


async def test_sync_invoke_needs_a_sync_router() -> None:
    model, _, _ = setup(Reply.ok("x"))
    with pytest.raises(NotImplementedError, match="SyncRouter"):
        model.invoke("hi")


async def test_astream_tool_call_chunks_aggregate_to_the_call() -> None:
    model, _, b = setup(Reply.ok(tool_calls=[("get_weather", {"city": "Lyon"})]))
    chunks = [c async for c in model.bind_tools([get_weather]).astream("Weather in Lyon?")]
    whole = chunks[0]
    for c in chunks[1:]:
        whole = whole + c
    (call,) = whole.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Lyon"})
    assert whole.response_metadata["finish_reason"] == "tool_calls"
    assert b.calls[0].stream


async def test_a_stream_cut_after_output_raises_partial_output() -> None:
    model, _, b = setup(Reply.drop_after(4, text="one two three four"))
    model.envelope = Envelope(budget=10, max_attempts=3, hold_tokens=0)  # the first text commits
    seen: list[str] = []

    async def consume() -> None:
        async for c in model.astream("count"):
            seen.append(str(c.content))

    with pytest.raises(Unavailable) as info:
        await consume()
    assert info.value.reason is FailureKind.PARTIAL_OUTPUT
    assert "".join(seen).startswith("one")  # text reached the caller ...
    assert len(b.calls) == 1  # ... so nothing was retried or spliced on after it
    assert [x.target for x in info.value.record.attempts] == ["a", "b"]


def test_invoke_with_a_sync_router() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    with SyncRouter(lambda: router([target(a)], [target(b)], a, b)) as sync:
        model = FailoverChatModel(router=sync, route="r", envelope=Envelope(budget=10))
        msg = model.invoke("hi")
        assert msg.content == "from b"
        assert msg.response_metadata["failover"]["target_used"] == "b"
        assert [c.content for c in model.stream("hi")] == ["from b"]  # one whole answer as one chunk
        assert asyncio.run(model.ainvoke("hi")).content == "from b"  # async callers of a SyncRouter too
    assert (len(a.calls), len(b.calls)) == (3, 3)
