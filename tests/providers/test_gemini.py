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
from failover.providers import GeminiDialect, dialect_for

from ._wire import load, response, target

D = GeminiDialect()
T = target(Dialect.GEMINI)


def parse_ok(resp: object) -> Response:
    assert isinstance(resp, Response), resp
    return resp


def parse_fail(resp: object) -> Failure:
    assert isinstance(resp, Failure), resp
    return resp


def _generation(parts: list[dict[str, Any]] | None, finish: str | None = "STOP", **extra: Any) -> bytes:
    candidate: dict[str, Any] = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1",
    }
    body.update(extra)
    return json.dumps(body).encode()


# ------------------------------------------------------------------ 200 samples


def test_01_text_with_thinking_usage(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "gemini/01-generate-content-stop-usage.json")))
    assert r.text == "There are **3** r's in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y."
    assert r.usage == Usage(input_tokens=9, output_tokens=28 + 244, cached_input_tokens=0, reasoning_tokens=244)
    assert r.usage.total_tokens == 281  # matches totalTokenCount
    assert r.stop_reason is StopReason.END_TURN
    assert r.raw_stop_reason == "STOP"
    assert r.model == "gemini-3-pro-preview"
    assert r.response_id == "Un6LacrVMcjUxs0PmJfWoQc"
    assert r.provider_request_id == "Un6LacrVMcjUxs0PmJfWoQc"  # no request-id header: responseId


def test_02_function_call(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "gemini/02-generate-content-function-call.json")))
    assert r.text == ""
    assert r.stop_reason is StopReason.TOOL_USE
    assert len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert call.name == "weather"
    assert call.parsed == {"location": "San Francisco"}
    assert json.loads(call.arguments) == {"location": "San Francisco"}
    assert call.id == "call_m36LaZGyCLz1xs0PtNSB-QU_0"
    assert r.usage == Usage(input_tokens=29, output_tokens=15 + 893, reasoning_tokens=893)


def test_05_max_tokens_without_parts_is_truncated(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "gemini/05-max-tokens-no-parts-vertex.json")))
    assert f.kind is FailureKind.TRUNCATED
    assert f.disposition.action is Action.REPAIR
    assert f.provider_code == "MAX_TOKENS"
    assert f.usage == Usage(input_tokens=1706, output_tokens=2999, reasoning_tokens=2999)
    assert f.response is not None
    assert f.response.text == ""
    assert f.response.stop_reason is StopReason.MAX_TOKENS
    assert f.provider_request_id == "Dj9LaPCjJsCvgLUPgeGuqAU"


def test_06_safety_is_content_filtered(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "gemini/06-finish-safety-reconstructed.json")))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.disposition.action is Action.STOP
    assert f.provider_code == "SAFETY"
    assert f.usage == Usage(input_tokens=12)
    assert f.response is not None
    assert f.response.stop_reason is StopReason.CONTENT_FILTER


def test_07_prompt_block_chunk_as_a_whole_response(wire: Path) -> None:
    # The stream sample's only chunk has the same shape a non-streaming prompt block has.
    line = (wire / "gemini/07-prompt-blocked-prohibited-content.jsonl").read_bytes().splitlines()[0]
    f = parse_fail(D.parse(T, response(200, line)))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.provider_code == "PROHIBITED_CONTENT"
    assert f.usage == Usage(input_tokens=9)
    assert f.response is not None
    assert f.response.raw_stop_reason == "PROHIBITED_CONTENT"


@pytest.mark.parametrize(
    "finish", ["RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "SAFETY", "LANGUAGE"]
)
def test_policy_finish_reasons_are_content_filtered(finish: str) -> None:
    f = parse_fail(D.parse(T, response(200, _generation([{"text": "partial"}], finish))))
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.provider_code == finish


@pytest.mark.parametrize("finish", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
def test_bad_function_call_finish(finish: str) -> None:
    f = parse_fail(
        D.parse(
            T,
            response(
                200,
                _generation(
                    None,
                    finish,
                ),
            ),
        )
    )
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED


def test_args_not_an_object_is_malformed() -> None:
    f = parse_fail(D.parse(T, response(200, _generation([{"functionCall": {"name": "f", "args": [1, 2]}}]))))
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED


def test_function_call_without_args_and_with_id() -> None:
    parts: list[dict[str, Any]] = [
        {"functionCall": {"name": "now", "id": "fc-7"}},
        {"functionCall": {"name": "f", "args": {"a": 1}}},
    ]
    r = parse_ok(D.parse(T, response(200, _generation(parts))))
    assert [(c.id, c.name, c.parsed) for c in r.tool_calls] == [("fc-7", "now", {}), ("call_resp-1_1", "f", {"a": 1})]


def test_thought_parts_are_not_text() -> None:
    parts: list[dict[str, Any]] = [{"text": "thinking...", "thought": True}, {"text": "Answer."}]
    assert parse_ok(D.parse(T, response(200, _generation(parts)))).text == "Answer."


def test_cached_and_tool_use_tokens() -> None:
    usage = {
        "promptTokenCount": 1000,
        "cachedContentTokenCount": 800,
        "toolUsePromptTokenCount": 50,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 30,
    }
    r = parse_ok(D.parse(T, response(200, _generation([{"text": "x"}], usageMetadata=usage))))
    assert r.usage == Usage(input_tokens=1050, output_tokens=50, cached_input_tokens=800, reasoning_tokens=30)


def test_request_id_header_wins_over_response_id() -> None:
    r = parse_ok(D.parse(T, response(200, _generation([{"text": "x"}]), x_goog_request_id="g-1")))
    assert r.provider_request_id == "g-1"
    assert r.response_id == "resp-1"


def test_no_candidates_and_no_block_is_a_server_error() -> None:
    f = parse_fail(D.parse(T, response(200, '{"usageMetadata": {"promptTokenCount": 3}}')))
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert f.usage == Usage(input_tokens=3)


# ------------------------------------------------------------------ error samples


@pytest.mark.parametrize(
    ("sample", "status", "kind", "action", "code", "retry_after"),
    [
        (
            "gemini/08-error-429-resource-exhausted-retryinfo.http",
            429,
            FailureKind.RATE_LIMITED,
            Action.REPLAY,
            "RESOURCE_EXHAUSTED",
            48.0,
        ),
        (
            "gemini/09-error-503-unavailable.json",
            503,
            FailureKind.PROVIDER_OVERLOADED,
            Action.REPLAY,
            "UNAVAILABLE",
            None,
        ),
        (
            "gemini/10-error-400-api-key-invalid.http",
            400,
            FailureKind.AUTHENTICATION_OR_PERMISSION,
            Action.NEXT,
            "API_KEY_INVALID",
            None,
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
    retry_after: float | None,
) -> None:
    f = parse_fail(D.parse(T, load(wire, sample)))
    assert f.kind is kind
    assert f.disposition == disposition(kind)
    assert f.disposition.action is action
    assert f.status == status
    assert f.provider_code == code
    assert f.retry_after == retry_after
    assert f.should_retry is None
    assert f.provider_request_id is None  # Gemini error bodies carry no id and the samples no header
    assert f.rate_limits is None
    assert f.message.startswith(f"gemini {status} {code}: ")
    assert f.detail is not None


def test_08_message(wire: Path) -> None:
    f = parse_fail(D.parse(T, load(wire, "gemini/08-error-429-resource-exhausted-retryinfo.http")))
    assert "Please retry in 48.939935699s" in f.message


def _sample_08(wire: Path, edit: Any) -> bytes:
    resp = load(wire, "gemini/08-error-429-resource-exhausted-retryinfo.http")
    body = json.loads(resp.body)
    edit(body["error"])
    return json.dumps(body).encode()


def test_per_day_quota_is_exhausted_not_rate_limited(wire: Path) -> None:
    def per_day(err: dict[str, Any]) -> None:
        err["details"][1]["violations"][0]["quotaId"] = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"

    f = parse_fail(D.parse(T, response(429, _sample_08(wire, per_day))))
    assert f.kind is FailureKind.QUOTA_EXHAUSTED
    assert f.disposition.action is Action.NEXT
    assert f.retry_after == 48.0  # still reported; the policy decides what to do with it


def test_zero_quota_is_exhausted(wire: Path) -> None:
    def zero(err: dict[str, Any]) -> None:
        err["details"][1]["violations"][0]["quotaValue"] = "0"

    assert parse_fail(D.parse(T, response(429, _sample_08(wire, zero)))).kind is FailureKind.QUOTA_EXHAUSTED


def test_fractional_retry_delay(wire: Path) -> None:
    def fractional(err: dict[str, Any]) -> None:
        err["details"][2]["retryDelay"] = "1.5s"

    assert parse_fail(D.parse(T, response(429, _sample_08(wire, fractional)))).retry_after == 1.5


def test_retry_after_header_wins_over_retry_info(wire: Path) -> None:
    f = parse_fail(D.parse(T, response(429, _sample_08(wire, lambda err: None), retry_after="5")))
    assert f.retry_after == 5.0


def _err(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> str:
    body: dict[str, Any] = {"error": {"code": code, "message": message, "status": status}}
    if details:
        body["error"]["details"] = details
    return json.dumps(body)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            400,
            _err(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1250025) exceeds the maximum number of tokens allowed (1048576).",
            ),
            FailureKind.CONTEXT_OVERFLOW,
        ),
        (400, _err(400, "INVALID_ARGUMENT", "Invalid JSON payload received."), FailureKind.INVALID_REQUEST),
        (
            403,
            _err(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers"),
            FailureKind.AUTHENTICATION_OR_PERMISSION,
        ),
        (
            400,
            _err(400, "FAILED_PRECONDITION", "User location is not supported for the API use."),
            FailureKind.AUTHENTICATION_OR_PERMISSION,
        ),
        (
            404,
            _err(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta"),
            FailureKind.MODEL_NOT_FOUND,
        ),
        (500, _err(500, "INTERNAL", "An internal error has occurred."), FailureKind.PROVIDER_SERVER_ERROR),
        (
            504,
            _err(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
            FailureKind.PROVIDER_SERVER_ERROR,
        ),
        (
            429,
            _err(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
            FailureKind.RATE_LIMITED,
        ),
        (
            429,
            _err(429, "RESOURCE_EXHAUSTED", "Quota exceeded for metric: x, limit: 0, model: gemini-2.5-pro"),
            FailureKind.QUOTA_EXHAUSTED,
        ),
        (
            403,
            _err(
                403,
                "PERMISSION_DENIED",
                "disabled",
                [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}],
            ),
            FailureKind.AUTHENTICATION_OR_PERMISSION,
        ),
        (502, "<html><title>502 Server Error</title></html>", FailureKind.PROVIDER_SERVER_ERROR),
        (503, "", FailureKind.PROVIDER_OVERLOADED),
        (
            400,
            "[" + _err(400, "INVALID_ARGUMENT", "Function call is missing a thought_signature") + "]",
            FailureKind.INVALID_REQUEST,
        ),
        (
            200,
            '{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}',
            FailureKind.PROVIDER_OVERLOADED,
        ),
        (200, "", FailureKind.PROVIDER_SERVER_ERROR),
    ],
)
def test_other_errors(status: int, body: str, kind: FailureKind) -> None:
    f = parse_fail(D.parse(T, response(status, body)))
    assert f.kind is kind
    assert f.status == status


# ------------------------------------------------------------------ build


def _body(req: Request, t: Any = T, *, stream: bool = False) -> dict[str, Any]:
    http = D.build(t, req, stream=stream)
    assert http.json is not None
    return dict(http.json)


def test_build_basic() -> None:
    req = Request(
        messages=(Message.system("Be brief."), Message.user("Hi"), Message.assistant("Hello"), Message.user("Bye")),
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        stop=("END",),
        seed=7,
    )
    http = D.build(T, req)
    assert http.url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    assert http.headers["x-goog-api-key"] == "sk-test-KEY-123"
    assert "key=" not in http.url
    assert http.json == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [{"text": "Hello"}]},
            {"role": "user", "parts": [{"text": "Bye"}]},
        ],
        "generationConfig": {
            "maxOutputTokens": 64,
            "temperature": 0.2,
            "topP": 0.9,
            "stopSequences": ["END"],
            "seed": 7,
        },
    }


def test_build_stream_url() -> None:
    t = target(Dialect.GEMINI, model="models/gemini-2.5-pro", query=(("x", "1"),))
    http = D.build(t, Request.simple("x"), stream=True)
    assert http.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&x=1"
    )
    assert "generationConfig" not in (http.json or {})


def test_build_images() -> None:
    req = Request(
        messages=(
            Message.user(
                "Describe",
                ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
                ImagePart(url="https://example.com/cat.png?size=big"),
                ImagePart(url="gs://bucket/object"),
            ),
        )
    )
    assert _body(req)["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Describe"},
                {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQ"}},
                {"fileData": {"fileUri": "https://example.com/cat.png?size=big", "mimeType": "image/png"}},
                {"fileData": {"fileUri": "gs://bucket/object"}},
            ],
        }
    ]


WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": False},
)


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        (ToolChoice(mode="auto"), {"mode": "AUTO"}),
        (ToolChoice(mode="none"), {"mode": "NONE"}),
        (ToolChoice(mode="required"), {"mode": "ANY"}),
        (ToolChoice(mode="tool", name="get_weather"), {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
def test_build_tools_and_choice(choice: ToolChoice, config: dict[str, Any]) -> None:
    body = _body(Request(messages=(Message.user("x"),), tools=(WEATHER,), tool_choice=choice))
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "additionalProperties": False,
                    },
                }
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": config}


def test_build_tool_round_trip_merges_parallel_results() -> None:
    calls = (
        ToolCall(id="c1", name="get_weather", arguments='{"city":"Paris"}', parsed={"city": "Paris"}),
        ToolCall(id="c2", name="get_time", arguments=""),
    )
    req = Request(
        messages=(
            Message.user("Weather and time in Paris?"),
            Message.assistant(tool_calls=calls),
            Message.tool("c1", "18C"),
            Message.tool("c2", "noon"),
        ),
        tools=(WEATHER,),
    )
    assert _body(req)["contents"] == [
        {"role": "user", "parts": [{"text": "Weather and time in Paris?"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "get_time", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}},
                {"functionResponse": {"name": "get_time", "response": {"output": "noon"}}},
            ],
        },
    ]


def test_build_gemini_3_replay_carries_signature_sentinel() -> None:
    t = target(Dialect.GEMINI, model="gemini-3-pro-preview")
    calls = (ToolCall(id="a", name="f", arguments="{}"), ToolCall(id="b", name="g", arguments="{}"))
    req = Request(
        messages=(
            Message.user("x"),
            Message.assistant(tool_calls=calls),
            Message.tool("a", "1"),
            Message.tool("b", "2"),
        )
    )
    parts = _body(req, t)["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in parts[1]  # parallel calls: only the first carries one


def test_build_round_trip_from_parsed_response(wire: Path) -> None:
    r = parse_ok(D.parse(T, load(wire, "gemini/02-generate-content-function-call.json")))
    msgs = (
        Message.user("weather?"),
        Message.assistant(tool_calls=r.tool_calls),
        Message.tool(r.tool_calls[0].id, "sunny"),
    )
    contents = _body(Request(messages=msgs))["contents"]
    assert contents[1]["parts"][0]["functionCall"] == {"name": "weather", "args": {"location": "San Francisco"}}
    assert contents[2]["parts"][0]["functionResponse"]["name"] == "weather"


@pytest.mark.parametrize(
    ("fmt", "config"),
    [
        (
            ResponseFormat.json_schema({"type": "object", "properties": {"a": {"type": "string"}}}),
            {
                "responseMimeType": "application/json",
                "responseJsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
        ),
        (ResponseFormat(kind="json_object"), {"responseMimeType": "application/json"}),
    ],
)
def test_build_json_output(fmt: ResponseFormat, config: dict[str, Any]) -> None:
    assert _body(Request(messages=(Message.user("x"),), response_format=fmt))["generationConfig"] == config


def test_dialect_for() -> None:
    assert dialect_for(Dialect.GEMINI) is dialect_for(Dialect.GEMINI)
    assert dialect_for(Dialect.GEMINI).name == "gemini"
