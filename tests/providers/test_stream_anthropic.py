"""Anthropic Messages streams: every captured stream, then the edges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import (
    Dialect,
    FailureKind,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    Stop,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)

from .test_stream_common import WIRE, check_tool_invariants, cut_points, run, sample

AN = Dialect.ANTHROPIC

STREAMS = [
    "anthropic/02-stream-text-ratelimit-headers.http",
    "anthropic/03-stream-tool-use-input-json-delta.sse",
    "anthropic/04-stream-text-then-tool-use-docs.sse",
    "anthropic/05-stream-max-tokens-mid-tool-input.sse",
    "anthropic/06-stream-refusal.sse",
    "anthropic/07-stream-midstream-error-overloaded.sse",
]


def events(*items: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in items)


def start(usage: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 1},
    }
    return ("message_start", {"type": "message_start", "message": message})


def block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def delta(index: int, d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})


def block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def message_delta(stop: str, usage: dict[str, Any] | None = None, **extra: Any) -> tuple[str, dict[str, Any]]:
    d = {"stop_reason": stop, "stop_sequence": None, **extra}
    return ("message_delta", {"type": "message_delta", "delta": d, "usage": usage or {"output_tokens": 5}})


STOP = ("message_stop", {"type": "message_stop"})


# ----------------------------------------------------------------------- captured streams


def test_02_text_with_ping_and_request_id(wire: Path) -> None:
    headers, body = sample(wire, STREAMS[0])
    r = run(AN, body, headers)
    assert r.of(TextDelta) == [TextDelta(text="1\n2\n3")]
    assert r.stops == [Stop(reason=StopReason.END_TURN, raw="end_turn")]
    assert r.usages == [
        UsageUpdate(usage=Usage(input_tokens=15, output_tokens=1)),
        UsageUpdate(usage=Usage(input_tokens=15, output_tokens=9)),
    ]
    resp = r.response()
    assert resp.text == "1\n2\n3"
    assert resp.usage == Usage(input_tokens=15, output_tokens=9)
    assert (resp.model, resp.response_id) == ("claude-haiku-4-5-20251001", "msg_011CeCGmCzjcUtmtEmMdEiM2")
    assert resp.provider_request_id == "<REQUEST_ID>"  # request-id, as the recorder redacted it
    assert (resp.stop_reason, resp.raw_stop_reason) == (StopReason.END_TURN, "end_turn")


def test_03_tool_use_input_json_delta(wire: Path) -> None:
    r = run(AN, sample(wire, STREAMS[1])[1])
    check_tool_invariants(r)
    call = ToolCall(
        id="toolu_018acGYLtfR52q9yDbWaEdQZ",
        name="get_weather",
        arguments='{"location": "San Francisco, CA", "units": "f"}',
        parsed={"location": "San Francisco, CA", "units": "f"},
    )
    assert r.of(ToolCallStart) == [ToolCallStart(index=0, id=call.id, name=call.name)]
    deltas = r.of(ToolCallDelta)
    assert len(deltas) == 9  # the leading "" fragment is not passed on
    assert all(isinstance(d, ToolCallDelta) and d.arguments for d in deltas)
    assert r.done == [ToolCallDone(index=0, call=call)]
    assert r.stops == [Stop(reason=StopReason.TOOL_USE, raw="tool_use")]
    resp = r.response()
    assert resp.tool_calls == (call,)
    assert resp.text == ""
    assert resp.usage == Usage(input_tokens=656, output_tokens=74)
    assert resp.stop_reason is StopReason.TOOL_USE


def test_04_text_then_tool_use(wire: Path) -> None:
    r = run(AN, sample(wire, STREAMS[2])[1])
    check_tool_invariants(r)
    assert r.text == "Okay, let's check the weather for San Francisco, CA:"
    call = ToolCall(
        id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        name="get_weather",
        arguments='{"location": "San Francisco, CA"}',
        parsed={"location": "San Francisco, CA"},
    )
    # Content block 1 is the message's first tool call: position 0.
    assert r.of(ToolCallStart) == [ToolCallStart(index=0, id=call.id, name=call.name)]
    assert r.done == [ToolCallDone(index=0, call=call)]
    assert r.events.index(r.of(ToolCallStart)[0]) > r.events.index(r.of(TextDelta)[-1])
    resp = r.response()
    assert (resp.text, resp.tool_calls) == (r.text, (call,))
    # message_delta carries only output_tokens here: input comes from message_start.
    assert resp.usage == Usage(input_tokens=472, output_tokens=89)
    assert r.usages[-1].usage == resp.usage
    assert resp.model == "claude-opus-4-8"


def test_05_max_tokens_mid_tool_input_is_truncated_and_keeps_the_partial(wire: Path) -> None:
    r = run(AN, sample(wire, STREAMS[3])[1])
    assert r.text == (
        "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called "
        "taxes.txt. Let me do that for you now."
    )
    assert r.of(ToolCallStart) == [ToolCallStart(index=0, id="toolu_01EKqbqmZrGRXy18eN7m9kvY", name="make_file")]
    assert len(r.of(ToolCallDelta)) == 3
    assert r.done == []  # no content_block_stop: the call never completed
    assert r.stops == [Stop(reason=StopReason.MAX_TOKENS, raw="max_tokens")]
    f = r.failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.provider_code == "max_tokens"
    assert f.usage == Usage(input_tokens=450, output_tokens=124)
    assert f.response is not None
    assert f.response.text == r.text
    (partial,) = f.response.tool_calls
    assert (partial.id, partial.name, partial.parsed) == ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file", None)
    assert partial.arguments.startswith('{"filename": "taxes.txt", "lines_of_text": [\n')
    assert partial.arguments.endswith('\n"Filing taxes')


def test_06_refusal_with_stop_details(wire: Path) -> None:
    r = run(AN, sample(wire, STREAMS[4])[1])
    assert r.text == ""
    assert r.stops == [Stop(reason=StopReason.REFUSAL, raw="refusal")]
    f = r.failure()
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert "This request was refused due to policy." in f.message
    assert f.response is not None
    assert f.response.refusal == "This request was refused due to policy."
    assert f.usage == Usage(input_tokens=20, output_tokens=0)


def test_07_midstream_overloaded_error_raises(wire: Path) -> None:
    r = run(AN, sample(wire, STREAMS[5])[1])
    assert r.text == "Hello"
    assert r.result is None
    f = r.raised
    assert f is not None
    assert f.kind is FailureKind.PROVIDER_OVERLOADED
    assert f.provider_code == "overloaded_error"
    assert "Overloaded" in f.message
    assert f.response is not None and f.response.text == "Hello"


@pytest.mark.parametrize("name", STREAMS[:5])
def test_streamed_response_matches_events(wire: Path, name: str) -> None:
    headers, body = sample(wire, name)
    r = run(AN, body, headers)
    resp = r.result if isinstance(r.result, Response) else r.failure().response
    assert resp is not None
    assert resp.text == r.text
    assert tuple(d.call for d in r.done) == resp.tool_calls[: len(r.done)]
    assert resp.usage == r.usages[-1].usage
    assert resp.stop_reason == r.stops[-1].reason


@pytest.mark.parametrize("name", STREAMS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_split_anywhere_gives_the_same_events_and_result(name: str, data: st.DataObject) -> None:
    headers, body = sample(WIRE, name)
    whole = run(AN, body, headers)
    split = run(AN, body, headers, data.draw(cut_points(body)))
    assert split.events == whole.events
    assert split.result == whole.result
    assert split.raised == whole.raised


# ----------------------------------------------------------------------- incomplete streams


def test_stream_cut_before_message_delta_is_transient(wire: Path) -> None:
    headers, body = sample(wire, STREAMS[0])
    r = run(AN, body[: body.index(b"event: message_delta")], headers)
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert "stream ended before completion" in f.message
    assert f.provider_request_id == "<REQUEST_ID>"
    assert f.response is not None and f.response.text == "1\n2\n3"
    assert f.usage == Usage(input_tokens=15, output_tokens=1)


def test_stop_reason_without_message_stop_is_complete(wire: Path) -> None:
    body = sample(wire, STREAMS[1])[1]
    r = run(AN, body[: body.index(b"event: message_stop")])
    assert r.response().tool_calls[0].parsed == {"location": "San Francisco, CA", "units": "f"}


def test_cut_inside_the_last_event_json_raises_malformed(wire: Path) -> None:
    body = sample(wire, STREAMS[2])[1]
    r = run(AN, body[: body.index(b'"usage":{"output_tokens":89}')])
    assert r.raised is not None
    assert r.raised.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "malformed stream event" in r.raised.message


# ----------------------------------------------------------------------- edges


def test_tool_without_input_is_an_empty_object() -> None:
    body = events(
        start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": ""}),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    assert r.of(ToolCallDelta) == []
    assert r.done == [ToolCallDone(index=0, call=ToolCall(id="toolu_1", name="now", arguments="", parsed={}))]
    assert r.response().tool_calls[0].parsed == {}


def test_malformed_tool_input_is_done_with_parsed_none_and_fails() -> None:
    body = events(
        start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"a": '}),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    assert r.done[0].call.parsed is None
    f = r.failure()
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    assert "f" in f.message


def test_thinking_and_signature_deltas_are_reasoning_not_text() -> None:
    body = events(
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me think"}),
        delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAh"}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        delta(1, {"type": "text_delta", "text": "Answer."}),
        block_stop(1),
        message_delta("end_turn"),
        STOP,
    )
    r = run(AN, body)
    assert r.of(TextDelta) == [TextDelta(text="Answer.")]
    assert r.response().text == "Answer."
    block = Reasoning(
        text="Let me think", signature="EqQBCgIYAh", source="anthropic", origin="anthropic:claude-sonnet-4-5"
    )
    assert r.events[1:3] == [ReasoningDelta(index=0, text="Let me think"), ReasoningDone(index=0, block=block)]
    assert r.response().reasoning == (block,)


def test_two_tool_calls_get_positions_in_order() -> None:
    body = events(
        start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "Two calls."}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"x": 1}'}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"y": "é"}'}),
        block_stop(2),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    check_tool_invariants(r)
    assert [(d.index, d.call.id, d.call.parsed) for d in r.done] == [
        (0, "toolu_a", {"x": 1}),
        (1, "toolu_b", {"y": "é"}),
    ]
    assert r.response().stop_reason is StopReason.TOOL_USE


def test_usage_with_cache_counts_and_cumulative_overwrite() -> None:
    usage = {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 1}
    body = events(
        start(usage),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "ok"}),
        block_stop(0),
        message_delta("end_turn", {"output_tokens": 7, "cache_read_input_tokens": None}),
        STOP,
    )
    r = run(AN, body)
    assert r.response().usage == Usage(input_tokens=125, output_tokens=7, cached_input_tokens=100)


def test_context_window_stop_is_context_overflow() -> None:
    body = events(start(), message_delta("model_context_window_exceeded"), STOP)
    f = run(AN, body).failure()
    assert f.kind is FailureKind.CONTEXT_OVERFLOW


def test_error_event_is_classified_by_its_type() -> None:
    body = events(start(), ("error", {"type": "error", "error": {"type": "api_error", "message": "Internal"}}))
    r = run(AN, body, {"request-id": "req_5"})
    assert r.raised is not None
    assert r.raised.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert r.raised.provider_code == "api_error"
    assert r.raised.provider_request_id == "req_5"


def test_unknown_event_types_are_ignored() -> None:
    body = events(start(), ("future_event", {"type": "future_event", "x": 1}), message_delta("end_turn"), STOP)
    assert run(AN, body).response().stop_reason is StopReason.END_TURN
