"""The OpenAI Responses API as the gateway speaks it: bodies in, response objects and events out.

The oracle for a stream is openai-python's own: every event is validated against its
``ResponseStreamEvent`` types, and its ``ResponseStreamState`` (what ``client.responses.stream()``
accumulates with, and checks the lifecycle with) must end with the response the plain body
renders for the same answer.
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response as SdkResponse
from openai.types.responses import ResponseStreamEvent

from failover.inbound import RelayMismatch, WireError
from failover.inbound import responses as rs
from failover.inbound._responses_items import client_token, history_reasoning
from failover.model import (
    Completed,
    Failure,
    FailureKind,
    ImagePart,
    Message,
    PartialOutput,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    ResponseFormat,
    RouteRecord,
    StopReason,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    Usage,
)
from failover.model._record import Workflow

from .test_reasoning import CALL, CLAUDE, DEEPSEEK, REDACTED, answers, streams


def _event_types() -> dict[str, type[Any]]:
    """openai-python's event class for each event name (its union is discriminated by ``type``)."""
    union = typing.get_args(ResponseStreamEvent)[0]
    return {typing.get_args(cls.model_fields["type"].annotation)[0]: cls for cls in typing.get_args(union)}


_EVENTS = _event_types()


class _Event:
    """Validates one event against its openai-python type (strict pydantic validation, stricter
    than the SDK's own lenient construction)."""

    @staticmethod
    def validate_python(data: dict[str, Any]) -> Any:
        return _EVENTS[data["type"]].model_validate(data)


EVENT = _Event()
BODY = rs.parse_body({"model": "chat", "input": "Hi"})
RECORD = RouteRecord(
    request_id="req_1",
    route="chat",
    workflow=Workflow.DIRECT,
    outcome="truncated",
    attempts=(),
    waits=(),
    excluded=(),
    recovered=False,
    recovery_reason=None,
    target_used="a",
    elapsed_ms=1.0,
    added_latency_ms=0.0,
    total_cost=0.0,
)


def request(**body: Any) -> Any:
    return rs.to_request(rs.parse_body({"model": "chat", **body}))


def refused(body: dict[str, Any]) -> WireError:
    with pytest.raises(WireError) as exc:
        rs.to_request(rs.parse_body({"model": "chat", **body}))
    assert exc.value.status == 400
    return exc.value


# -- the SDK as the oracle --------------------------------------------------------------------------


def rendered(events: list[object], end: Completed | PartialOutput, *, body: Any = BODY) -> list[tuple[str, Any]]:
    r = rs.EventRenderer("resp_1", 1700000000, "chat", rs.echo(body), request_id="req_1")
    out = r.start()
    for e in events:
        out += r.render(e)
    if isinstance(end, Completed):
        return out + r.end(end, now=1700000001)
    return out + r.partial(end, "partial_output: cut (request id req_1)")


def sdk_events(events: list[tuple[str, Any]]) -> list[Any]:
    """Each event as the SDK's type (strictly validated), in a sequence the SDK's stream state
    accepts; items one at a time, as OpenAI streams them."""
    out = []
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    open_item: int | None = None
    for i, (name, data) in enumerate(events):
        assert data["type"] == name and data["sequence_number"] == i
        event = EVENT.validate_python(json.loads(json.dumps(data)))
        if name == "response.output_item.added":
            assert open_item is None
            open_item = data["output_index"]
        elif "output_index" in data:
            assert data["output_index"] == open_item, name
            if name == "response.output_item.done":
                open_item = None
        state.handle_event(event)
        out.append(event)
    assert open_item is None
    grammar(events)
    return out


# The events of one output item, as OpenAI sends them (one letter per event name).
_LETTERS = {
    "response.output_item.added": "A",
    "response.content_part.added": "P",
    "response.output_text.delta": "t",
    "response.output_text.done": "T",
    "response.refusal.delta": "r",
    "response.refusal.done": "R",
    "response.content_part.done": "Q",
    "response.function_call_arguments.delta": "f",
    "response.function_call_arguments.done": "F",
    "response.reasoning_summary_part.added": "S",
    "response.reasoning_summary_text.delta": "s",
    "response.reasoning_summary_text.done": "U",
    "response.reasoning_summary_part.done": "V",
    "response.output_item.done": "D",
}
_GRAMMAR = {
    "message": re.compile(r"A(Pt*TQ)?(PrRQ)?D"),
    "function_call": re.compile(r"Af*FD"),
    "reasoning": re.compile(r"A(Ss*UV)?D"),
}


def grammar(events: list[tuple[str, Any]]) -> None:
    """Each item's events in OpenAI's order, and each done event holding what its deltas add up to."""
    per_item: dict[int, list[tuple[str, Any]]] = {}
    for name, data in events:
        if "output_index" in data:
            per_item.setdefault(data["output_index"], []).append((name, data))
    for index, mine in per_item.items():
        kind = mine[0][1]["item"]["type"]
        letters = "".join(_LETTERS[name] for name, _ in mine)
        assert _GRAMMAR[kind].fullmatch(letters), (index, kind, letters)
        deltas = "".join(d["delta"] for n, d in mine if n.endswith(".delta") and "refusal" not in n)
        for name, data in mine:
            if name in ("response.output_text.done", "response.reasoning_summary_text.done"):
                assert data["text"] == deltas
            elif name == "response.function_call_arguments.done":
                assert data["arguments"] == deltas


def final(events: list[tuple[str, Any]]) -> Any:
    sdk_events(events)
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for _, data in events:
        state.handle_event(EVENT.validate_python(json.loads(json.dumps(data))))
    return state._completed_response


def items(output: list[Any]) -> list[dict[str, Any]]:
    out = []
    for item in output:
        d = item if isinstance(item, dict) else item.model_dump(exclude_none=True)
        d = {k: v for k, v in d.items() if k not in ("id", "parsed_arguments") and v is not None}
        if "content" in d:
            d["content"] = [{k: v for k, v in p.items() if k != "parsed"} for p in d["content"]]
        out.append(d)
    return out


def plain(resp: Response) -> SdkResponse:
    body = rs.response_body(resp, response_id="resp_1", created=1700000000, model="chat", body=BODY, now=1700000001)
    return SdkResponse.model_validate(body)


# -- the body -> Request ----------------------------------------------------------------------------


def test_a_string_input_and_instructions() -> None:
    req = request(input="Hi", instructions="Be brief.", max_output_tokens=64, temperature=0.2, top_p=0.9)
    assert req.messages == (Message.system("Be brief."), Message.user("Hi"))
    assert (req.max_tokens, req.temperature, req.top_p) == (64, 0.2, 0.9)


def test_items_become_turns() -> None:
    req = request(
        input=[
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": [{"type": "input_text", "text": "Look:"}, image("data:image/png;base64,AAA")]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two cities."}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
            {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]},
            {"role": "assistant", "content": "Sunny and rain."},
        ]
    )
    system, user, turn, out1, out2, last = req.messages
    assert system == Message.system("Use tools.")
    assert user.content == (TextPart(text="Look:"), ImagePart(url="data:image/png;base64,AAA", detail="auto"))
    assert turn.role == "assistant" and turn.text == "Checking."
    assert [(c.id, c.name, c.parsed) for c in turn.tool_calls] == [
        ("c1", "get_weather", {"city": "Oslo"}),
        ("c2", "get_weather", None),  # malformed arguments are carried as they were
    ]
    assert turn.reasoning == (Reasoning(text="Two cities.", source="openai-responses"),)
    assert (out1, out2) == (Message.tool("c1", "sunny"), Message.tool("c2", "rain"))
    assert last == Message.assistant("Sunny and rain.")


def image(url: str) -> dict[str, Any]:
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def test_a_message_after_calls_is_another_turn_and_reasoning_alone_is_left_out() -> None:
    req = request(
        input=[
            {"role": "user", "content": "Hi"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Only thinking."}]},
            {"role": "user", "content": "Still there?"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"role": "assistant", "content": "Done."},
        ]
    )
    assert [(m.role, m.text, len(m.tool_calls)) for m in req.messages] == [
        ("user", "Hi", 0),
        ("user", "Still there?", 0),
        ("assistant", "", 1),
        ("assistant", "Done.", 0),
    ]


def test_tools_choice_format_and_effort() -> None:
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}, "strict": True}
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = request(
        input="Hi",
        tools=[tool],
        tool_choice={"type": "function", "name": "f"},
        text={"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}, "verbosity": "low"},
        reasoning={"effort": "xhigh", "summary": "auto"},
    )
    assert req.tools[0].name == "f" and req.tools[0].strict
    assert req.tool_choice == ToolChoice(mode="tool", name="f")
    assert req.response_format == ResponseFormat(kind="json_schema", schema=schema, name="out", strict=True)
    assert req.reasoning_effort == "high"
    assert request(input="Hi", reasoning={"effort": "none"}).reasoning_effort == "minimal"
    assert request(input="Hi", text={"format": {"type": "json_object"}}).response_format == ResponseFormat(
        kind="json_object"
    )
    assert request(input="Hi", text={"format": {"type": "text"}}).response_format is None


def test_accepted_fields_that_change_nothing_upstream() -> None:
    req = request(
        input="Hi",
        store=True,
        metadata={"k": "v"},
        parallel_tool_calls=False,
        user="u1",
        safety_identifier="s",
        prompt_cache_key="p",
        service_tier="auto",
        truncation="auto",
        include=["reasoning.encrypted_content"],
        stream_options={"include_obfuscation": False},
        previous_response_id=None,
        background=False,
    )
    assert req.messages == (Message.user("Hi"),)


# -- reasoning items --------------------------------------------------------------------------------


@pytest.mark.parametrize("block", [CLAUDE, REDACTED, DEEPSEEK], ids=["signed", "redacted", "unsigned"])
def test_a_block_of_another_provider_comes_back_as_it_was(block: Reasoning) -> None:
    token = client_token(block)
    assert token is not None and token.startswith("failover.v1.")
    assert history_reasoning(block.text, token, "input[0]") == block


def test_an_openai_responses_block_keeps_its_own_encrypted_content() -> None:
    own = Reasoning(text="s", signature="gAAAAB-opaque", source="openai-responses", origin="openai-responses:gpt-5")
    assert client_token(own) == "gAAAAB-opaque"
    back = history_reasoning("s", "gAAAAB-opaque", "input[0]")
    assert back == Reasoning(text="s", signature="gAAAAB-opaque", source="openai-responses")


@pytest.mark.parametrize("token", ["failover.v1.", "failover.v1.!!", "failover.v1.eyJzb3VyY2UiOiJtYXJzIn0"])
def test_a_token_that_claims_to_be_failovers_but_is_not_is_refused_naming_the_field(token: str) -> None:
    err = refused({"input": [{"type": "reasoning", "summary": [], "encrypted_content": token}]})
    assert err.param == "input[0].encrypted_content" and "exactly as it was received" in err.message


# -- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"input": "Hi", "previous_response_id": "resp_1"}, "previous_response_id", "server-side state"),
        ({"input": "Hi", "conversation": {"id": "conv_1"}}, "conversation", "server-side state"),
        ({"input": "Hi", "prompt": {"id": "pmpt_1"}}, "prompt", "template"),
        ({"input": "Hi", "background": True}, "background", "poll"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "send the item itself"),
        ({"input": [{"type": "computer_call_output", "call_id": "c"}]}, "input[0].type", "web_search_call items"),
        ({"input": "Hi", "tool_choice": {"type": "web_search"}}, "tool_choice.type", "hosted tool"),
        ({"input": "Hi", "tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice.type", "allowed"),
        ({"input": "Hi", "include": ["message.output_text.logprobs"]}, "include", "logprobs"),
        ({"input": "Hi", "context_management": [{"type": "compaction"}]}, "context_management", "compact"),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": [image("https://x/i.png")]}]},
            "input[0].output[0].type",
            "text only",
        ),
        ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0].content[0].type", "input_text"),
        ({"input": [{"role": "system", "content": [image("https://x/i.png")]}]}, "input[0].content[0]", "user"),
        ({"input": [{"role": "user", "content": []}]}, "input[0].content", "empty"),
        ({"input": [{"role": "user", "content": [image("ftp://x")]}]}, "input[0].content[0].image_url", "http"),
        ({"input": []}, "input", ""),
        ({}, "input", ""),
        ({"input": "Hi", "tools": [{"type": "function", "name": "f"}] * 2}, "tools[1].name", "twice"),
        ({"input": "Hi", "tool_choice": {"type": "function", "name": "g"}}, "tool_choice.name", "not in tools"),
        ({"input": "Hi", "metadata": {str(i): "v" for i in range(17)}}, "metadata", ""),
        ({"input": "Hi", "temperature": True}, "temperature", ""),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id", ""),
    ],
)
def test_what_cannot_be_carried_is_a_400_naming_the_field(body: dict[str, Any], param: str, says: str) -> None:
    err = refused(body)
    assert err.param == param, err
    assert says in err.message and param in err.message


def test_a_body_that_is_not_an_object() -> None:
    with pytest.raises(WireError, match="JSON object"):
        rs.parse_body(["model", "chat"])


# -- the answer -------------------------------------------------------------------------------------


def test_a_plain_answer_is_a_response_object() -> None:
    resp = Response(
        text="Oslo: sunny.",
        reasoning=(CLAUDE,),
        tool_calls=(CALL,),
        usage=Usage(input_tokens=10, output_tokens=5, cached_input_tokens=4, reasoning_tokens=2),
        stop_reason=StopReason.TOOL_USE,
    )
    got = plain(resp)
    assert got.status == "completed" and got.completed_at == 1700000001 and got.error is None
    reasoning, message, call = got.output
    assert reasoning.type == "reasoning" and [s.text for s in reasoning.summary] == ["Let me think."]
    assert message.type == "message" and got.output_text == "Oslo: sunny."
    assert call.type == "function_call"
    assert (call.call_id, call.name, call.arguments) == ("c1", "get_weather", CALL.arguments)
    assert got.usage is not None and got.usage.input_tokens_details.cached_tokens == 4
    assert (got.usage.total_tokens, got.usage.output_tokens_details.reasoning_tokens) == (15, 2)


@pytest.mark.parametrize(
    ("reason", "status", "why"),
    [
        (StopReason.END_TURN, "completed", None),
        (StopReason.MAX_TOKENS, "incomplete", "max_output_tokens"),
        (StopReason.CONTENT_FILTER, "incomplete", "content_filter"),
    ],
)
def test_status_and_incomplete_details(reason: StopReason, status: str, why: str | None) -> None:
    resp = Response(text="cut", stop_reason=reason)
    got = plain(resp)
    assert got.status == status
    assert (got.incomplete_details.reason if got.incomplete_details else None) == why
    assert got.output[0].status == ("completed" if why is None else "incomplete")
    streamed = final_or_incomplete([TextDelta(text="cut")], resp)
    assert streamed.status == status and items(streamed.output) == items(got.output)


def final_or_incomplete(events: list[object], resp: Response) -> Any:
    out = rendered(events, Completed(response=resp))
    sdk_events(out)
    return SdkResponse.model_validate(out[-1][1]["response"])


@pytest.mark.parametrize(
    "resp",
    [
        Response(refusal="I can't help with that.", stop_reason=StopReason.REFUSAL),
        Response(text="Partly.", refusal="No more.", stop_reason=StopReason.REFUSAL),
        Response(parsed={"answer": 42}),
        Response(),
        Response(reasoning=(REDACTED,), tool_calls=(CALL,), stop_reason=StopReason.TOOL_USE),
    ],
    ids=["refusal", "text-and-refusal", "structured-without-text", "empty", "redacted-and-a-call"],
)
def test_answers_streamed_with_nothing_but_their_end_equal_the_plain_body(resp: Response) -> None:
    events: list[object] = [TextDelta(text=resp.text)] if resp.text else []
    got = final(rendered(events, Completed(response=resp)))
    assert items(got.output) == items(plain(resp).output)


def test_a_stream_cut_by_the_output_limit_ends_incomplete_with_what_was_sent() -> None:
    failure = Failure(kind=FailureKind.TRUNCATED, message="cut", usage=Usage(input_tokens=3, output_tokens=2))
    cut = PartialOutput(text="one two", tool_calls=(), failure=failure, record=RECORD)
    out = rendered([TextDelta(text="one "), TextDelta(text="two")], cut)
    sdk_events(out)
    name, data = out[-1]
    assert name == "response.incomplete" and data["x_failover"]["request_id"] == "req_1"
    done = SdkResponse.model_validate(data["response"])
    assert done.incomplete_details is not None and done.incomplete_details.reason == "max_output_tokens"
    assert done.output_text == "one two" and done.output[0].status == "incomplete"
    assert done.usage is not None and done.usage.output_tokens == 2


def test_any_other_cut_is_an_error_event_then_response_failed() -> None:
    failure = Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message="reset")
    cut = PartialOutput(text="", tool_calls=(), failure=failure, record=RECORD)
    events: list[object] = [ToolCallStart(index=0, id="c1", name="f"), ToolCallDelta(index=0, arguments='{"a"')]
    out = rendered(events, cut)
    (error_name, error), (failed_name, failed) = out[-2:]
    assert (error_name, error["code"], error["param"]) == ("error", "partial_output", None)
    assert failed_name == "response.failed"
    response = SdkResponse.model_validate(failed["response"])
    assert response.status == "failed" and response.error is not None and "req_1" in response.error.message
    (call,) = response.output
    assert (call.type, call.status, call.arguments) == ("function_call", "incomplete", '{"a"')
    for _, data in out:
        EVENT.validate_python(json.loads(json.dumps(data)))


def test_an_answer_that_changed_under_the_client_raises() -> None:
    r = rs.EventRenderer("resp_1", 1700000000, "chat", rs.echo(BODY))
    r.start()
    r.render(TextDelta(text="Hello"))
    with pytest.raises(RelayMismatch):
        r.end(Completed(response=Response(text="Goodbye")), now=1700000001)


def test_calls_interleaved_upstream_go_out_one_item_at_a_time() -> None:
    c2 = ToolCall(id="c2", name="get_time", arguments='{"tz":"UTC"}', parsed={"tz": "UTC"})
    events: list[object] = [
        ReasoningDelta(index=0, text="Two "),
        ToolCallStart(index=0, id="c1", name="get_weather"),
        ToolCallStart(index=1, id="c2", name="get_time"),
        ToolCallDelta(index=1, arguments='{"tz":'),
        ToolCallDelta(index=0, arguments='{"city":'),
        ReasoningDelta(index=0, text="calls."),
        ToolCallDelta(index=1, arguments='"UTC"}'),
        ToolCallDelta(index=0, arguments='"Oslo"}'),
        ReasoningDone(index=0, block=Reasoning(text="Two calls.", source="openai", origin="openai:m")),
    ]
    resp = Response(
        reasoning=(Reasoning(text="Two calls.", source="openai", origin="openai:m"),),
        tool_calls=(CALL, c2),
        stop_reason=StopReason.TOOL_USE,
    )
    got = final(rendered(events, Completed(response=resp)))
    assert items(got.output) == items(plain(resp).output)


# -- any order a dialect streams an answer in -------------------------------------------------------


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_what_the_sdk_assembles_equals_the_plain_answer(data: st.DataObject) -> None:
    """For any order a dialect streams an answer in, the SDK's stream state ends with the response
    the plain body renders (items, text, calls, reasoning summaries and tokens), and every event
    is one of openai-python's types."""
    resp = data.draw(answers())
    events = data.draw(streams(resp))
    got = final(rendered(events, Completed(response=resp)))
    expected = items(plain(resp).output)
    found = items(got.output)
    # a stream goes in the order the model produced it (a call, then a later reasoning block; text
    # split by a call over two messages): the same text, the same reasoning and calls in order
    assert "".join(p.get("text", "") for i in found for p in i.get("content", ())) == resp.text
    for kind in ("reasoning", "function_call"):
        assert [i for i in found if i["type"] == kind] == [i for i in expected if i["type"] == kind]
    assert got.status == "completed"


# -- Codex's tools: namespaces, hosted tools, include and reasoning.summary --------------------------

FN: Any = {"type": "function", "name": "spawn_agent", "parameters": {"type": "object", "properties": {}}}


def test_a_namespace_is_flattened_and_its_calls_are_named_back() -> None:
    ns = {"type": "namespace", "name": "multi_agent_v1", "description": "Agents.", "tools": [FN]}
    body = rs.parse_body({"model": "chat", "input": "Hi", "tools": [ns], "tool_choice": "required"})
    req = rs.to_request(body)
    assert [(t.name, t.description) for t in req.tools] == [("multi_agent_v1__spawn_agent", "Agents.")]
    assert rs.tool_names(body) == {"multi_agent_v1__spawn_agent": ("multi_agent_v1", "spawn_agent")}
    call = ToolCall(id="c1", name="multi_agent_v1__spawn_agent", arguments="{}", parsed={})
    (item,) = rs.output_items(Response(tool_calls=(call,)), names=rs.tool_names(body))
    assert (item["name"], item["namespace"]) == ("spawn_agent", "multi_agent_v1")
    forced = request(
        input="Hi", tools=[ns], tool_choice={"type": "function", "name": "spawn_agent", "namespace": "multi_agent_v1"}
    )
    assert forced.tool_choice == ToolChoice(mode="tool", name="multi_agent_v1__spawn_agent")
    assert rs.echo(body)["tools"] == [{**ns, "tools": [FN]}]


@pytest.mark.parametrize(
    ("tools", "param", "says"),
    [
        (
            [{**FN, "name": "a__spawn_agent"}, {"type": "namespace", "name": "a", "tools": [FN]}],
            "tools[1].tools[0].name",
            "twice",
        ),
        ([{"type": "namespace", "name": "n" * 60, "tools": [FN]}], "tools[0].tools[0].name", "64 characters"),
        ([{"type": "namespace", "name": "n", "tools": []}], "tools[0].tools", ""),
        ([{"type": "namespace", "name": "n.x", "tools": [FN]}], "tools[0].name", ""),
    ],
)
def test_a_namespace_that_cannot_be_flattened_safely_is_a_400(tools: list[Any], param: str, says: str) -> None:
    err = refused({"input": "Hi", "tools": tools})
    assert err.param == param and says in err.message


def test_hosted_tools_include_and_summary_are_carried_verbatim() -> None:
    search = {"type": "web_search", "search_context_size": "low", "filters": {"allowed_domains": ["a.org"]}}
    req = request(
        input="Hi",
        tools=[FN, search, {"type": "custom", "name": "apply_patch"}],
        include=["reasoning.encrypted_content", "web_search_call.action.sources"],
        reasoning={"effort": "low", "summary": "detailed"},
    )
    assert [t.name for t in req.tools] == ["spawn_agent"]
    assert req.hosted_tools == (search, {"type": "custom", "name": "apply_patch"})
    assert req.include == ("reasoning.encrypted_content", "web_search_call.action.sources")
    assert req.reasoning_summary == "detailed"
    assert request(input="Hi", tools=[search], tool_choice="required").hosted_tools == (search,)


def test_a_web_search_call_in_the_history_is_taken_and_left_out() -> None:
    req = request(
        input=[
            {"role": "user", "content": "Weather?"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
        ]
    )
    assert req.messages == (Message.user("Weather?"), Message.assistant("Sunny."))


def test_a_plain_answer_gives_hosted_items_verbatim_before_the_message() -> None:
    searched = {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    out = rs.output_items(Response(text="Sunny.", hosted_items=(searched,)))
    assert [i["type"] for i in out] == ["web_search_call", "message"] and out[0] == searched


# -- max_tool_calls, truncation, service_tier: checked, then passed through ---------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tool_calls", 0),
        ("max_tool_calls", "3"),
        ("max_tool_calls", True),
        ("max_tool_calls", 2.5),
        ("truncation", "sometimes"),
        ("truncation", True),
        ("service_tier", "gold"),
        ("service_tier", 1),
    ],
)
def test_a_bad_responses_setting_is_refused_naming_it(field: str, value: object) -> None:
    err = refused({"input": "Hi", field: value})
    assert err.status == 400 and field in (err.param or "") and field in err.message


def test_the_responses_settings_go_to_a_responses_target_and_only_auto_truncation_binds() -> None:
    req = request(input="Hi", max_tool_calls=3, truncation="disabled", service_tier="flex")
    passed = req.passthrough
    assert passed is not None
    assert dict(passed.fields) == {"max_tool_calls": 3, "truncation": "disabled", "service_tier": "flex"}
    assert passed.hints == {"max_tool_calls", "truncation", "service_tier"} and not passed.opaque
    auto = request(input="Hi", truncation="auto").passthrough
    assert auto is not None and auto.opaque == {"truncation"}  # only a Responses target can cut to fit
