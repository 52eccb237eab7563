"""Gemini streamGenerateContent?alt=sse: every captured stream, then the edges."""

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
from failover.providers import GeminiDialect
from failover.transport._types import HttpResponse

from ._wire import target
from .test_stream_common import WIRE, check_tool_invariants, cut_points, run, sample

GE = Dialect.GEMINI

STREAMS = [
    "gemini/03-stream-text-crlf.http",
    "gemini/04-stream-function-call.http",
    "gemini/07-prompt-blocked-prohibited-content.jsonl",
]


def crlf(*chunks: dict[str, Any]) -> bytes:
    """Events framed as Gemini frames them: ``data: {...}\\r\\n\\r\\n``."""
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def chunk(parts: list[dict[str, Any]] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts or [], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "resp_1", **extra}


USAGE: dict[str, Any] = {"usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10}}


# ----------------------------------------------------------------------- captured streams


def test_03_two_text_chunks_with_crlf_framing(wire: Path) -> None:
    headers, body = sample(wire, STREAMS[0])
    assert b"\r\n\r\n" in body
    r = run(GE, body, headers)
    first = "Let's think step-by-step:\n\n1.  You have the number 2.\n2.  You are adding another"
    second = (
        " 2 to it.\n3.  If you count two items, and then count two more items, you will have a total of four items."
        "\n\nSo, 2 + 2 = 4."
    )
    assert r.of(TextDelta) == [TextDelta(text=first), TextDelta(text=second)]
    assert r.stops == [Stop(reason=StopReason.END_TURN, raw="STOP")]
    # Cumulative usage on both chunks; thinking is output.
    assert r.usages == [
        UsageUpdate(usage=Usage(input_tokens=13, output_tokens=29 + 137, reasoning_tokens=137)),
        UsageUpdate(usage=Usage(input_tokens=13, output_tokens=71 + 137, reasoning_tokens=137)),
    ]
    resp = r.response()
    assert resp.text == first + second
    assert resp.usage == Usage(input_tokens=13, output_tokens=208, reasoning_tokens=137)
    assert (resp.model, resp.response_id) == ("gemini-2.5-flash", "Bb-Fapr3DvG_nsEPhfTU6Ag")
    assert resp.provider_request_id == "Bb-Fapr3DvG_nsEPhfTU6Ag"  # no x-goog-request-id: responseId stands in
    assert (resp.stop_reason, resp.raw_stop_reason) == (StopReason.END_TURN, "STOP")


def test_04_function_call_arrives_whole(wire: Path) -> None:
    headers, body = sample(wire, STREAMS[1])
    r = run(GE, body, headers)
    call = ToolCall(id="call_Ub-FarbpCtHmnsEP--XY8Qg_0", name="best_language_to_learn", arguments="{}", parsed={})
    assert r.events[:3] == [
        ToolCallStart(index=0, id=call.id, name=call.name),
        ToolCallDelta(index=0, arguments="{}"),
        ToolCallDone(index=0, call=call),
    ]
    assert r.stops == [Stop(reason=StopReason.TOOL_USE, raw="STOP")]
    resp = r.response()
    assert resp.tool_calls == (call,)
    assert resp.text == ""  # the thoughtSignature is not text
    assert resp.usage == Usage(input_tokens=48, output_tokens=14 + 61, reasoning_tokens=61)
    assert resp.stop_reason is StopReason.TOOL_USE


def test_04_single_chunk_stream_equals_the_body_parse(wire: Path) -> None:
    headers, body = sample(wire, STREAMS[1])
    payload = body.split(b"data: ", 1)[1].rstrip(b"\r\n")
    parsed = GeminiDialect().parse(target(GE), HttpResponse(status=200, headers=headers, body=payload))
    assert run(GE, body, headers).result == parsed


def test_07_prompt_blocked_is_content_filtered(wire: Path) -> None:
    r = run(GE, sample(wire, STREAMS[2])[1])
    assert r.of(TextDelta) == []
    assert r.stops == [Stop(reason=StopReason.CONTENT_FILTER, raw="PROHIBITED_CONTENT")]
    f = r.failure()
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.provider_code == "PROHIBITED_CONTENT"
    assert "the prompt was blocked (PROHIBITED_CONTENT)" in f.message
    assert f.usage == Usage(input_tokens=9)
    assert f.response is not None and f.response.response_id == "EXCPatOAKMrQjMcPteHVmQo"
    assert f.response.model == "gemini-3.7-flash"


@pytest.mark.parametrize("name", STREAMS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_split_anywhere_gives_the_same_events_and_result(name: str, data: st.DataObject) -> None:
    headers, body = sample(WIRE, name)
    whole = run(GE, body, headers)
    split = run(GE, body, headers, data.draw(cut_points(body)))
    assert split.events == whole.events
    assert split.result == whole.result


# ----------------------------------------------------------------------- incomplete and failing streams


def test_stream_cut_before_finish_reason_is_transient(wire: Path) -> None:
    headers, body = sample(wire, STREAMS[0])
    r = run(GE, body[: body.index(b"\r\n\r\n") + 4], headers)
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert "stream ended before completion" in f.message
    assert f.response is not None and f.response.text.endswith("You are adding another")
    assert f.usage == Usage(input_tokens=13, output_tokens=166, reasoning_tokens=137)


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "SPII"])
def test_safety_finish_is_content_filtered(reason: str) -> None:
    r = run(GE, crlf(chunk([{"text": "Once upon"}]), chunk([], finish=reason, **USAGE)))
    assert r.text == "Once upon"
    assert r.stops == [Stop(reason=StopReason.CONTENT_FILTER, raw=reason)]
    f = r.failure()
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.response is not None and f.response.text == "Once upon"


def test_max_tokens_is_truncated() -> None:
    f = run(GE, crlf(chunk([{"text": "abc"}], finish="MAX_TOKENS", **USAGE))).failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.usage == Usage(input_tokens=7, output_tokens=3)


def test_malformed_function_call_finish() -> None:
    data = chunk([], finish="MALFORMED_FUNCTION_CALL", **USAGE)
    data["candidates"][0]["finishMessage"] = "Malformed function call: print(x"
    f = run(GE, crlf(data)).failure()
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    assert "Malformed function call: print(x" in f.message


def test_error_chunk_mid_stream_raises_classified_failure() -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    r = run(GE, crlf(chunk([{"text": "Hi"}]), error), {"x-goog-request-id": "g_1"})
    assert r.text == "Hi"
    assert r.raised is not None
    assert r.raised.kind is FailureKind.PROVIDER_OVERLOADED
    assert r.raised.provider_request_id == "g_1"
    assert r.raised.response is not None and r.raised.response.text == "Hi"


def test_rate_limit_error_chunk() -> None:
    error = {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}
    r = run(GE, crlf(error))
    assert r.raised is not None and r.raised.kind is FailureKind.RATE_LIMITED


# ----------------------------------------------------------------------- parts


def test_thought_parts_are_not_text() -> None:
    r = run(GE, crlf(chunk([{"text": "pondering", "thought": True}, {"text": "Answer"}], finish="STOP")))
    assert r.of(TextDelta) == [TextDelta(text="Answer")]
    assert r.response().text == "Answer"


def test_text_and_calls_keep_their_order_and_positions_across_chunks() -> None:
    body = crlf(
        chunk([{"text": "Calling."}, {"functionCall": {"name": "f", "args": {"a": 1}}}]),
        chunk([{"functionCall": {"name": "g", "args": {"b": "é"}, "id": "given_id"}}], finish="STOP", **USAGE),
    )
    r = run(GE, body)
    check_tool_invariants(r)
    assert isinstance(r.events[0], TextDelta)
    assert [(d.index, d.call.id, d.call.name, d.call.parsed) for d in r.done] == [
        (0, "call_resp_1_0", "f", {"a": 1}),
        (1, "given_id", "g", {"b": "é"}),
    ]
    assert r.response().stop_reason is StopReason.TOOL_USE


def test_args_that_are_not_an_object_are_malformed() -> None:
    r = run(GE, crlf(chunk([{"functionCall": {"name": "f", "args": [1, 2]}}], finish="STOP")))
    assert r.done[0].call.parsed is None
    assert r.failure().kind is FailureKind.TOOL_CALL_MALFORMED


def test_unchanged_usage_is_not_repeated() -> None:
    r = run(GE, crlf(chunk([{"text": "a"}], **USAGE), chunk([{"text": "b"}], finish="STOP", **USAGE)))
    assert len(r.usages) == 1
    assert r.response().text == "ab"


def test_response_is_a_response_on_success() -> None:
    r = run(GE, crlf(chunk([{"text": "fine"}], finish="STOP", **USAGE)))
    assert isinstance(r.result, Response)
    assert r.result.usage == Usage(input_tokens=7, output_tokens=3)
