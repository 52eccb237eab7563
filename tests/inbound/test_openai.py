"""failover.inbound.openai: Chat Completions bodies in, completions, chunks and errors out."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from failover.inbound import WireError
from failover.inbound import openai as oa
from failover.model import (
    Completed,
    Response,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)

HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Hello"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def test_no_http_server_below_the_gateway() -> None:
    """inbound is for clients too: importing it must not pull in starlette or the gateway."""
    code = (
        "import sys, failover.inbound;"
        "bad = sorted(m for m in sys.modules if m.startswith(('starlette', 'failover.gateway', 'uvicorn')));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_body_round_trip() -> None:
    body = oa.parse_body(
        {
            "model": "chat",
            "messages": [
                {"role": "system", "content": "Be brief."},
                *HELLO,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "9C"},
            ],
            "tools": [TOOL],
            "tool_choice": "required",
            "max_completion_tokens": 50,
            "stop": "END",
            "user": "ignored",
        }
    )
    req = oa.to_request(body)
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool"]
    assert req.messages[2].tool_calls[0].parsed == {"city": "Oslo"}
    assert req.tool_choice is not None and req.tool_choice.mode == "required"
    assert (req.max_tokens, req.stop) == (50, ("END",))


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]},
            "messages[0].content[0].image_url.url",
        ),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"max_tokens": 5, "max_completion_tokens": 6}, "max_tokens"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "response_format.json_schema.schema",
        ),
    ],
)
def test_refusals_are_wire_errors_naming_the_field(extra: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as exc:
        oa.to_request(oa.parse_body({"model": "chat", "messages": HELLO, **extra}))
    assert exc.value.status == 400
    assert exc.value.param == param
    assert param.split(".")[0].split("[")[0] in exc.value.message


def test_not_an_object() -> None:
    with pytest.raises(WireError) as exc:
        oa.parse_body([1])
    assert exc.value.code == "invalid_body"


def test_completion_body_is_an_sdk_completion() -> None:
    resp = Response(
        tool_calls=(ToolCall(id="c1", name="get_weather", arguments='{"city":"Oslo"}'),),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=10, output_tokens=3),
    )
    out = ChatCompletion.model_validate(oa.completion_body(resp, completion_id="chatcmpl-1", created=1, model="chat"))
    assert out.choices[0].finish_reason == "tool_calls"
    assert out.choices[0].message.tool_calls is not None
    assert out.usage is not None and out.usage.total_tokens == 13


def test_error_body() -> None:
    assert oa.error_body(400, "bad", type="invalid_request_error", code="x", param="model") == {
        "error": {"message": "bad", "type": "invalid_request_error", "code": "x", "param": "model"}
    }


def test_chunks_accumulate_in_the_openai_sdk() -> None:
    a = ToolCall(id="a", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"})
    b = ToolCall(id="b", name="get_time", arguments='{"tz":"CET"}', parsed={"tz": "CET"})
    r = oa.ChunkRenderer("chatcmpl-1", 1700000000, "chat", include_usage=True, request_id="req_1")
    events: list[object] = [
        UsageUpdate(usage=Usage(input_tokens=4)),
        TextDelta(text="Let me "),
        TextDelta(text="check."),
        ToolCallStart(index=0, id="a", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city":'),
        ToolCallDone(index=0, call=a),  # the rest of the arguments arrives with the done
        ToolCallDone(index=1, call=b),  # a call given whole
    ]
    chunks = r.start()
    for e in events:
        chunks += r.render(e)
    resp = Response(
        text="Let me check.",
        tool_calls=(a, b),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=4, output_tokens=8),
    )
    chunks += r.end(Completed(response=resp))
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    final = state.get_final_completion()
    choice = final.choices[0]
    assert choice.message.content == "Let me check."
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("a", "get_weather", {"city": "Oslo"}),
        ("b", "get_time", {"tz": "CET"}),
    ]
    assert choice.finish_reason == "tool_calls"
    assert final.usage is not None and final.usage.completion_tokens == 8
    assert chunks[-2]["x_failover"]["request_id"] == "req_1"
    assert chunks[-1]["choices"] == []
