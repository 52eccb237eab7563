"""POST /v1/chat/completions (non-streaming) through the ASGI app: bodies, headers, failures."""

from __future__ import annotations

import json
import logging

import pytest

from failover.testing import Reply

from ._kit import ACME_KEY, PROVIDER_KEY, Kit, chat_body

PIXEL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def test_plain_chat_is_an_openai_completion_with_failover_headers() -> None:
    kit = Kit({"a": [Reply.ok("Hello there", usage=(12, 3))]})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"x-failover-request-id": "trace-1"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    # the model that answered (target a's), not the route; the route is in x-failover-route
    assert body["model"] == kit.providers["a"].model != "chat"
    assert r.headers["x-failover-route"] == "chat"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there", "refusal": None}
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens"] == 12
    assert body["usage"]["completion_tokens"] == 3
    assert body["usage"]["total_tokens"] == 15
    h = r.headers
    assert h["x-failover-request-id"] == "trace-1"
    assert h["x-request-id"] == "trace-1"
    assert h["x-failover-target"] == "a"
    assert h["x-failover-attempts"] == "1"
    assert h["x-failover-recovered"] == "false"
    assert h["x-failover-degraded"] == "false"
    assert h["x-failover-workflow"] == "direct"
    assert int(h["x-failover-added-latency-ms"]) >= 0


async def test_failover_shows_in_headers() -> None:
    kit = Kit({"x": Reply.overloaded()})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("flaky"))
    assert r.status_code == 200
    assert r.headers["x-failover-target"] == "c"
    assert r.headers["x-failover-recovered"] == "true"
    assert r.headers["x-failover-workflow"] == "fallback"
    assert int(r.headers["x-failover-attempts"]) >= 2
    assert r.json()["choices"][0]["message"]["content"] == "ok from c"


async def test_request_fields_reach_the_provider() -> None:
    kit = Kit()
    body = {
        "model": "chat",
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
                ],
            },
        ],
        "max_completion_tokens": 77,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "user": "ignored-by-the-gateway",
    }
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None
    text = json.dumps(sent)
    assert PIXEL in text
    assert "Be brief." in text
    assert 77 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
    assert sent["temperature"] == 0.2
    assert sent["seed"] == 7
    assert sent["model"] == kit.providers["a"].model  # the target's model, not the route name


async def test_structured_output() -> None:
    kit = Kit({"a": [Reply.ok(json={"answer": "42"})]})
    rf = {"type": "json_schema", "json_schema": {"name": "result", "schema": SCHEMA, "strict": True}}
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body(response_format=rf))
    assert r.status_code == 200, r.text
    assert json.loads(r.json()["choices"][0]["message"]["content"]) == {"answer": "42"}
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None and sent["response_format"]["json_schema"]["schema"] == SCHEMA


async def test_tool_calls_have_json_string_arguments() -> None:
    kit = Kit({"t": [Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])]})
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("tools", tools=tools, tool_choice="auto"))
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert call["id"]


async def test_tool_result_round_trip_is_accepted() -> None:
    kit = Kit()
    messages = [
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
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json={"model": "chat", "messages": messages, "tools": tools})
    assert r.status_code == 200, r.text
    sent = kit.providers["a"].calls[-1].json
    assert sent is not None and sent["messages"][-1]["tool_call_id"] == "call_1"


async def test_unknown_route_is_404_model_not_found() -> None:
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("gpt-9"))
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "model_not_found"
    assert err["param"] == "model"
    assert "gpt-9" in err["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "chat", "messages": []}, "messages"),
        ({"model": "chat", "messages": [{"role": "user", "content": "x"}], "temperature": 5}, "temperature"),
        ({"model": "chat", "messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        ({"model": "chat", "messages": [{"role": "user", "content": "x"}], "n": 3}, "n"),
        (
            {
                "model": "chat",
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}],
            },
            "messages[0].content[0].image_url.url",
        ),
        (
            {
                "model": "chat",
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "r"}},
            },
            "response_format.json_schema.schema",
        ),
        (
            {
                "model": "chat",
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            "tool_choice",
        ),
    ],
)
async def test_invalid_bodies_are_400_naming_the_field(body: dict[str, object], param: str) -> None:
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    assert kit.net.calls == []  # nothing was sent upstream


async def test_not_json_and_too_deep() -> None:
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "invalid_json"
        deep: object = "x"
        for _ in range(40):
            deep = {"a": deep}
        r = await c.post("/v1/chat/completions", json={**chat_body(), "metadata": deep})
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "json_too_deep"
        r = await c.post("/v1/chat/completions", content=b"[" * 5_000 + b"]" * 5_000)  # beyond the parser's stack
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "json_too_deep"


async def test_body_too_large_is_413() -> None:
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body(text="x" * 70_000))
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "request_too_large"

        async def chunks():  # no content-length: counted while reading
            for _ in range(10):
                yield b" " * 10_000

        r = await c.post("/v1/chat/completions", content=chunks())
        assert r.status_code == 413
    assert kit.net.calls == []


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("x-failover-deadline-ms", "soon"),
        ("x-failover-deadline-ms", "0"),
        ("x-failover-deadline-ms", "99999999"),
        ("x-failover-max-attempts", "0"),
        ("x-failover-max-attempts", "1.5"),
        ("x-failover-max-cost", "-1"),
        ("x-failover-max-cost", "nan"),
        ("x-failover-allow-fallback", "maybe"),
        ("x-failover-side-effects", "all"),
        ("x-failover-request-id", "has spaces in it"),
    ],
)
async def test_bad_headers_are_400_naming_the_header_and_the_fix(header: str, value: str) -> None:
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={header: value})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == header
    assert err["code"] == "invalid_header"
    assert header in err["message"] and "Fix:" in err["message"]
    assert kit.net.calls == []


async def test_headers_shape_the_envelope() -> None:
    kit = Kit({"x": Reply.overloaded()})
    async with kit.client() as c:
        r = await c.post(
            "/v1/chat/completions", json=chat_body("flaky"), headers={"x-failover-allow-fallback": "false"}
        )
        assert r.status_code == 503
        assert r.headers["x-failover-target"] == ""
        assert r.json()["error"]["code"] == "provider_overloaded"
        assert kit.providers["c"].calls == []
        r = await c.post(
            "/v1/chat/completions",
            json=chat_body("flaky"),
            headers={"x-failover-max-attempts": "1", "x-failover-allow-fallback": "true"},
        )
        assert r.headers["x-failover-attempts"] == "1"
        assert r.status_code == 503


async def test_retryable_unavailable_is_503_with_retry_after() -> None:
    kit = Kit({"s": Reply.rate_limit(retry_after=30)})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo"), headers={"x-failover-deadline-ms": "2000"})
    assert r.status_code == 503
    assert r.headers["retry-after"] == "30"  # the provider's own hint: a retry later can succeed
    # one layer owns retries: the SDKs are told not to retry, the caller is told it may come back
    assert (r.headers["x-should-retry"], r.headers["x-failover-retryable"]) == ("false", "true")
    err = r.json()["error"]
    assert err["code"] == "rate_limited"
    assert err["type"] == "service_unavailable"
    assert r.headers["x-failover-request-id"] in err["message"]


async def test_exhausted_deadline_is_504() -> None:
    kit = Kit({"s": Reply.hang()})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo"), headers={"x-failover-deadline-ms": "300"})
    assert r.status_code == 504
    assert r.json()["error"]["code"] == "deadline_exhausted"
    assert r.json()["error"]["type"] == "timeout_error"


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (Reply.invalid("messages[0] is not valid"), 400, "invalid_request"),
        (Reply.context_overflow(), 400, "context_overflow"),
        (Reply.content_filter(), 400, "content_filtered"),
    ],
)
async def test_request_side_failures_are_400(reply: Reply, status: int, code: str) -> None:
    kit = Kit({"s": reply})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo"))
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    assert r.headers["x-should-retry"] == "false"


async def test_contract_failure_is_422() -> None:
    kit = Kit({"s": Reply.schema_invalid()})
    rf = {"type": "json_schema", "json_schema": {"name": "result", "schema": SCHEMA}}
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo", response_format=rf))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] in {"contract_failure", "schema_invalid"}


async def test_broken_provider_credential_is_502_and_leaks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    kit = Kit()
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("misconfigured"))
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["code"] == "authentication_or_permission"
    assert "not your API key" in err["message"]
    assert "Incorrect API key" not in err["message"]  # the provider's words stay inside
    assert "sk-" not in r.text
    assert r.headers["x-should-retry"] == "false"
    assert kit.providers["m"].calls[-1].status == 401


async def test_provider_secret_never_leaves(caplog: pytest.LogCaptureFixture) -> None:
    """Every kind of answer, plain and streamed: the provider key is in no body, header or log line."""
    caplog.set_level(logging.DEBUG)
    leaky = f"upstream said: bad key {PROVIDER_KEY} and Bearer {PROVIDER_KEY}"
    kit = Kit(
        {
            "s": [Reply.invalid(leaky)],
            "x": Reply.overloaded(message=leaky),
        }
    )
    seen: list[str] = []
    async with kit.client() as c:
        for route, extra in [("solo", {}), ("flaky", {}), ("chat", {}), ("chat", {"stream": True}), ("gpt-x", {})]:
            r = await c.post("/v1/chat/completions", json=chat_body(route, **extra))
            seen.append(r.text + json.dumps(dict(r.headers)))
        for path in ["/v1/models", "/admin/health"]:
            r = await c.get(path)
            seen.append(r.text + json.dumps(dict(r.headers)))
        r = await c.get("/admin/health", headers={"authorization": "Bearer gw-admin-key-0003"})
        seen.append(r.text)
    assert kit.providers["s"].calls, "the provider was called"
    blob = "\n".join(seen)
    assert PROVIDER_KEY not in blob
    assert PROVIDER_KEY not in caplog.text
    assert ACME_KEY not in caplog.text


def test_scrubber_removes_configured_secrets_and_key_shapes() -> None:
    from failover.inbound._failures import Scrubber

    scrub = Scrubber(["hunter2-provider-secret"])
    out = scrub("x hunter2-provider-secret y sk-proj-abcdef123 z AIzaSyA1234567890abcdef Bearer abcdefghijk ?key=zzz")
    assert "hunter2" not in out and "sk-proj" not in out and "AIza" not in out and "abcdefghijk" not in out
    assert "zzz" not in out


async def test_no_answer_of_the_gateway_invites_a_clients_own_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs retry a 408, 409 or 5xx by themselves unless told not to: every error says so,
    a bad body, an unknown path and the gateway's own bug alike."""
    kit = Kit()

    async def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a bug")

    async with kit.client() as c:
        bad = await c.post("/v1/chat/completions", content=b"not json", headers={"content-type": "application/json"})
        missing = await c.get("/v1/nothing-here")
        monkeypatch.setattr(kit.router, "complete", broken)
        bug = await c.post("/v1/chat/completions", json=chat_body("solo"))
    assert (bad.status_code, missing.status_code, bug.status_code) == (400, 404, 500)
    for r in (bad, missing, bug):
        assert r.headers["x-should-retry"] == "false", r


@pytest.mark.parametrize("stream", [False, True])
async def test_the_gateways_own_bug_is_logged_with_its_traceback_and_no_secret(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    """An operator sees where an internal error came from; the client sees only its request id."""
    caplog.set_level(logging.ERROR, logger="failover.gateway")
    kit = Kit()

    def deep_in_the_gateway() -> None:
        raise RuntimeError(f"a bug near {PROVIDER_KEY} and sk-proj-abcdefghijklmnop1234")

    async def broken(*args: object, **kwargs: object) -> object:
        deep_in_the_gateway()
        raise AssertionError("unreachable")

    class BrokenStream:  # what router.stream returns, failing at its first event
        record = target = max_tokens_capped_to = None

        async def __aenter__(self) -> BrokenStream:
            return self

        async def aclose(self) -> None:
            return None

        def __aiter__(self) -> BrokenStream:
            return self

        async def __anext__(self) -> object:
            deep_in_the_gateway()
            raise AssertionError("unreachable")

    def broken_stream(*args: object, **kwargs: object) -> object:
        return BrokenStream()

    monkeypatch.setattr(kit.router, "stream" if stream else "complete", broken_stream if stream else broken)
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json=chat_body("solo", stream=stream))
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    assert "RuntimeError" not in r.text and PROVIDER_KEY not in r.text
    line = next(rec.getMessage() for rec in caplog.records if "internal error" in rec.getMessage())
    assert "Traceback" in line and "deep_in_the_gateway" in line and "RuntimeError: a bug near" in line
    assert PROVIDER_KEY not in line and "sk-proj-abcdefghijklmnop1234" not in line


@pytest.mark.parametrize(
    ("fields", "param", "code", "says"),
    [
        ({"messages": "Hello"}, "messages", "invalid_type", "messages: Input should be a valid list (got a string)"),
        ({"messages": None}, "messages", "invalid_type", "(got null)"),
        ({"max_tokens": "lots"}, "max_tokens", "invalid_type", "valid integer (got a string)"),
        ({"temperature": 9}, "temperature", "invalid_value", "temperature: Input should be less than or equal to 2"),
        ({"messages": [{"role": "user"}]}, "messages[0].content", "missing_required_parameter", "Field required"),
    ],
    ids=["a-string-for-a-list", "null", "a-string-for-a-number", "out-of-range", "missing"],
)
async def test_a_malformed_body_is_a_400_that_names_the_field_its_kind_and_what_was_sent(
    fields: dict[str, object], param: str, code: str, says: str
) -> None:
    kit = Kit({"a": [Reply.ok("never")]})
    async with kit.client() as c:
        r = await c.post("/v1/chat/completions", json={**chat_body(), **fields})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)  # the codes OpenAI's API gives these
    assert says in error["message"]
    assert kit.providers["a"].calls == []  # refused before any upstream call
