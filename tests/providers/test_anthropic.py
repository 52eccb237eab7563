from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from failover.model import (
    Action,
    Dialect,
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Request,
    Response,
    ResponseFormat,
    StopReason,
    Tool,
    ToolCall,
    ToolChoice,
    Usage,
    disposition,
)
from failover.providers import AnthropicDialect, dialect_for

from ._wire import load, response, target

D = AnthropicDialect()
T = target(Dialect.ANTHROPIC)


def parse_ok(resp: object) -> Response:
    assert isinstance(resp, Response), resp
    return resp


def parse_fail(resp: object) -> Failure:
    assert isinstance(resp, Failure), resp
    return resp


def _message(content: list[dict[str, Any]], stop: str | None = "end_turn", **extra: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 4},
    }
    body.update(extra)
    return json.dumps(body).encode()


# ------------------------------------------------------------------ 200 samples


def test_01_text_with_usage(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "anthropic/01-nonstream-text-usage.json")))
    assert r.text == (
        "Hello! I'm doing well, thanks for asking. How are you doing today? Is there anything I can help you with?"
    )
    assert r.usage == Usage(input_tokens=12, output_tokens=29, cached_input_tokens=0)
    assert r.stop_reason is StopReason.END_TURN
    assert r.raw_stop_reason == "end_turn"
    assert r.model == "claude-sonnet-4-5-20250929"
    assert r.response_id == "msg_01VdEjxAP5ahtHKrrRdNBteQ"
    assert r.tool_calls == ()


def test_cache_tokens_count_as_input() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 50,
        "output_tokens": 30,
        "output_tokens_details": {"thinking_tokens": 20},
    }
    r = parse_ok(D.parse(T, response(200, _message([{"type": "text", "text": "hi"}], usage=usage))))
    assert r.usage == Usage(input_tokens=160, output_tokens=30, cached_input_tokens=100, reasoning_tokens=20)


def test_tool_use_blocks() -> None:
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
    ]
    r = parse_ok(D.parse(T, response(200, _message(content, "tool_use"), request_id="req_9")))
    assert r.text == "Let me check."
    assert r.stop_reason is StopReason.TOOL_USE
    assert [(c.id, c.name, c.parsed) for c in r.tool_calls] == [
        ("toolu_1", "get_weather", {"city": "Paris"}),
        ("toolu_2", "now", {}),
    ]
    assert json.loads(r.tool_calls[0].arguments) == {"city": "Paris"}
    assert r.provider_request_id == "req_9"


def test_tool_use_input_not_an_object_is_malformed() -> None:
    content = [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": "oops"}]
    f = parse_fail(D.parse(T, response(200, _message(content, "tool_use"))))
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    assert f.response is not None
    assert f.response.tool_calls[0].parsed is None


def test_max_tokens_is_truncated() -> None:
    f = parse_fail(D.parse(T, response(200, _message([{"type": "text", "text": "Once upon"}], "max_tokens"))))
    assert f.kind is FailureKind.TRUNCATED
    assert f.disposition.action is Action.REPAIR
    assert f.provider_code == "max_tokens"
    assert f.usage == Usage(input_tokens=10, output_tokens=4)
    assert f.response is not None
    assert f.response.text == "Once upon"
    assert f.response.stop_reason is StopReason.MAX_TOKENS


def test_max_tokens_mid_tool_input_is_truncated_not_malformed() -> None:
    content = [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]
    f = parse_fail(D.parse(T, response(200, _message(content, "max_tokens"))))
    assert f.kind is FailureKind.TRUNCATED


def test_refusal_with_stop_details() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "This request was refused due to policy."}
    f = parse_fail(D.parse(T, response(200, _message([], "refusal", stop_details=details))))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.disposition.action is Action.STOP
    assert f.response is not None
    assert f.response.refusal == "This request was refused due to policy."
    assert f.response.stop_reason is StopReason.REFUSAL


def test_refusal_without_details_keeps_text() -> None:
    f = parse_fail(D.parse(T, response(200, _message([{"type": "text", "text": "I can't help."}], "refusal"))))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.response is not None
    assert f.response.refusal == "I can't help."


def test_context_window_stop_is_overflow() -> None:
    f = parse_fail(
        D.parse(T, response(200, _message([{"type": "text", "text": "…"}], "model_context_window_exceeded")))
    )
    assert f.kind is FailureKind.CONTEXT_OVERFLOW


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("stop_sequence", StopReason.STOP_SEQUENCE), ("pause_turn", StopReason.OTHER), ("brand_new", StopReason.OTHER)],
)
def test_other_stop_reasons(stop: str, reason: StopReason) -> None:
    r = parse_ok(D.parse(T, response(200, _message([{"type": "text", "text": "x"}], stop))))
    assert r.stop_reason is reason
    assert r.raw_stop_reason == stop


# ------------------------------------------------------------------ error samples


def _err(err_type: str, message: str, request_id: str | None = None) -> str:
    body: dict[str, Any] = {"type": "error", "error": {"type": err_type, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return json.dumps(body)


@pytest.mark.parametrize(
    ("sample", "status", "kind", "action", "code", "should_retry", "request_id"),
    [
        (
            "anthropic/08-error-429-rate-limit.http",
            429,
            FailureKind.RATE_LIMITED,
            Action.REPLAY,
            "rate_limit_error",
            True,
            "req_011CYK5n67SytMUxm8WMZUWY",  # from the body: the recorder dropped the header
        ),
        (
            "anthropic/09-error-529-overloaded.json",
            529,
            FailureKind.PROVIDER_OVERLOADED,
            Action.REPLAY,
            "overloaded_error",
            None,
            None,
        ),
        (
            "anthropic/10-error-400-prompt-too-long.http",
            400,
            FailureKind.CONTEXT_OVERFLOW,
            Action.NEXT,
            "invalid_request_error",
            False,
            "<REQUEST_ID>",  # the request-id header
        ),
        (
            "anthropic/11-error-401-authentication.http",
            401,
            FailureKind.AUTHENTICATION_OR_PERMISSION,
            Action.NEXT,
            "authentication_error",
            False,
            "<REQUEST_ID>",
        ),
    ],
)
def test_error_samples(
    wire: Path,
    sample: str,
    status: int,
    kind: FailureKind,
    action: Action,
    code: str,
    should_retry: bool | None,
    request_id: str | None,
) -> None:
    f = parse_fail(D.parse(T, load(wire, sample)))
    assert f.kind is kind
    assert f.disposition == disposition(kind)
    assert f.disposition.action is action
    assert f.status == status
    assert f.provider_code == code
    assert f.should_retry is should_retry
    assert f.provider_request_id == request_id
    assert f.retry_after is None  # no sample carries retry-after
    assert f.message.startswith(f"anthropic {status} {code}: ")
    assert f.detail is not None


def test_08_message_is_the_providers(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "anthropic/08-error-429-rate-limit.http")))
    assert "20,000,000 prompt bytes per hour" in f.message
    assert f.rate_limits is None  # the recorder dropped the rate-limit headers


def test_10_message(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "anthropic/10-error-400-prompt-too-long.http")))
    assert "prompt is too long: 3333404 tokens > 200000 maximum" in f.message


def test_429_with_retry_after_and_rate_limit_headers() -> None:
    body = _err("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "req_1")
    f = parse_fail(
        D.parse(
            T,
            response(
                429,
                body,
                retry_after="17",
                date="Wed, 19 Aug 2026 14:34:12 GMT",
                anthropic_ratelimit_input_tokens_limit="30000",
                anthropic_ratelimit_input_tokens_remaining="0",
                anthropic_ratelimit_input_tokens_reset="2026-08-19T14:34:29Z",
                x_should_retry="true",
                request_id="req_1",
            ),
        )
    )
    assert f.kind is FailureKind.RATE_LIMITED
    assert f.retry_after == 17.0
    assert f.should_retry is True
    assert f.rate_limits is not None
    assert (f.rate_limits.limit_input_tokens, f.rate_limits.remaining_input_tokens) == (30000, 0)
    assert f.rate_limits.reset_input_tokens == 17.0


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            _err("invalid_request_error", "Your credit balance is too low to access the Anthropic API."),
            FailureKind.QUOTA_EXHAUSTED,
        ),
        (
            400,
            _err(
                "invalid_request_error",
                "You have reached your specified API usage limits. You will regain access on 2026-09-01 at 00:00 UTC.",
            ),
            FailureKind.QUOTA_EXHAUSTED,
        ),
        (402, _err("billing_error", "billing"), FailureKind.QUOTA_EXHAUSTED),
        (
            403,
            _err("permission_error", "no access"),
            FailureKind.AUTHENTICATION_OR_PERMISSION,
        ),
        (
            404,
            _err("not_found_error", "model: claude-9"),
            FailureKind.MODEL_NOT_FOUND,
        ),
        (
            413,
            _err("request_too_large", "Request exceeds the maximum allowed number of bytes."),
            FailureKind.INVALID_REQUEST,
        ),
        (
            500,
            _err("api_error", "Internal server error"),
            FailureKind.PROVIDER_SERVER_ERROR,
        ),
        (
            504,
            _err("timeout_error", "Request timeout"),
            FailureKind.PROVIDER_SERVER_ERROR,
        ),
        (
            409,
            _err("conflict_error", "conflict"),
            FailureKind.TRANSPORT_TRANSIENT,
        ),
        (
            400,
            _err(
                "invalid_request_error", "input length and `max_tokens` exceed context limit: 198000 + 21333 > 200000"
            ),
            FailureKind.CONTEXT_OVERFLOW,
        ),
        (
            400,
            _err("invalid_request_error", "messages: text content blocks must be non-empty"),
            FailureKind.INVALID_REQUEST,
        ),
        (529, "<html>overloaded</html>", FailureKind.PROVIDER_OVERLOADED),
        (500, "", FailureKind.PROVIDER_SERVER_ERROR),
        (
            200,
            _err("overloaded_error", "Overloaded"),
            FailureKind.PROVIDER_OVERLOADED,
        ),
        (200, "not json", FailureKind.PROVIDER_SERVER_ERROR),
    ],
)
def test_other_errors(status: int, body: str, kind: FailureKind) -> None:
    f = parse_fail(D.parse(T, response(status, body)))
    assert f.kind is kind


def test_api_key_redacted_from_error() -> None:
    t = target(Dialect.ANTHROPIC, api_key="sk-ant-SECRET")
    body = _err("authentication_error", "invalid x-api-key sk-ant-SECRET")
    f = parse_fail(D.parse(t, response(401, body)))
    assert "sk-ant-SECRET" not in f.message
    assert f.detail is not None
    assert "sk-ant-SECRET" not in f.detail


# ------------------------------------------------------------------ build


def _body(req: Request, t: Any = T, *, stream: bool = False) -> dict[str, Any]:
    http = D.build(t, req, stream=stream)
    assert http.json is not None
    return dict(http.json)


def test_build_basic() -> None:
    req = Request(
        messages=(Message.system("Be brief."), Message.system("Be kind."), Message.user("Hi")),
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        stop=("END",),
        seed=7,
    )
    http = D.build(T, req)
    assert http.url == "https://api.anthropic.com/v1/messages"
    assert http.headers["x-api-key"] == "sk-test-KEY-123"
    assert http.headers["anthropic-version"] == "2023-06-01"
    assert http.headers["content-type"] == "application/json"
    assert "authorization" not in http.headers
    assert http.json == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": "Be brief.\n\nBe kind.",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
    }


def test_build_max_tokens_defaults_to_target() -> None:
    t = target(Dialect.ANTHROPIC, max_output_tokens=1234)
    assert _body(Request.simple("x"), t)["max_tokens"] == 1234


def test_build_images() -> None:
    req = Request(
        messages=(
            Message.user(
                "Describe",
                ImagePart(url="data:image/png;base64,iVBORw0KGgo="),
                ImagePart(url="https://example.com/cat.jpg"),
            ),
        )
    )
    assert _body(req)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            ],
        }
    ]


WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.mark.parametrize(
    ("choice", "wire_choice"),
    [
        (ToolChoice(mode="auto"), {"type": "auto"}),
        (ToolChoice(mode="none"), {"type": "none"}),
        (ToolChoice(mode="required"), {"type": "any"}),
        (ToolChoice(mode="tool", name="get_weather"), {"type": "tool", "name": "get_weather"}),
    ],
)
def test_build_tools_and_choice(choice: ToolChoice, wire_choice: dict[str, str]) -> None:
    body = _body(Request(messages=(Message.user("x"),), tools=(WEATHER,), tool_choice=choice))
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
    ]
    assert body["tool_choice"] == wire_choice


def test_build_tool_results_are_merged_into_one_user_turn() -> None:
    calls = (
        ToolCall(id="toolu_1", name="get_weather", arguments='{"city":"Paris"}', parsed={"city": "Paris"}),
        ToolCall(id="toolu_2", name="get_weather", arguments='{"city":"Rome"}'),  # parsed not set: decoded here
    )
    req = Request(
        messages=(
            Message.user("Weather in Paris and Rome?"),
            Message.assistant("Checking.", tool_calls=calls),
            Message.tool("toolu_1", "18C"),
            Message.tool("toolu_2", "25C"),
            Message.user("Thanks. And tomorrow?"),
        ),
        tools=(WEATHER,),
    )
    assert _body(req)["messages"] == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "25C"},
            ],
        },
        {"role": "user", "content": "Thanks. And tomorrow?"},
    ]


def test_build_round_trip_from_parsed_response() -> None:
    content = [{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}]
    r = parse_ok(D.parse(T, response(200, _message(content, "tool_use"))))
    msgs = (Message.user("time?"), Message.assistant(r.text, tool_calls=r.tool_calls), Message.tool("toolu_1", "noon"))
    sent = _body(Request(messages=msgs))["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}],
    }
    assert sent[2]["content"][0]["tool_use_id"] == "toolu_1"


def test_build_drops_empty_assistant_turns() -> None:
    req = Request(messages=(Message.user("a"), Message.assistant(""), Message.user("b")))
    assert [m["role"] for m in _body(req)["messages"]] == ["user", "user"]


def test_build_json_schema_uses_output_config() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    body = _body(Request(messages=(Message.user("x"),), response_format=ResponseFormat.json_schema(schema)))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert "tools" not in body


def test_build_stream_and_extra_headers() -> None:
    t = target(Dialect.ANTHROPIC, headers=(("anthropic-beta", "x-2025"),))
    http = D.build(t, Request.simple("x"), stream=True)
    assert http.json is not None
    assert http.json["stream"] is True
    assert http.headers["anthropic-beta"] == "x-2025"
    assert http.headers["accept"] == "text/event-stream"


def test_dialect_for() -> None:
    assert dialect_for(Dialect.ANTHROPIC) is dialect_for(Dialect.ANTHROPIC)
    assert dialect_for(Dialect.ANTHROPIC).name == "anthropic"


def test_reasoning_effort_maps_to_a_thinking_budget_below_max_tokens() -> None:
    from failover.model import Message, Request
    from failover.providers import AnthropicDialect

    from ._wire import target

    t = target("anthropic")
    body = (
        AnthropicDialect()
        .build(t, Request(messages=(Message.user("x"),), max_tokens=4000, reasoning_effort="high"))
        .json
    )
    assert body is not None and body["thinking"] == {"type": "enabled", "budget_tokens": 3999}
    low = (
        AnthropicDialect().build(t, Request(messages=(Message.user("x"),), max_tokens=900, reasoning_effort="low")).json
    )
    assert low is not None and "thinking" not in low  # a budget under 1024 is not allowed: no thinking
