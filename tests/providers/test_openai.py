from __future__ import annotations

import json
from pathlib import Path

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
from failover.providers import OpenAIDialect, dialect_for

from ._wire import load, response, target

D = OpenAIDialect()
T = target(Dialect.OPENAI)


def parse_ok(resp: object) -> Response:
    assert not isinstance(resp, Failure), resp
    assert isinstance(resp, Response)
    return resp


def parse_fail(resp: object) -> Failure:
    assert isinstance(resp, Failure), resp
    return resp


# ------------------------------------------------------------------ 200 samples


def test_01_text_with_usage(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "openai-chat/01-nonstream-text-usage.json")))
    assert r.text.startswith("**Holiday Name:** Galaxy Day")
    assert r.text.endswith("dream beyond our world.")
    assert r.tool_calls == ()
    assert r.usage == Usage(input_tokens=16, output_tokens=363, cached_input_tokens=0, reasoning_tokens=0)
    assert r.stop_reason is StopReason.END_TURN
    assert r.raw_stop_reason == "stop"
    assert r.refusal is None
    assert r.model == "gpt-4.1-nano-2025-04-14"
    assert r.response_id == "chatcmpl-D8Z5f52zQqikDBEKQMQoYcWMcWPeU"
    assert r.parsed is None


def test_02_parallel_tool_calls(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "openai-chat/02-nonstream-parallel-tool-calls.json")))
    assert r.text == ""
    assert r.stop_reason is StopReason.TOOL_USE
    assert [(c.id, c.name) for c in r.tool_calls] == [
        ("call_fdNz3vOBKYgOIpMdWotB9MjY", "GetWeatherArgs"),
        ("call_h1DWI1POMJLb0KwIyQHWXD4p", "get_stock_price"),
    ]
    assert r.tool_calls[0].parsed == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert r.tool_calls[1].parsed == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert r.tool_calls[0].arguments == '{"city": "Edinburgh", "country": "GB", "units": "c"}'
    assert r.usage == Usage(input_tokens=149, output_tokens=60)


def test_03_finish_length_is_truncated(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "openai-chat/03-nonstream-finish-length.json")))
    assert f.kind is FailureKind.TRUNCATED
    assert f.disposition.action is Action.REPAIR
    assert f.status == 200
    assert f.provider_code == "length"
    assert f.usage == Usage(input_tokens=79, output_tokens=1)
    assert f.response is not None
    assert f.response.text == '{"'
    assert f.response.stop_reason is StopReason.MAX_TOKENS


def test_04_json_schema_output_is_text_not_validated(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "openai-chat/04-nonstream-json-schema.json")))
    assert json.loads(r.text) == {"city": "San Francisco", "temperature": 65, "units": "f"}
    assert r.parsed is None  # validation/ decodes and checks it
    assert r.usage == Usage(input_tokens=79, output_tokens=14)


def test_05_refusal_is_content_filtered(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "openai-chat/05-nonstream-refusal.json")))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.disposition.action is Action.STOP
    assert f.response is not None
    assert f.response.refusal == "I'm very sorry, but I can't assist with that."
    assert f.response.stop_reason is StopReason.REFUSAL
    assert f.response.text == ""
    assert f.usage == Usage(input_tokens=79, output_tokens=12)
    assert "I'm very sorry" in f.message


# ------------------------------------------------------------------ error samples


@pytest.mark.parametrize(
    ("sample", "status", "kind", "code", "retry_after", "request_id"),
    [
        (
            "openai-chat/12-error-429-rate-limit-exceeded.http",
            429,
            FailureKind.RATE_LIMITED,
            "rate_limit_exceeded",
            56.0,
            "<X_REQUEST_ID>",
        ),
        (
            "openai-chat/13-error-429-insufficient-quota.json",
            429,
            FailureKind.QUOTA_EXHAUSTED,
            "insufficient_quota",
            None,
            None,
        ),
        (
            "openai-chat/14-error-400-context-length-exceeded.json",
            400,
            FailureKind.CONTEXT_OVERFLOW,
            "context_length_exceeded",
            None,
            None,
        ),
        (
            "openai-chat/15-error-401-invalid-api-key.http",
            401,
            FailureKind.AUTHENTICATION_OR_PERMISSION,
            "invalid_api_key",
            None,
            "<X_REQUEST_ID>",
        ),
        (
            "openai-chat/16-error-404-model-not-found.json",
            404,
            FailureKind.MODEL_NOT_FOUND,
            "model_not_found",
            None,
            None,
        ),
        (
            "openai-chat/17-error-500-server-error.json",
            500,
            FailureKind.PROVIDER_SERVER_ERROR,
            "server_error",
            None,
            None,
        ),
        (
            "openai-chat/18-error-503-server-overloaded.json",
            503,
            FailureKind.PROVIDER_OVERLOADED,
            "server_is_overloaded",
            None,
            None,
        ),
        (
            "deepseek/03-error-400-context-length-octet-stream.http",
            400,
            FailureKind.CONTEXT_OVERFLOW,
            "invalid_request_error",
            None,
            "20f7a0db0e3f4d45c852a9c27a2d1ade",  # x-ds-trace-id
        ),
    ],
)
def test_error_samples(
    wire: Path,
    sample: str,
    status: int,
    kind: FailureKind,
    code: str,
    retry_after: float | None,
    request_id: str | None,
) -> None:
    f = parse_fail(D.parse(T, load(wire, sample)))
    assert f.kind is kind
    assert f.status == status
    assert f.provider_code == code
    assert f.retry_after == retry_after
    assert f.should_retry is None  # OpenAI samples carry no x-should-retry
    assert f.provider_request_id == request_id
    assert f.disposition == disposition(kind)
    assert f.message.startswith(f"openai {status} {code}: ")
    assert f.detail is not None
    assert f.usage is None
    assert f.response is None


@pytest.mark.parametrize(
    ("sample", "action"),
    [
        ("openai-chat/12-error-429-rate-limit-exceeded.http", Action.REPLAY),
        ("openai-chat/13-error-429-insufficient-quota.json", Action.NEXT),
        ("openai-chat/14-error-400-context-length-exceeded.json", Action.NEXT),
        ("openai-chat/15-error-401-invalid-api-key.http", Action.NEXT),
        ("openai-chat/16-error-404-model-not-found.json", Action.NEXT),
        ("openai-chat/17-error-500-server-error.json", Action.REPLAY),
        ("openai-chat/18-error-503-server-overloaded.json", Action.REPLAY),
        ("deepseek/03-error-400-context-length-octet-stream.http", Action.NEXT),
    ],
)
def test_error_sample_actions(wire: Path, sample: str, action: Action) -> None:
    assert parse_fail(D.parse(T, load(wire, sample))).disposition.action is action


def test_12_rate_limit_headers_are_kept(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "openai-chat/12-error-429-rate-limit-exceeded.http")))
    assert f.rate_limits is not None
    assert (f.rate_limits.limit_requests, f.rate_limits.remaining_requests, f.rate_limits.reset_requests) == (
        60,
        59,
        1.0,
    )
    assert (f.rate_limits.limit_tokens, f.rate_limits.remaining_tokens, f.rate_limits.reset_tokens) == (
        150000,
        149984,
        360.0,
    )
    assert "Rate limit reached for gpt-4.1" in f.message


def test_15_api_key_never_in_message_or_detail(wire: Path) -> None:
    # The provider echoes the (short, invalid) key back: "Incorrect API key provided: invalid-key."
    t = target(Dialect.OPENAI, api_key="invalid-key")
    f = parse_fail(D.parse(t, load(wire, "openai-chat/15-error-401-invalid-api-key.http")))
    assert f.detail is not None
    assert "invalid-key" not in f.message
    assert "invalid-key" not in f.detail
    assert "[REDACTED]" in f.detail
    assert "invalid-key" not in repr(f)


def test_17_message_keeps_provider_request_id_text(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "openai-chat/17-error-500-server-error.json")))
    assert "req_540c6eaab7f4556b2baa22bcba915d51" in f.message


# ------------------------------------------------------------------ other shapes


def _completion(message: dict[str, object], finish: str | None = "stop", **extra: object) -> bytes:
    body: dict[str, object] = {
        "id": "chatcmpl-x",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    body.update(extra)
    return json.dumps(body).encode()


def test_content_filter_finish_reason() -> None:
    f = parse_fail(D.parse(T, response(200, _completion({"content": ""}, "content_filter"))))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.response is not None
    assert f.response.stop_reason is StopReason.CONTENT_FILTER


@pytest.mark.parametrize("arguments", ['{"a": 1', "[1, 2]", '"text"', "null"])
def test_tool_arguments_not_an_object_are_malformed(arguments: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    f = parse_fail(D.parse(T, response(200, _completion({"content": None, "tool_calls": [call]}, "tool_calls"))))
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    assert f.disposition.action is Action.REPAIR
    assert f.response is not None
    assert f.response.tool_calls[0].arguments == arguments
    assert f.response.tool_calls[0].parsed is None
    assert f.usage == Usage(input_tokens=10, output_tokens=5)


def test_truncated_tool_arguments_report_truncation_not_malformed() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": '}}
    f = parse_fail(D.parse(T, response(200, _completion({"content": None, "tool_calls": [call]}, "length"))))
    assert f.kind is FailureKind.TRUNCATED


def test_blank_arguments_mean_no_arguments_and_object_arguments_are_accepted() -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "now", "arguments": ""}},
        {"id": "c2", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
    ]
    r = parse_ok(D.parse(T, response(200, _completion({"content": None, "tool_calls": calls}, "tool_calls"))))
    assert [c.parsed for c in r.tool_calls] == [{}, {"x": 1}]
    assert r.tool_calls[1].arguments == '{"x":1}'


def test_forced_tool_call_with_finish_stop_is_tool_use() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    r = parse_ok(D.parse(T, response(200, _completion({"content": None, "tool_calls": [call]}, "stop"))))
    assert r.stop_reason is StopReason.TOOL_USE
    assert r.raw_stop_reason == "stop"


def test_deepseek_cache_hit_usage_and_blank_line_keepalive() -> None:
    # DeepSeek writes blank lines while a non-streaming request is queued.
    body = b"\n\n\n" + _completion(
        {"content": "hi"},
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "prompt_cache_hit_tokens": 64,
            "prompt_cache_miss_tokens": 36,
        },
    )
    r = parse_ok(D.parse(T, response(200, body, content_type="application/json")))
    assert r.usage == Usage(input_tokens=100, output_tokens=7, cached_input_tokens=64)


def test_reasoning_and_cached_token_details() -> None:
    usage = {
        "prompt_tokens": 2000,
        "completion_tokens": 900,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 640},
    }
    r = parse_ok(D.parse(T, response(200, _completion({"content": "x"}, usage=usage))))
    assert r.usage == Usage(input_tokens=2000, output_tokens=900, cached_input_tokens=1024, reasoning_tokens=640)


def test_content_as_list_of_parts() -> None:
    content = [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "..."}, {"type": "text", "text": "b"}]
    assert parse_ok(D.parse(T, response(200, _completion({"content": content})))).text == "ab"


def test_request_id_header_on_success() -> None:
    r = parse_ok(D.parse(T, response(200, _completion({"content": "x"}), x_request_id="req_abc")))
    assert r.provider_request_id == "req_abc"


def test_rate_limit_headers_on_success_do_not_break_parse() -> None:
    r = parse_ok(D.parse(T, response(200, _completion({"content": "x"}), x_ratelimit_remaining_tokens="5")))
    assert r.text == "x"


def test_the_completion_a_server_sends_for_a_stream_request_it_did_not_stream() -> None:
    # vLLM / SGLang shaped (what such a server sends when it ignores stream: true): nulls for
    # what is absent, an empty tool_calls list, its own extra fields; reasoning in `reasoning`.
    body = {
        "id": "chatcmpl-9f",
        "object": "chat.completion",
        "created": 1,
        "model": "Qwen/Qwen3-8B",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Paris.",
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning": "The capital of France.",
                    "reasoning_content": None,
                },
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 12, "total_tokens": 30, "completion_tokens": 18, "prompt_tokens_details": None},
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }
    r = parse_ok(D.parse(T, response(200, json.dumps(body), content_type="application/json")))
    assert (r.text, r.tool_calls, r.stop_reason) == ("Paris.", (), StopReason.END_TURN)
    assert r.reasoning_text == "The capital of France."
    assert r.reasoning[0].origin == T.key and r.reasoning[0].source == "openai"
    assert r.usage == Usage(input_tokens=12, output_tokens=18)


def test_empty_choices_is_a_server_error() -> None:
    body = json.dumps({"id": "x", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0}})
    f = parse_fail(D.parse(T, response(200, body)))
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert f.usage == Usage(input_tokens=3)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (502, "<html><body><h1>502 Bad Gateway</h1></body></html>", FailureKind.PROVIDER_SERVER_ERROR),
        (503, "<html>Service Unavailable</html>", FailureKind.PROVIDER_OVERLOADED),
        (500, b"\xff\xfe\x00garbage", FailureKind.PROVIDER_SERVER_ERROR),
        (504, "", FailureKind.PROVIDER_SERVER_ERROR),
        (429, "", FailureKind.RATE_LIMITED),
        (401, "Unauthorized", FailureKind.AUTHENTICATION_OR_PERMISSION),
        (403, "{}", FailureKind.AUTHENTICATION_OR_PERMISSION),
        (402, '{"error":{"message":"Insufficient Balance","type":"unknown_error"}}', FailureKind.QUOTA_EXHAUSTED),
        (404, "404 page not found", FailureKind.MODEL_NOT_FOUND),
        (408, "", FailureKind.TRANSPORT_TRANSIENT),
        (409, "", FailureKind.TRANSPORT_TRANSIENT),
        (413, "Request Entity Too Large", FailureKind.INVALID_REQUEST),
        (422, '{"error":{"message":"Failed to deserialize the JSON body"}}', FailureKind.INVALID_REQUEST),
        (
            400,
            '{"error":{"message":"Unrecognized request argument supplied: foo","type":"invalid_request_error"}}',
            FailureKind.INVALID_REQUEST,
        ),
        (
            400,
            '{"error":{"code":"content_filter","message":"The response was filtered","status":400}}',
            FailureKind.CONTENT_FILTERED,
        ),
        (400, '{"error":{"code":"invalid_prompt","message":"Invalid prompt: flagged"}}', FailureKind.CONTENT_FILTERED),
        # vLLM: {"object":"error","message":...,"type":"BadRequestError","code":400}
        (
            400,
            '{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, you '
            'requested 5000 tokens","type":"BadRequestError","param":null,"code":400}',
            FailureKind.CONTEXT_OVERFLOW,
        ),
        (
            429,
            '{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error"}}',
            FailureKind.PROVIDER_OVERLOADED,
        ),
        (429, '{"error":{"message":"over","code":"billing_hard_limit_reached"}}', FailureKind.QUOTA_EXHAUSTED),
        # a specific code refines the status ...
        (
            500,
            '{"error":{"message":"busy","type":"server_error","code":"server_is_overloaded"}}',
            FailureKind.PROVIDER_OVERLOADED,
        ),
        (503, '{"error":{"message":"Slow Down","type":"server_error","code":"slow_down"}}', FailureKind.RATE_LIMITED),
        (
            429,
            '{"error":{"message":"no credits","type":"insufficient_quota","code":"credit_balance_exhausted"}}',
            FailureKind.QUOTA_EXHAUSTED,
        ),
        (400, '{"error":{"code":"image_content_policy_violation","message":"x"}}', FailureKind.CONTENT_FILTERED),
        # ... a generic type does not (OpenAI's 401 for a missing key is an invalid_request_error) ...
        (
            401,
            '{"error":{"message":"You didn\'t provide an API key.","type":"invalid_request_error","code":null}}',
            FailureKind.AUTHENTICATION_OR_PERMISSION,
        ),
        # ... and a filter code on a 5xx is the provider's failure
        (500, '{"error":{"code":"content_filter","message":"filter service down"}}', FailureKind.PROVIDER_SERVER_ERROR),
        (302, "", FailureKind.PROVIDER_SERVER_ERROR),
        (400, "[1, 2, 3]", FailureKind.INVALID_REQUEST),
        (400, '{"error": "plain string error"}', FailureKind.INVALID_REQUEST),
    ],
)
def test_unusual_error_bodies(status: int, body: str | bytes, kind: FailureKind) -> None:
    f = parse_fail(D.parse(T, response(status, body)))
    assert f.kind is kind
    assert f.status == status
    assert f.message.startswith(f"openai {status}")


def test_html_error_message_has_a_snippet() -> None:
    f = parse_fail(D.parse(T, response(502, "<html>\n<body>\n<h1>502 Bad Gateway</h1></body></html>")))
    assert "502 Bad Gateway" in f.message


def test_detail_is_trimmed() -> None:
    f = parse_fail(D.parse(T, response(500, "x" * 10_000)))
    assert f.detail is not None
    assert len(f.detail) <= 2_001
    assert len(f.message) < 1_000


def test_200_with_error_envelope_uses_its_code() -> None:
    body = '{"error":{"message":"Provider returned error","code":429}}'
    f = parse_fail(D.parse(T, response(200, body)))
    assert f.kind is FailureKind.RATE_LIMITED


@pytest.mark.parametrize(
    ("body", "kind", "code"),
    [
        ('{"error":{"message":"x","type":"None","param":"None","code":"503"}}', FailureKind.PROVIDER_OVERLOADED, "503"),
        ('{"error":{"message":"x","code":"rate_limit_exceeded"}}', FailureKind.RATE_LIMITED, "rate_limit_exceeded"),
        (
            '{"error":{"message":"x","type":"invalid_request_error"}}',
            FailureKind.INVALID_REQUEST,
            "invalid_request_error",
        ),
        ('{"error":{"message":"x","type":"authentication_error"}}', FailureKind.AUTHENTICATION_OR_PERMISSION, None),
    ],
)
def test_200_error_envelope_codes(body: str, kind: FailureKind, code: str | None) -> None:
    # LiteLLM sends the upstream status as a string code; a type names the failure when the
    # status (200) does not.
    f = parse_fail(D.parse(T, response(200, body)))
    assert f.kind is kind
    if code is not None:
        assert f.provider_code == code


def test_200_with_choices_and_an_error_is_the_error() -> None:
    # OpenRouter: the provider failed after all; the choice ends with "error" and carries it.
    body = json.dumps(
        {
            "id": "gen-1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ""},
                    "finish_reason": "error",
                    "error": {"code": 502, "message": "Provider returned error"},
                }
            ],
        }
    )
    f = parse_fail(D.parse(T, response(200, body)))
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "Provider returned error" in f.message


def test_finish_reason_error_without_an_error_object_is_a_server_error() -> None:
    body = {
        "id": "x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hal"}, "finish_reason": "error"}],
    }
    f = parse_fail(D.parse(T, response(200, json.dumps(body))))
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert f.response is not None and f.response.text == "Hal"


@pytest.mark.parametrize("body", ["", "not json", "<html></html>", '{"object": "list"}', "null"])
def test_unreadable_200_is_a_server_error(body: str) -> None:
    f = parse_fail(D.parse(T, response(200, body)))
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR


def test_should_retry_header_is_reported() -> None:
    f = parse_fail(D.parse(T, response(500, "{}", x_should_retry="false")))
    assert f.should_retry is False
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR


# ------------------------------------------------------------------ build


def _body(req: Request, t: object = T, *, stream: bool = False) -> dict[str, object]:
    http = D.build(t, req, stream=stream)  # type: ignore[arg-type]
    assert http.json is not None
    return dict(http.json)


def test_build_basic() -> None:
    req = Request(
        messages=(Message.system("Be brief."), Message.user("Hi")),
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        stop=("END",),
        seed=7,
    )
    http = D.build(T, req)
    assert http.method == "POST"
    assert http.url == "https://api.openai.com/v1/chat/completions"
    assert http.headers["authorization"] == "Bearer sk-test-KEY-123"
    assert http.headers["content-type"] == "application/json"
    assert http.json == {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 64,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
    }
    json.loads(http.body_bytes())


def test_build_max_completion_tokens_opt_in() -> None:
    t = target(Dialect.OPENAI, extra=(("max_tokens_field", "max_completion_tokens"),))
    body = _body(Request.simple("x", max_tokens=10), t)
    assert body["max_completion_tokens"] == 10
    assert "max_tokens" not in body


def test_build_images() -> None:
    req = Request(
        messages=(
            Message.user(
                "What is this?",
                ImagePart(url="data:image/png;base64,iVBORw0KGgo=", detail="low"),
                ImagePart(url="https://example.com/cat.jpg"),
            ),
        )
    )
    assert _body(req)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            ],
        }
    ]


WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    strict=True,
)


@pytest.mark.parametrize(
    ("choice", "wire_choice"),
    [
        (ToolChoice(mode="auto"), "auto"),
        (ToolChoice(mode="none"), "none"),
        (ToolChoice(mode="required"), "required"),
        (ToolChoice(mode="tool", name="get_weather"), {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_build_tools_and_choice(choice: ToolChoice, wire_choice: object) -> None:
    body = _body(Request(messages=(Message.user("x"),), tools=(WEATHER,), tool_choice=choice))
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "strict": True,
            },
        }
    ]
    assert body["tool_choice"] == wire_choice


def test_build_tool_choice_without_tools_is_omitted() -> None:
    body = _body(Request(messages=(Message.user("x"),), tool_choice=ToolChoice(mode="required")))
    assert "tool_choice" not in body
    assert "tools" not in body


def test_build_tool_round_trip() -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}', parsed={"city": "Paris"})
    req = Request(
        messages=(
            Message.user("Weather in Paris?"),
            Message.assistant(tool_calls=(call,)),
            Message.tool("call_1", "18C and sunny"),
        ),
        tools=(WEATHER,),
    )
    assert _body(req)["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
    ]


def test_build_parsed_response_round_trips_through_parse(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "openai-chat/02-nonstream-parallel-tool-calls.json")))
    msgs = (
        Message.user("go"),
        Message.assistant(r.text, tool_calls=r.tool_calls),
        *(Message.tool(c.id, "ok") for c in r.tool_calls),
    )
    sent = _body(Request(messages=msgs))["messages"]
    assert isinstance(sent, list)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert json.loads(sent[1]["tool_calls"][1]["function"]["arguments"]) == {"ticker": "AAPL", "exchange": "NASDAQ"}


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (
            ResponseFormat.json_schema({"type": "object", "properties": {"a": {"type": "string"}}}, name="thing"),
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "thing",
                    "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                    "strict": True,
                },
            },
        ),
        (ResponseFormat(kind="json_object"), {"type": "json_object"}),
        (ResponseFormat(kind="text"), None),
    ],
)
def test_build_response_format(fmt: ResponseFormat, expected: object) -> None:
    body = _body(Request(messages=(Message.user("x"),), response_format=fmt))
    assert body.get("response_format") == expected


def test_build_stream() -> None:
    http = D.build(T, Request.simple("x"), stream=True)
    assert http.json is not None
    assert http.json["stream"] is True
    assert http.json["stream_options"] == {"include_usage": True}
    assert http.headers["accept"] == "text/event-stream"


def test_build_azure() -> None:
    t = target(
        Dialect.OPENAI,
        model="gpt-4o-prod",
        base_url="https://myres.openai.azure.com/",
        azure_deployment=True,
        query=(("api-version", "2024-10-21"),),
        headers=(("x-ms-useragent", "failover"),),
    )
    http = D.build(t, Request.simple("x"))
    assert (
        http.url
        == "https://myres.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    )
    assert http.headers["api-key"] == "sk-test-KEY-123"
    assert "authorization" not in http.headers
    assert http.headers["x-ms-useragent"] == "failover"


def test_build_query_and_headers_and_no_key() -> None:
    t = target(Dialect.OPENAI, api_key=None, base_url="http://localhost:8000/v1", query=(("a", "1 2"),))
    http = D.build(t, Request.simple("x"))
    assert http.url == "http://localhost:8000/v1/chat/completions?a=1+2"
    assert "authorization" not in http.headers


def test_build_never_puts_the_key_in_repr() -> None:
    http = D.build(T, Request.simple("x"))
    assert "sk-test-KEY-123" not in repr(http)


def test_dialect_for_returns_shared_instances() -> None:
    assert dialect_for(Dialect.OPENAI) is dialect_for(Dialect.OPENAI)
    assert isinstance(dialect_for(Dialect.OPENAI), OpenAIDialect)
    assert dialect_for(Dialect.OPENAI).name == "openai"
    with pytest.raises(ValueError):
        dialect_for("cohere")  # type: ignore[arg-type]
