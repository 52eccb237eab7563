"""The official openai SDK's Responses client, at its default settings, reads the fake's answers.

``client.responses.create`` / ``.parse`` / ``.stream`` (its strict accumulator checks every
event's item, index and response id) against a FakeProvider speaking ``openai-responses`` on
loopback: text, tool calls, structured output, reasoning, the 200s that are not answers, and
each error as the SDK's own exception class. Default settings include the SDK's two retries,
so an error is scripted for every request and the retries are counted; virtual time (looptime)
makes its backoff instant.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pydantic
import pytest

from failover import Capability, Message, Request, Route, Router, Tool
from failover.model import Completed
from failover.policy import Unlimited
from failover.testing import FakeProvider, FakeServer, Reply, Script

pytestmark = [pytest.mark.e2e, pytest.mark.looptime]

TOOLS: Any = [
    {
        "type": "function",
        "name": name,
        "parameters": {
            "type": "object",
            "properties": {key: {"type": "string"}},
            "required": [key],
            "additionalProperties": False,
        },
        "strict": True,
    }
    for name, key in (("get_weather", "city"), ("get_time", "tz"))
]
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]


class Weather(pydantic.BaseModel):
    city: str
    temperature: float


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeProvider, openai.AsyncOpenAI]]:
    p = FakeProvider("r", "openai-responses", model="gpt-5-mini-2025-08-07")
    async with FakeServer(p) as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url_for(p), api_key="sk-test")  # default settings
        async with client:
            yield p, client


async def test_text_usage_and_ids(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load([Reply.ok("It is sunny.", usage=(11, 4))])
    resp = await client.responses.create(model="gpt-5-mini", input="Weather in Paris?", instructions="Be brief.")
    assert resp.output_text == "It is sunny."
    assert (resp.status, resp.id, resp.model) == ("completed", "resp_r_1", "gpt-5-mini-2025-08-07")
    assert resp.usage is not None and (resp.usage.input_tokens, resp.usage.output_tokens) == (11, 4)
    assert resp.instructions == "Be brief."
    call = p.calls[0]
    assert (call.path, call.model, call.headers["authorization"]) == ("/v1/responses", "gpt-5-mini", "***")


async def test_tool_calls(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load([Reply.ok(tool_calls=CALLS)])
    resp = await client.responses.create(model="gpt-5-mini", input="Weather and time?", tools=TOOLS)
    calls = [item for item in resp.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == CALLS
    assert all(c.call_id.startswith("call_") for c in calls) and len({c.call_id for c in calls}) == 2


async def test_structured_output_is_parsed_by_the_sdk(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load(["ok", Reply.ok(json={"city": "Paris", "temperature": 21.5})])
    default = await client.responses.parse(model="gpt-5-mini", input="Weather?", text_format=Weather)
    scripted = await client.responses.parse(model="gpt-5-mini", input="Weather?", text_format=Weather)
    assert default.output_parsed == Weather(city="ok from r", temperature=0)  # an example of the schema
    assert scripted.output_parsed == Weather(city="Paris", temperature=21.5)
    sent = p.calls[0].json
    assert sent is not None and sent["text"]["format"]["type"] == "json_schema"


async def test_a_forced_tool_is_called(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load(["ok"])
    resp = await client.responses.create(
        model="gpt-5-mini", input="Time?", tools=TOOLS, tool_choice={"type": "function", "name": "get_time"}
    )
    (call,) = [item for item in resp.output if item.type == "function_call"]
    assert (call.name, json.loads(call.arguments)) == ("get_time", {"tz": "ok from r"})


@pytest.mark.parametrize("interleave", [False, True])
async def test_the_stream_helper_accumulates_text_and_calls(
    fake: tuple[FakeProvider, openai.AsyncOpenAI], interleave: bool
) -> None:
    p, client = fake
    p.load([Reply.ok("Checking both.", tool_calls=CALLS, interleave=interleave)])
    async with client.responses.stream(model="gpt-5-mini", input="Weather and time?", tools=TOOLS) as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Checking both."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == CALLS
    assert final.usage is not None and final.usage.output_tokens > 0


async def test_create_with_stream_true_numbers_every_event(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load([Reply.ok("one two three")])
    stream = await client.responses.create(model="gpt-5-mini", input="Count.", stream=True)
    seen = [event async for event in stream]
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert (seen[0].type, seen[1].type, seen[-1].type) == (
        "response.created",
        "response.in_progress",
        "response.completed",
    )
    assert "".join(e.delta for e in seen if e.type == "response.output_text.delta") == "one two three"


async def test_reasoning_with_its_encrypted_content(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load([Reply.ok("19.", reasoning="Add 12 and 7."), Reply.ok("19.", reasoning="Add 12 and 7.")])
    asked = await client.responses.create(
        model="gpt-5-mini", input="12+7?", reasoning={"effort": "low"}, include=["reasoning.encrypted_content"]
    )
    unasked = await client.responses.create(model="gpt-5-mini", input="12+7?")
    (item,) = [i for i in asked.output if i.type == "reasoning"]
    assert [s.text for s in item.summary] == ["Add 12 and 7."] and item.encrypted_content
    (bare,) = [i for i in unasked.output if i.type == "reasoning"]
    assert bare.encrypted_content is None  # the real API sends it only when included
    assert asked.usage is not None and asked.usage.output_tokens_details.reasoning_tokens > 0


async def test_the_200s_that_are_not_answers(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    p.load([Reply.truncate("Once upon"), Reply.content_filter(), Reply.refuse("I can't help with that.")])
    cut = await client.responses.create(model="gpt-5-mini", input="A story.", max_output_tokens=16)
    filtered = await client.responses.create(model="gpt-5-mini", input="Something.")
    refused = await client.responses.create(model="gpt-5-mini", input="Something else.")
    assert (cut.status, cut.incomplete_details and cut.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert cut.output_text == "Once upon" and cut.usage is not None and cut.usage.output_tokens == 16
    assert filtered.incomplete_details is not None and filtered.incomplete_details.reason == "content_filter"
    (message,) = refused.output
    assert message.type == "message" and message.content[0].type == "refusal"
    assert message.content[0].refusal == "I can't help with that."


ERRORS = [
    (Reply.rate_limit(retry_after=1), openai.RateLimitError, 429, "rate_limit_exceeded", 3),
    (Reply.quota(), openai.RateLimitError, 429, "insufficient_quota", 3),
    (Reply.overloaded(), openai.InternalServerError, 503, "server_is_overloaded", 3),
    (Reply.server_error(), openai.InternalServerError, 500, None, 3),
    (Reply.unauthorized(), openai.AuthenticationError, 401, "invalid_api_key", 1),
    (Reply.not_found(), openai.NotFoundError, 404, "model_not_found", 1),
    (Reply.context_overflow(), openai.BadRequestError, 400, "context_length_exceeded", 1),
    (Reply.invalid(), openai.BadRequestError, 400, None, 1),
]


@pytest.mark.parametrize(("reply", "error", "status", "code", "requests"), ERRORS, ids=[e[0].kind for e in ERRORS])
async def test_each_error_raises_the_sdks_class(
    fake: tuple[FakeProvider, openai.AsyncOpenAI],
    reply: Reply,
    error: type[openai.APIStatusError],
    status: int,
    code: str | None,
    requests: int,
) -> None:
    p, client = fake
    p.load(Script.always(reply))
    with pytest.raises(error) as info:
        await client.responses.create(model="gpt-5-mini", input="hi")
    assert (info.value.status_code, info.value.code) == (status, code)
    assert info.value.request_id == f"req_r_{requests}"
    assert len(p.calls) == requests  # the SDK's own retries, at its defaults: 429 and 5xx only


async def test_the_fake_checks_what_the_real_api_checks(fake: tuple[FakeProvider, openai.AsyncOpenAI]) -> None:
    p, client = fake
    with pytest.raises(openai.BadRequestError) as low:
        await client.responses.create(model="gpt-5-mini", input="hi", max_output_tokens=10)
    assert "Expected a value >= 16, but got 10" in str(low.value)
    with pytest.raises(openai.BadRequestError) as empty:
        await client.responses.create(model="gpt-5-mini", input=[])
    assert "'input'" in str(empty.value)
    assert [c.scripted for c in p.calls] == [False, False]  # refused before any scripted reply


@pytest.mark.parametrize(
    ("cause", "code"),
    [("overloaded", "server_is_overloaded"), ("rate_limit", "rate_limit_exceeded"), ("server_error", "server_error")],
)
async def test_a_mid_stream_error_event_raises_in_the_sdk(
    fake: tuple[FakeProvider, openai.AsyncOpenAI], cause: str, code: str
) -> None:
    p, client = fake
    p.load([Reply.error_event_after(6, cause=cause, text="one two three four five six seven")])
    deltas: list[str] = []
    stream = await client.responses.create(model="gpt-5-mini", input="Count.", stream=True)
    with pytest.raises(openai.APIError) as info:
        await _read_into(stream, deltas)
    assert info.value.code == code
    assert deltas and "one two three four five six seven".startswith("".join(deltas))


async def _read_into(stream: Any, deltas: list[str]) -> None:
    async for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)


# -- the SDK as the oracle: failover's Router reads the same stream the same way ---------------------

ORACLE = [
    Reply.ok("It is sunny in Paris today."),
    Reply.ok("Checking both.", tool_calls=CALLS, interleave=True),
    Reply.ok("19.", reasoning="Add 12 and 7, then answer."),
    Reply.ok(tool_calls=CALLS, split_bytes=5),
]


@pytest.mark.parametrize("reply", ORACLE, ids=["text", "interleaved-calls", "reasoning", "split-writes"])
async def test_the_router_reads_a_stream_as_the_sdk_does(reply: Reply) -> None:
    # two fakes of one name, one reply each: the same response, byte for byte (ids, signatures)
    theirs, mine = FakeProvider("r", "openai-responses", [reply]), FakeProvider("r", "openai-responses", [reply])
    async with FakeServer(theirs) as srv, openai.AsyncOpenAI(base_url=srv.base_url_for(theirs), api_key="sk") as client:
        include: Any = ["reasoning.encrypted_content"]
        hi: Any = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
        async with client.responses.stream(
            model="gpt-5-mini", input=hi, tools=TOOLS, reasoning={"effort": "low"}, include=include, store=False
        ) as stream:
            sdk = await stream.get_final_response()
    async with FakeServer(mine) as srv:
        target = srv.target_for(mine, tokenizer="estimate", capabilities=frozenset(Capability))
        tools = tuple(Tool(name=t["name"], parameters=t["parameters"], strict=True) for t in TOOLS)
        request = Request(messages=(Message.user("hi"),), tools=tools, reasoning_effort="low")
        router = Router([Route(name="r", primary=(target,))], retry_budget=Unlimited())
        async with router, router.stream("r", request) as s:
            events = [e async for e in s]
    assert theirs.calls[0].json == mine.calls[0].json  # the same request, so the same answer
    end = events[-1]
    assert isinstance(end, Completed), end
    ours = end.response
    calls = [item for item in sdk.output if item.type == "function_call"]
    reasoning = [item for item in sdk.output if item.type == "reasoning"]
    assert ours.text == sdk.output_text
    assert [(c.id, c.name, c.arguments) for c in ours.tool_calls] == [(c.call_id, c.name, c.arguments) for c in calls]
    assert [(b.text, b.signature) for b in ours.reasoning] == [
        ("\n\n".join(s.text for s in r.summary), r.encrypted_content) for r in reasoning
    ]
    assert sdk.usage is not None
    assert (ours.usage.input_tokens, ours.usage.output_tokens) == (sdk.usage.input_tokens, sdk.usage.output_tokens)
    assert ours.response_id == sdk.id
