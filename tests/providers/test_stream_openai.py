"""OpenAI Chat Completions streams (and DeepSeek, Azure): every captured stream, then the edges."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import (
    Dialect,
    Failure,
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
from failover.providers import OpenAIDialect
from failover.providers._base import SSEEvent

from ._wire import target
from .test_stream_common import REQUEST, WIRE, check_tool_invariants, cut_points, run, sample, sse

OA = Dialect.OPENAI

STREAMS = [
    "openai-chat/06-stream-text-include-usage.sse",
    "openai-chat/07-stream-text-include-usage-obfuscation.jsonl",
    "openai-chat/08-stream-parallel-tool-calls.sse",
    "openai-chat/09-stream-finish-length.sse",
    "openai-chat/10-stream-refusal.sse",
    "openai-chat/11-stream-content-filter-azure.sse",
    "deepseek/01-stream-usage-done.http",
    "deepseek/02-stream-queued-keepalive-reconstructed.sse",
]


def chunk(delta: Mapping[str, object] | None = None, finish: str | None = None, **extra: object) -> dict[str, object]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": dict(delta or {}), "finish_reason": finish}],
        **extra,
    }


def frag(index: int, arguments: str = "", id: str | None = None, name: str | None = None) -> dict[str, object]:
    """One entry of ``delta.tool_calls``: a fragment of call ``index`` (its head with id and name)."""
    fn: dict[str, object] = {"arguments": arguments}
    if name is not None:
        fn["name"] = name
    out: dict[str, object] = {"index": index, "function": fn}
    if id is not None:
        out |= {"id": id, "type": "function"}
    return out


def calls(*fragments: dict[str, object]) -> dict[str, object]:
    return {"tool_calls": list(fragments)}


def call_delta(index: int, arguments: str = "", id: str | None = None, name: str | None = None) -> dict[str, object]:
    return calls(frag(index, arguments, id, name))


# ----------------------------------------------------------------------- captured streams


def test_06_text_then_usage_chunk_then_done(wire: Path) -> None:
    r = run(OA, sample(wire, STREAMS[0])[1])
    expected = (
        "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, "
        "I recommend checking a reliable weather website or a weather app."
    )
    assert r.text == expected
    assert len(r.of(TextDelta)) == 30  # the role chunk's "" content is not a delta
    assert r.stops == [Stop(reason=StopReason.END_TURN, raw="stop")]
    assert r.usages == [UsageUpdate(usage=Usage(input_tokens=14, output_tokens=30))]
    assert r.events[-2:] == [r.stops[0], r.usages[0]]  # stop on the finish chunk, usage on the next
    resp = r.response()
    assert resp.text == expected
    assert (resp.stop_reason, resp.raw_stop_reason) == (StopReason.END_TURN, "stop")
    assert resp.usage == Usage(input_tokens=14, output_tokens=30)
    assert (resp.model, resp.response_id) == ("gpt-4o-2024-08-06", "chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL")
    assert resp.tool_calls == () and resp.refusal is None


def test_07_obfuscation_and_usage_null_on_every_chunk(wire: Path) -> None:
    path = wire / STREAMS[1]
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    expected = "".join(c["choices"][0]["delta"].get("content") or "" for c in lines if c["choices"])
    r = run(OA, sample(wire, STREAMS[1])[1])
    assert len(expected) == 1724 and r.text == expected
    assert r.text.startswith("**Holiday Name:** Harmony Day\n\n**Date:**")
    assert r.text.endswith("shared human experiences and mutual respect.")
    assert len(r.of(TextDelta)) == 300
    assert r.usages == [UsageUpdate(usage=Usage(input_tokens=16, output_tokens=300))]  # the nulls are skipped
    resp = r.response()
    assert resp.model == "gpt-4.1-nano-2025-04-14"
    assert resp.response_id == "chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0"
    assert resp.stop_reason is StopReason.END_TURN


def test_08_parallel_tool_calls(wire: Path) -> None:
    r = run(OA, sample(wire, STREAMS[2])[1])
    check_tool_invariants(r)
    first = ToolCall(
        id="call_JMW1whyEaYG438VE1OIflxA2",
        name="GetWeatherArgs",
        arguments='{"city": "Edinburgh", "country": "GB", "units": "c"}',
        parsed={"city": "Edinburgh", "country": "GB", "units": "c"},
    )
    second = ToolCall(
        id="call_DNYTawLBoN8fj3KN6qU9N1Ou",
        name="get_stock_price",
        arguments='{"ticker": "AAPL", "exchange": "NASDAQ"}',
        parsed={"ticker": "AAPL", "exchange": "NASDAQ"},
    )
    starts = r.of(ToolCallStart)
    assert starts == [
        ToolCallStart(index=0, id=first.id, name=first.name),
        ToolCallStart(index=1, id=second.id, name=second.name),
    ]
    assert [len([d for d in r.of(ToolCallDelta) if d.index == i]) for i in (0, 1)] == [11, 9]
    assert r.done == [ToolCallDone(index=0, call=first), ToolCallDone(index=1, call=second)]
    # Every call is complete only when the choice finishes (a later fragment may belong to any
    # call): both dones come together, just before the stop.
    stop_at = r.events.index(r.stops[0])
    assert [r.events.index(d) for d in r.done] == [stop_at - 2, stop_at - 1]
    assert r.stops == [Stop(reason=StopReason.TOOL_USE, raw="tool_calls")]
    assert r.text == ""
    resp = r.response()
    assert resp.tool_calls == (first, second)
    assert resp.usage == Usage(input_tokens=149, output_tokens=60)
    assert resp.stop_reason is StopReason.TOOL_USE


def test_09_finish_length_is_truncated_with_the_partial_response(wire: Path) -> None:
    r = run(OA, sample(wire, STREAMS[3])[1])
    assert r.text == '{"'
    assert r.stops == [Stop(reason=StopReason.MAX_TOKENS, raw="length")]
    f = r.failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.provider_code == "length"
    assert f.usage == Usage(input_tokens=79, output_tokens=1)
    assert f.response is not None and f.response.text == '{"'
    assert f.response.response_id == "chatcmpl-ABfw3Oqj8RD0z6aJiiX37oTjV2HFh"


def test_10_refusal_deltas_are_not_text_and_end_content_filtered(wire: Path) -> None:
    r = run(OA, sample(wire, STREAMS[4])[1])
    assert r.of(TextDelta) == []
    assert r.stops == [Stop(reason=StopReason.REFUSAL, raw="stop")]
    f = r.failure()
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert "I'm sorry, I can't assist with that request." in f.message
    assert f.response is not None
    assert f.response.refusal == "I'm sorry, I can't assist with that request."
    assert (f.response.text, f.response.stop_reason) == ("", StopReason.REFUSAL)
    assert f.usage == Usage(input_tokens=79, output_tokens=11)


def test_11_azure_content_filter_chunks(wire: Path) -> None:
    r = run(OA, sample(wire, STREAMS[5])[1])
    assert r.text == "Hey Jude, better"
    assert r.stops == [Stop(reason=StopReason.CONTENT_FILTER, raw="content_filter")]
    assert r.usages == []  # "usage": null everywhere
    f = r.failure()
    assert f.kind is FailureKind.CONTENT_FILTERED
    assert f.provider_code == "content_filter"
    assert f.response is not None
    # The filter chunks' empty id and model do not hide the real ones.
    assert f.response.response_id == "chatcmpl-8JCbt5d4luUIhYCI7YH4dQK7hnHx2"
    assert f.response.model == "gpt-35-turbo"
    assert f.response.text == "Hey Jude, better"


@pytest.mark.parametrize("name", STREAMS[6:])
def test_deepseek_usage_on_the_finish_chunk(wire: Path, name: str) -> None:
    headers, body = sample(wire, name)
    r = run(OA, body, headers)
    assert r.comments == (3 if name.endswith("keepalive-reconstructed.sse") else 0)
    assert r.text == "1, 2, 3."
    assert [e.text for e in r.of(TextDelta)] == ["1", ",", " ", "2", ",", " ", "3", "."]
    assert r.usages == [UsageUpdate(usage=Usage(input_tokens=11, output_tokens=8, cached_input_tokens=0))]
    resp = r.response()
    assert (resp.model, resp.response_id) == ("deepseek-v4-flash", "e626f326-1f18-4dca-aad2-0f60d3d57075")
    assert resp.stop_reason is StopReason.END_TURN
    if name.endswith(".http"):
        assert resp.provider_request_id == "fa0235db4a8eb390f5c45bd64a6cbaab"  # x-ds-trace-id


@pytest.mark.parametrize("name", STREAMS)
def test_streamed_response_matches_events(wire: Path, name: str) -> None:
    headers, body = sample(wire, name)
    r = run(OA, body, headers)
    resp = r.result if isinstance(r.result, Response) else r.failure().response
    assert resp is not None
    assert resp.text == r.text
    assert resp.tool_calls == tuple(d.call for d in r.done)
    assert resp.usage == (r.usages[-1].usage if r.usages else Usage())
    assert r.stops and resp.stop_reason == r.stops[-1].reason


@pytest.mark.parametrize("name", STREAMS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_split_anywhere_gives_the_same_events_and_result(name: str, data: st.DataObject) -> None:
    headers, body = sample(WIRE, name)
    whole = run(OA, body, headers)
    cuts = data.draw(cut_points(body))
    split = run(OA, body, headers, cuts)
    assert split.events == whole.events
    assert split.result == whole.result
    assert split.comments == whole.comments


# ----------------------------------------------------------------------- incomplete and failing streams


def test_stream_cut_before_finish_reason_is_transient_with_the_partial_text(wire: Path) -> None:
    body = sample(wire, STREAMS[0])[1]
    cut = body.index(b'"finish_reason":"stop"')
    r = run(OA, body[: body.rindex(b"\n\n", 0, cut) + 2])
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert "stream ended before completion" in f.message
    assert f.response is not None and f.response.text == r.text
    assert r.text.endswith("a weather app.")


def test_tool_call_cut_mid_arguments_is_transient_and_never_done(wire: Path) -> None:
    body = sample(wire, STREAMS[2])[1]
    cut = body.index(b'"arguments":"ty\\": "')
    r = run(OA, body[: body.rindex(b"\n\n", 0, cut) + 2], {"x-request-id": "req_1"})
    assert r.of(ToolCallStart) == [ToolCallStart(index=0, id="call_JMW1whyEaYG438VE1OIflxA2", name="GetWeatherArgs")]
    assert r.done == []
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert f.provider_request_id == "req_1"
    assert f.response is not None
    assert [(c.name, c.arguments, c.parsed) for c in f.response.tool_calls] == [("GetWeatherArgs", '{"ci', None)]


def test_done_is_optional_after_finish_reason(wire: Path) -> None:
    body = sample(wire, STREAMS[0])[1]
    r = run(OA, body[: body.index(b"data: [DONE]")])
    assert r.response().text.startswith("I'm unable")


def test_error_payload_mid_stream_raises_classified_failure() -> None:
    body = sse(
        chunk({"content": "Hel"}),
        {"error": {"message": "The server had an error while processing your request.", "type": "server_error"}},
    )
    r = run(OA, body, {"x-request-id": "req_7"})
    assert r.text == "Hel"
    f = r.raised
    assert f is not None
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "The server had an error" in f.message
    assert f.provider_request_id == "req_7"
    assert f.response is not None and f.response.text == "Hel"  # what had arrived, for the trace


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "bad", "type": "BadRequestError", "code": 400, "object": "error"}, FailureKind.INVALID_REQUEST),
        (
            {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"},
            FailureKind.CONTEXT_OVERFLOW,
        ),
        ({"message": "You exceeded your current quota", "code": "insufficient_quota"}, FailureKind.QUOTA_EXHAUSTED),
        ({"message": "upstream overloaded", "code": 503}, FailureKind.PROVIDER_OVERLOADED),
        ("plain string error", FailureKind.PROVIDER_SERVER_ERROR),
        # by code, whatever the 200 the stream came with
        (
            {"message": "busy", "type": "service_unavailable_error", "code": "server_is_overloaded"},
            FailureKind.PROVIDER_OVERLOADED,
        ),
        ({"message": "TPM", "type": "tokens", "code": "rate_limit_exceeded"}, FailureKind.RATE_LIMITED),
        ({"message": "ramp", "type": "rate_limit_error", "code": "slow_down"}, FailureKind.RATE_LIMITED),
        ({"message": "no credits", "code": "credit_balance_exhausted"}, FailureKind.QUOTA_EXHAUSTED),
        ({"message": "flagged", "code": "invalid_prompt"}, FailureKind.CONTENT_FILTERED),
        ({"message": "bad key", "code": "invalid_api_key"}, FailureKind.AUTHENTICATION_OR_PERMISSION),
        ({"message": "gone", "code": "model_not_found"}, FailureKind.MODEL_NOT_FOUND),
        ({"message": "busy", "code": "429"}, FailureKind.RATE_LIMITED),  # LiteLLM: the status as a string
        # by type, when there is no specific code
        ({"message": "x", "type": "service_unavailable_error"}, FailureKind.PROVIDER_OVERLOADED),
        ({"message": "x", "type": "overloaded_error"}, FailureKind.PROVIDER_OVERLOADED),
        ({"message": "x", "type": "invalid_request_error"}, FailureKind.INVALID_REQUEST),
        ({"message": "x", "type": "authentication_error"}, FailureKind.AUTHENTICATION_OR_PERMISSION),
        ({"message": "x", "code": "request_timeout"}, FailureKind.TRANSPORT_TRANSIENT),
        # by the provider's words
        (
            {"message": "This model's maximum context length is 65536 tokens", "type": "invalid_request_error"},
            FailureKind.CONTEXT_OVERFLOW,
        ),
        ({"message": "The engine is currently overloaded", "type": "server_error"}, FailureKind.PROVIDER_OVERLOADED),
    ],
)
def test_error_payload_uses_the_body_classifier(error: object, kind: FailureKind) -> None:
    r = run(OA, sse({"error": error}))
    assert r.raised is not None and r.raised.kind is kind


CONSTRUCTED = Path(__file__).resolve().parent / "constructed"


@pytest.mark.parametrize(
    ("name", "kind", "code", "text"),
    [
        (
            "openai-chat-midstream-01-server-is-overloaded.sse",
            FailureKind.PROVIDER_OVERLOADED,
            "server_is_overloaded",
            "The forecast for Paris",
        ),
        (
            "openai-chat-midstream-02-rate-limit-exceeded.sse",
            FailureKind.RATE_LIMITED,
            "rate_limit_exceeded",
            "The forecast for Paris",
        ),
        (
            "openai-chat-midstream-03-insufficient-quota.sse",
            FailureKind.QUOTA_EXHAUSTED,
            "insufficient_quota",
            "The forecast for Paris",
        ),
        (
            "openai-chat-midstream-04-server-error.sse",
            FailureKind.PROVIDER_SERVER_ERROR,
            "server_error",
            "The forecast for Paris",
        ),
        (
            "openai-chat-midstream-05-openrouter-finish-error.sse",
            FailureKind.PROVIDER_SERVER_ERROR,
            "server_error",
            "The forecast for Paris",
        ),
        (
            "openai-chat-midstream-06-vllm-status-code.sse",
            FailureKind.PROVIDER_OVERLOADED,
            "ServiceUnavailableError",
            "The forecast for Paris",
        ),
        ("openai-chat-midstream-07-error-before-content.sse", FailureKind.RATE_LIMITED, "rate_limit_exceeded", ""),
    ],
)
def test_midstream_error_samples_are_classified_by_code(name: str, kind: FailureKind, code: str, text: str) -> None:
    # CONSTRUCTED samples: no real capture of an error in the middle of a Chat Completions
    # stream exists (constructed/README.md says what each is built from).
    r = run(OA, (CONSTRUCTED / name).read_bytes(), {"x-request-id": "req_9"})
    f = r.raised
    assert f is not None, r.result
    assert (f.kind, f.provider_code, f.status) == (kind, code, 200)
    assert f.provider_request_id == "req_9"
    assert r.text == text
    assert f.response is not None and f.response.text == text  # what had arrived, for the trace


def test_an_error_on_the_finishing_choice_is_classified_by_its_code() -> None:
    last = chunk(finish="error")
    last["choices"][0]["error"] = {"code": 429, "message": "Rate limit exceeded upstream"}  # type: ignore[index]
    r = run(OA, sse(chunk({"content": "Hal"}), last))
    assert r.raised is not None
    assert (r.raised.kind, r.raised.provider_code) == (FailureKind.RATE_LIMITED, "429")
    assert r.raised.response is not None and r.raised.response.text == "Hal"


def test_finish_reason_error_ends_the_stream_as_a_server_error() -> None:
    r = run(OA, sse(chunk({"content": "Hal"}), chunk(finish="error")))
    f = r.failure()
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "finish_reason error" in f.message
    assert f.response is not None and f.response.text == "Hal"


def test_malformed_json_event_raises() -> None:
    r = run(OA, sse(chunk({"content": "a"}), '{"id": "x", "choices": [{"delta": {"content": "b"'))
    assert r.text == "a"
    assert r.raised is not None
    assert r.raised.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "malformed stream event" in r.raised.message


# ----------------------------------------------------------------------- tool-call edges


def test_malformed_arguments_are_done_with_parsed_none_and_fail_at_finish() -> None:
    body = sse(
        chunk(call_delta(0, "", id="call_a", name="f")),
        chunk(call_delta(0, '{"x": ')),
        chunk(call_delta(0, "}")),
        chunk(finish="tool_calls"),
        "[DONE]",
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert r.done == [ToolCallDone(index=0, call=ToolCall(id="call_a", name="f", arguments='{"x": }', parsed=None))]
    f = r.failure()
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    assert "f" in f.message


def test_interleaved_calls_are_each_complete_at_the_finish() -> None:
    # The issue's repro: call 0's second fragment comes after call 1 opened. Each call is a
    # buffer of its own, complete only when the choice finishes.
    body = sse(
        chunk(call_delta(0, "", id="call_a", name="get_weather")),
        chunk(call_delta(0, '{"city": ')),
        chunk(call_delta(1, "", id="call_b", name="search")),
        chunk(call_delta(0, '"Paris"}')),
        chunk(call_delta(1, '{"q": "x"}')),
        chunk(finish="tool_calls"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    weather = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}', parsed={"city": "Paris"})
    search = ToolCall(id="call_b", name="search", arguments='{"q": "x"}', parsed={"q": "x"})
    assert r.done == [ToolCallDone(index=0, call=weather), ToolCallDone(index=1, call=search)]
    assert r.events[-3:] == [*r.done, Stop(reason=StopReason.TOOL_USE, raw="tool_calls")]
    assert r.response().tool_calls == (weather, search)


def test_fragments_in_one_chunk_for_several_calls() -> None:
    body = sse(
        chunk(calls(frag(0, "", "c0", "f"), frag(1, "", "c1", "g"))),
        chunk(calls(frag(0, '{"a":'), frag(1, '{"b":'))),
        chunk(calls(frag(1, " 2}"), frag(0, " 1}"))),
        chunk(finish="tool_calls"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert [(c.id, c.parsed) for c in r.response().tool_calls] == [("c0", {"a": 1}), ("c1", {"b": 2})]


def test_an_index_reused_with_a_new_id_is_a_new_call() -> None:
    # Ollama and some proxies number every parallel call 0; the ids still tell them apart.
    body = sse(
        chunk(call_delta(0, "", id="c1", name="f")),
        chunk(call_delta(0, '{"a": 1}')),
        chunk(call_delta(0, "", id="c2", name="g")),
        chunk(call_delta(0, '{"b": 2}')),
        chunk(finish="tool_calls"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert [(d.index, d.call.id, d.call.parsed) for d in r.done] == [(0, "c1", {"a": 1}), (1, "c2", {"b": 2})]


def test_indexes_that_do_not_start_at_zero_are_numbered_from_zero() -> None:
    # Some proxies number calls from 1: the events still number them 0, 1 (what an SDK client
    # assembling the relayed stream needs), in the order the server opened them.
    body = sse(
        chunk(call_delta(1, "", id="c1", name="f")),
        chunk(call_delta(2, "", id="c2", name="g")),
        chunk(call_delta(1, "{}")),
        chunk(call_delta(2, "{}")),
        chunk(finish="tool_calls"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert [(d.index, d.call.id) for d in r.done] == [(0, "c1"), (1, "c2")]


def test_nothing_after_the_finish_reason_changes_the_answer() -> None:
    body = sse(
        chunk(call_delta(0, "{}", id="c1", name="f")),
        chunk(finish="tool_calls"),
        chunk(call_delta(0, "garbage")),
        chunk({"content": "late"}, finish="stop"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert len(r.stops) == 1 and r.text == ""
    assert r.response().tool_calls == (ToolCall(id="c1", name="f", arguments="{}", parsed={}),)


def test_blank_arguments_parse_as_an_empty_object() -> None:
    r = run(OA, sse(chunk(call_delta(0, "", id="call_a", name="ping")), chunk(finish="tool_calls")))
    assert r.done[0].call.parsed == {}
    assert r.response().tool_calls[0].parsed == {}


def test_forced_tool_with_finish_stop_is_tool_use() -> None:
    r = run(OA, sse(chunk(call_delta(0, "{}", id="call_a", name="f")), chunk(finish="stop")))
    assert r.stops == [Stop(reason=StopReason.TOOL_USE, raw="stop")]
    assert r.response().stop_reason is StopReason.TOOL_USE


def test_repeated_id_and_name_on_every_fragment_start_one_call() -> None:
    body = sse(
        chunk(call_delta(0, '{"a"', id="call_a", name="f")),
        chunk(call_delta(0, ": 1}", id="call_a", name="f")),
        chunk(finish="tool_calls"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert len(r.of(ToolCallStart)) == 1
    assert r.response().tool_calls == (ToolCall(id="call_a", name="f", arguments='{"a": 1}', parsed={"a": 1}),)


def test_calls_without_index_are_told_apart_by_id() -> None:
    def no_index(arguments: str, id: str | None = None, name: str | None = None) -> dict[str, object]:
        d = call_delta(0, arguments, id, name)
        del d["tool_calls"][0]["index"]  # type: ignore[index]
        return d

    body = sse(
        chunk(no_index('{"a": 1}', id="c1", name="f")),
        chunk(no_index('{"b": 2}', id="c2", name="g")),
        chunk(no_index("")),
        chunk(finish="tool_calls"),
    )
    r = run(OA, body)
    check_tool_invariants(r)
    assert [(c.id, c.parsed) for c in r.response().tool_calls] == [("c1", {"a": 1}), ("c2", {"b": 2})]


def test_arguments_sent_as_an_object_are_taken_whole() -> None:
    whole = {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": {"city": "Paris"}}}]}
    r = run(OA, sse(chunk(whole), chunk(finish="tool_calls")))
    check_tool_invariants(r)
    assert r.response().tool_calls == (
        ToolCall(id="c1", name="f", arguments='{"city":"Paris"}', parsed={"city": "Paris"}),
    )


def test_content_as_a_list_of_parts() -> None:
    r = run(OA, sse(chunk({"content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]}), chunk(finish="stop")))
    assert r.text == "hi" and r.response().text == "hi"


def test_other_choices_are_ignored() -> None:
    other = chunk({"content": "B"})
    other["choices"][0]["index"] = 1  # type: ignore[index]
    r = run(OA, sse(chunk({"content": "A"}), other, chunk(finish="stop")))
    assert r.response().text == "A"


def test_stream_parser_reads_request_id_and_rate_limits_from_headers() -> None:
    headers = {"x-request-id": "req_42", "x-ratelimit-remaining-requests": "59"}
    parser = OpenAIDialect().stream_parser(target(OA), REQUEST, headers)
    parser.feed(SSEEvent(data=json.dumps(chunk({"content": "x"}, finish="length"))))
    f = parser.finish()
    assert isinstance(f, Failure) and f.kind is FailureKind.TRUNCATED
    assert f.provider_request_id == "req_42"
    assert f.rate_limits is not None and f.rate_limits.remaining_requests == 59
    assert f.response is not None and f.response.provider_request_id == "req_42"


# ----------------------------------------------------------------------- calls in index order


def sdk_calls(*chunks: dict[str, object]) -> list[tuple[str, str, str]]:
    """The oracle: the openai SDK's chunk objects, their ``delta.tool_calls`` filed by
    ``index`` and listed by it (as its ``accumulate_delta`` files them when index 0 comes
    first; its ``.stream()`` accumulator raises IndexError when it does not)."""
    from openai.types.chat import ChatCompletionChunk

    filed: dict[int, list[str]] = {}
    for c in chunks:
        for choice in ChatCompletionChunk.model_validate({"created": 0, **c}).choices:
            for tc in choice.delta.tool_calls or ():
                slot = filed.setdefault(tc.index, ["", "", ""])
                slot[0] += tc.id or ""
                if tc.function is not None:
                    slot[1] += tc.function.name or ""
                    slot[2] += tc.function.arguments or ""
    return [(i, n, a) for i, n, a in (filed[k] for k in sorted(filed))]


# vLLM's parallel calls as measured: index 1's head before index 0's, fragments interleaved.
INDEX_1_FIRST = (
    chunk({"role": "assistant", "content": None}),
    chunk(call_delta(1, "", id="call_b", name="search")),
    chunk(call_delta(1, '{"q": ')),
    chunk(call_delta(0, "", id="call_a", name="get_weather")),
    chunk(calls(frag(1, '"x"}'), frag(0, '{"city": '))),
    chunk(call_delta(0, '"Paris"}')),
    chunk(finish="tool_calls"),
)


def test_calls_are_listed_by_index_when_index_1_opens_first() -> None:
    r = run(OA, sse(*INDEX_1_FIRST, "[DONE]"))
    check_tool_invariants(r)
    weather = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}', parsed={"city": "Paris"})
    search = ToolCall(id="call_b", name="search", arguments='{"q": "x"}', parsed={"q": "x"})
    got = r.response().tool_calls
    assert got == (weather, search)
    assert [(c.id, c.name, c.arguments) for c in got] == sdk_calls(*INDEX_1_FIRST)
    assert r.done == [ToolCallDone(index=0, call=weather), ToolCallDone(index=1, call=search)]
    # index 1 waited for index 0's head: the client is never shown 1 before 0, nor a number
    # it would have to take back
    starts = r.of(ToolCallStart)
    assert [(s.index, s.id) for s in starts] == [(0, "call_a"), (1, "call_b")]
    first = r.events.index(starts[0])
    assert r.events[first : first + 3] == [starts[0], starts[1], ToolCallDelta(index=1, arguments='{"q": ')]


def test_a_gap_in_the_indexes_is_closed_and_the_later_call_waits_for_the_finish() -> None:
    body = (
        chunk(call_delta(2, "", id="call_c", name="g")),
        chunk(call_delta(0, "{}", id="call_a", name="f")),
        chunk(call_delta(2, "{}")),
        chunk(finish="tool_calls"),
    )
    r = run(OA, sse(*body))
    check_tool_invariants(r)
    assert [(c.id, c.name, c.arguments) for c in r.response().tool_calls] == sdk_calls(*body)
    assert [(d.index, d.call.id) for d in r.done] == [(0, "call_a"), (1, "call_c")]
    starts = r.of(ToolCallStart)
    assert r.events.index(starts[1]) > r.events.index(r.of(ToolCallDelta)[0])  # index 1 might still have come


def test_a_stream_cut_before_index_0_opened_lists_the_calls_by_index() -> None:
    # the partial answer a failure carries lists what had arrived in the SDK's order too
    body = sse(chunk(call_delta(1, '{"b"', id="call_b", name="g")), chunk(call_delta(0, "{", id="call_a", name="f")))
    r = run(OA, body)
    partial = r.failure().response
    assert partial is not None
    assert [c.id for c in partial.tool_calls] == ["call_a", "call_b"]
