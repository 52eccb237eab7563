"""Anthropic thinking: parsed from bodies and streams, sent back, and read as the SDK reads it.

The thinking streams in ``wire/anthropic/`` are constructed from the docs' examples (see
``wire/README.md``): no capture with thinking is public.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from failover.model import (
    Dialect,
    FailureKind,
    Message,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    StopReason,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolChoice,
)
from failover.providers import AnthropicDialect
from failover.router._history import readable_history

from ._wire import response, target
from .test_stream_anthropic import STOP, block_start, block_stop, delta, events, message_delta, start
from .test_stream_common import check_tool_invariants, cut_points, run

AN = Dialect.ANTHROPIC
D = AnthropicDialect()
T = target(AN)
KEY = T.key  # "anthropic:claude-sonnet-4-5": the origin every parsed block names
SAMPLES = Path(__file__).parent / "wire" / "anthropic"
WEATHER = Tool(name="get_weather", parameters={"type": "object", "properties": {"location": {"type": "string"}}})


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def thinking(text: str, signature: str | None) -> Reasoning:
    return Reasoning(text=text, signature=signature, source="anthropic", origin=KEY)


def redacted(data: str) -> Reasoning:
    return Reasoning(redacted=data, source="anthropic", origin=KEY)


def check_reasoning_invariants(events: list[Any], resp: Response | None = None) -> None:
    """Each reasoning block: its deltas, then one done whose text is the deltas joined."""
    done = [e for e in events if isinstance(e, ReasoningDone)]
    for d in done:
        joined = "".join(e.text for e in events if isinstance(e, ReasoningDelta) and e.index == d.index)
        assert d.block.text == joined
        later = events[events.index(d) + 1 :]
        assert not any(isinstance(e, ReasoningDelta) and e.index == d.index for e in later)
    assert len(done) == len({d.index for d in done})  # one done per block
    if resp is not None:
        assert tuple(d.block for d in sorted(done, key=lambda d: d.index)) == resp.reasoning


# ----------------------------------------------------------------------- samples from the docs


def test_docs_thinking_stream_is_a_signed_reasoning_block_before_the_text() -> None:
    r = run(AN, sample("01-stream-thinking-docs.sse"))
    first = "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147"
    second = "\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\n\nSo GCD(1071, 462) = 21"
    block = thinking(first + second, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...")
    assert r.events[:3] == [
        ReasoningDelta(index=0, text=first),
        ReasoningDelta(index=0, text=second),
        ReasoningDone(index=0, block=block),
    ]
    assert r.text == "The greatest common divisor of 1071 and 462 is **21**."
    resp = r.response()
    assert resp.reasoning == (block,)
    assert resp.reasoning_text == first + second
    assert resp.text == r.text  # the thinking is not the answer
    check_reasoning_invariants(r.events, resp)


def test_docs_thinking_redacted_and_tool_use_stream() -> None:
    r = run(AN, sample("02-stream-thinking-redacted-tool-use-docs.sse"))
    check_tool_invariants(r)
    resp = r.response()
    check_reasoning_invariants(r.events, resp)
    data = r.of(ReasoningDone)[1].block.redacted
    assert data is not None and data.startswith("EmwKAhgBEgy3va3pzix")
    assert [type(e).__name__ for e in r.events if not isinstance(e, ReasoningDelta | ToolCallDelta)] == [
        "UsageUpdate",
        "ReasoningDone",
        "ReasoningDone",  # the redacted block: no delta, its data whole
        "TextDelta",
        "ToolCallStart",
        "ToolCallDone",
        "Stop",
        "UsageUpdate",
    ]
    assert resp.reasoning[1] == redacted(data)
    assert [e.index for e in r.of(ReasoningDelta)] == [0, 0]  # the thinking's two deltas; none for redacted
    assert resp.reasoning[0].text == (
        "The user wants to know the current weather in Paris. I have access to a function `get_weather`..."
    )
    assert resp.tool_calls == (
        ToolCall(
            id="toolu_01CswdEQBMshySk6Y9DFKrfq",
            name="get_weather",
            arguments='{"location": "Paris"}',
            parsed={"location": "Paris"},
        ),
    )
    assert resp.stop_reason is StopReason.TOOL_USE


@pytest.mark.parametrize("name", ["01-stream-thinking-docs.sse", "02-stream-thinking-redacted-tool-use-docs.sse"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_docs_samples_split_anywhere_give_the_same_events(name: str, data: st.DataObject) -> None:
    body = sample(name)
    whole = run(AN, body)
    split = run(AN, body, cuts=data.draw(cut_points(body)))
    assert split.events == whole.events
    assert split.result == whole.result


# ----------------------------------------------------------------------- message bodies


def _message(content: list[dict[str, Any]], stop: str = "tool_use") -> bytes:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 10, "output_tokens": 4},
        }
    ).encode()


# Interleaved thinking: a thinking block between two tool_use blocks (and a redacted one).
INTERLEAVED: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "First the weather.", "signature": "sig-A"},
    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
    {"type": "thinking", "thinking": "Now the time.", "signature": "sig-B"},
    {"type": "redacted_thinking", "data": "ENCRYPTED"},
    {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
]


def test_message_body_carries_thinking_and_redacted_blocks_in_order() -> None:
    resp = D.parse(T, response(200, _message(INTERLEAVED)))
    assert isinstance(resp, Response)
    assert resp.reasoning == (
        thinking("First the weather.", "sig-A"),
        thinking("Now the time.", "sig-B"),
        redacted("ENCRYPTED"),
    )
    assert [c.id for c in resp.tool_calls] == ["toolu_1", "toolu_2"]
    assert resp.text == ""
    assert resp.reasoning_text == "First the weather.Now the time."


def test_a_thinking_block_with_an_empty_signature_has_none() -> None:
    resp = D.parse(T, response(200, _message([{"type": "thinking", "thinking": "t", "signature": ""}], "end_turn")))
    assert isinstance(resp, Response)
    assert resp.reasoning == (thinking("t", None),)


def test_interleaved_thinking_stream_keeps_its_order() -> None:
    body = events(
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "First the weather."}),
        delta(0, {"type": "signature_delta", "signature": "sig-A"}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"location": "Paris"}'}),
        block_stop(1),
        block_start(2, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(2, {"type": "thinking_delta", "thinking": "Now the time."}),
        delta(2, {"type": "signature_delta", "signature": "sig-B"}),
        block_stop(2),
        block_start(3, {"type": "redacted_thinking", "data": "ENCRYPTED"}),
        block_stop(3),
        block_start(4, {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}}),
        block_stop(4),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    check_tool_invariants(r)
    resp = r.response()
    check_reasoning_invariants(r.events, resp)
    # The events come in the blocks' order: thinking, call, thinking, redacted, call.
    order = [(type(e).__name__, e.index) for e in r.events if isinstance(e, ReasoningDone | ToolCallDone)]
    assert order == [
        ("ReasoningDone", 0),
        ("ToolCallDone", 0),
        ("ReasoningDone", 1),
        ("ReasoningDone", 2),
        ("ToolCallDone", 1),
    ]
    # The stream's Response is the body's, block for block.
    parsed = D.parse(T, response(200, _message(INTERLEAVED)))
    assert isinstance(parsed, Response)
    assert (resp.reasoning, resp.tool_calls[0].parsed, resp.tool_calls[1].parsed) == (
        parsed.reasoning,
        {"location": "Paris"},
        {},
    )


def test_fragments_of_open_blocks_interleave_by_index() -> None:
    """A proxy that interleaves blocks: each fragment goes to its own block, as the SDK keeps them."""
    body = events(
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_start(1, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
        block_start(2, {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"city": '}),
        delta(0, {"type": "thinking_delta", "thinking": "two "}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"q": '}),
        delta(1, {"type": "input_json_delta", "partial_json": '"Paris"}'}),
        delta(0, {"type": "thinking_delta", "thinking": "calls"}),
        block_stop(1),  # call 0 is final here, before call 1 and the thinking
        delta(2, {"type": "input_json_delta", "partial_json": '"x"}'}),
        delta(0, {"type": "signature_delta", "signature": "sig"}),
        block_stop(2),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    check_tool_invariants(r)
    resp = r.response()
    check_reasoning_invariants(r.events, resp)
    assert [(d.index, d.call.id, d.call.parsed) for d in r.done] == [
        (0, "toolu_a", {"city": "Paris"}),
        (1, "toolu_b", {"q": "x"}),
    ]
    assert resp.tool_calls == tuple(d.call for d in r.done)
    assert resp.reasoning == (thinking("two calls", "sig"),)


@pytest.mark.parametrize("second", [0, 1])  # the same index again, or a lower one
def test_a_block_start_that_goes_back_is_a_malformed_stream(second: int) -> None:
    """Indexes are positions in the content, started in order: the SDK refuses a start that
    goes back (``Unexpected "content_block_start" index``), since which block later
    fragments mean is then unknowable. Gaps are harmless and read."""
    body = events(
        start(),
        block_start(1, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
        block_start(second, {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}),
        block_stop(1),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    assert r.raised is not None
    assert r.raised.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert f"content_block_start index {second} after index 1" in r.raised.message
    gap = events(
        start(),
        block_start(2, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
        block_stop(2),
        message_delta("tool_use"),
        STOP,
    )
    assert [c.id for c in run(AN, gap).response().tool_calls] == ["toolu_a"]


def test_a_fragment_after_its_block_stopped_is_not_part_of_it() -> None:
    body = events(
        start(),
        block_start(0, {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"x": 1}'}),
        block_stop(0),
        delta(0, {"type": "input_json_delta", "partial_json": "garbage"}),
        block_start(1, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(1, {"type": "thinking_delta", "thinking": "t"}),
        delta(1, {"type": "signature_delta", "signature": "s"}),
        block_stop(1),
        delta(1, {"type": "thinking_delta", "thinking": "late"}),
        message_delta("tool_use"),
        STOP,
    )
    r = run(AN, body)
    check_tool_invariants(r)
    assert r.of(ToolCallDelta) == [ToolCallDelta(index=0, arguments='{"x": 1}')]
    resp = r.response()
    check_reasoning_invariants(r.events, resp)
    assert resp.tool_calls[0].parsed == {"x": 1}
    assert resp.reasoning == (thinking("t", "s"),)


def test_a_signature_delta_replaces_the_signature_as_the_sdk_does() -> None:
    body = events(
        start(),
        block_start(0, {"type": "thinking", "thinking": "t", "signature": "from-start"}),
        delta(0, {"type": "signature_delta", "signature": "first"}),
        delta(0, {"type": "signature_delta", "signature": "second"}),
        block_stop(0),
        block_start(1, {"type": "thinking", "thinking": "u", "signature": "whole"}),  # a proxy's whole block
        block_stop(1),
        message_delta("end_turn"),
        STOP,
    )
    r = run(AN, body)
    assert r.events[1] == ReasoningDelta(index=0, text="t")  # the block start's own text
    assert r.response().reasoning == (thinking("t", "second"), thinking("u", "whole"))


def test_thinking_cut_by_max_tokens_is_kept_unsigned_without_a_done() -> None:
    body = events(
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me think about"}),
        message_delta("max_tokens"),
        STOP,
    )
    r = run(AN, body)
    assert r.of(ReasoningDone) == []
    f = r.failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.response is not None and f.response.reasoning == (thinking("Let me think about", None),)


def test_midstream_error_while_thinking_keeps_the_partial_reasoning() -> None:
    body = events(
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "hmm"}),
        ("error", {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}),
    )
    r = run(AN, body)
    assert r.raised is not None
    assert r.raised.kind is FailureKind.RATE_LIMITED
    assert r.raised.response is not None and r.raised.response.reasoning == (thinking("hmm", None),)


# ----------------------------------------------------------------------- the SDK's accumulator as the oracle


def _sdk_message(event_list: list[dict[str, Any]]) -> Any:
    snapshot = None
    bufs: dict[int, bytes] = {}
    for event in event_list:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)  # type: ignore[arg-type]
    return snapshot


@st.composite
def _blocks(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Content blocks of a message: text, thinking (signed), redacted thinking, 0-4 tool calls."""
    kinds = draw(
        st.lists(st.sampled_from(["text", "thinking", "redacted", "tool"]), min_size=1, max_size=7).filter(
            lambda k: k.count("tool") <= 4
        )
    )
    words = st.text(alphabet='abcé €{}"\\\n', min_size=0, max_size=12)
    out: list[tuple[str, Any]] = []
    for kind in kinds:
        if kind == "text":
            out.append((kind, draw(st.lists(words.filter(bool), min_size=1, max_size=4))))
        elif kind == "thinking":
            out.append(
                (
                    kind,
                    (
                        draw(st.lists(words.filter(bool), max_size=4)),
                        draw(st.text("ABCxyz+/=", min_size=1, max_size=12)),
                    ),
                )
            )
        elif kind == "redacted":
            out.append((kind, draw(st.text("ABCxyz+/=", min_size=1, max_size=20))))
        else:
            args = draw(st.dictionaries(st.sampled_from(["city", "q", "n", "é"]), st.integers() | words, max_size=3))
            text = json.dumps(args, ensure_ascii=False)
            cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
            pieces = [""] + [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            out.append((kind, (f"toolu_{len(out)}", f"fn{len(out)}", pieces)))
    return out


def _stream(blocks: list[tuple[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The message's events: blocks start in index order, fragments of open blocks interleave
    at random (text blocks, which a stream of text deltas cannot tell apart, do not)."""
    queues: list[list[dict[str, Any]]] = []
    for i, (kind, value) in enumerate(blocks):
        q: list[dict[str, Any]] = []
        if kind == "text":
            q.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            q += [
                {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}} for t in value
            ]
        elif kind == "thinking":
            parts, sig = value
            q.append(
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                }
            )
            q += [
                {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": t}}
                for t in parts
            ]
            q += [
                {"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": s}}
                for s in (sig.split("=") if "=" in sig else [sig])  # more than one: the last one counts
            ]
        elif kind == "redacted":
            q.append(
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "redacted_thinking", "data": value},
                }
            )
        else:
            call_id, name, pieces = value
            q.append(
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                }
            )
            q += [
                {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": p}}
                for p in pieces
            ]
        q.append({"type": "content_block_stop", "index": i})
        queues.append(q)
    out: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 9, "output_tokens": 1},
            },
        }
    ]
    started = 0
    text_open: int | None = None
    while any(queues):
        ready = [
            i
            for i, q in enumerate(queues)
            if q
            and (i < started or i == started)
            and not (blocks[i][0] == "text" and text_open is not None and text_open != i)
        ]
        if text_open is not None and queues[text_open]:
            ready = [text_open]  # a text block runs to its end before anything else starts or moves
        i = rng.choice(ready)
        event = queues[i].pop(0)
        if event["type"] == "content_block_start":
            started += 1
            if blocks[i][0] == "text":
                text_open = i
        elif event["type"] == "content_block_stop" and text_open == i:
            text_open = None
        out.append(event)
    stop = "tool_use" if any(k == "tool" for k, _ in blocks) else "end_turn"
    out.append(
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 42}}
    )
    out.append({"type": "message_stop"})
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=_blocks(), seed=st.integers(0, 2**32 - 1))
def test_the_assembled_response_equals_the_sdks_accumulated_message(blocks: list[tuple[str, Any]], seed: int) -> None:
    event_list = _stream(blocks, random.Random(seed))
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in event_list).encode()
    r = run(AN, body)
    check_tool_invariants(r)
    resp = r.response()
    check_reasoning_invariants(r.events, resp)
    sdk = _sdk_message(event_list)
    content = list(sdk.content)
    assert resp.text == "".join(b.text for b in content if b.type == "text")
    assert r.text == resp.text
    expected_reasoning = tuple(
        thinking(b.thinking, b.signature or None) if b.type == "thinking" else redacted(b.data)
        for b in content
        if b.type in ("thinking", "redacted_thinking")
    )
    assert resp.reasoning == expected_reasoning
    assert [(c.id, c.name, c.parsed) for c in resp.tool_calls] == [
        (b.id, b.name, b.input) for b in content if b.type == "tool_use"
    ]
    # Every call finished at its own stop (in the order the stops came), numbered by its start.
    assert tuple(d.call for d in sorted(r.done, key=lambda d: d.index)) == resp.tool_calls
    assert resp.raw_stop_reason == sdk.stop_reason
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (sdk.usage.input_tokens, sdk.usage.output_tokens)


# ----------------------------------------------------------------------- build: sending thinking back


def _loop(reasoning: tuple[Reasoning, ...], *, effort: str | None = "high", text: str = "Checking.") -> Request:
    call = ToolCall(id="toolu_1", name="get_weather", arguments='{"location":"Paris"}', parsed={"location": "Paris"})
    return Request(
        messages=(
            Message.user("Weather in Paris?"),
            Message.assistant(text, tool_calls=(call,), reasoning=reasoning),
            Message.tool("toolu_1", "18C"),
        ),
        tools=(WEATHER,),
        max_tokens=32000,
        reasoning_effort=effort,  # type: ignore[arg-type]
    )


def _body(request: Request) -> dict[str, Any]:
    http = D.build(T, request)
    assert http.json is not None
    return dict(http.json)


def test_build_sends_thinking_back_first_complete_and_signed() -> None:
    body = _body(_loop((thinking("Let me check.", "sig-A"), redacted("ENC"))))
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Let me check.", "signature": "sig-A"},
        {"type": "redacted_thinking", "data": "ENC"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 24576}


def test_build_leaves_out_unsigned_thinking_and_other_formats() -> None:
    blocks = (
        thinking("no signature", None),
        Reasoning(text="deepseek", source="openai"),
        Reasoning(text="", signature="gemini-sig", source="gemini"),
        thinking("kept", "sig"),
    )
    body = _body(_loop(blocks, effort=None))
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "text", "tool_use"]
    assert body["messages"][1]["content"][0]["thinking"] == "kept"


def test_thinking_is_off_when_the_open_tool_turn_lost_its_thinking() -> None:
    # Another provider wrote the turn: the router leaves its reasoning out for Claude ...
    gemini = Reasoning(text="", signature="g-sig", source="gemini", origin="gemini:gemini-3-pro")
    request, stripped = readable_history(_loop((gemini,)), KEY, D.reasoning_source)
    assert stripped == 1
    body = _body(request)
    # ... and the API would refuse thinking for a tool loop whose turn starts with tool_use:
    # the request goes without it.
    assert body["messages"][1]["content"][0]["type"] == "text"
    assert "thinking" not in body
    # Unsigned thinking is left out too: the same.
    assert "thinking" not in _body(_loop((thinking("summary only", None),), text=""))


def test_thinking_stays_on_when_the_open_tool_turn_keeps_its_thinking() -> None:
    request, stripped = readable_history(_loop((thinking("mine", "sig"),)), KEY, D.reasoning_source)
    assert stripped == 0
    assert _body(request)["thinking"]["type"] == "enabled"
    assert _body(_loop((redacted("ENC"),)))["thinking"]["type"] == "enabled"


def test_thinking_stays_on_after_a_finished_tool_loop_without_thinking() -> None:
    # The last assistant turn answered in text: a new turn may think again.
    call = ToolCall(id="toolu_1", name="get_weather", arguments="{}", parsed={})
    request = Request(
        messages=(
            Message.user("Weather?"),
            Message.assistant("", tool_calls=(call,)),
            Message.tool("toolu_1", "18C"),
            Message.assistant("It is 18C."),
            Message.user("And tomorrow?"),
        ),
        max_tokens=32000,
        reasoning_effort="low",
    )
    assert _body(request)["thinking"] == {"type": "enabled", "budget_tokens": 2048}


@pytest.mark.parametrize("choice", [ToolChoice(mode="required"), ToolChoice(mode="tool", name="get_weather")])
def test_thinking_is_off_when_tool_choice_forces_a_tool(choice: ToolChoice) -> None:
    request = Request(
        messages=(Message.user("x"),), tools=(WEATHER,), tool_choice=choice, max_tokens=32000, reasoning_effort="high"
    )
    body = _body(request)
    assert body["tool_choice"]["type"] in ("any", "tool")
    assert "thinking" not in body


def test_without_thinking_a_final_assistant_turn_goes_without_its_thinking() -> None:
    request = Request(
        messages=(Message.user("Say hi"), Message.assistant("Hi", reasoning=(thinking("t", "s"),))),
    )
    body = _body(request)
    assert body["messages"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "Hi"}]}
    # An earlier turn keeps its thinking.
    longer = Request(messages=(*request.messages, Message.user("again")))
    assert _body(longer)["messages"][1]["content"][0] == {"type": "thinking", "thinking": "t", "signature": "s"}


def test_a_turn_with_only_thinking_is_not_sent() -> None:
    request = Request(
        messages=(Message.user("a"), Message.assistant("", reasoning=(thinking("t", "s"),)), Message.user("b"))
    )
    assert [m["role"] for m in _body(request)["messages"]] == ["user", "user"]


# ----------------------------------------------------------------------- round trips


@pytest.mark.parametrize("streamed", [False, True])
def test_round_trip_reproduces_the_blocks(streamed: bool) -> None:
    """build -> the provider's answer -> parse -> Response.message() -> build: the assistant
    turn goes back exactly as the model wrote it (thinking, redacted, text, tool_use)."""
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": "sig-A"},
        {"type": "redacted_thinking", "data": "ENC"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
    ]
    first = Request(
        messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,), max_tokens=32000, reasoning_effort="high"
    )
    assert _body(first)["thinking"]["type"] == "enabled"
    if streamed:
        items: list[tuple[str, dict[str, Any]]] = [start()]
        for i, b in enumerate(content):
            if b["type"] == "thinking":
                items += [
                    block_start(i, {"type": "thinking", "thinking": "", "signature": ""}),
                    delta(i, {"type": "thinking_delta", "thinking": b["thinking"][:8]}),
                    delta(i, {"type": "thinking_delta", "thinking": b["thinking"][8:]}),
                    delta(i, {"type": "signature_delta", "signature": b["signature"]}),
                ]
            elif b["type"] == "text":
                items += [
                    block_start(i, {"type": "text", "text": ""}),
                    delta(i, {"type": "text_delta", "text": b["text"]}),
                ]
            elif b["type"] == "tool_use":
                items += [
                    block_start(i, {**b, "input": {}}),
                    delta(i, {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}),
                ]
            else:
                items.append(block_start(i, b))
            items.append(block_stop(i))
        items += [message_delta("tool_use"), STOP]
        resp = run(AN, events(*items)).response()
    else:
        parsed = D.parse(T, response(200, _message(content)))
        assert isinstance(parsed, Response)
        resp = parsed
    second = Request(
        messages=(*first.messages, resp.message(), Message.tool("toolu_1", "18C")),
        tools=first.tools,
        max_tokens=first.max_tokens,
        reasoning_effort=first.reasoning_effort,
    )
    request, stripped = readable_history(second, T.key, D.reasoning_source)
    assert stripped == 0
    body = _body(request)
    assert body["messages"][1] == {"role": "assistant", "content": content}
    assert body["thinking"]["type"] == "enabled"
    assert body["messages"][2]["content"][0]["tool_use_id"] == "toolu_1"


def test_round_trip_to_another_model_goes_without_thinking() -> None:
    parsed = D.parse(T, response(200, _message(INTERLEAVED)))
    assert isinstance(parsed, Response)
    other = target(AN, model="claude-other")
    request = Request(
        messages=(Message.user("x"), parsed.message(), Message.tool("toolu_1", "a"), Message.tool("toolu_2", "b")),
        max_tokens=32000,
        reasoning_effort="high",
    )
    readable, stripped = readable_history(request, other.key, D.reasoning_source)
    assert stripped == 3
    body = D.build(other, readable).json
    assert body is not None
    assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use", "tool_use"]
    assert "thinking" not in body


def test_text_delta_events_are_the_responses_text() -> None:
    r = run(AN, sample("02-stream-thinking-redacted-tool-use-docs.sse"))
    assert "".join(e.text for e in r.of(TextDelta)) == r.response().text
