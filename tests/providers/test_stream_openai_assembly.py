"""Tool-call assembly in Chat Completions streams, against the official openai SDK as the oracle.

For any interleaving of N parallel calls' argument fragments (and any packing of fragments
into chunks), the parser must assemble exactly the calls, in index order, as
``openai.lib.streaming.chat.ChatCompletionStreamState`` (the accumulator behind
``client.chat.completions.stream()``) does from the same chunks; the fragments it passes on
must join, per index, into the final arguments; and a client that assembles those events
relayed as chunks (what the gateway does) with the same SDK accumulator must get the same
calls again.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from failover.model import (
    Dialect,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
)

from .test_stream_common import check_tool_invariants, run, sse

OA = Dialect.OPENAI


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # JSON object text
    pieces: tuple[str, ...]  # the arguments cut into fragments (the first rides on the head)


_KEYS = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6)
_VALUES = st.one_of(
    st.integers(-1000, 1000),
    st.booleans(),
    st.none(),
    st.text(max_size=12),  # any Unicode, quotes and backslashes included
    st.lists(st.integers(0, 9), max_size=3),
)


@st.composite
def a_call(draw: st.DrawFn, i: int) -> Call:
    args = json.dumps(draw(st.dictionaries(_KEYS, _VALUES, max_size=4)), ensure_ascii=draw(st.booleans()))
    cuts = sorted(draw(st.sets(st.integers(0, len(args)), max_size=6)))
    bounds = [0, *cuts, len(args)]
    pieces = tuple(args[a:b] for a, b in itertools.pairwise(bounds))
    name = draw(st.sampled_from(["get_weather", "search", "lookup_order", "send_email"]))
    return Call(
        id=f"call_{i}_{draw(st.text('abcXYZ019', min_size=4, max_size=8))}", name=name, arguments=args, pieces=pieces
    )


@st.composite
def a_stream(draw: st.DrawFn) -> tuple[list[Call], list[dict[str, Any]]]:
    """N calls and the chunks of a stream that sends them with fragments interleaved.

    Calls are opened in index order (the protocol, and what the SDK oracle needs: it uses
    ``index`` as a list position). Everything else is free: fragments of different calls in
    any order, several fragments (of one call or of several) in one chunk, empty fragments,
    text before the calls, and a call's first fragment sent before its id and name (which
    some compatible servers do; failover holds it until the call can be announced).
    """
    n = draw(st.integers(1, 4))
    calls = [draw(a_call(i)) for i in range(n)]
    queues = []
    for i, c in enumerate(calls):
        head: dict[str, Any] = {"index": i, "id": c.id, "type": "function", "function": {"name": c.name}}
        rest = [{"index": i, "function": {"arguments": p}} for p in c.pieces[1:]]
        first = {"index": i, "function": {"arguments": c.pieces[0]}}
        if draw(st.booleans()):  # the usual: the head carries the first fragment
            head["function"]["arguments"] = c.pieces[0]
            queues.append([head, *rest])
        else:  # the first fragment before the head
            head["function"]["arguments"] = ""
            queues.append([first, head, *rest])
    order: list[dict[str, Any]] = []
    opened = 0
    while any(queues):
        # a call may start only after the calls before it have started
        ready = [i for i, q in enumerate(queues) if q and i <= opened]
        i = draw(st.sampled_from(ready))
        opened = max(opened, i + 1)
        order.append(queues[i].pop(0))
    chunks: list[dict[str, Any]] = []
    text = draw(st.sampled_from(["", "Let me check."]))
    if text:
        chunks.append(_chunk({"role": "assistant", "content": text}))
    at = 0
    while at < len(order):
        k = draw(st.integers(1, 3))
        chunks.append(_chunk({"tool_calls": order[at : at + k]}))
        at += k
    chunks.append(_chunk({}, finish="tool_calls"))
    if draw(st.booleans()):
        chunks.append({**_chunk({}), "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}})
    return calls, chunks


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sdk_calls(chunks: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What the official SDK assembles from these chunks: [(id, name, arguments)] in its order."""
    state: Any = ChatCompletionStreamState()
    for data in chunks:
        state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=data))
    message = state.get_final_completion().choices[0].message
    return [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls or ()]


def relayed(events: list[StreamEvent]) -> list[dict[str, Any]]:
    """Our tool-call events as a relay renders them for a Chat Completions client."""
    out = []
    for e in events:
        if isinstance(e, ToolCallStart):
            fn = {"name": e.name, "arguments": ""}
            out.append(_chunk({"tool_calls": [{"index": e.index, "id": e.id, "type": "function", "function": fn}]}))
        elif isinstance(e, ToolCallDelta):
            out.append(_chunk({"tool_calls": [{"index": e.index, "function": {"arguments": e.arguments}}]}))
    out.append(_chunk({}, finish="tool_calls"))
    return out


@settings(max_examples=120, deadline=None)
@given(stream=a_stream())
def test_any_interleaving_assembles_the_calls_as_the_sdk_does(stream: tuple[list[Call], list[dict[str, Any]]]) -> None:
    calls, chunks = stream
    r = run(OA, sse(*chunks, "[DONE]"))
    check_tool_invariants(r)  # one start per call, deltas after it, done = its deltas joined
    expected = [(c.id, c.name, c.arguments) for c in calls]
    resp = r.response()
    # the calls, in index order, each complete
    assert [(t.id, t.name, t.arguments) for t in resp.tool_calls] == expected
    assert [t.parsed for t in resp.tool_calls] == [json.loads(c.arguments) for c in calls]
    assert [d.index for d in r.done] == list(range(len(calls)))
    # the SDK reading the same chunks agrees
    assert sdk_calls(chunks) == expected
    # every call is done only at the finish: the dones come last, just before the stop
    stop_at = r.events.index(r.stops[0])
    assert r.events[stop_at - len(calls) : stop_at] == r.done
    # the fragments passed on join, per index, into the final arguments
    for d in r.done:
        joined = "".join(e.arguments for e in r.of(ToolCallDelta) if e.index == d.index)
        assert joined == d.call.arguments
    # and a client assembling those events relayed as chunks gets the same calls
    assert sdk_calls(relayed(r.events)) == expected


def test_the_repro_from_the_sdk_side() -> None:
    """The hand-written repro, checked against the SDK too (a fixed example of the property)."""
    chunks = [
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        _chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_b", "type": "function", "function": {"name": "search", "arguments": ""}}
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"q": "x"}'}}]}),
        _chunk({}, finish="tool_calls"),
    ]
    expected = [("call_a", "get_weather", '{"city": "Paris"}'), ("call_b", "search", '{"q": "x"}')]
    assert sdk_calls(chunks) == expected
    r = run(OA, sse(*chunks))
    assert [(t.id, t.name, t.arguments) for t in r.response().tool_calls] == expected
    assert r.done == [
        ToolCallDone(
            index=0,
            call=ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}', parsed={"city": "Paris"}),
        ),
        ToolCallDone(index=1, call=ToolCall(id="call_b", name="search", arguments='{"q": "x"}', parsed={"q": "x"})),
    ]
