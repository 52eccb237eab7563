"""failover.inbound.anthropic: Messages bodies in, messages, events and errors out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message as SdkMessage

from failover.inbound import WireError
from failover.inbound import anthropic as an
from failover.model import (
    Completed,
    Dialect,
    ImagePart,
    Response,
    StopReason,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)

from ..providers.test_stream_common import run, sample

HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Hello"}]
WEATHER = {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "max_tokens": 256, "messages": HELLO, **extra}


def request(**extra: Any) -> Any:
    return an.to_request(an.parse_body(body(**extra)))


# -------------------------------------------------------------------- body -> Request


def test_a_full_conversation_maps_to_the_neutral_request() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is here?", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "22C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "down"}],
                    "is_error": True,
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]
    req = an.to_request(
        an.parse_body(
            {
                "model": "chat",
                "max_tokens": 100,
                "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use metric."}],
                "messages": messages,
                "tools": [WEATHER],
                "tool_choice": {"type": "tool", "name": "get_weather"},
                "temperature": 0.3,
                "top_p": 0.9,
                "stop_sequences": ["END"],
                "metadata": {"user_id": "u-1"},
                "service_tier": "auto",
            }
        )
    )
    roles = [m.role for m in req.messages]
    assert roles == ["system", "system", "user", "assistant", "tool", "tool", "user"]
    assert req.system_text == "Be brief.\n\nUse metric."
    user = req.messages[2]
    # the prompt-caching marker stays on its block, for an Anthropic target (see Passthrough)
    assert user.content[0] == TextPart(text="What is here?", cache_control={"type": "ephemeral"})
    assert user.content[1] == ImagePart(url="data:image/png;base64,iVBORw0KGgo=")
    assert user.content[2] == ImagePart(url="https://example.com/cat.jpg")
    assistant = req.messages[3]
    assert assistant.text == "Let me check."  # the thinking block is dropped
    assert [(c.id, c.name, json.loads(c.arguments)) for c in assistant.tool_calls] == [
        ("toolu_1", "get_weather", {"city": "Paris"}),
        ("toolu_2", "get_weather", {"city": "Rome"}),
    ]
    assert (req.messages[4].tool_call_id, req.messages[4].text) == ("toolu_1", "22C")
    assert (req.messages[5].tool_call_id, req.messages[5].text) == ("toolu_2", "Error: down")
    assert req.messages[6].text == "And tomorrow?"
    assert req.tools[0].name == "get_weather" and req.tools[0].parameters == {"type": "object"}
    assert req.tool_choice is not None and (req.tool_choice.mode, req.tool_choice.name) == ("tool", "get_weather")
    assert (req.max_tokens, req.temperature, req.top_p, req.stop) == (100, 0.3, 0.9, ("END",))
    passed = req.passthrough
    assert passed is not None and passed.dialect == "anthropic"
    assert dict(passed.fields) == {"metadata": {"user_id": "u-1"}, "service_tier": "auto"}
    assert passed.hints == {"metadata", "service_tier", "cache_control"} and not passed.opaque


@pytest.mark.parametrize(
    ("choice", "mode"),
    [({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none")],
)
def test_tool_choice_modes(choice: dict[str, Any], mode: str) -> None:
    req = request(tools=[WEATHER], tool_choice=choice)
    assert req.tool_choice is not None and req.tool_choice.mode == mode


@pytest.mark.parametrize(
    ("thinking", "effort"),
    [
        ({"type": "enabled", "budget_tokens": 1024}, "minimal"),
        ({"type": "enabled", "budget_tokens": 4000}, "low"),
        ({"type": "enabled", "budget_tokens": 8192}, "medium"),
        ({"type": "enabled", "budget_tokens": 30000}, "high"),
        ({"type": "adaptive"}, None),
        ({"type": "disabled"}, None),
    ],
)
def test_thinking_maps_to_a_reasoning_effort(thinking: dict[str, Any], effort: str | None) -> None:
    req = an.to_request(an.parse_body({**body(thinking=thinking), "max_tokens": 64000}))
    assert req.reasoning_effort == effort


def test_output_config_effort_and_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = request(output_config={"effort": "max", "format": {"type": "json_schema", "schema": schema}})
    assert req.reasoning_effort == "high"
    assert req.response_format is not None and req.response_format.kind == "json_schema"
    assert req.response_format.schema == schema
    older = request(output_format={"type": "json_schema", "schema": schema})
    assert older.response_format is not None and older.response_format.schema == schema


def test_system_role_messages_are_system_messages() -> None:
    req = request(messages=[{"role": "system", "content": "Rules."}, *HELLO])
    assert [m.role for m in req.messages] == ["system", "user"]


@pytest.mark.parametrize(
    ("extra", "param", "words"),
    [
        ({"top_k": 5}, "top_k", "top_k is not supported"),
        ({"container": "c-1"}, "container", "not supported"),
        ({"mcp_servers": [{"type": "url"}]}, "mcp_servers", "MCP"),
        ({"inference_geo": "us"}, "inference_geo", "data regions"),
        ({"max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
        ({"temperature": 1.5}, "temperature", "less than or equal to 1"),
        ({"messages": []}, "messages", "at least 1"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "'robot' is not supported"),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
            "messages[0].content[0].type",
            "'document' is not supported",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}
                ]
            },
            "messages[0].content[0].source.type",
            "'file' is not supported",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "ftp://x"}}]}
                ]
            },
            "messages[0].content[0].source.url",
            "http(s) URL",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "image", "source": {"type": "url", "url": "https://x"}}],
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0]",
            "text only",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0].type",
            "'image' is not supported",
        ),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0]", "server tool"),
        ({"tools": [{"name": "bad name!", "input_schema": {}}]}, "tools[0].name", "pattern"),
        ({"tools": [{"name": "t"}]}, "tools[0].input_schema", "required"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
            "tool_choice.disable_parallel_tool_use",
            "disable_parallel_tool_use",
        ),
        ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name", "'nope'"),
        ({"tool_choice": {"type": "any"}}, "tool_choice", "at least one tool"),
        ({"thinking": {"type": "enabled", "budget_tokens": 512}}, "thinking.budget_tokens", "1024"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking.budget_tokens", "less than max_tokens"),
        (
            {
                "output_format": {"type": "json_schema", "schema": {}},
                "output_config": {"format": {"type": "json_schema", "schema": {}}},
            },
            "output_format",
            "not both",
        ),
    ],
)
def test_refusals_are_400s_naming_the_field(extra: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(WireError) as exc:
        an.to_request(an.parse_body(body(**extra)))
    err = exc.value
    assert err.status == 400
    assert err.param == param
    assert param in err.message
    assert words in err.message


@pytest.mark.parametrize("data", [[], "text", None, 3])
def test_a_body_that_is_not_an_object(data: Any) -> None:
    with pytest.raises(WireError) as exc:
        an.parse_body(data)
    assert exc.value.status == 400 and exc.value.code == "invalid_body"


def test_missing_required_fields_name_them() -> None:
    for field in ("model", "max_tokens", "messages"):
        data = body()
        del data[field]
        with pytest.raises(WireError) as exc:
            an.parse_body(data)
        assert exc.value.param == field and field in exc.value.message


# -------------------------------------------------------------------- Response -> message body


def test_message_body_is_an_sdk_message() -> None:
    resp = Response(
        text="Let me look.",
        tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"}),),
        usage=Usage(input_tokens=100, output_tokens=20, cached_input_tokens=40, reasoning_tokens=5),
        stop_reason=StopReason.END_TURN,  # an OpenAI-compatible server that says "stop" with tool calls
    )
    out = an.message_body(resp, message_id="msg_1", model="chat")
    msg = SdkMessage.model_validate(out)
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[1].input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert msg.usage.input_tokens == 60 and msg.usage.cache_read_input_tokens == 40
    assert msg.usage.output_tokens == 20
    assert out["usage"]["output_tokens_details"] == {"thinking_tokens": 5}


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (StopReason.END_TURN, "end_turn"),
        (StopReason.STOP_SEQUENCE, "stop_sequence"),
        (StopReason.MAX_TOKENS, "max_tokens"),
        (StopReason.REFUSAL, "refusal"),
        (StopReason.CONTENT_FILTER, "refusal"),
        (StopReason.OTHER, "end_turn"),
    ],
)
def test_stop_reasons(reason: StopReason, expected: str) -> None:
    out = an.message_body(Response(text="x", stop_reason=reason), message_id="m", model="chat")
    assert out["stop_reason"] == expected
    SdkMessage.model_validate(out)


def test_structured_output_and_refusal_bodies() -> None:
    parsed = an.message_body(Response(parsed={"a": 1}), message_id="m", model="chat")
    assert parsed["content"] == [{"type": "text", "text": '{"a":1}'}]
    refused = an.message_body(
        Response(refusal="I can't help with that.", stop_reason=StopReason.REFUSAL), message_id="m", model="chat"
    )
    assert refused["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert refused["stop_details"]["explanation"] == "I can't help with that."
    SdkMessage.model_validate(refused)


def test_a_sample_response_survives_the_round_trip(wire: Path) -> None:
    from failover.providers import dialect_for

    from ..providers._wire import load, target

    resp = dialect_for(Dialect.ANTHROPIC).parse(
        target(Dialect.ANTHROPIC), load(wire, "anthropic/01-nonstream-text-usage.json")
    )
    assert isinstance(resp, Response)
    out = an.message_body(resp, message_id="msg_x", model="chat")
    original = json.loads((wire / "anthropic/01-nonstream-text-usage.json").read_text())
    assert out["content"] == original["content"]
    assert out["stop_reason"] == original["stop_reason"]
    assert out["usage"]["input_tokens"] == original["usage"]["input_tokens"]
    assert out["usage"]["output_tokens"] == original["usage"]["output_tokens"]


# -------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_types_by_status(status: int, kind: str) -> None:
    assert an.error_type_for(status) == kind
    assert an.error_body(status, "m")["error"]["type"] == kind


def test_error_body_shape() -> None:
    assert an.error_body(429, "slow down", code="rate_limit_exceeded", request_id="req_1") == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down", "details": {"error_code": "rate_limit_exceeded"}},
        "request_id": "req_1",
    }
    assert an.error_body(400, "bad", type="invalid_request_error") == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "bad"},
    }


# -------------------------------------------------------------------- streams


def accumulate(events: list[tuple[str, dict[str, Any]]]) -> SdkMessage:
    """What the anthropic SDK's ``messages.stream()`` builds from these events."""
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for name, data in events:
        assert data["type"] == name
        if name in {"ping", "error"}:
            continue
        snapshot = accumulate_event(event=data, current_snapshot=snapshot, json_bufs=bufs)  # type: ignore[arg-type]
    return SdkMessage.model_validate(snapshot.model_dump())


def render(events: list[object], resp: Response) -> list[tuple[str, dict[str, Any]]]:
    r = an.EventRenderer("msg_1", "chat", request_id="req_1")
    out = r.start()
    for e in events:
        out += r.render(e)
    return out + r.end(Completed(response=resp))


def check_sequential(events: list[tuple[str, dict[str, Any]]]) -> None:
    """Blocks open one at a time, in index order, each stopped before the next starts."""
    open_block: int | None = None
    started: list[int] = []
    for name, data in events:
        if name == "content_block_start":
            assert open_block is None
            open_block = data["index"]
            started.append(data["index"])
        elif name == "content_block_delta":
            assert data["index"] == open_block
        elif name == "content_block_stop":
            assert data["index"] == open_block
            open_block = None
    assert open_block is None
    assert started == list(range(len(started)))


def test_text_then_tool_stream() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"})
    events: list[object] = [
        UsageUpdate(usage=Usage(input_tokens=10)),
        TextDelta(text="Checking"),
        TextDelta(text=" now."),
        ToolCallStart(index=0, id="c1", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city":'),
        ToolCallDelta(index=0, arguments='"Oslo"}'),
        ToolCallDone(index=0, call=call),
    ]
    resp = Response(
        text="Checking now.",
        tool_calls=(call,),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=10, output_tokens=7),
    )
    out = render(events, resp)
    check_sequential(out)
    assert [n for n, _ in out][:2] == ["message_start", "ping"]
    assert [n for n, _ in out][-2:] == ["message_delta", "message_stop"]
    msg = accumulate(out)
    assert msg.content[0].text == "Checking now."  # type: ignore[union-attr]
    assert msg.content[1].input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert msg.stop_reason == "tool_use"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (10, 7)
    assert out[-2][1]["x_failover"]["request_id"] == "req_1"


def test_interleaved_parallel_calls_become_sequential_blocks() -> None:
    a = ToolCall(id="a", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"})
    b = ToolCall(id="b", name="get_time", arguments='{"tz":"CET"}', parsed={"tz": "CET"})
    events: list[object] = [
        ToolCallStart(index=0, id="a", name="get_weather"),
        ToolCallStart(index=1, id="b", name="get_time"),
        ToolCallDelta(index=0, arguments='{"city":'),
        ToolCallDelta(index=1, arguments='{"tz":'),
        ToolCallDelta(index=0, arguments='"Oslo"}'),
        ToolCallDelta(index=1, arguments='"CET"}'),
        ToolCallDone(index=0, call=a),
        ToolCallDone(index=1, call=b),
    ]
    out = render(events, Response(tool_calls=(a, b), stop_reason=StopReason.TOOL_USE))
    check_sequential(out)
    msg = accumulate(out)
    assert [(c.id, c.input) for c in msg.content] == [("a", {"city": "Oslo"}), ("b", {"tz": "CET"})]  # type: ignore[union-attr]


def test_a_call_given_whole_and_arguments_completed_at_done() -> None:
    whole = ToolCall(id="g", name="get_time", arguments='{"tz":"UTC"}', parsed={"tz": "UTC"})
    late = ToolCall(id="h", name="get_weather", arguments='{"city":"Rome"}', parsed={"city": "Rome"})
    events: list[object] = [
        ToolCallDone(index=0, call=whole),
        ToolCallStart(index=1, id="h", name="get_weather"),
        ToolCallDelta(index=1, arguments='{"city"'),
        ToolCallDone(index=1, call=late),
    ]
    out = render(events, Response(tool_calls=(whole, late), stop_reason=StopReason.TOOL_USE))
    check_sequential(out)
    msg = accumulate(out)
    assert [c.input for c in msg.content] == [{"tz": "UTC"}, {"city": "Rome"}]  # type: ignore[union-attr]


def test_an_empty_answer_still_has_a_text_block() -> None:
    out = render([], Response(text="", stop_reason=StopReason.END_TURN))
    check_sequential(out)
    msg = accumulate(out)
    assert [b.type for b in msg.content] == ["text"]


def test_the_error_event() -> None:
    r = an.EventRenderer("msg_1", "chat", request_id="req_9")
    ((name, data),) = r.error("partial_output: cut", code="partial_output")
    assert name == "error"
    assert data == {
        "type": "error",
        "error": {"type": "api_error", "message": "partial_output: cut", "details": {"error_code": "partial_output"}},
        "request_id": "req_9",
    }


@pytest.mark.parametrize(
    "name",
    [
        "anthropic/02-stream-text-ratelimit-headers.http",
        "anthropic/03-stream-tool-use-input-json-delta.sse",
        "anthropic/04-stream-text-then-tool-use-docs.sse",
    ],
)
def test_captured_streams_rerendered_give_the_same_final_message(wire: Path, name: str) -> None:
    """A real Anthropic stream -> failover's events -> our events: the SDK builds the same message."""
    headers, raw = sample(wire, name)
    parsed = run(Dialect.ANTHROPIC, raw, headers)
    resp = parsed.response()
    ours = accumulate(render(list(parsed.events), resp))
    events = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.strip().split("\n") if ": " in line)
        if "event" in lines and lines["event"] not in {"ping"}:
            events.append((lines["event"], json.loads(lines["data"])))
    theirs = accumulate(events)
    assert ours.stop_reason == theirs.stop_reason
    assert [b.model_dump(include={"type", "text", "name", "input", "id"}) for b in ours.content] == [
        b.model_dump(include={"type", "text", "name", "input", "id"}) for b in theirs.content
    ]
    assert ours.usage.output_tokens == theirs.usage.output_tokens


def test_our_stream_parses_back_through_the_anthropic_dialect() -> None:
    """EventRenderer output, as SSE bytes, read by failover's own Anthropic stream parser."""
    call = ToolCall(id="c1", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"})
    events: list[object] = [
        TextDelta(text="One "),
        TextDelta(text="moment."),
        ToolCallStart(index=0, id="c1", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city":"Oslo"}'),
        ToolCallDone(index=0, call=call),
    ]
    resp = Response(
        text="One moment.",
        tool_calls=(call,),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=5, output_tokens=9),
    )
    out = render(events, resp)
    raw = b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in out)
    back = run(Dialect.ANTHROPIC, raw).response()
    assert back.text == "One moment."
    assert [(c.id, c.name, c.parsed) for c in back.tool_calls] == [("c1", "get_weather", {"city": "Oslo"})]
    assert back.stop_reason is StopReason.TOOL_USE
    assert (back.usage.input_tokens, back.usage.output_tokens) == (5, 9)


def test_context_management_and_unknown_fields_are_passed_through_and_classified() -> None:
    clear = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    req = an.to_request(an.parse_body(body(context_management=clear)), headers={"anthropic-beta": "b1,b2"})
    assert req.passthrough is not None
    assert dict(req.passthrough.fields) == {"context_management": clear}
    assert dict(req.passthrough.headers) == {"anthropic-beta": "b1,b2"}
    assert req.passthrough.hints == {"context_management", "anthropic-beta"} and not req.passthrough.opaque
    assert req.passthrough.ineligible("openai") is None
    assert req.passthrough.dropped("openai") == ("anthropic-beta", "context_management")
    assert req.passthrough.dropped("anthropic") == ()
    # clearing tool results changes what the model sees: only an Anthropic target may serve it
    tools = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    req = request(context_management=tools, future_field={"x": 1})
    assert req.passthrough is not None and req.passthrough.opaque == {"context_management", "future_field"}
    why = req.passthrough.ineligible("openai")
    assert why is not None and "context_management, future_field" in why
    assert req.passthrough.ineligible("anthropic") is None
    assert request().passthrough is None  # nothing to carry: the hot path sees None
