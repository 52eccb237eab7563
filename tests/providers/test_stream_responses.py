"""OpenAI Responses streams: every captured stream, cut anywhere, then the edges (items assembled
in any interleaving, events before their item, the ends a stream can have)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from failover.model import (
    Dialect,
    FailureKind,
    ReasoningDelta,
    ReasoningDone,
    StopReason,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
)

from .test_stream_common import WIRE, check_tool_invariants, cut_points, run, sample

RS = Dialect.OPENAI_RESPONSES
TEXT = "openai-responses/01-stream-text-completed-usage.http"
REASONING = "openai-responses/02-stream-reasoning-function-call-args.jsonl"
QUOTA = "openai-responses/03-stream-error-event-insufficient-quota.jsonl"


def events(*evs: dict[str, Any], framed: bool = True) -> bytes:
    """SSE for the given events, numbered as the API numbers them (``event:`` lines optional)."""
    out = b""
    for n, ev in enumerate(evs):
        data = json.dumps({**ev, "sequence_number": n})
        out += (f"event: {ev['type']}\n" if framed else "").encode() + f"data: {data}\n\n".encode()
    return out


def response(status: str = "completed", output: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    usage = {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 12,
    }
    return {
        "id": "resp_9",
        "object": "response",
        "status": status,
        "model": "gpt-5-mini",
        "output": output or [],
        "usage": usage if status != "in_progress" else None,
        **extra,
    }


CREATED = {"type": "response.created", "response": response("in_progress")}
COMPLETED = {"type": "response.completed", "response": response()}


def fc_added(at: int, call_id: str, name: str) -> dict[str, Any]:
    item = {
        "id": f"fc_{at}",
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": call_id,
        "name": name,
    }
    return {"type": "response.output_item.added", "output_index": at, "item": item}


def fc_delta(at: int, delta: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "item_id": f"fc_{at}", "output_index": at, "delta": delta}


def fc_done(at: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    item = {
        "id": f"fc_{at}",
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }
    return {"type": "response.output_item.done", "output_index": at, "item": item}


def text_delta(at: int, delta: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": f"msg_{at}",
        "output_index": at,
        "content_index": 0,
        "delta": delta,
        "logprobs": [],
    }


# -------------------------------------------------------------------------------- the captures


def test_01_text_with_usage() -> None:
    headers, body = sample(WIRE, TEXT)
    r = run(RS, body, headers)
    resp = r.response()
    assert resp.text == r.text == "1, 2, 3"
    assert len(r.of(TextDelta)) == 7
    assert resp.usage == Usage(input_tokens=14, output_tokens=8)
    assert r.usages[-1].usage == resp.usage
    assert (r.stops[-1].reason, r.stops[-1].raw) == (StopReason.END_TURN, "completed")
    assert resp.response_id == "resp_0a02cdbf39789cc8016a85bef06dc88192bb00de16e4c5ac1e"
    assert resp.model == "gpt-4.1-nano-2025-04-14"
    assert resp.provider_request_id == "<X_REQUEST_ID>"


def test_02_reasoning_summary_then_a_function_call() -> None:
    headers, body = sample(WIRE, REASONING)
    r = run(RS, body, headers)
    resp = r.response()
    check_tool_invariants(r)
    (block,) = resp.reasoning
    assert block.text.startswith("**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7")
    assert "".join(e.text for e in r.of(ReasoningDelta)) == block.text
    assert block.signature is not None and block.signature.startswith(
        "gAAAAABpPDIV"
    )  # the done item's, not the added one's
    assert (block.source, block.origin) == ("openai-responses", "openai-responses:gpt-5-mini")
    assert [e.block for e in r.of(ReasoningDone)] == [block]
    (c,) = resp.tool_calls
    assert (c.id, c.name, c.parsed) == ("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"})
    assert len(r.of(ToolCallDelta)) == 13
    assert resp.stop_reason is StopReason.TOOL_USE
    assert resp.usage == Usage(input_tokens=134, output_tokens=28)
    kinds = [type(e) for e in r.events]
    assert kinds.index(ReasoningDone) < kinds.index(ToolCallStart)  # the reasoning came first


def test_03_error_event_is_quota_exhausted() -> None:
    headers, body = sample(WIRE, QUOTA)
    r = run(RS, body, headers)
    assert r.raised is not None and r.events == []
    assert r.raised.kind is FailureKind.QUOTA_EXHAUSTED
    assert r.raised.provider_code == "insufficient_quota"
    assert "You exceeded your current quota" in r.raised.message


@settings(max_examples=60, deadline=None)
@given(cuts=cut_points(sample(WIRE, REASONING)[1]))
def test_02_cut_anywhere_reads_the_same(cuts: list[int]) -> None:
    headers, body = sample(WIRE, REASONING)
    whole, cut = run(RS, body, headers), run(RS, body, headers, cuts)
    assert cut.events == whole.events and cut.result == whole.result


@settings(max_examples=40, deadline=None)
@given(cuts=cut_points(sample(WIRE, TEXT)[1]))
def test_01_cut_anywhere_reads_the_same(cuts: list[int]) -> None:
    headers, body = sample(WIRE, TEXT)
    assert run(RS, body, headers, cuts).result == run(RS, body, headers).result


# -------------------------------------------------------------------------------- tool calls


def test_interleaved_calls_are_assembled_per_item_and_finished_in_order() -> None:
    body = events(
        CREATED,
        fc_added(0, "call_a", "get_weather"),
        fc_delta(0, '{"city":'),
        fc_added(1, "call_b", "get_time"),
        fc_delta(1, '{"tz":'),
        fc_delta(0, '"Paris"}'),
        fc_delta(1, '"CET"}'),
        fc_done(1, "call_b", "get_time", '{"tz":"CET"}'),  # the second call is done first
        fc_done(0, "call_a", "get_weather", '{"city":"Paris"}'),
        COMPLETED,
    )
    r = run(RS, body)
    check_tool_invariants(r)
    assert [(e.index, e.id) for e in r.of(ToolCallStart)] == [(0, "call_a"), (1, "call_b")]
    assert [(e.index, e.call.parsed) for e in r.done] == [(0, {"city": "Paris"}), (1, {"tz": "CET"})]
    kinds = [type(e) for e in r.events]
    assert kinds.index(ToolCallDone) > max(i for i, k in enumerate(kinds) if k is ToolCallDelta)  # 1 waited for 0
    assert [c.id for c in r.response().tool_calls] == ["call_a", "call_b"]


def test_events_found_by_item_id_alone_and_before_their_item() -> None:
    early = {"type": "response.function_call_arguments.delta", "item_id": "fc_0", "delta": '{"q":'}
    body = events(
        CREATED,
        early,  # an argument fragment before the item was added: the item opens with it
        fc_added(0, "call_a", "search"),
        {"type": "response.function_call_arguments.delta", "item_id": "fc_0", "delta": '"x"}'},  # no output_index
        fc_done(0, "call_a", "search", '{"q":"x"}'),
        COMPLETED,
    )
    r = run(RS, body)
    check_tool_invariants(r)
    assert [(e.id, e.name) for e in r.of(ToolCallStart)] == [("call_a", "search")]
    assert [e.arguments for e in r.of(ToolCallDelta)] == ['{"q":', '"x"}']
    assert r.response().tool_calls[0].parsed == {"q": "x"}


def test_the_done_arguments_are_the_calls_and_their_rest_is_sent() -> None:
    body = events(
        CREATED,
        fc_added(0, "call_a", "search"),
        fc_delta(0, '{"q":'),
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_0",
            "output_index": 0,
            "arguments": '{"q":"all"}',
        },
        COMPLETED,  # no output_item.done: the end finishes the call
    )
    r = run(RS, body)
    check_tool_invariants(r)
    assert [e.arguments for e in r.of(ToolCallDelta)] == ['{"q":', '"all"}']
    assert r.response().tool_calls[0].parsed == {"q": "all"}


def test_malformed_arguments_at_the_end() -> None:
    body = events(CREATED, fc_added(0, "call_a", "search"), fc_delta(0, '{"q": "unfinis'), COMPLETED)
    r = run(RS, body)
    assert r.failure().kind is FailureKind.TOOL_CALL_MALFORMED


# -------------------------------------------------------------------------------- text, reasoning


def test_text_done_sends_what_the_deltas_did_not() -> None:
    done = {
        "type": "response.output_text.done",
        "item_id": "msg_0",
        "output_index": 0,
        "content_index": 0,
        "text": "Hello world",
    }
    r = run(RS, events(CREATED, text_delta(0, "Hello "), done, COMPLETED))
    assert [e.text for e in r.of(TextDelta)] == ["Hello ", "world"]
    assert r.response().text == "Hello world"


def test_summary_parts_are_one_block_with_a_blank_line_between() -> None:
    def delta(part: int, text: str) -> dict[str, Any]:
        return {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_0",
            "output_index": 0,
            "summary_index": part,
            "delta": text,
        }

    item = {
        "id": "rs_0",
        "type": "reasoning",
        "encrypted_content": "enc",
        "summary": [{"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}],
    }
    body = events(
        CREATED,
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "summary": []}},
        delta(0, "First."),
        delta(1, "Sec"),
        delta(1, "ond."),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        text_delta(1, "Answer."),
        COMPLETED,
    )
    r = run(RS, body)
    assert [e.text for e in r.of(ReasoningDelta)] == ["First.", "\n\n", "Sec", "ond."]
    (done,) = r.of(ReasoningDone)
    assert (done.block.text, done.block.signature) == ("First.\n\nSecond.", "enc")
    assert r.response().reasoning == (done.block,) and r.response().text == "Answer."


def test_raw_reasoning_text_of_open_models() -> None:
    delta = {
        "type": "response.reasoning_text.delta",
        "item_id": "rs_0",
        "output_index": 0,
        "content_index": 0,
        "delta": "thinking",
    }
    item = {
        "id": "rs_0",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "thinking"}],
    }
    r = run(
        RS, events(CREATED, delta, {"type": "response.output_item.done", "output_index": 0, "item": item}, COMPLETED)
    )
    assert [b.text for b in r.response().reasoning] == ["thinking"]
    assert r.response().reasoning[0].signature is None


def test_a_refusal_is_held_back_and_content_filtered() -> None:
    def refusal(delta: str) -> dict[str, Any]:
        return {
            "type": "response.refusal.delta",
            "item_id": "msg_0",
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
        }

    r = run(RS, events(CREATED, refusal("I can't "), refusal("help."), COMPLETED))
    assert r.of(TextDelta) == []
    f = r.failure()
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.response is not None and f.response.refusal == "I can't help."
    assert r.stops[-1].reason is StopReason.REFUSAL


@pytest.mark.parametrize(
    ("reason", "kind"),
    [("max_output_tokens", FailureKind.TRUNCATED), ("content_filter", FailureKind.CONTENT_FILTERED)],
)
def test_response_incomplete(reason: str, kind: FailureKind) -> None:
    end = {"type": "response.incomplete", "response": response("incomplete", incomplete_details={"reason": reason})}
    r = run(RS, events(CREATED, text_delta(0, "Once upon"), end))
    f = r.failure()
    assert f.kind is kind
    assert f.response is not None and f.response.text == "Once upon" == r.text
    assert f.usage is not None and f.usage.output_tokens == 7


def test_an_answer_given_only_in_the_terminal_event_is_read_from_it() -> None:
    part = {"type": "output_text", "annotations": [], "text": "Whole."}
    output = [
        {"id": "msg_0", "type": "message", "status": "completed", "role": "assistant", "content": [part]},
        {"id": "fc_1", "type": "function_call", "call_id": "call_z", "name": "noop", "arguments": "{}"},
    ]
    r = run(RS, events(CREATED, {"type": "response.completed", "response": response(output=output)}))
    check_tool_invariants(r)
    assert r.text == r.response().text == "Whole."
    assert [(c.id, c.parsed) for c in r.response().tool_calls] == [("call_z", {})]


# -------------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        # the API reference's shape: code, message and param at the top
        ({"code": "rate_limit_exceeded", "message": "Rate limit reached.", "param": None}, FailureKind.RATE_LIMITED),
        ({"code": "server_is_overloaded", "message": "Overloaded."}, FailureKind.PROVIDER_OVERLOADED),
        ({"code": "server_error", "message": "Oops."}, FailureKind.PROVIDER_SERVER_ERROR),
        # as recorded (03): under "error"
        (
            {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "Quota."}},
            FailureKind.QUOTA_EXHAUSTED,
        ),
        ({"error": {"type": "tokens", "code": "rate_limit_exceeded", "message": "TPM."}}, FailureKind.RATE_LIMITED),
    ],
)
def test_an_error_event_is_classified_by_its_code(error: dict[str, Any], kind: FailureKind) -> None:
    r = run(RS, events(CREATED, text_delta(0, "Hel"), {"type": "error", **error}, COMPLETED))
    assert r.raised is not None and r.raised.kind is kind
    assert r.raised.response is not None and r.raised.response.text == "Hel"  # what had arrived, for the trace
    assert r.result is None  # nothing after the error is read


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": "server_error", "message": "The server had an error."}, FailureKind.PROVIDER_SERVER_ERROR),
        ({"code": "invalid_prompt", "message": "Flagged."}, FailureKind.CONTENT_FILTERED),
        (None, FailureKind.PROVIDER_SERVER_ERROR),
    ],
)
def test_response_failed(error: dict[str, str] | None, kind: FailureKind) -> None:
    r = run(RS, events(CREATED, {"type": "response.failed", "response": response("failed", error=error)}))
    assert r.raised is not None and r.raised.kind is kind


def test_a_stream_cut_before_its_end_is_incomplete() -> None:
    r = run(RS, events(CREATED, text_delta(0, "Half")))
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert f.response is not None and f.response.text == "Half"


def test_without_event_lines_and_with_a_done_marker() -> None:
    body = events(CREATED, text_delta(0, "Hi"), COMPLETED, framed=False) + b"data: [DONE]\n\n"
    r = run(RS, body)
    assert r.response().text == "Hi"


def test_unknown_events_are_skipped() -> None:
    odd = [
        {"type": "response.web_search_call.searching", "item_id": "ws_0", "output_index": 0},
        {"type": "response.output_text.annotation.added", "item_id": "msg_1", "output_index": 1, "annotation": {}},
        {"type": "keepalive"},
    ]
    r = run(RS, events(CREATED, *odd, text_delta(1, "ok"), COMPLETED))
    assert r.response().text == "ok"


def test_items_without_their_done_event_are_finished_as_the_response_lists_them() -> None:
    summary = {
        "type": "response.reasoning_summary_text.delta",
        "item_id": "rs_0",
        "output_index": 0,
        "summary_index": 0,
        "delta": "Plan.",
    }
    reasoning = {
        "id": "rs_0",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Plan."}],
        "encrypted_content": "enc-final",
    }
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "search", "arguments": '{"q":"x"}'}
    body = events(
        CREATED,
        summary,
        fc_added(1, "call_a", "search"),
        fc_delta(1, '{"q":'),
        {"type": "response.completed", "response": response(output=[reasoning, call])},
    )
    r = run(RS, body)
    check_tool_invariants(r)
    resp = r.response()
    assert [(b.text, b.signature) for b in resp.reasoning] == [("Plan.", "enc-final")]
    assert [(c.id, c.parsed) for c in resp.tool_calls] == [("call_a", {"q": "x"})]
    assert [e.arguments for e in r.of(ToolCallDelta)] == ['{"q":', '"x"}']
