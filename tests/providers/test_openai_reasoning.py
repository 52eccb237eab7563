"""Reasoning in Chat Completions: read from DeepSeek-style and OpenAI-compatible fields, sent back
beside tool calls only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from failover.model import (
    Dialect,
    FailureKind,
    Message,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Stop,
    StopReason,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallStart,
)
from failover.providers import OpenAIDialect

from ._wire import response, target
from .test_stream_common import run, sse

OA = Dialect.OPENAI
D = OpenAIDialect()
T = target(OA)  # the target `run` parses streams for: blocks carry its key as their origin


def block(text: str) -> Reasoning:
    return Reasoning(text=text, source="openai", origin=T.key)


def ds_chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DeepSeek thinking-mode chunk: the field it is not sending is null, as DeepSeek does."""
    return {
        "id": "e626f326",
        "object": "chat.completion.chunk",
        "created": 1780944343,
        "model": "deepseek-v4-pro",
        "choices": [
            {"index": 0, "delta": {"content": None, "reasoning_content": None, **delta}, "finish_reason": finish}
        ],
        "usage": usage,
    }


# ----------------------------------------------------------------------- a whole body


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"reasoning_content": "9.11 < 9.8 because 0.11 < 0.8."}, "9.11 < 9.8 because 0.11 < 0.8."),  # DeepSeek
        ({"reasoning": "Compare the tenths."}, "Compare the tenths."),  # vLLM >= 0.11, OpenRouter
        ({"reasoning_content": "", "reasoning": "Compare the tenths."}, "Compare the tenths."),  # vLLM in between
        (
            {
                "reasoning": "Compare the tenths.",
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "text": "Compare the tenths.",
                        "signature": "sig",
                        "format": "x",
                        "index": 0,
                    }
                ],
            },
            "Compare the tenths.",
        ),  # OpenRouter: the details repeat the text; it is read once
        ({"reasoning_content": None}, None),  # SGLang and others: null when there is none
        ({}, None),
    ],
)
def test_body_reasoning_fields(fields: dict[str, Any], text: str | None) -> None:
    message = {"role": "assistant", "content": "9.8 is greater.", **fields}
    body = {"id": "x", "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    r = D.parse(T, response(200, json.dumps(body)))
    assert not isinstance(r, type(None))
    assert r.text == "9.8 is greater."  # type: ignore[union-attr]
    assert r.reasoning == ((block(text),) if text else ())  # type: ignore[union-attr]


def test_body_reasoning_with_tool_calls_and_a_failure_keeps_it() -> None:
    message = {"role": "assistant", "content": "", "reasoning_content": "Need the date first.", "tool_calls": []}
    body = {"id": "x", "choices": [{"index": 0, "message": message, "finish_reason": "length"}]}
    f = D.parse(T, response(200, json.dumps(body)))
    assert f.kind is FailureKind.TRUNCATED  # type: ignore[union-attr]
    assert f.response is not None and f.response.reasoning == (block("Need the date first."),)  # type: ignore[union-attr]


# ----------------------------------------------------------------------- a stream


def test_deepseek_stream_reasoning_then_answer() -> None:
    body = sse(
        ds_chunk({"role": "assistant", "content": "", "reasoning_content": ""}),  # nothing yet
        ds_chunk({"reasoning_content": "Compare"}),
        ds_chunk({"reasoning_content": " the tenths."}),
        ds_chunk({"content": "9.8"}),
        ds_chunk({"content": " is greater."}),
        ds_chunk({"content": ""}, finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 20}),
        "[DONE]",
    )
    r = run(OA, body)
    whole = block("Compare the tenths.")
    assert r.events[:5] == [
        ReasoningDelta(index=0, text="Compare"),
        ReasoningDelta(index=0, text=" the tenths."),
        ReasoningDone(index=0, block=whole),  # done when the answer begins
        TextDelta(text="9.8"),
        TextDelta(text=" is greater."),
    ]
    resp = r.response()
    assert resp.reasoning == (whole,) and resp.reasoning_text == "Compare the tenths."
    assert resp.text == "9.8 is greater."


def test_vllm_reasoning_field_then_tool_call() -> None:
    def c(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-v",
            "object": "chat.completion.chunk",
            "model": "Qwen/Qwen3-8B",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    head = {
        "index": 0,
        "id": "chatcmpl-tool-1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    body = sse(
        c({"role": "assistant", "content": ""}),
        c({"reasoning": "The user wants"}),
        c({"reasoning": " the weather."}),
        c({"tool_calls": [head]}),
        c({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}),
        c({}, finish="tool_calls"),
    )
    r = run(OA, body)
    done_at = r.events.index(ReasoningDone(index=0, block=block("The user wants the weather.")))
    assert isinstance(r.events[done_at + 1], ToolCallStart)  # the thinking is done when the call begins
    resp = r.response()
    assert resp.reasoning_text == "The user wants the weather."
    assert resp.tool_calls[0].parsed == {"city": "Paris"}


def test_reasoning_only_is_done_at_the_finish() -> None:
    r = run(OA, sse(ds_chunk({"reasoning_content": "Hmm."}), ds_chunk({}, finish="length")))
    assert r.events == [
        ReasoningDelta(index=0, text="Hmm."),
        ReasoningDone(index=0, block=block("Hmm.")),
        Stop(reason=StopReason.MAX_TOKENS, raw="length"),
    ]
    f = r.failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.response is not None and f.response.reasoning == (block("Hmm."),)


def test_a_stream_cut_while_thinking_keeps_what_arrived() -> None:
    r = run(OA, sse(ds_chunk({"reasoning_content": "Let me"}), ds_chunk({"reasoning_content": " think"})))
    assert r.of(ReasoningDone) == []  # never complete
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert f.response is not None and f.response.reasoning == (block("Let me think"),)


def test_reasoning_after_the_answer_began_is_a_second_block() -> None:
    # Not seen from DeepSeek, but nothing forbids it: each block is complete before the next.
    body = sse(
        ds_chunk({"reasoning_content": "First."}),
        ds_chunk({"content": "A"}),
        ds_chunk({"reasoning_content": "Second."}),
        ds_chunk({"content": "B"}),
        ds_chunk({}, finish="stop"),
    )
    r = run(OA, body)
    assert [(type(e).__name__, getattr(e, "index", None)) for e in r.events if not isinstance(e, TextDelta)] == [
        ("ReasoningDelta", 0),
        ("ReasoningDone", 0),
        ("ReasoningDelta", 1),
        ("ReasoningDone", 1),
        ("Stop", None),
    ]
    assert r.response().reasoning == (block("First."), block("Second."))


def test_a_refusal_ends_the_thinking_too() -> None:
    r = run(OA, sse(ds_chunk({"reasoning_content": "Hmm."}), ds_chunk({"refusal": "No."}), ds_chunk({}, finish="stop")))
    assert r.of(ReasoningDone) == [ReasoningDone(index=0, block=block("Hmm."))]
    assert r.failure().kind is FailureKind.CONTENT_FILTERED


def test_stream_and_body_read_the_same_reasoning() -> None:
    message = {"role": "assistant", "content": "ok", "reasoning_content": "think"}
    body = {
        "id": "e626f326",
        "model": "deepseek-v4-pro",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    whole = D.parse(T, response(200, json.dumps(body)))
    streamed = run(
        OA,
        sse(
            ds_chunk({"reasoning_content": "th"}),
            ds_chunk({"reasoning_content": "ink"}),
            ds_chunk({"content": "ok"}),
            ds_chunk({}, finish="stop"),
        ),
    ).response()
    assert whole.reasoning == streamed.reasoning == (block("think"),)  # type: ignore[union-attr]


# ----------------------------------------------------------------------- sending it back


WEATHER = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
CALL = ToolCall(id="call_00_kw66", name="get_weather", arguments='{"city": "Hangzhou"}', parsed={"city": "Hangzhou"})


def _messages(req: Request) -> list[dict[str, Any]]:
    http = D.build(T, req)
    assert http.json is not None
    return http.json["messages"]  # type: ignore[no-any-return]


def test_reasoning_goes_back_beside_tool_calls() -> None:
    req = Request(
        messages=(
            Message.user("Weather in Hangzhou tomorrow?"),
            Message.assistant("", tool_calls=(CALL,), reasoning=(block("I need the weather."),)),
            Message.tool(CALL.id, "Cloudy 7~13°C"),
        ),
        tools=(WEATHER,),
    )
    assistant = _messages(req)[1]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": CALL.id, "type": "function", "function": {"name": "get_weather", "arguments": CALL.arguments}}
        ],
        "reasoning_content": "I need the weather.",
    }


def test_reasoning_of_a_turn_without_tool_calls_is_not_sent() -> None:
    # DeepSeek ignores it there; a server that does not know the field may refuse it.
    req = Request(messages=(Message.user("a"), Message.assistant("b", reasoning=(block("think"),)), Message.user("c")))
    assert "reasoning_content" not in _messages(req)[1]


def test_only_this_formats_blocks_are_sent_and_several_are_joined() -> None:
    blocks = (
        block("one. "),
        Reasoning(text="claude's", signature="sig", source="anthropic", origin=T.key),
        block("two."),
    )
    req = Request(
        messages=(Message.user("a"), Message.assistant("", tool_calls=(CALL,), reasoning=blocks)), tools=(WEATHER,)
    )
    assert _messages(req)[1]["reasoning_content"] == "one. two."
    only_other = (Reasoning(text="x", signature="sig", source="anthropic", origin=T.key),)
    req = Request(
        messages=(Message.user("a"), Message.assistant("", tool_calls=(CALL,), reasoning=only_other)), tools=(WEATHER,)
    )
    assert "reasoning_content" not in _messages(req)[1]


def test_a_streamed_tool_turn_round_trips_with_its_reasoning() -> None:
    head = {"index": 0, "id": CALL.id, "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    body = sse(
        ds_chunk({"role": "assistant", "reasoning_content": "I need "}),
        ds_chunk({"reasoning_content": "the weather."}),
        ds_chunk({"tool_calls": [head]}),
        ds_chunk({"tool_calls": [{"index": 0, "function": {"arguments": CALL.arguments}}]}),
        ds_chunk({}, finish="tool_calls"),
    )
    resp = run(OA, body).response()
    req = Request(
        messages=(Message.user("Weather?"), resp.message(), Message.tool(CALL.id, "Cloudy")), tools=(WEATHER,)
    )
    sent = _messages(req)[1]
    assert sent["reasoning_content"] == "I need the weather."
    assert sent["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": CALL.arguments}
