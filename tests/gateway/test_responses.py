"""``POST /v1/responses``: the official openai SDK, at its default settings, against ONE real
uvicorn server on loopback, with fault-kit providers behind it.

The SDK is the oracle: ``responses.stream()`` accumulates the events into a final response,
which must equal the plain answer to the same request, and the events of ``create(stream=True)``
must add up to the response that ends them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pydantic
import pytest

from failover import Route
from failover.gateway import GatewaySettings, create_app
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply
from tests._sdk import disconnected_call, fake_target, leave_after, quiet_router

from ._kit import ACME_KEY, NO_HOLD, PROVIDER_KEY, Kit, ServerThread

pytestmark = pytest.mark.e2e

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


@pytest.fixture
async def client(served: tuple[Kit, ServerThread]) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=served[1].base_url, api_key=ACME_KEY) as c:  # the SDK's defaults
        yield c


def items(resp: Any) -> list[dict[str, Any]]:
    """What a client reads of a response's output, without the ids each rendering makes anew
    (the fake providers number their call ids per request, too), and without what the SDK's
    parse helpers add."""
    out = []
    for item in resp.output:
        d = item.model_dump(exclude_none=True, exclude={"id", "call_id", "parsed_arguments"})
        for part in d.get("content") or ():
            part.pop("parsed", None)
        out.append(d)
    return out


def same_answer(streamed: Any, plain: Any) -> None:
    assert items(streamed) == items(plain)
    assert (streamed.status, streamed.incomplete_details, streamed.usage) == (
        plain.status,
        plain.incomplete_details,
        plain.usage,
    )
    assert streamed.output_text == plain.output_text


def added_up(events: list[Any]) -> dict[int, str]:
    """Check the event sequence as a client reads it and return, per output index, the text,
    arguments or summary its deltas add up to: sequence numbers 0, 1, 2...; created and
    in_progress first; one item at a time, each content event between its item's added and done
    events; one terminal event last."""
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    built: dict[int, str] = {}
    open_index: int | None = None
    for e in events[2:-1]:
        if e.type == "response.output_item.added":
            assert open_index is None, "an item began before the previous one was done"
            open_index = e.output_index
            built[open_index] = ""
            continue
        assert e.output_index == open_index, f"{e.type} outside its item"
        if e.type in (
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "response.reasoning_summary_text.delta",
        ):
            built[open_index] += e.delta
        elif e.type == "response.output_item.done":
            open_index = None
    assert open_index is None
    assert events[-1].type in ("response.completed", "response.incomplete")
    return built


def shown(item: Any) -> str:
    if item.type == "message":
        return "".join(getattr(part, "text", "") for part in item.content)
    if item.type == "function_call":
        return str(item.arguments)
    return "".join(s.text for s in item.summary)


async def plain_and_streamed(
    client: openai.AsyncOpenAI, kit: Kit, provider: str, reply: Reply, **params: Any
) -> tuple[Any, Any, list[Any]]:
    """The same scripted answer three ways: plain, through ``responses.stream()``, and as the raw
    events of ``create(stream=True)``."""
    kit.providers[provider].load([reply, reply, reply])
    plain = await client.responses.create(**params)
    async with client.responses.stream(**params) as s:
        final = await s.get_final_response()
    events = [e async for e in await client.responses.create(stream=True, **params)]
    return plain, final, events


# -------------------------------------------------------------------- answers


async def test_text_plain_and_streamed_are_the_same_answer(kit: Kit, client: openai.AsyncOpenAI) -> None:
    reply = Reply.ok("Hello from the gateway, word by word", usage=(9, 7))
    before = len(kit.providers["a"].calls)
    plain, final, events = await plain_and_streamed(
        client, kit, "a", reply, model="chat", input="Hello", instructions="Be brief."
    )
    assert plain.object == "response" and plain.id.startswith("resp_") and plain.model == kit.providers["a"].model
    assert plain.status == "completed" and plain.incomplete_details is None and plain.error is None
    assert plain.output_text == "Hello from the gateway, word by word"
    assert plain.instructions == "Be brief." and plain.store is False
    assert plain.usage is not None
    assert (plain.usage.input_tokens, plain.usage.output_tokens, plain.usage.total_tokens) == (9, 7, 16)
    assert plain._request_id  # the SDK read x-request-id
    same_answer(final, plain)
    built = added_up(events)
    done = events[-1].response
    named = [e.response.model for e in events if getattr(e, "response", None) is not None]  # created, ..., completed
    assert len(named) >= 3 and set(named) == {kit.providers["a"].model} and final.model == plain.model
    assert [shown(i) for i in done.output] == [built[i] for i in range(len(done.output))]
    assert sum(e.type == "response.output_text.delta" for e in events) == 7  # a word per delta
    summary = (events[-1].model_extra or {})["x_failover"]  # beside the response, as the chat stream's
    assert (summary["target"], summary["attempts"], summary["recovered"]) == ("a", 1, False)
    sent = kit.providers["a"].calls[before].json
    assert sent is not None and sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]


async def test_parallel_tool_calls(kit: Kit, client: openai.AsyncOpenAI) -> None:
    # the OpenAI-dialect target interleaves the two calls' fragments; the client gets them one by one
    calls_made = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    reply = Reply.ok(tool_calls=calls_made, interleave=True)
    plain, final, events = await plain_and_streamed(client, kit, "t", reply, model="tools", input="Hi", tools=[WEATHER])
    calls = [i for i in plain.output if i.type == "function_call"]
    assert [(c.name, json.loads(c.arguments), c.status) for c in calls] == [
        ("get_weather", {"city": "Paris"}, "completed"),
        ("get_weather", {"city": "Rome"}, "completed"),
    ]
    assert len({c.call_id for c in calls}) == 2 and all(c.id and c.id.startswith("fc_") for c in calls)
    assert [i.type for i in plain.output] == ["function_call", "function_call"]  # no empty message beside calls
    assert plain.tools[0].name == "get_weather" and plain.parallel_tool_calls is True
    same_answer(final, plain)
    built = added_up(events)
    assert [json.loads(built[i]) for i in range(2)] == [{"city": "Paris"}, {"city": "Rome"}]
    assert sum(e.type == "response.function_call_arguments.delta" for e in events) > 2  # fragments, not whole


async def test_structured_output_with_parse_and_stream(kit: Kit, client: openai.AsyncOpenAI) -> None:
    class Answer(pydantic.BaseModel):
        answer: str
        confidence: float

    kit.providers["a"].load([Reply.ok(json={"answer": "42", "confidence": 0.9})] * 2)
    parsed = await client.responses.parse(model="chat", input="Hi", text_format=Answer)
    assert parsed.output_parsed == Answer(answer="42", confidence=0.9)
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None and sent["response_format"]["json_schema"]["name"] == "Answer"
    async with client.responses.stream(model="chat", input="Hi", text_format=Answer) as s:
        final = await s.get_final_response()
    assert final.output_parsed == Answer(answer="42", confidence=0.9)
    assert parsed.text is not None and parsed.text.format is not None and parsed.text.format.type == "json_schema"


async def test_reasoning_summary_plain_and_streamed(kit: Kit, client: openai.AsyncOpenAI) -> None:
    reply = Reply.ok("It is 42.", reasoning="Six times seven is forty-two.")
    plain, final, events = await plain_and_streamed(
        client, kit, "a", reply, model="chat", input="6x7?", reasoning={"effort": "high", "summary": "auto"}
    )
    reasoning, message = plain.output
    assert reasoning.type == "reasoning" and message.type == "message"
    assert [s.text for s in reasoning.summary] == ["Six times seven is forty-two."]
    assert reasoning.encrypted_content  # so a stateless client can send it back
    assert plain.output_text == "It is 42."
    same_answer(final, plain)
    built = added_up(events)
    assert built[0] == "Six times seven is forty-two." and built[1] == "It is 42."
    kinds = [e.type for e in events]
    assert kinds.index("response.reasoning_summary_part.added") < kinds.index("response.reasoning_summary_text.done")
    assert kinds.index("response.reasoning_summary_part.done") < kinds.index("response.content_part.added")


async def test_a_tool_loop_with_reasoning_goes_back_to_the_model_that_wrote_it(
    kit: Kit, client: openai.AsyncOpenAI
) -> None:
    # a is down: the Anthropic-dialect fallback b answers with a signed thinking block and a call
    kit.providers["a"].load("overloaded")
    kit.providers["b"].load([Reply.ok(tool_calls=[("get_weather", {"city": "Oslo"})], reasoning="Need the weather.")])
    before = len(kit.providers["b"].calls)
    first = await client.responses.create(model="chat", input="Weather in Oslo?", tools=[WEATHER])
    assert first.status == "completed"
    thinking = next(i for i in first.output if i.type == "reasoning")
    call = next(i for i in first.output if i.type == "function_call")
    # the client sends the whole conversation back, as a stateless client does
    history: list[Any] = [
        {"role": "user", "content": "Weather in Oslo?"},
        *[i.model_dump(exclude_none=True) for i in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
    ]
    second = await client.responses.create(model="chat", input=history, tools=[WEATHER])
    assert second.output_text == "ok from b"
    sent = kit.providers["b"].calls[before + 1].json
    assert sent is not None
    assistant = next(m for m in sent["messages"] if m["role"] == "assistant")
    block = next(b for b in assistant["content"] if b["type"] == "thinking")
    assert block["thinking"] == "Need the weather." and block["signature"]  # Anthropic's own signature, intact
    token = thinking.encrypted_content or ""
    assert token.startswith("failover.v1.")  # issued by failover: it names the source, origin and signature
    payload = json.loads(base64.urlsafe_b64decode(token.removeprefix("failover.v1.") + "=="))
    assert (payload["source"], payload["signature"]) == ("anthropic", block["signature"])
    blocks = [b for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"]]
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert result["tool_use_id"] == call.call_id and "sunny" in json.dumps(result)


async def test_failover_behind_the_endpoint(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["x"].load("overloaded")
    raw = await client.responses.with_raw_response.create(model="flaky", input="Hi")
    assert raw.headers["x-failover-target"] == "c"
    assert raw.headers["x-failover-recovered"] == "true"
    assert int(raw.headers["x-failover-attempts"]) >= 2
    assert raw.parse().output_text == "ok from c"
    async with client.responses.stream(model="flaky", input="Hi") as s:
        final = await s.get_final_response()
    assert final.output_text == "ok from c"
    assert [c.kind for c in kit.providers["x"].calls][:2] == ["overloaded", "overloaded"]


# -------------------------------------------------------------------- cut and failed


async def test_truncation_streamed_is_incomplete_and_plain_is_a_typed_422(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["s"].load([Reply.truncate("one two three four five")])
    before = len(kit.providers["s"].calls)
    events = [
        e async for e in await client.responses.create(model="solo", input="Count", stream=True, extra_headers=NO_HOLD)
    ]
    built = added_up(events)
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    (message,) = last.response.output
    assert message.status == "incomplete" and shown(message) == built[0] == "one two three four five"
    # a plain answer cut by the limit is repaired (max tokens raised); cut again, it is the typed failure
    kit.providers["s"].load([Reply.truncate("one"), Reply.truncate("one two")])
    with pytest.raises(openai.UnprocessableEntityError) as exc:
        await client.responses.create(model="solo", input="Count")
    assert isinstance(exc.value.body, dict) and exc.value.body["code"] == "truncated"
    assert len(kit.providers["s"].calls) - before == 3  # the stream's one attempt, the plain one and its repair


async def test_a_failure_mid_stream_is_an_error_event_then_response_failed(
    kit: Kit, client: openai.AsyncOpenAI
) -> None:
    kit.providers["s"].load([Reply.drop_after(3, text="one two three four five six")])
    events = [
        e async for e in await client.responses.create(model="solo", input="Count", stream=True, extra_headers=NO_HOLD)
    ]
    error, failed = events[-2:]
    assert error.type == "error" and error.code == "partial_output" and "partial_output" in error.message
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None and "request id" in failed.response.error.message
    (message,) = failed.response.output
    assert message.status == "incomplete" and shown(message)  # what was sent, nothing spliced on
    assert [e.sequence_number for e in events] == list(range(len(events)))
    # the stream helper has no completed response to give
    kit.providers["s"].load([Reply.drop_after(3, text="one two three four five six")])
    async with client.responses.stream(model="solo", input="Count", extra_headers=NO_HOLD) as s:
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            await s.get_final_response()


async def test_a_break_before_the_commit_point_is_rescued_in_the_sdk(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["s"].load([Reply.drop_after(3, text="one two three four five six"), Reply.ok("whole answer")])
    before = len(kit.providers["s"].calls)
    async with client.responses.stream(model="solo", input="Count") as s:
        final = await s.get_final_response()
    assert final.status == "completed" and final.output_text == "whole answer"
    assert len(kit.providers["s"].calls) - before == 2


async def test_unavailable_is_openais_error_with_the_retry_policy(kit: Kit, client: openai.AsyncOpenAI) -> None:
    kit.providers["s"].load("rate_limit(retry_after=30)")
    before = len(kit.providers["s"].calls)
    with pytest.raises(openai.APIStatusError) as exc:
        await client.responses.create(model="solo", input="Hi", extra_headers={"x-failover-deadline-ms": "2000"})
    err = exc.value
    assert err.status_code == 503
    assert err.response.headers["retry-after"] == "30" and err.response.headers["x-should-retry"] == "false"
    assert isinstance(err.body, dict) and err.body["code"] == "rate_limited"
    # the SDK at its default max_retries obeyed x-should-retry: one request, the router's attempts only
    assert len(kit.providers["s"].calls) - before == int(err.response.headers["x-failover-attempts"]) == 1


async def test_deadline_is_504_and_streams_fail_before_the_first_byte_the_same(
    kit: Kit, client: openai.AsyncOpenAI
) -> None:
    kit.providers["s"].load("hang")
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as exc:
            await client.responses.create(
                model="solo", input="Hi", stream=stream, extra_headers={"x-failover-deadline-ms": "300"}
            )
        assert exc.value.status_code == 504 and exc.value.response.headers["x-should-retry"] == "false"


async def test_client_disconnect_mid_stream_closes_upstream(kit: Kit, client: openai.AsyncOpenAI) -> None:
    a = kit.providers["a"]
    a.load([Reply.ok(" ".join(f"w{i}" for i in range(400)), chunk_interval=0.02)])
    before = len(a.calls)
    stream = await client.responses.create(model="chat", input="Hi", stream=True, extra_headers=NO_HOLD)
    await leave_after(stream, 6)
    call = await disconnected_call(a, before)
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.events_sent < 100


# -------------------------------------------------------------------- refused: stateful and unsupported


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("previous_response_id", "resp_123"),
        ("conversation", "conv_123"),
        ("prompt", {"id": "pmpt_123"}),
        ("background", True),
    ],
)
async def test_stateful_fields_are_a_400_naming_the_field_and_why(
    kit: Kit, client: openai.AsyncOpenAI, field: str, value: Any
) -> None:
    before = len(kit.net.calls)
    with pytest.raises(openai.BadRequestError) as exc:
        await client.responses.create(model="chat", input="Hi", extra_body={field: value})
    body = exc.value.body
    assert isinstance(body, dict) and body["param"] == field
    assert field in body["message"] and "server-side state" in body["message"]
    assert exc.value.response.headers["x-should-retry"] == "false"
    assert len(kit.net.calls) == before  # nothing went upstream


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        ({"tools": [{"type": "web_search"}], "tool_choice": "required"}, "tools[0].type"),
        ({"tools": [WEATHER], "tool_choice": {"type": "file_search"}}, "tool_choice.type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0].type",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            "input[0].content[0].file_id",
        ),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"max_output_tokens": "300"}, "max_output_tokens"),
    ],
)
async def test_what_the_gateway_cannot_carry_is_a_400_naming_the_field(
    kit: Kit, client: openai.AsyncOpenAI, params: dict[str, Any], param: str
) -> None:
    body = {"model": "chat", "input": "Hi", **params}
    before = len(kit.net.calls)
    with pytest.raises(openai.BadRequestError) as exc:
        await client.post("/responses", body=body, cast_to=object)
    assert isinstance(exc.value.body, dict) and exc.value.body["param"] == param, exc.value.body
    assert len(kit.net.calls) == before  # nothing went upstream


async def test_stored_responses_are_a_404_that_says_why(kit: Kit, client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as got:
        await client.responses.retrieve("resp_abc")
    assert "keeps no responses" in got.value.message and "input" in got.value.message
    with pytest.raises(openai.NotFoundError) as deleted:
        await client.responses.delete("resp_abc")
    assert "keeps no responses" in deleted.value.message
    with pytest.raises(openai.NotFoundError):
        await client.responses.input_items.list("resp_abc")
    async with openai.AsyncOpenAI(base_url=client.base_url, api_key="wrong-key") as stranger:
        with pytest.raises(openai.AuthenticationError):
            await stranger.responses.retrieve("resp_abc")


async def test_secrets_never_returned(kit: Kit, client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as exc:
        await client.responses.create(model="misconfigured", input="Hi")
    assert exc.value.status_code == 502
    assert PROVIDER_KEY not in exc.value.response.text
    assert PROVIDER_KEY not in json.dumps(dict(exc.value.response.headers))


# -------------------------------------------------------------------- the gateway's limits apply here too


async def test_the_hostile_input_limits_apply(kit: Kit) -> None:
    """Body size, JSON depth, invalid JSON, lone surrogates, a key's route: the same answers as on
    the chat endpoint (the same lifecycle), each before anything goes upstream."""
    before = len(kit.net.calls)
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    async with kit.client() as c:
        big = await c.post("/v1/responses", json={"model": "chat", "input": "x" * (65 * 1024)})
        nested = await c.post("/v1/responses", json={"model": "chat", "input": "Hi", "metadata": {"k": deep}})
        broken = await c.post("/v1/responses", content=b'{"model": "chat", "input": ', headers=JSON)
        lone_body = b'{"model": "chat", "input": [{"role": "user", "content": "\\ud800"}]}'
        lone = await c.post("/v1/responses", content=lone_body, headers=JSON)
        unknown = await c.post("/v1/responses", json={"model": "nope", "input": "Hi"})
        denied = await c.post("/v1/responses", json={"model": "secret", "input": "Hi"})
        method = await c.get("/v1/responses")
    assert (big.status_code, big.json()["error"]["code"]) == (413, "request_too_large")
    assert (nested.status_code, nested.json()["error"]["code"]) == (400, "json_too_deep")
    assert (broken.status_code, broken.json()["error"]["code"]) == (400, "invalid_json")
    assert (lone.status_code, lone.json()["error"]["param"]) == (400, "input[0].content")
    assert (unknown.status_code, unknown.json()["error"]["param"]) == (404, "model")
    assert (denied.status_code, denied.json()["error"]["code"]) == (403, "route_not_allowed")
    assert method.status_code == 405 and method.headers["allow"] == "POST"
    for r in (big, nested, broken, lone, unknown, denied, method):
        assert r.headers["x-should-retry"] == "false"
    assert len(kit.net.calls) == before


JSON = {"content-type": "application/json"}


# -------------------------------------------------------------------- a Responses target behind the endpoint


async def test_a_responses_target_gets_its_own_reasoning_back_and_a_chat_target_takes_over() -> None:
    """Route ``gpt``: an OpenAI Responses target, then an approved Chat Completions fallback. The
    Responses target's encrypted reasoning goes to the client as it was and back to the target
    untouched; when the target is down, the fallback answers the same client, stream and all."""
    r = FakeProvider("r", "openai-responses", api_key=PROVIDER_KEY)
    a = FakeProvider("a", "openai", api_key=PROVIDER_KEY)
    route = Route(name="gpt", primary=(fake_target(r, PROVIDER_KEY),), fallbacks=(fake_target(a, PROVIDER_KEY),))
    app = create_app(quiet_router([route], FakeNetwork(r, a)), GatewaySettings())
    call_first = Reply.ok(tool_calls=[("get_weather", {"city": "Oslo"})], reasoning="Need the weather.")
    r.load([call_first, Reply.ok("Sunny.")])
    asked: Any = {"tools": [WEATHER], "reasoning": {"effort": "medium"}}  # a reasoning request: encrypted items
    with ServerThread(app) as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused") as client:
            first = await client.responses.create(model="gpt", input="Weather in Oslo?", **asked)
            thinking = next(i for i in first.output if i.type == "reasoning")
            call = next(i for i in first.output if i.type == "function_call")
            assert thinking.encrypted_content and not thinking.encrypted_content.startswith("failover.v1.")
            history: list[Any] = [
                {"role": "user", "content": "Weather in Oslo?"},
                *[i.model_dump(exclude_none=True) for i in first.output],
                {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
            ]
            second = await client.responses.create(model="gpt", input=history, **asked)
            assert second.output_text == "Sunny."
            sent = r.calls[1].json
            assert sent is not None
            (back,) = [i for i in sent["input"] if i.get("type") == "reasoning"]
            assert back["encrypted_content"] == thinking.encrypted_content  # the provider's own, untouched
            r.load("overloaded")
            async with client.responses.stream(model="gpt", input=history, **asked) as s:
                final = await s.get_final_response()
    assert final.output_text == "ok from a"
    assert [c.kind for c in r.calls[2:]] == ["overloaded", "overloaded"]
    chat = a.calls[-1].json
    assert chat is not None and not any("reasoning_content" in m for m in chat["messages"])  # not its to read
