"""Reasoning in both client dialects, and the relay's promise: a client assembles exactly the answer
failover records, or the stream ends with an error; never a different answer, silently.

The oracles are the official SDKs' own stream accumulators: ``ChatCompletionStreamState`` (openai)
and ``accumulate_event`` (anthropic, what ``client.messages.stream()`` builds its message with).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message as SdkMessage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from failover.inbound import RelayMismatch, WireError
from failover.inbound import anthropic as an
from failover.inbound import openai as oa
from failover.model import (
    Completed,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
)

CLAUDE = Reasoning(text="Let me think.", signature="EqQBCgIYAhIMsig==", source="anthropic", origin="anthropic:claude")
REDACTED = Reasoning(redacted="ENCRYPTED==", source="anthropic", origin="anthropic:claude")
GEMINI = Reasoning(text="A thought.", signature="CiQBthought", source="gemini", origin="gemini:gemini-pro")
DEEPSEEK = Reasoning(text="Hmm, 2+2.", source="openai", origin="openai:deepseek-reasoner")
CALL = ToolCall(id="c1", name="get_weather", arguments='{"city":"Oslo"}', parsed={"city": "Oslo"})


# -- the SDKs' own accumulators -------------------------------------------------------------------


def openai_final(events: list[object], resp: Response) -> ChatCompletion:
    r = oa.ChunkRenderer("chatcmpl-1", 1700000000, "chat", include_usage=True)
    chunks = r.start()
    for e in events:
        chunks += r.render(e)
    chunks += r.end(Completed(response=resp))
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(json.loads(json.dumps(c))))
    return state.get_final_completion()


def anthropic_events(events: list[object], resp: Response) -> list[tuple[str, dict[str, Any]]]:
    r = an.EventRenderer("msg_1", "chat")
    out = r.start()
    for e in events:
        out += r.render(e)
    return out + r.end(Completed(response=resp))


def anthropic_final(events: list[tuple[str, dict[str, Any]]]) -> SdkMessage:
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    open_block: int | None = None
    for name, data in events:
        assert data["type"] == name
        # blocks are sequential, as Anthropic's: one open at a time, in index order
        if name == "content_block_start":
            assert open_block is None and data["index"] == len(snapshot.content)
            open_block = data["index"]
        elif name in ("content_block_delta", "content_block_stop"):
            assert data["index"] == open_block
            open_block = None if name == "content_block_stop" else open_block
        if name in {"ping", "error"}:
            continue
        snapshot = accumulate_event(event=json.loads(json.dumps(data)), current_snapshot=snapshot, json_bufs=bufs)  # type: ignore[arg-type]
    assert open_block is None
    return SdkMessage.model_validate(snapshot.model_dump())


def blocks(message: SdkMessage) -> list[dict[str, Any]]:
    """The content blocks as a client reads them (no SDK-only fields)."""
    keep = {
        "text": ("type", "text"),
        "thinking": ("type", "thinking", "signature"),
        "redacted_thinking": ("type", "data"),
        "tool_use": ("type", "id", "name", "input"),
    }
    return [{k: getattr(b, k) for k in keep[b.type]} for b in message.content]


# -- OpenAI clients ---------------------------------------------------------------------------------


def test_openai_clients_read_reasoning_content_in_a_plain_answer_and_a_stream() -> None:
    resp = Response(text="4", reasoning=(DEEPSEEK, CLAUDE), stop_reason=StopReason.END_TURN)
    body = oa.completion_body(resp, completion_id="c", created=1, model="chat")
    message = ChatCompletion.model_validate(body).choices[0].message
    assert message.model_extra == {"reasoning_content": "Hmm, 2+2.Let me think."}
    assert "reasoning" not in body["choices"][0]["message"]  # one field: the Agents SDK would show both
    events: list[object] = [
        ReasoningDelta(index=0, text="Hmm, "),
        ReasoningDelta(index=0, text="2+2."),
        ReasoningDone(index=0, block=DEEPSEEK),
        ReasoningDone(index=1, block=CLAUDE),  # a block given whole
        TextDelta(text="4"),
    ]
    final = openai_final(events, resp).choices[0].message
    assert (final.content, final.model_extra) == ("4", {"reasoning_content": "Hmm, 2+2.Let me think."})


def test_an_answer_without_reasoning_has_no_reasoning_field() -> None:
    body = oa.completion_body(Response(text="hi"), completion_id="c", created=1, model="chat")
    assert "reasoning_content" not in body["choices"][0]["message"]


def test_openai_history_reasoning_comes_back_as_the_clients_reasoning() -> None:
    def assistant(**extra: Any) -> tuple[Reasoning, ...]:
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "4", **extra}]
        return oa.to_request(oa.parse_body({"model": "chat", "messages": messages})).messages[1].reasoning

    client = Reasoning(text="Hmm.", source="openai")  # origin None: a client's history
    assert assistant(reasoning_content="Hmm.") == (client,)
    assert assistant(reasoning="Hmm.") == (client,)  # vLLM / OpenRouter's name
    assert assistant(reasoning_content="Hmm.", reasoning="Hmm.") == (client,)  # vLLM sends both: one block
    assert assistant() == ()
    assert assistant(reasoning_content="") == ()


def test_a_reasoning_only_answer_reaches_an_openai_client() -> None:
    resp = Response(text="", reasoning=(DEEPSEEK,), stop_reason=StopReason.END_TURN)
    events: list[object] = [ReasoningDelta(index=0, text=DEEPSEEK.text), ReasoningDone(index=0, block=DEEPSEEK)]
    choice = openai_final(events, resp).choices[0]
    assert choice.message.content == ""
    assert choice.message.model_extra == {"reasoning_content": DEEPSEEK.text}
    assert choice.finish_reason == "stop"


def test_the_rest_of_a_call_or_a_block_goes_out_when_it_finishes_or_at_the_end() -> None:
    late = ToolCall(id="c2", name="get_time", arguments='{"tz":"CET"}', parsed={"tz": "CET"})
    resp = Response(text="ok", reasoning=(DEEPSEEK, GEMINI), tool_calls=(CALL, late), stop_reason=StopReason.TOOL_USE)
    events: list[object] = [
        ReasoningDelta(index=0, text="Hmm"),  # finished at the end with the answer's own block
        ToolCallStart(index=0, id="c1", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"ci'),
        ToolCallDone(index=0, call=CALL),  # its rest goes out now
        ToolCallStart(index=1, id="c2", name="get_time"),
        ToolCallDelta(index=1, arguments="{"),  # never finished: the end finishes it
        TextDelta(text="ok"),
    ]  # GEMINI is never sent at all: the end sends it whole
    message = openai_final(events, resp).choices[0].message
    assert message.model_extra == {"reasoning_content": "Hmm, 2+2.A thought."}
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [  # type: ignore[union-attr]
        ("c1", "get_weather", '{"city":"Oslo"}'),
        ("c2", "get_time", '{"tz":"CET"}'),
    ]


@pytest.mark.parametrize(
    ("events", "resp"),
    [
        # the final arguments do not extend the fragments sent (the frozen call)
        ([ToolCallStart(index=0, id="c1", name="get_weather"), ToolCallDelta(index=0, arguments='{"q":')], None),
        # a fragment after the call was finished
        ([ToolCallDone(index=0, call=CALL), ToolCallDelta(index=0, arguments="x")], None),
        # the answer holds another call than the one sent
        ([ToolCallStart(index=0, id="c9", name="get_weather")], None),
        # the client was sent a call the answer does not hold
        ([ToolCallStart(index=1, id="c2", name="get_time"), ToolCallDone(index=0, call=CALL)], None),
        # the text changed under the client
        ([TextDelta(text="Hello")], Response(text="Help!", tool_calls=(CALL,))),
        # a reasoning block's text changed under the client
        ([ReasoningDelta(index=0, text="Hmm, 3")], None),
        # more text for a block already finished
        ([ReasoningDone(index=0, block=DEEPSEEK), ReasoningDelta(index=0, text="more")], None),
    ],
)
def test_an_answer_that_changed_under_the_client_ends_the_stream_loudly(
    events: list[object], resp: Response | None
) -> None:
    resp = resp or Response(reasoning=(DEEPSEEK,), tool_calls=(CALL,), stop_reason=StopReason.TOOL_USE)
    with pytest.raises(RelayMismatch):
        openai_final(events, resp)
    with pytest.raises(RelayMismatch):
        anthropic_final(anthropic_events(events, resp))


# -- Anthropic clients ------------------------------------------------------------------------------


def test_anthropic_clients_read_thinking_blocks_in_order_in_a_stream_and_a_plain_answer() -> None:
    resp = Response(text="Hi", reasoning=(CLAUDE, REDACTED), tool_calls=(CALL,), stop_reason=StopReason.TOOL_USE)
    events: list[object] = [
        ReasoningDelta(index=0, text="Let me "),
        TextDelta(text="Hi"),  # held until the thinking block is finished: blocks never interleave
        ReasoningDelta(index=0, text="think."),
        ReasoningDone(index=0, block=CLAUDE),
        ReasoningDone(index=1, block=REDACTED),
        ToolCallStart(index=0, id="c1", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city":"Oslo"}'),
        ToolCallDone(index=0, call=CALL),
    ]
    out = anthropic_events(events, resp)
    deltas = [d["delta"]["type"] for n, d in out if n == "content_block_delta"]
    assert deltas == ["thinking_delta", "thinking_delta", "signature_delta", "text_delta", "input_json_delta"]
    thinking = {"type": "thinking", "thinking": "Let me think.", "signature": CLAUDE.signature}
    redacted = {"type": "redacted_thinking", "data": "ENCRYPTED=="}
    tool = {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Oslo"}}
    assert blocks(anthropic_final(out)) == [thinking, {"type": "text", "text": "Hi"}, redacted, tool]
    plain = SdkMessage.model_validate(an.message_body(resp, message_id="m", model="chat"))
    assert blocks(plain) == [thinking, redacted, {"type": "text", "text": "Hi"}, tool]


def test_a_block_of_another_provider_gets_a_signature_failover_issued_and_comes_back_as_it_was() -> None:
    sig = an.client_signature(GEMINI)
    assert sig.startswith("failover.v1.") and "." not in base64.b64encode(b"any real signature").decode()
    assert an.client_signature(CLAUDE) == CLAUDE.signature  # an Anthropic block keeps its own
    resp = Response(text="4", reasoning=(CLAUDE, REDACTED, GEMINI, DEEPSEEK))
    plain = an.message_body(resp, message_id="m", model="chat")
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": plain["content"]},
        {"role": "user", "content": "and?"},
    ]
    back = an.to_request(an.parse_body({"model": "chat", "max_tokens": 99, "messages": history}))
    # the client's own history: Anthropic blocks of unknown origin, the others exactly as they were
    assert back.messages[1].reasoning == (
        Reasoning(text=CLAUDE.text, signature=CLAUDE.signature, source="anthropic"),
        Reasoning(redacted="ENCRYPTED==", source="anthropic"),
        GEMINI,
        DEEPSEEK,
    )


def _b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize(
    "signature",
    [
        "failover.v1.not-base64!",
        "failover.v1." + base64.urlsafe_b64encode(b"[1, 2]").decode(),
        # failover never issues one for an Anthropic block: it would be a forged Anthropic signature
        "failover.v1."
        + base64.urlsafe_b64encode(json.dumps({"source": "anthropic", "signature": "x"}).encode()).decode(),
        "failover.v1." + base64.urlsafe_b64encode(json.dumps({"source": "mystery"}).encode()).decode(),
    ],
)
def test_a_signature_that_claims_to_be_failovers_but_is_not_is_refused_naming_the_field(signature: str) -> None:
    block = {"type": "thinking", "thinking": "t", "signature": signature}
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [block, {"type": "text", "text": "4"}]},
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(WireError) as err:
        an.to_request(an.parse_body({"model": "chat", "max_tokens": 99, "messages": history}))
    assert err.value.status == 400 and err.value.param == "messages[1].content[0].signature"


def test_an_assistant_turn_of_thinking_only_is_left_out() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "EqQB"}]},
        {"role": "user", "content": "and?"},
    ]
    request = an.to_request(an.parse_body({"model": "chat", "max_tokens": 99, "messages": history}))
    assert [m.role for m in request.messages] == ["user", "user"]


def test_a_reasoning_only_answer_reaches_an_anthropic_client_with_its_empty_text_block() -> None:
    resp = Response(text="", reasoning=(GEMINI,), stop_reason=StopReason.MAX_TOKENS)
    events: list[object] = [ReasoningDelta(index=0, text="A "), ReasoningDelta(index=0, text="thought.")]
    message = anthropic_final(anthropic_events(events, resp))  # the end finishes the open block
    thinking = {"type": "thinking", "thinking": "A thought.", "signature": an.client_signature(GEMINI)}
    assert blocks(message) == [thinking, {"type": "text", "text": ""}]
    assert message.stop_reason == "max_tokens"
    plain = SdkMessage.model_validate(an.message_body(resp, message_id="m", model="chat"))
    assert blocks(plain) == blocks(message)


# -- the relay's promise, over random event orders ---------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def answers(draw: st.DrawFn) -> Response:
    sources = st.sampled_from(
        [
            lambda t: Reasoning(text=t, signature="EqQB" + str(len(t)), source="anthropic", origin="anthropic:c"),
            lambda t: Reasoning(redacted="RED" + str(len(t)), source="anthropic", origin="anthropic:c"),
            lambda t: Reasoning(text=t, signature="g" + str(len(t)), source="gemini", origin="gemini:g"),
            lambda t: Reasoning(text=t, source="openai", origin="openai:d"),
        ]
    )
    reasoning = tuple(draw(sources)(draw(_TEXT)) for _ in range(draw(st.integers(0, 3))))
    calls = tuple(
        ToolCall(id=f"call_{i}", name=draw(st.sampled_from(["get_weather", "lookup"])), arguments=args, parsed=value)
        for i in range(draw(st.integers(0, 4)))
        for value in [draw(st.dictionaries(st.sampled_from("abc"), _TEXT | st.integers(), max_size=3))]
        for args in [json.dumps(value, ensure_ascii=draw(st.booleans()))]
    )
    stop = StopReason.TOOL_USE if calls else StopReason.END_TURN
    return Response(text=draw(_TEXT), reasoning=reasoning, tool_calls=calls, stop_reason=stop)


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=4))) if len(text) > 1 else []
    return [p for p in (text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)) if p]


@st.composite
def streams(draw: st.DrawFn, resp: Response) -> list[object]:
    """The answer as a dialect may stream it: pieces of every part, the parts interleaved in any
    order, a call or block given whole or left for the end to finish."""
    lanes: list[list[object]] = [[TextDelta(text=p) for p in _pieces(draw, resp.text)]]
    for i, block in enumerate(resp.reasoning):
        shape = draw(st.sampled_from(["deltas", "whole", "unfinished", "partial"]))
        pieces = _pieces(draw, block.text)
        if shape == "partial":
            pieces = pieces[:-1]  # the rest arrives with its ReasoningDone
        lane: list[object] = [] if shape == "whole" else [ReasoningDelta(index=i, text=p) for p in pieces]
        if shape != "unfinished" or not lane:
            lane.append(ReasoningDone(index=i, block=block))
        lanes.append(lane)
    for i, call in enumerate(resp.tool_calls):
        shape = draw(st.sampled_from(["deltas", "whole", "unfinished", "partial"]))
        pieces = _pieces(draw, call.arguments)
        if shape == "partial":
            pieces = pieces[:-1]
        if shape == "whole":
            lanes.append([ToolCallDone(index=i, call=call)])
            continue
        lane = [ToolCallStart(index=i, id=call.id, name=call.name)]
        lane += [ToolCallDelta(index=i, arguments=p) for p in pieces]
        if shape != "unfinished":
            lane.append(ToolCallDone(index=i, call=call))
        lanes.append(lane)
    events: list[object] = []
    lanes = [lane for lane in lanes if lane]
    while lanes:
        lane = lanes[draw(st.integers(0, len(lanes) - 1))]
        events.append(lane.pop(0))
        lanes = [lane for lane in lanes if lane]
    return events


def _changed(draw: st.DrawFn, resp: Response) -> Response:
    """The answer a buggy dialect records after streaming ``resp``: one part changed."""
    what = draw(st.sampled_from(["text", "arguments", "name", "reasoning", "drop_call"]))
    if what == "text":
        return Response(**{**_fields(resp), "text": resp.text + "!"})
    if what == "reasoning" and resp.reasoning:
        first = resp.reasoning[0]
        changed = Reasoning(text=first.text + "?", signature=first.signature, source=first.source, origin=first.origin)
        return Response(**{**_fields(resp), "reasoning": (changed, *resp.reasoning[1:])})
    if resp.tool_calls:
        c = resp.tool_calls[0]
        if what == "arguments":
            c = ToolCall(id=c.id, name=c.name, arguments=c.arguments[:-1] + " }", parsed=c.parsed)
        elif what == "name":
            c = ToolCall(id=c.id, name=c.name + "_v2", arguments=c.arguments, parsed=c.parsed)
        else:
            return Response(**{**_fields(resp), "tool_calls": resp.tool_calls[1:]})
        return Response(**{**_fields(resp), "tool_calls": (c, *resp.tool_calls[1:])})
    return Response(**{**_fields(resp), "text": resp.text + "?"})


def _fields(resp: Response) -> dict[str, Any]:
    return {
        "text": resp.text,
        "reasoning": resp.reasoning,
        "tool_calls": resp.tool_calls,
        "stop_reason": resp.stop_reason,
    }


def _assembled_openai(final: ChatCompletion) -> tuple[Any, ...]:
    m = final.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in m.tool_calls or []]  # type: ignore[union-attr]
    return (m.content or "", (m.model_extra or {}).get("reasoning_content", ""), calls, final.choices[0].finish_reason)


def _expected_openai(resp: Response) -> tuple[Any, ...]:
    calls = [(c.id, c.name, c.arguments) for c in resp.tool_calls]
    return (resp.text, resp.reasoning_text, calls, oa.finish_reason(resp.stop_reason))


def _expected_anthropic(resp: Response) -> list[dict[str, Any]]:
    """The blocks a client should end with: the plain body's, in stream order (thinking where it came)."""
    return blocks(SdkMessage.model_validate(an.message_body(resp, message_id="m", model="chat")))


def _by_kind(found: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """What a client reads of the blocks: the text (a stream may split it over blocks), the
    thinking and redacted blocks in order, the tool_use blocks in order."""
    text = "".join(b["text"] for b in found if b["type"] == "text")
    thinking = [b for b in found if b["type"] in ("thinking", "redacted_thinking")]
    return text, thinking, [b for b in found if b["type"] == "tool_use"]


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_what_a_client_assembles_equals_the_record_or_the_stream_ends_with_an_error(data: st.DataObject) -> None:
    """For any order a dialect streams an answer in, each SDK's accumulator ends with exactly the
    answer failover records; when the recorded answer differs from what was streamed (a broken
    dialect), the relay raises RelayMismatch, which a server turns into an error event."""
    sent = data.draw(answers())
    events = data.draw(streams(sent))
    recorded = _changed(data.draw, sent) if data.draw(st.booleans()) else sent
    try:
        openai_got = _assembled_openai(openai_final(events, recorded))
    except RelayMismatch:
        openai_got = None
    try:
        message = anthropic_final(anthropic_events(events, recorded))
    except RelayMismatch:
        message = None
    if recorded is sent:
        assert openai_got == _expected_openai(recorded)
        assert message is not None
        assert _by_kind(blocks(message)) == _by_kind(_expected_anthropic(recorded))
        assert message.stop_reason == an.stop_reason(recorded)
    else:  # never a different answer in silence
        assert openai_got is None or openai_got == _expected_openai(recorded)
        assert message is None or _by_kind(blocks(message)) == _by_kind(_expected_anthropic(recorded))
