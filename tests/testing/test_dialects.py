"""Each reply kind, rendered as the real provider sends it: status, headers, body fields."""

from __future__ import annotations

import json

import pytest

from failover.model import Dialect
from failover.testing import FakeProvider, Reply

from ._helpers import TOOL_PARAMS, WEATHER_SCHEMA, as_json, send, sse_data, sse_events

OA, AN, GE = Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI


def fake(dialect: Dialect, reply: Reply | str, **kw: object) -> FakeProvider:
    return FakeProvider("p", dialect, [reply], **kw)  # type: ignore[arg-type]


# -- 200s ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", [OA, AN, GE])
async def test_a_plain_reply_answers_a_stream_request_with_the_json_body(dialect: Dialect) -> None:
    resp = await send(fake(dialect, Reply.ok("whole", plain=True)), stream=True)
    assert resp.status == 200
    assert "json" in (resp.header("content-type") or "") and "event-stream" not in (resp.header("content-type") or "")
    assert "whole" in json.dumps(as_json(resp))
    streamed = await send(fake(dialect, Reply.ok("whole")), stream=True)  # without it: a stream, as asked
    assert dialect is GE or "event-stream" in (streamed.header("content-type") or "")


async def test_retry_after_as_an_http_date_beside_the_response_date() -> None:
    from failover.providers._headers import parse_retry_after

    resp = await send(fake(OA, Reply.rate_limit(retry_after_date=3)))
    assert resp.status == 429
    date, when = resp.header("date"), resp.header("retry-after")
    assert date and when and when.endswith("GMT") and date.endswith("GMT")
    assert parse_retry_after(resp.headers) == 3.0  # read against the response's own date


async def test_openai_ok_is_a_chat_completion() -> None:
    resp = await send(fake(OA, "ok"))
    assert resp.status == 200
    assert resp.header("content-type") == "application/json"
    assert resp.header("x-request-id") == "req_p_1"
    b = as_json(resp)
    assert b["id"] == "chatcmpl-p-1"
    assert b["object"] == "chat.completion"
    assert isinstance(b["created"], int) and b["created"] > 1_600_000_000
    assert b["model"] == "gpt-4o-mini"  # echoes the request's model
    assert b["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok from p", "refusal": None, "annotations": []},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    # 35 prompt characters -> 9 tokens; "ok from p" -> 3
    assert (b["usage"]["prompt_tokens"], b["usage"]["completion_tokens"], b["usage"]["total_tokens"]) == (9, 3, 12)


async def test_anthropic_ok_is_a_message() -> None:
    resp = await send(fake(AN, Reply.ok("Bonjour", usage=(12, 29)), model="claude-opus-4-1"))
    assert resp.status == 200
    assert resp.header("request-id") == "req_p_1"
    b = as_json(resp)
    assert b["id"] == "msg_p_1"
    assert (b["type"], b["role"], b["model"]) == ("message", "assistant", "claude-opus-4-1")
    assert b["content"] == [{"type": "text", "text": "Bonjour"}]
    assert (b["stop_reason"], b["stop_sequence"]) == ("end_turn", None)
    assert (b["usage"]["input_tokens"], b["usage"]["output_tokens"]) == (12, 29)


async def test_gemini_ok_is_a_generate_content_response() -> None:
    resp = await send(fake(GE, "ok('It is sunny.')"))
    assert resp.status == 200
    assert resp.header("content-type") == "application/json; charset=UTF-8"
    b = as_json(resp)
    assert b["candidates"] == [
        {"content": {"parts": [{"text": "It is sunny."}], "role": "model"}, "finishReason": "STOP", "index": 0}
    ]
    assert b["usageMetadata"]["promptTokenCount"] == 9
    assert b["usageMetadata"]["candidatesTokenCount"] == 3
    assert b["usageMetadata"]["totalTokenCount"] == 12
    assert (b["modelVersion"], b["responseId"]) == ("gemini-2.5-flash", "p-1")


async def test_tool_calls_in_each_dialect() -> None:
    reply = Reply.ok(tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {})])
    o = as_json(await send(fake(OA, reply)))
    msg = o["choices"][0]["message"]
    assert o["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["content"] is None
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == [
        ("function", "get_weather", {"city": "Paris"}),
        ("function", "get_time", {}),
    ]
    assert len({c["id"] for c in msg["tool_calls"]}) == 2

    a = as_json(await send(fake(AN, reply)))
    assert a["stop_reason"] == "tool_use"
    assert [(c["type"], c["name"], c["input"]) for c in a["content"]] == [
        ("tool_use", "get_weather", {"city": "Paris"}),
        ("tool_use", "get_time", {}),
    ]
    assert all(c["id"].startswith("toolu_") for c in a["content"])

    g = as_json(await send(fake(GE, reply)))
    assert g["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"name": "get_time", "args": {}}},
    ]
    assert g["candidates"][0]["finishReason"] == "STOP"


async def test_structured_output_json_is_the_text() -> None:
    obj = {"city": "Paris", "temperature": 21.5, "units": "c", "tags": []}
    schema_fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER_SCHEMA, "strict": True}}
    o = as_json(await send(fake(OA, Reply.ok(json=obj)), response_format=schema_fmt))
    assert json.loads(o["choices"][0]["message"]["content"]) == obj
    a = as_json(
        await send(
            fake(AN, Reply.ok(json=obj)), output_config={"format": {"type": "json_schema", "schema": WEATHER_SCHEMA}}
        )
    )
    assert json.loads(a["content"][0]["text"]) == obj
    g = as_json(
        await send(
            fake(GE, Reply.ok(json=obj)),
            generationConfig={"responseMimeType": "application/json", "responseJsonSchema": WEATHER_SCHEMA},
        )
    )
    assert json.loads(g["candidates"][0]["content"]["parts"][0]["text"]) == obj


async def test_default_ok_for_a_schema_request_matches_the_schema() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER_SCHEMA, "strict": True}}
    o = as_json(await send(fake(OA, "ok"), response_format=fmt))
    assert json.loads(o["choices"][0]["message"]["content"]) == {
        "city": "ok from p",
        "temperature": 0,
        "units": "c",
        "tags": [],
    }
    gemini_schema = {"type": "OBJECT", "properties": {"n": {"type": "INTEGER", "minimum": 3}}}
    g = as_json(await send(fake(GE, "ok"), generationConfig={"responseSchema": gemini_schema}))
    assert json.loads(g["candidates"][0]["content"]["parts"][0]["text"]) == {"n": 3}


async def test_a_forced_tool_gets_called_by_default() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": TOOL_PARAMS}}]
    choice = {"type": "function", "function": {"name": "get_weather"}}
    o = as_json(await send(fake(OA, "ok"), tools=tools, tool_choice=choice))
    call = o["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "ok from p"})
    assert o["choices"][0]["finish_reason"] == "stop"  # a named tool_choice ends with "stop" on the real API

    a_tools = [{"name": "record", "input_schema": TOOL_PARAMS}]
    a = as_json(
        await send(
            fake(AN, Reply.ok(json={"city": "Oslo"})), tools=a_tools, tool_choice={"type": "tool", "name": "record"}
        )
    )
    assert a["content"] == [
        {"type": "tool_use", "id": a["content"][0]["id"], "name": "record", "input": {"city": "Oslo"}}
    ]
    assert a["stop_reason"] == "tool_use"

    g_tools = [{"functionDeclarations": [{"name": "lookup", "parameters": TOOL_PARAMS}]}]
    g = as_json(await send(fake(GE, "ok"), tools=g_tools, toolConfig={"functionCallingConfig": {"mode": "ANY"}}))
    assert g["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"name": "lookup", "args": {"city": "ok from p"}}}
    ]


async def test_truncate() -> None:
    o = as_json(await send(fake(OA, "truncate('The weath')"), max_tokens=5))
    assert o["choices"][0]["finish_reason"] == "length"
    assert o["choices"][0]["message"]["content"] == "The weath"
    assert o["usage"]["completion_tokens"] == 5  # the output limit was used up
    a = as_json(await send(fake(AN, "truncate")))
    assert a["stop_reason"] == "max_tokens"
    assert a["content"][0]["text"] == "partial answer from p, cut"
    assert a["usage"]["output_tokens"] == 256
    g = as_json(await send(fake(GE, "truncate('x')")))
    assert g["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert g["candidates"][0]["content"]["parts"] == [{"text": "x"}]


async def test_refuse() -> None:
    o = as_json(await send(fake(OA, "refuse")))
    msg = o["choices"][0]["message"]
    assert (msg["content"], msg["refusal"]) == (None, "I'm sorry, but I can't assist with that.")
    assert o["choices"][0]["finish_reason"] == "stop"
    a = as_json(await send(fake(AN, "refuse")))
    assert (a["content"], a["stop_reason"]) == ([], "refusal")
    assert a["stop_details"]["type"] == "refusal"
    g = as_json(await send(fake(GE, "refuse")))
    cand = g["candidates"][0]
    assert cand["finishReason"] == "SAFETY" and "content" not in cand
    assert {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True} in cand[
        "safetyRatings"
    ]


async def test_content_filter() -> None:
    o = as_json(await send(fake(OA, "content_filter")))
    assert o["choices"][0]["finish_reason"] == "content_filter"
    assert o["choices"][0]["message"]["content"] is None
    a = as_json(await send(fake(AN, "content_filter")))
    assert a["stop_reason"] == "refusal"
    g = as_json(await send(fake(GE, "content_filter")))
    assert "candidates" not in g
    assert g["promptFeedback"] == {"blockReason": "PROHIBITED_CONTENT"}
    assert g["usageMetadata"]["promptTokenCount"] == 9


async def test_malformed_tool_args() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": TOOL_PARAMS}}]
    o = as_json(await send(fake(OA, "malformed_tool_args"), tools=tools))
    fn = o["choices"][0]["message"]["tool_calls"][0]["function"]
    assert fn["name"] == "get_weather"  # the request's first tool
    with pytest.raises(json.JSONDecodeError):
        json.loads(fn["arguments"])
    assert o["choices"][0]["finish_reason"] == "tool_calls"

    a = as_json(await send(fake(AN, "malformed_tool_args('save', arguments='{\"a\": ')")))
    block = a["content"][0]
    assert (block["type"], block["name"], block["input"]) == ("tool_use", "save", '{"a": ')
    assert a["stop_reason"] == "tool_use"

    g = as_json(await send(fake(GE, "malformed_tool_args('lookup')")))
    cand = g["candidates"][0]
    assert cand["finishReason"] == "MALFORMED_FUNCTION_CALL"
    assert cand["finishMessage"].startswith("Malformed function call: print(default_api.lookup(")


async def test_schema_invalid_returns_json_that_misses_the_schema() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER_SCHEMA}}
    o = as_json(await send(fake(OA, "schema_invalid"), response_format=fmt))
    assert json.loads(o["choices"][0]["message"]["content"]) == {"wrong": 1}
    assert o["choices"][0]["finish_reason"] == "stop"
    g = as_json(await send(fake(GE, "schema_invalid({'city': 3})")))
    assert json.loads(g["candidates"][0]["content"]["parts"][0]["text"]) == {"city": 3}


async def test_delay_answers_like_ok() -> None:
    a = as_json(await send(fake(AN, "delay(0.01, text='late')")))
    assert a["content"] == [{"type": "text", "text": "late"}]


# -- errors --------------------------------------------------------------------------------------


async def test_rate_limit_openai() -> None:
    resp = await send(fake(OA, Reply.rate_limit(retry_after=2, retry_after_ms=1500)))
    assert resp.status == 429
    assert resp.header("retry-after") == "2"
    assert resp.header("retry-after-ms") == "1500"
    assert resp.header("x-ratelimit-remaining-requests") == "0"
    assert resp.header("x-request-id") == "req_p_1"
    err = as_json(resp)["error"]
    assert (err["type"], err["code"], err["param"]) == ("requests", "rate_limit_exceeded", None)
    assert "Please try again in 1.5s." in err["message"]


async def test_rate_limit_without_hint_sends_no_retry_headers() -> None:
    resp = await send(fake(OA, "rate_limit"))
    assert resp.status == 429
    assert resp.header("retry-after") is None and resp.header("retry-after-ms") is None


async def test_rate_limit_anthropic_and_gemini() -> None:
    a = await send(fake(AN, Reply.rate_limit(retry_after=7)))
    assert a.status == 429
    assert (a.header("retry-after"), a.header("x-should-retry"), a.header("request-id")) == ("7", "true", "req_p_1")
    assert a.header("anthropic-ratelimit-requests-remaining") == "0"
    body = as_json(a)
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert body["request_id"] == "req_p_1"

    g = await send(fake(GE, Reply.rate_limit(retry_after=48)))
    assert g.status == 429
    assert g.header("retry-after") is None  # Gemini puts the hint in the body only
    err = as_json(g)["error"]
    assert (err["code"], err["status"]) == (429, "RESOURCE_EXHAUSTED")
    retry = [d for d in err["details"] if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo"]
    assert retry == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "48s"}]
    quota = next(d for d in err["details"] if d["@type"].endswith("QuotaFailure"))
    assert "PerMinute" in quota["violations"][0]["quotaId"]
    assert err["message"].endswith("Please retry in 48s.")


async def test_quota() -> None:
    o = await send(fake(OA, "quota"))
    assert o.status == 429
    assert as_json(o)["error"]["type"] == as_json(o)["error"]["code"] == "insufficient_quota"
    a = await send(fake(AN, "quota"))
    assert (a.status, a.header("x-should-retry")) == (400, "false")
    assert as_json(a)["error"]["type"] == "invalid_request_error"
    assert as_json(a)["error"]["message"].startswith("Your credit balance is too low to access the Anthropic API.")
    g = await send(fake(GE, "quota"))
    err = as_json(g)["error"]
    assert (g.status, err["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert not any(d["@type"].endswith("RetryInfo") for d in err["details"])
    quota = next(d for d in err["details"] if d["@type"].endswith("QuotaFailure"))
    assert "PerDay" in quota["violations"][0]["quotaId"]


async def test_overloaded() -> None:
    o = await send(fake(OA, "overloaded"))
    assert o.status == 503
    assert as_json(o)["error"]["code"] == "server_is_overloaded"
    a = await send(fake(AN, Reply.overloaded(retry_after=3)))
    assert (a.status, a.header("x-should-retry"), a.header("retry-after")) == (529, "true", "3")
    assert as_json(a)["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    g = await send(fake(GE, "overloaded"))
    assert g.status == 503
    assert as_json(g) == {
        "error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}
    }


async def test_server_error() -> None:
    o = await send(fake(OA, "server_error"))
    assert o.status == 500
    err = as_json(o)["error"]
    assert (err["type"], err["code"]) == ("server_error", None)
    assert "req_p_1" in err["message"]
    a = await send(fake(AN, "server_error"))
    assert (a.status, as_json(a)["error"]["type"]) == (500, "api_error")
    g = await send(fake(GE, "server_error"))
    assert (g.status, as_json(g)["error"]["status"]) == (500, "INTERNAL")


async def test_unauthorized() -> None:
    o = await send(fake(OA, "unauthorized"))
    assert o.status == 401
    assert o.header("www-authenticate") == 'Bearer realm="OpenAI API"'
    assert as_json(o)["error"]["code"] == "invalid_api_key"
    a = await send(fake(AN, "unauthorized"))
    assert (a.status, a.header("x-should-retry")) == (401, "false")
    assert as_json(a)["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
    g = await send(fake(GE, "unauthorized"))
    err = as_json(g)["error"]
    assert (g.status, err["status"]) == (400, "INVALID_ARGUMENT")  # Gemini: 400, not 401
    assert err["details"][0]["reason"] == "API_KEY_INVALID"


async def test_not_found_names_the_model() -> None:
    o = await send(fake(OA, "not_found"))
    assert o.status == 404
    err = as_json(o)["error"]
    assert err["code"] == "model_not_found"
    assert err["message"] == "The model `gpt-4o-mini` does not exist or you do not have access to it."
    a = await send(fake(AN, "not_found"))
    assert (a.status, as_json(a)["error"]) == (404, {"type": "not_found_error", "message": "model: claude-haiku-4-5"})
    g = await send(fake(GE, "not_found"))
    assert g.status == 404
    assert as_json(g)["error"]["message"].startswith("models/gemini-2.5-flash is not found for API version v1beta")


async def test_context_overflow_uses_each_real_message() -> None:
    reply = Reply.context_overflow(prompt_tokens=3333404, limit=200000)
    o = await send(fake(OA, reply))
    err = as_json(o)["error"]
    assert (o.status, err["code"], err["param"]) == (400, "context_length_exceeded", "messages")
    assert err["message"] == (
        "This model's maximum context length is 200000 tokens. However, your messages resulted in "
        "3333404 tokens. Please reduce the length of the messages."
    )
    a = await send(fake(AN, reply))
    assert (a.status, as_json(a)["error"]) == (
        400,
        {"type": "invalid_request_error", "message": "prompt is too long: 3333404 tokens > 200000 maximum"},
    )
    g = await send(fake(GE, "context_overflow"))
    assert g.status == 400
    assert as_json(g)["error"]["message"] == (
        "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
    )


async def test_invalid_with_a_custom_message() -> None:
    o = await send(fake(OA, "invalid('messages[1].content: bad')"))
    assert (o.status, as_json(o)["error"]["message"], as_json(o)["error"]["type"]) == (
        400,
        "messages[1].content: bad",
        "invalid_request_error",
    )
    a = await send(fake(AN, "invalid"))
    assert (a.status, as_json(a)["error"]["type"]) == (400, "invalid_request_error")
    g = await send(fake(GE, "invalid"))
    assert (g.status, as_json(g)["error"]["status"]) == (400, "INVALID_ARGUMENT")


# -- streams -------------------------------------------------------------------------------------


async def test_openai_stream_with_usage() -> None:
    p = fake(OA, "ok('Hello there friend')")
    resp = await send(p, stream=True, stream_options={"include_usage": True})
    assert resp.header("content-type") == "text/event-stream; charset=utf-8"
    events = sse_data(resp)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello there friend"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    assert p.calls[0].stream is True


async def test_anthropic_stream_events() -> None:
    resp = await send(fake(AN, Reply.ok("Hi you", tool_calls=[("f", {"x": 1})])), stream=True)
    assert sse_events(resp) == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    data = sse_data(resp)
    partial = "".join(
        d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta" and d["index"] == 1
    )
    assert json.loads(partial) == {"x": 1}
    assert data[-2]["delta"]["stop_reason"] == "tool_use"


async def test_gemini_stream_sse_with_crlf() -> None:
    resp = await send(fake(GE, "ok('one two')"), stream=True)
    assert b"\r\n\r\n" in resp.body
    chunks = sse_data(resp)
    assert [c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks] == ["one ", "two"]
    assert "finishReason" not in chunks[0]["candidates"][0]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 2
