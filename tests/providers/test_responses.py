"""The OpenAI Responses dialect: the request it builds (checked against the openai SDK's own
request types) and what it reads from a response body or an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)

from failover.model import (
    Dialect,
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Reasoning,
    Request,
    Response,
    ResponseFormat,
    StopReason,
    Tool,
    ToolCall,
    ToolChoice,
)
from failover.providers import OpenAIResponsesDialect, dialect_for

from ._wire import load, response, target

RS = Dialect.OPENAI_RESPONSES
D = OpenAIResponsesDialect()
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = Tool(name="get_weather", description="Weather in a city", parameters=SCHEMA, strict=True)


class _NonStreaming(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # reaches the nested TypedDicts too
    body: ResponseCreateParamsNonStreaming


class _Streaming(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    body: ResponseCreateParamsStreaming


def sdk_valid(body: dict[str, Any], *, stream: bool = False) -> None:
    """``body`` is a create-response request as openai-python types it: every key known, every
    item of a known shape (raises pydantic's ValidationError otherwise)."""
    (_Streaming if stream else _NonStreaming)(body=body)


def build(request: Request, *, stream: bool = False, **kw: Any) -> dict[str, Any]:
    http = D.build(target(RS, **kw), request, stream=stream)
    assert http.json is not None
    return dict(http.json)


FULL = Request(
    messages=(
        Message.system("Be brief."),
        Message.system("Answer in French."),
        Message.user("Weather here?", ImagePart(url="data:image/png;base64,iVBORw0KGgo=", detail="low")),
        Message.assistant(
            "Let me check.", tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}'),)
        ),
        Message.tool("call_1", "Sunny, 21 C"),
    ),
    tools=(WEATHER, Tool(name="noop")),
    tool_choice=ToolChoice(mode="auto"),
    response_format=ResponseFormat.json_schema(SCHEMA, name="weather"),
    max_tokens=300,
    temperature=0.3,
    top_p=0.9,
    stop=("END",),
    seed=7,
    reasoning_effort="low",
)


# -------------------------------------------------------------------------------- build


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_full_request_is_a_valid_create_response_body(stream: bool) -> None:
    body = build(FULL, stream=stream)
    sdk_valid(body, stream=stream)
    assert body.get("stream", False) is stream
    http = D.build(target(RS), FULL, stream=stream)
    assert (http.method, http.url) == ("POST", "https://api.openai.com/v1/responses")
    assert http.headers["authorization"] == "Bearer sk-test-KEY-123"
    assert http.headers["accept"] == ("text/event-stream" if stream else "application/json")


def test_the_request_maps_field_by_field() -> None:
    body = build(FULL)
    assert body["model"] == "gpt-5-mini"
    assert body["instructions"] == "Be brief.\n\nAnswer in French."  # every system message, in order
    assert body["store"] is False  # always: a retry must not leave a second stored response
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather here?"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
            ],
        },
        {"type": "message", "role": "assistant", "content": "Let me check."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": SCHEMA,
            "strict": True,
        },
        # strict false said out loud: left out, this API would make the tool strict
        {"type": "function", "name": "noop", "parameters": {"type": "object", "properties": {}}, "strict": False},
    ]
    assert body["tool_choice"] == "auto"
    assert body["text"] == {"format": {"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}}
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (300, 0.3, 0.9)
    assert body["reasoning"] == {"effort": "low"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert not {"stop", "seed", "previous_response_id", "messages", "max_tokens"} & set(body)


def test_a_plain_request_asks_for_nothing_a_model_without_reasoning_refuses() -> None:
    body = build(Request.simple("hi"))
    sdk_valid(body)
    assert body == {
        "model": "gpt-5-mini",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "store": False,
    }


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice(mode="auto"), "auto"),
        (ToolChoice(mode="none"), "none"),
        (ToolChoice(mode="required"), "required"),
        (ToolChoice(mode="tool", name="get_weather"), {"type": "function", "name": "get_weather"}),
        (ToolChoice(mode="tool"), "required"),
    ],
)
def test_tool_choice(choice: ToolChoice, wire: Any) -> None:
    body = build(Request(messages=(Message.user("hi"),), tools=(WEATHER,), tool_choice=choice))
    sdk_valid(body)
    assert body["tool_choice"] == wire


def test_json_object_and_no_tool_choice_without_tools() -> None:
    request = Request(
        messages=(Message.user("hi"),),
        response_format=ResponseFormat(kind="json_object"),
        tool_choice=ToolChoice(mode="required"),
    )
    body = build(request)
    sdk_valid(body)
    assert body["text"] == {"format": {"type": "json_object"}}
    assert "tool_choice" not in body and "tools" not in body


@pytest.mark.parametrize(("asked", "sent"), [(1, 16), (15, 16), (16, 16), (17, 17)])
def test_max_output_tokens_is_at_least_the_apis_minimum(asked: int, sent: int) -> None:
    assert build(Request.simple("hi", max_tokens=asked))["max_output_tokens"] == sent


def test_reasoning_goes_back_by_its_encrypted_content_only() -> None:
    ours = Reasoning(text="Think first.", signature="gAAAA-enc-1", source="openai-responses", origin="x")
    summary_less = Reasoning(signature="gAAAA-enc-2", source="openai-responses")
    unsigned = Reasoning(text="no way back without a store", source="openai-responses")
    theirs = Reasoning(text="Claude's", signature="sig", source="anthropic")
    chat = Reasoning(text="DeepSeek's", source="openai")
    turn = Message.assistant(
        "",
        tool_calls=(ToolCall(id="call_9", name="noop", arguments="", parsed={}),),
        reasoning=(ours, summary_less, unsigned, theirs, chat),
    )
    request = Request(messages=(Message.user("hi"), turn, Message.tool("call_9", "done")), tools=(Tool(name="noop"),))
    body = build(request)
    assert body["input"][1:] == [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Think first."}],
            "encrypted_content": "gAAAA-enc-1",
        },
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-enc-2"},
        {"type": "function_call", "call_id": "call_9", "name": "noop", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "done"},
    ]
    # a reasoning model's loop: the next reasoning must come back encrypted too
    assert body["include"] == ["reasoning.encrypted_content"]
    # Items go without their item ids (as OpenAI's own stateless client, Codex, sends them): with
    # store false an id refers to nothing. The SDK types the id as required; with one, it is valid.
    assert all("id" not in item for item in body["input"])
    with pytest.raises(pydantic.ValidationError):
        sdk_valid(body)
    sdk_valid(
        {**body, "input": [dict(item, id="rs_1") if item["type"] == "reasoning" else item for item in body["input"]]}
    )


def test_a_reasoning_summary_is_asked_for_only_when_the_target_says_so() -> None:
    plain = build(Request(messages=(Message.user("hi"),), reasoning_effort="high"))
    assert plain["reasoning"] == {"effort": "high"}
    summary = build(Request.simple("hi"), extra=(("reasoning_summary", "detailed"),))
    sdk_valid(summary)
    assert summary["reasoning"] == {"summary": "detailed"}
    assert summary["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in build(Request.simple("hi"), extra=(("reasoning_summary", "verbose"),))


def test_a_clients_hosted_tools_include_and_summary_go_verbatim() -> None:
    search = {"type": "web_search", "filters": {"allowed_domains": ["a.org"]}}
    asked = Request(
        messages=(Message.user("hi"),),
        tools=(WEATHER,),
        tool_choice=ToolChoice(mode="required"),
        hosted_tools=(search,),
        include=("web_search_call.action.sources", "reasoning.encrypted_content"),
        reasoning_summary="concise",
        reasoning_effort="low",
    )
    body = build(asked, extra=(("reasoning_summary", "detailed"),))  # the client's summary wins
    sdk_valid(body)
    assert [t["type"] for t in body["tools"]] == ["function", "web_search"] and body["tools"][1] == search
    assert body["tool_choice"] == "required"
    assert body["include"] == ["reasoning.encrypted_content", "web_search_call.action.sources"]
    assert body["reasoning"] == {"effort": "low", "summary": "concise"}
    alone = build(Request(messages=(Message.user("hi"),), hosted_tools=(search,), include=("a.b",)))
    assert (alone["tools"], alone["include"]) == ([search], ["a.b"])


def test_hosted_tools_items_are_kept_verbatim() -> None:
    searched = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search"}}
    message = {"id": "m1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]}
    data = {"object": "response", "status": "completed", "output": [searched, message], "usage": {}}
    got = D.parse(target(RS), response(200, json.dumps(data)))
    assert isinstance(got, Response) and got.hosted_items == (searched,) and got.text == "Hi"


def test_azure_sends_the_key_as_api_key_and_extras_win() -> None:
    t = target(
        RS,
        base_url="https://res.openai.azure.com/openai/v1/",
        model="my-deployment",
        azure_deployment=True,
        headers=(("x-ms-client-request-id", "r1"),),
        query=(("api-version", "preview"),),
    )
    http = D.build(t, Request.simple("hi"))
    assert http.url == "https://res.openai.azure.com/openai/v1/responses?api-version=preview"
    assert http.headers["api-key"] == "sk-test-KEY-123" and "authorization" not in http.headers
    assert http.headers["x-ms-client-request-id"] == "r1"
    assert http.json is not None and http.json["model"] == "my-deployment"


def test_no_key_no_credential_header() -> None:
    http = D.build(target(RS, api_key=None), Request.simple("hi"))
    assert "authorization" not in http.headers and "api-key" not in http.headers


def test_the_registry_hands_out_the_dialect() -> None:
    adapter = dialect_for(RS)
    assert isinstance(adapter, OpenAIResponsesDialect)
    assert (adapter.name, adapter.reasoning_source) == ("openai-responses", "openai-responses")


# -------------------------------------------------------------------------------- parse


def body(*output: dict[str, Any], status: str = "completed", **extra: Any) -> str:
    data = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": "gpt-5-mini-2025-08-07",
        "output": list(output),
        "usage": {
            "input_tokens": 30,
            "input_tokens_details": {"cached_tokens": 12},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 8},
            "total_tokens": 50,
        },
        **extra,
    }
    return json.dumps(data)


def text(t: str, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": t}
    return {"id": "msg_1", "type": "message", "status": status, "role": "assistant", "content": [part]}


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def parse(data: str, status: int = 200, **headers: str) -> Response | Failure:
    return D.parse(target(RS), response(status, data, **headers))


def test_text_usage_and_ids() -> None:
    got = parse(body(text("Hello "), text("there.")), x_request_id="req_42")
    assert isinstance(got, Response)
    assert got.text == "Hello there."
    assert (got.stop_reason, got.raw_stop_reason) == (StopReason.END_TURN, "completed")
    assert (got.usage.input_tokens, got.usage.output_tokens) == (30, 20)
    assert (got.usage.cached_input_tokens, got.usage.reasoning_tokens) == (12, 8)
    assert (got.model, got.response_id, got.provider_request_id) == ("gpt-5-mini-2025-08-07", "resp_1", "req_42")


def test_function_calls_are_named_by_their_call_id() -> None:
    got = parse(body(call("call_a", "get_weather", '{"city":"Paris"}'), call("call_b", "noop", "")))
    assert isinstance(got, Response)
    assert [(c.id, c.name, c.parsed) for c in got.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "noop", {}),
    ]
    assert got.stop_reason is StopReason.TOOL_USE


def test_reasoning_summary_and_encrypted_content() -> None:
    item = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "**Plan**"}, {"type": "summary_text", "text": "Then answer."}],
        "encrypted_content": "gAAAAenc",
    }
    bare = {"id": "rs_2", "type": "reasoning", "summary": []}  # no summary asked, no include: nothing to keep
    open_model = {
        "id": "rs_3",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "raw"}],
    }
    got = parse(body(item, bare, open_model, text("Hi")))
    assert isinstance(got, Response)
    assert [(r.text, r.signature, r.source, r.origin) for r in got.reasoning] == [
        ("**Plan**\n\nThen answer.", "gAAAAenc", "openai-responses", "openai-responses:gpt-5-mini"),
        ("raw", None, "openai-responses", "openai-responses:gpt-5-mini"),
    ]


@pytest.mark.parametrize(
    ("details", "kind", "stop"),
    [
        ({"reason": "max_output_tokens"}, FailureKind.TRUNCATED, StopReason.MAX_TOKENS),
        ({"reason": "content_filter"}, FailureKind.CONTENT_FILTERED, StopReason.CONTENT_FILTER),
        ({"reason": "max_messages"}, FailureKind.TRUNCATED, StopReason.OTHER),
        (None, FailureKind.TRUNCATED, StopReason.OTHER),
    ],
)
def test_an_incomplete_response_is_a_failure_that_keeps_the_answer(
    details: dict[str, str] | None, kind: FailureKind, stop: StopReason
) -> None:
    got = parse(body(text("Once upon a", status="incomplete"), status="incomplete", incomplete_details=details))
    assert isinstance(got, Failure)
    assert got.kind is kind
    assert got.response is not None and got.response.text == "Once upon a"
    assert got.response.stop_reason is stop
    assert got.usage is not None and got.usage.output_tokens == 20  # it was paid for


def test_a_refusal_is_content_filtered() -> None:
    refusal = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    got = parse(body(refusal))
    assert isinstance(got, Failure) and got.kind is FailureKind.CONTENT_FILTERED
    assert got.response is not None and got.response.refusal == "I can't help with that."
    assert got.response.stop_reason is StopReason.REFUSAL


def test_malformed_arguments() -> None:
    got = parse(body(call("call_a", "get_weather", '{"city": "Par')))
    assert isinstance(got, Failure) and got.kind is FailureKind.TOOL_CALL_MALFORMED


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": "server_error", "message": "Something went wrong."}, FailureKind.PROVIDER_SERVER_ERROR),
        ({"code": "rate_limit_exceeded", "message": "Slow down."}, FailureKind.RATE_LIMITED),
        ({"code": "invalid_prompt", "message": "Flagged."}, FailureKind.CONTENT_FILTERED),
        ({"code": "invalid_image_url", "message": "Bad URL."}, FailureKind.INVALID_REQUEST),
        ({"code": "data_residency_mismatch", "message": "Wrong region."}, FailureKind.AUTHENTICATION_OR_PERMISSION),
        (None, FailureKind.PROVIDER_SERVER_ERROR),
    ],
)
def test_a_failed_response_is_classified_by_its_error_code(error: dict[str, str] | None, kind: FailureKind) -> None:
    got = parse(body(status="failed", error=error))
    assert isinstance(got, Failure)
    assert got.kind is kind
    assert got.response is not None  # the usage and what there was, for the trace


def test_a_background_response_still_running_is_not_an_answer() -> None:
    got = parse(body(status="in_progress"))
    assert isinstance(got, Failure) and got.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "not finished" in got.message


@pytest.mark.parametrize("data", ["<html>502 Bad Gateway</html>", '{"choices": []}', ""])
def test_a_200_that_is_not_a_response_object(data: str) -> None:
    got = parse(data)
    assert isinstance(got, Failure) and got.kind is FailureKind.PROVIDER_SERVER_ERROR


# The openai-chat error samples: OpenAI answers every endpoint with the same envelope, and 13 and
# 15 were recorded from /v1/responses.
@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("openai-chat/12-error-429-rate-limit-exceeded.http", FailureKind.RATE_LIMITED),
        ("openai-chat/13-error-429-insufficient-quota.json", FailureKind.QUOTA_EXHAUSTED),
        ("openai-chat/14-error-400-context-length-exceeded.json", FailureKind.CONTEXT_OVERFLOW),
        ("openai-chat/15-error-401-invalid-api-key.http", FailureKind.AUTHENTICATION_OR_PERMISSION),
        ("openai-chat/16-error-404-model-not-found.json", FailureKind.MODEL_NOT_FOUND),
        ("openai-chat/17-error-500-server-error.json", FailureKind.PROVIDER_SERVER_ERROR),
        ("openai-chat/18-error-503-server-overloaded.json", FailureKind.PROVIDER_OVERLOADED),
    ],
)
def test_openais_error_bodies_are_classified_as_chat_completions_classifies_them(
    wire: Path, name: str, kind: FailureKind
) -> None:
    resp = load(wire, name)
    got = D.parse(target(RS), resp)
    chat = dialect_for(Dialect.OPENAI).parse(target(Dialect.OPENAI), resp)
    assert isinstance(got, Failure) and isinstance(chat, Failure)
    assert got.kind is kind is chat.kind
    assert (got.provider_code, got.retry_after, got.status) == (chat.provider_code, chat.retry_after, chat.status)
    assert got.message.startswith("openai-responses ")


def test_the_responses_api_context_window_wording_is_an_overflow() -> None:
    message = "Your input exceeds the context window of this model. Please adjust your input and try again."
    error = {"message": message, "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}
    envelope = {"error": error}
    got = parse(json.dumps(envelope), 400)
    assert isinstance(got, Failure) and got.kind is FailureKind.CONTEXT_OVERFLOW
    del error["code"]  # the words alone say it too
    got = parse(json.dumps(envelope), 400)
    assert isinstance(got, Failure) and got.kind is FailureKind.CONTEXT_OVERFLOW


def test_an_echoed_key_is_redacted() -> None:
    envelope = {"error": {"message": "Incorrect API key provided: sk-test-KEY-123.", "code": "invalid_api_key"}}
    got = parse(json.dumps(envelope), 401)
    assert isinstance(got, Failure)
    assert "sk-test-KEY-123" not in got.message and "sk-test-KEY-123" not in (got.detail or "")


def test_a_200_error_envelope_from_a_proxy() -> None:
    got = parse(json.dumps({"error": {"message": "upstream overloaded", "code": 503}}))
    assert isinstance(got, Failure) and got.kind is FailureKind.PROVIDER_OVERLOADED
