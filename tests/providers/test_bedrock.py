"""Bedrock Converse: bodies checked against botocore's service model, answers and errors classified.

Every body the dialect builds is validated with botocore's ``ParamValidator`` against the
``ConverseRequest`` / ``ConverseStreamRequest`` shapes of the ``bedrock-runtime`` model botocore
ships, and its URL path is the one botocore's own serializer writes for the same model id.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.loaders import Loader
from botocore.model import ServiceModel
from botocore.serialize import create_serializer
from botocore.validate import ParamValidator

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
    Target,
    TextPart,
    TimeoutPhase,
    Tool,
    ToolCall,
    ToolChoice,
)
from failover.providers import dialect_for
from failover.providers.bedrock import JSON_TOOL
from failover.transport import HttpResponse

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
TARGET = Target(
    name="bedrock-us",
    dialect=Dialect.BEDROCK,
    model=MODEL,
    base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
    region="us-east-1",
    max_output_tokens=8192,
)
DIALECT = dialect_for(Dialect.BEDROCK)
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
WEATHER = Tool(
    name="get_weather",
    description="Weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture(scope="module")
def service() -> ServiceModel:
    return ServiceModel(Loader().load_service_model("bedrock-runtime", "service-2"), "bedrock-runtime")


def _validate(service: ServiceModel, operation: str, params: dict[str, Any]) -> None:
    report = ParamValidator().validate(params, service.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


REQUESTS = {
    "text": Request.simple("What is the weather in Paris?", system="Be brief.", max_tokens=64),
    "sampling": Request(
        messages=(Message.user("hi"),), temperature=0.3, top_p=0.9, stop=("\n\n", "END"), max_tokens=10
    ),
    "image": Request(messages=(Message.user("What is this?", ImagePart(url=PNG)),)),
    "s3_image": Request(messages=(Message.user(ImagePart(url="s3://bucket/cat.jpeg")),)),
    "tools_auto": Request(messages=(Message.user("Weather?"),), tools=(WEATHER,), tool_choice=ToolChoice()),
    "tools_required": Request(
        messages=(Message.user("Weather?"),), tools=(WEATHER,), tool_choice=ToolChoice(mode="required")
    ),
    "tools_named": Request(
        messages=(Message.user("Weather?"),), tools=(WEATHER,), tool_choice=ToolChoice(mode="tool", name="get_weather")
    ),
    "tool_loop": Request(
        messages=(
            Message.user("Weather in Paris and Rome?"),
            Message.assistant(
                tool_calls=(
                    ToolCall(id="tooluse_1", name="get_weather", arguments='{"city":"Paris"}'),
                    ToolCall(id="tooluse_2", name="get_weather", arguments='{"city":"Rome"}'),
                ),
                reasoning=(Reasoning(text="two calls", signature="sig==", source="anthropic"),),
            ),
            Message.tool("tooluse_1", "sunny"),
            Message.tool("tooluse_2", "rain"),
        ),
        tools=(WEATHER,),
        reasoning_effort="low",
    ),
    "tool_choice_none_in_a_loop": Request(
        messages=(
            Message.user("Weather?"),
            Message.assistant(tool_calls=(ToolCall(id="t1", name="get_weather", arguments="{}"),)),
            Message.tool("t1", "sunny"),
        ),
        tools=(WEATHER,),
        tool_choice=ToolChoice(mode="none"),
    ),
    "json_schema": Request(
        messages=(Message.user("Answer as JSON"),), response_format=ResponseFormat.json_schema(SCHEMA)
    ),
    "json_schema_with_tools": Request(
        messages=(Message.user("Answer as JSON"),), tools=(WEATHER,), response_format=ResponseFormat.json_schema(SCHEMA)
    ),
    "json_object": Request(messages=(Message.user("JSON"),), response_format=ResponseFormat(kind="json_object")),
    "thinking": Request(messages=(Message.user("Think"),), reasoning_effort="medium", max_tokens=16000),
    "redacted_history": Request(
        messages=(
            Message.user("a"),
            Message.assistant("b", reasoning=(Reasoning(redacted="ZGF0YQ==", source="anthropic"),)),
            Message.user("c"),
        )
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
@pytest.mark.parametrize("name", list(REQUESTS))
def test_every_body_is_valid_for_botocores_service_model(service: ServiceModel, name: str, stream: bool) -> None:
    http = DIALECT.build(TARGET, REQUESTS[name], stream=stream)
    operation = "ConverseStream" if stream else "Converse"
    assert http.content is not None and json.loads(http.content) == http.json  # the bytes that are signed
    params = {"modelId": MODEL, **json.loads(http.content)}
    _validate(service, operation, params)
    # the path is the one botocore's own serializer writes for this model id
    serialized = create_serializer("rest-json").serialize_to_request(params, service.operation_model(operation))
    assert http.url == "https://bedrock-runtime.us-east-1.amazonaws.com" + serialized["url_path"]
    assert http.method == "POST"


def test_the_validator_refuses_what_bedrock_refuses(service: ServiceModel) -> None:
    """The check above can fail: a body with a block botocore does not know is refused."""
    http = DIALECT.build(TARGET, REQUESTS["text"])
    params = {"modelId": MODEL, **json.loads(http.content or b"")}
    params["messages"][0]["content"][0] = {"txt": "typo"}
    with pytest.raises(AssertionError, match="txt"):
        _validate(service, "Converse", params)


def test_body_shape() -> None:
    body = DIALECT.build(TARGET, REQUESTS["sampling"]).json or {}
    assert body["inferenceConfig"] == {
        "maxTokens": 10,
        "temperature": 0.3,
        "topP": 0.9,
        "stopSequences": ["\n\n", "END"],
    }
    text = DIALECT.build(TARGET, REQUESTS["text"]).json or {}
    assert text["system"] == [{"text": "Be brief."}]
    assert text["messages"] == [{"role": "user", "content": [{"text": "What is the weather in Paris?"}]}]
    assert "modelId" not in text  # it is in the path
    image = (DIALECT.build(TARGET, REQUESTS["image"]).json or {})["messages"][0]["content"][1]
    assert image == {"image": {"format": "png", "source": {"bytes": PNG.partition(",")[2]}}}


def test_a_tool_loop_is_one_assistant_turn_then_one_user_turn_of_results() -> None:
    body = DIALECT.build(TARGET, REQUESTS["tool_loop"]).json or {}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]
    assistant, results = body["messages"][1]["content"], body["messages"][2]["content"]
    assert assistant[0] == {"reasoningContent": {"reasoningText": {"text": "two calls", "signature": "sig=="}}}
    assert [b["toolUse"]["input"] for b in assistant[1:]] == [{"city": "Paris"}, {"city": "Rome"}]
    assert [b["toolResult"]["toolUseId"] for b in results] == ["tooluse_1", "tooluse_2"]
    # the loop's thinking came back signed, so the model may think again (Claude's rules)
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 2048}}


def test_tool_choice_mapping() -> None:
    def choice(name: str) -> Any:
        return (DIALECT.build(TARGET, REQUESTS[name]).json or {})["toolConfig"].get("toolChoice")

    assert choice("tools_auto") == {"auto": {}}
    assert choice("tools_required") == {"any": {}}
    assert choice("tools_named") == {"tool": {"name": "get_weather"}}
    assert choice("tool_choice_none_in_a_loop") is None  # no "none" in Converse: the default, tools kept
    no_history = Request(messages=(Message.user("hi"),), tools=(WEATHER,), tool_choice=ToolChoice(mode="none"))
    assert "toolConfig" not in (DIALECT.build(TARGET, no_history).json or {})


def test_structured_output_is_a_forced_tool() -> None:
    body = DIALECT.build(TARGET, REQUESTS["json_schema"]).json or {}
    (tool,) = body["toolConfig"]["tools"]
    assert tool["toolSpec"]["name"] == JSON_TOOL and tool["toolSpec"]["inputSchema"] == {"json": SCHEMA}
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": JSON_TOOL}}
    beside = DIALECT.build(TARGET, REQUESTS["json_schema_with_tools"]).json or {}
    assert [t["toolSpec"]["name"] for t in beside["toolConfig"]["tools"]] == ["get_weather", JSON_TOOL]
    assert "toolChoice" not in beside["toolConfig"]  # offered beside the caller's tools, not forced


def test_thinking_only_for_claude_and_never_with_a_forced_tool() -> None:
    body = DIALECT.build(TARGET, REQUESTS["thinking"]).json or {}
    assert body["additionalModelRequestFields"] == {"thinking": {"type": "enabled", "budget_tokens": 8192}}
    nova = Target(name="n", dialect=Dialect.BEDROCK, model="amazon.nova-pro-v1:0", base_url=TARGET.base_url)
    assert "additionalModelRequestFields" not in (DIALECT.build(nova, REQUESTS["thinking"]).json or {})
    forced = Request(
        messages=(Message.user("x"),),
        tools=(WEATHER,),
        tool_choice=ToolChoice(mode="required"),
        reasoning_effort="high",
    )
    assert "additionalModelRequestFields" not in (DIALECT.build(TARGET, forced).json or {})


def test_model_ids_arns_and_profiles_are_percent_encoded_in_the_path() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    t = Target(name="p", dialect=Dialect.BEDROCK, model=arn, base_url="https://bedrock-runtime.eu-west-1.amazonaws.com")
    http = DIALECT.build(t, REQUESTS["text"], stream=True)
    assert http.url == (
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/"
        "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse-stream"
    )
    assert http.headers["accept"] == "application/vnd.amazon.eventstream"


# -- answers -----------------------------------------------------------------------------------


def _ok(content: list[dict[str, Any]], stop: str = "end_turn", **usage: int) -> HttpResponse:
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, **usage},
        "metrics": {"latencyMs": 100},
    }
    return HttpResponse(status=200, headers={"x-amzn-requestid": "rid-1"}, body=json.dumps(body).encode())


def test_a_text_answer() -> None:
    out = DIALECT.parse(TARGET, _ok([{"text": "Sunny"}, {"text": ", 21 C."}], cacheReadInputTokens=100))
    assert isinstance(out, Response)
    assert out.text == "Sunny, 21 C." and out.stop_reason is StopReason.END_TURN
    assert (out.usage.input_tokens, out.usage.cached_input_tokens, out.usage.output_tokens) == (110, 100, 5)
    assert out.provider_request_id == "rid-1" and out.model == MODEL


def test_tool_use_and_reasoning() -> None:
    content = [
        {"reasoningContent": {"reasoningText": {"text": "think", "signature": "c2ln"}}},
        {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
        {"toolUse": {"toolUseId": "tooluse_a", "name": "get_weather", "input": {"city": "Paris"}}},
    ]
    out = DIALECT.parse(TARGET, _ok(content, "tool_use"))
    assert isinstance(out, Response) and out.stop_reason is StopReason.TOOL_USE
    assert out.tool_calls == (
        ToolCall(id="tooluse_a", name="get_weather", arguments='{"city":"Paris"}', parsed={"city": "Paris"}),
    )
    assert [(r.text, r.signature, r.redacted) for r in out.reasoning] == [
        ("think", "c2ln", None),
        ("", None, "cmVkYWN0ZWQ="),
    ]
    assert all(r.source == "anthropic" and r.origin == TARGET.key for r in out.reasoning)
    # and they go back as they came, in the next turn's history
    again = DIALECT.build(TARGET, Request(messages=(Message.user("q"), out.message(), Message.tool("tooluse_a", "ok"))))
    assert (again.json or {})["messages"][1]["content"][:2] == content[:2]


def test_the_structured_output_tool_is_read_as_the_answers_text() -> None:
    use = {"toolUse": {"toolUseId": "t", "name": JSON_TOOL, "input": {"answer": "42"}}}
    out = DIALECT.parse(TARGET, _ok([use], "tool_use"))
    assert isinstance(out, Response)
    assert (out.text, out.tool_calls, out.stop_reason) == ('{"answer":"42"}', (), StopReason.END_TURN)


@pytest.mark.parametrize(
    ("stop", "kind"),
    [
        ("max_tokens", FailureKind.TRUNCATED),
        ("content_filtered", FailureKind.CONTENT_FILTERED),
        ("guardrail_intervened", FailureKind.CONTENT_FILTERED),
        ("model_context_window_exceeded", FailureKind.CONTEXT_OVERFLOW),
        ("malformed_tool_use", FailureKind.TOOL_CALL_MALFORMED),
        ("malformed_model_output", FailureKind.PROVIDER_SERVER_ERROR),
    ],
)
def test_a_200_can_be_a_failure(stop: str, kind: FailureKind) -> None:
    out = DIALECT.parse(TARGET, _ok([{"text": "partial"}], stop))
    assert isinstance(out, Failure) and out.kind is kind and out.provider_code == stop
    assert out.response is not None and out.usage is not None and out.usage.output_tokens == 5  # paid for


@pytest.mark.parametrize("stop", ["end_turn", "stop_sequence", "tool_use"])
def test_ordinary_stops_are_answers(stop: str) -> None:
    assert isinstance(DIALECT.parse(TARGET, _ok([{"text": "x"}], stop)), Response)


def test_a_2xx_that_is_not_a_converse_answer_is_the_providers_fault() -> None:
    out = DIALECT.parse(TARGET, HttpResponse(status=200, headers={}, body=b"<html>proxy</html>"))
    assert isinstance(out, Failure) and out.kind is FailureKind.PROVIDER_SERVER_ERROR


# -- errors ------------------------------------------------------------------------------------

NS = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
ERRORS = [
    (429, "ThrottlingException", "Too many requests, please wait before trying again.", FailureKind.RATE_LIMITED),
    (429, "ThrottlingException", "Too many tokens, please wait before trying again.", FailureKind.RATE_LIMITED),
    (
        429,
        "ThrottlingException",
        "Too many tokens per day, please wait before trying again.",
        FailureKind.QUOTA_EXHAUSTED,
    ),
    (503, "ServiceUnavailableException", "Bedrock is unable to process your request.", FailureKind.PROVIDER_OVERLOADED),
    (429, "ModelNotReadyException", "Model is not ready to serve inference requests.", FailureKind.TRANSPORT_TRANSIENT),
    (500, "InternalServerException", "The system encountered an unexpected error.", FailureKind.PROVIDER_SERVER_ERROR),
    (424, "ModelErrorException", "The model produced an invalid response.", FailureKind.PROVIDER_SERVER_ERROR),
    (408, "ModelTimeoutException", "Model has timed out in processing the request.", FailureKind.TIMEOUT),
    (400, "ValidationException", "temperature: must be <= 1", FailureKind.INVALID_REQUEST),
    (400, "ValidationException", "Input is too long for requested model.", FailureKind.CONTEXT_OVERFLOW),
    (
        400,
        "ValidationException",
        "The model returned the following errors: prompt is too long: 250000 tokens > 200000 maximum",
        FailureKind.CONTEXT_OVERFLOW,
    ),
    (400, "ValidationException", "too many input tokens", FailureKind.CONTEXT_OVERFLOW),
    (
        400,
        "ValidationException",
        "Invocation of model ID anthropic.claude-x with on-demand throughput isn't supported. Retry your request "
        "with the ID or ARN of an inference profile that contains this model.",
        FailureKind.MODEL_NOT_FOUND,
    ),
    (400, "ValidationException", "The provided model identifier is invalid.", FailureKind.MODEL_NOT_FOUND),
    (403, "AccessDeniedException", "You don't have access to the model.", FailureKind.AUTHENTICATION_OR_PERMISSION),
    (
        403,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
        FailureKind.AUTHENTICATION_OR_PERMISSION,
    ),
    (
        403,
        "ExpiredTokenException",
        "The security token included in the request is expired",
        FailureKind.AUTHENTICATION_OR_PERMISSION,
    ),
    (
        403,
        "InvalidSignatureException",
        "The request signature we calculated does not match",
        FailureKind.AUTHENTICATION_OR_PERMISSION,
    ),
    (404, "ResourceNotFoundException", "Could not resolve the foundation model.", FailureKind.MODEL_NOT_FOUND),
    (400, "ServiceQuotaExceededException", "quota exceeded", FailureKind.QUOTA_EXHAUSTED),
]


@pytest.mark.parametrize(
    ("status", "type_", "message", "kind"), ERRORS, ids=[f"{e[1]}-{i}" for i, e in enumerate(ERRORS)]
)
def test_errors_by_their_type_header(status: int, type_: str, message: str, kind: FailureKind) -> None:
    headers = {"x-amzn-errortype": type_ + NS, "x-amzn-requestid": "rid-9", "content-type": "application/json"}
    out = DIALECT.parse(
        TARGET, HttpResponse(status=status, headers=headers, body=json.dumps({"message": message}).encode())
    )
    assert isinstance(out, Failure)
    assert (out.kind, out.provider_code, out.provider_request_id) == (kind, type_, "rid-9")
    assert message[:20] in out.message
    if kind is FailureKind.TIMEOUT:
        assert out.phase is TimeoutPhase.TOTAL


def test_errors_by_the_bodys_type_when_no_header() -> None:
    body = {"__type": "com.amazon.coral.service#ThrottlingException", "Message": "slow down"}
    out = DIALECT.parse(TARGET, HttpResponse(status=400, headers={}, body=json.dumps(body).encode()))
    assert isinstance(out, Failure) and out.kind is FailureKind.RATE_LIMITED and "slow down" in out.message


def test_an_unknown_error_falls_back_to_its_status() -> None:
    out = DIALECT.parse(TARGET, HttpResponse(status=502, headers={}, body=b"Bad Gateway"))
    assert isinstance(out, Failure) and out.kind is FailureKind.PROVIDER_SERVER_ERROR


def test_another_providers_call_ids_are_mapped_the_same_for_call_and_result(service: ServiceModel) -> None:
    long_id = "call/" + "x" * 80
    request = Request(
        messages=(
            Message.user("q"),
            Message.assistant(tool_calls=(ToolCall(id=long_id, name="get_weather", arguments="{}"),)),
            Message.tool(long_id, "sunny"),
        ),
        tools=(WEATHER,),
    )
    body = DIALECT.build(TARGET, request).json or {}
    use = body["messages"][1]["content"][0]["toolUse"]["toolUseId"]
    assert use == body["messages"][2]["content"][0]["toolResult"]["toolUseId"] == ("call_" + "x" * 80)[:64]
    _validate(service, "Converse", {"modelId": MODEL, **body})


def test_user_parts_that_are_blank_are_left_out() -> None:
    request = Request(messages=(Message(role="user", content=(TextPart(text=""), TextPart(text="hi"))),))
    assert (DIALECT.build(TARGET, request).json or {})["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]
