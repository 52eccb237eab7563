"""Valid provider streams, written awkwardly, for the differential tests (test_wire_differential.py).

A :class:`Story` is what one answer says (reasoning, text, parallel tool calls, a refusal, a
mid-stream error, usage). :func:`cases` draws a story for a dialect, the events a provider of
that dialect would send for it (:class:`Event`: an SSE ``event:`` name and the ``data:``
JSON), and the bytes that carry them (:class:`Wire`): random line terminators (LF, CR,
CRLF), comments and keep-alives, ``id:`` and ``retry:`` fields, ``data:`` with and without
its space, and a random write size for every piece, so multi-byte UTF-8 gets cut between
two writes.

Every stream drawn is VALID by the event-stream rules (checked against
``tests.testing._helpers.parse_sse``, a WHATWG decoder) and by its dialect's documentation.
Where an official SDK, the oracle, reads valid framing wrongly, the framing it is given
stays inside what it reads, and :class:`Wire` says so:

* the openai SDK's ``SSEDecoder``: once an ``id:`` field was seen, every blank line
  dispatches an event, also one with no data (the spec dispatches none), which the SDK then
  fails to decode as JSON. So after an ``id:`` an OpenAI stream carries its comments
  inside event blocks, never as blocks of their own; a ``retry:`` goes only into an event
  with data.
* google-genai reads any line that does not start with ``data: `` (with the space) as raw
  JSON: comments, ``id:``, ``retry:`` and ``data:`` without its space break it (Gemini itself
  never sends them). The SDK reads the same events in Gemini's own framing
  (:attr:`Wire.oracle`: ``data: `` lines ended by CRLF) in writes of the same sizes;
  failover reads the awkward bytes.

``RawServer`` serves such bytes on loopback exactly as drawn: one HTTP chunk per write, and
a short pause after a write that splits a character or a CRLF, so that a client which reads
whatever has arrived (failover's does) still gets the two halves apart.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import h11
from hypothesis import strategies as st

from failover.model import Dialect
from tests.testing._helpers import parse_sse

OA, AN, GE = Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI

TOOL_NAMES = ("get_weather", "search_web", "get_time", "send_note")
CAUSES = ("overloaded", "rate_limit", "server_error")


# -- what an answer says ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Thought:
    """One reasoning block. OpenAI: the ``reasoning_content`` text (no signature). Anthropic:
    a ``thinking`` block with its signature, or (``redacted``) a ``redacted_thinking`` block.
    Gemini: the thought parts' text, and the ``thoughtSignature`` of the answer."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Story:
    dialect: Dialect
    thoughts: tuple[Thought, ...] = ()
    text: str = ""
    calls: tuple[Call, ...] = ()
    refusal: str | None = None  # the model declines (OpenAI refusal, Anthropic refusal, Gemini SAFETY)
    error: str | None = None  # a mid-stream error with this cause (see CAUSES)
    usage: tuple[int, int] = (10, 20)  # input, output tokens (output includes reasoning)

    @property
    def reasoning(self) -> str:
        return "".join(t.text for t in self.thoughts)


@dataclass(frozen=True, slots=True)
class Event:
    """One SSE event: its ``event:`` name (None: no name) and its ``data:`` (one line)."""

    name: str | None
    data: str


@dataclass(frozen=True, slots=True)
class Features:
    """What the generator may put into a stream (all on in CI; switch a part off to see
    whether what remains reads alike, e.g. ``Features(reasoning=False)``)."""

    reasoning: bool = True
    interleave: bool = True  # OpenAI: fragments of parallel tool calls interleave
    errors: bool = True  # mid-stream errors
    refusals: bool = True
    framing: bool = True  # comments, keep-alives, id/retry fields, data: without the space, CR/CRLF

    @classmethod
    def parse(cls, off: str) -> Features:
        """``"reasoning,interleave"``: those switched off (the FAILOVER_WIRE_OFF variable)."""
        names = {n.strip() for n in off.split(",") if n.strip()}
        unknown = names - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"FAILOVER_WIRE_OFF: unknown feature(s) {sorted(unknown)}; known: {list(cls.__dataclass_fields__)}"
            )
        return cls(**dict.fromkeys(names, False))


# -- drawing a story -------------------------------------------------------------------------------

# Characters that test decoders: 2-, 3- and 4-byte UTF-8, JSON escapes, line separators a
# str.splitlines() would break at, and plain words.
_ALPHABET = st.sampled_from(
    [
        *"abcdefghij klmnop",
        " ",
        "é",
        "ß",
        "Ω",
        "中",
        "文",
        "😀",
        "🌍",
        '"',
        "\\",
        "\n",
        "\t",
        "\u2028",
        "\u0085",
        "/",
        "{",
        "}",
        ":",
    ]
)
_TEXT = st.text(_ALPHABET, min_size=1, max_size=40)
_KEY = st.sampled_from(["city", "q", "tz", "units", "note", "n", "tags", "deep"])
_VALUE: st.SearchStrategy[Any] = st.recursive(
    st.one_of(_TEXT, st.integers(-(10**6), 10**6), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEY, inner, max_size=2)),
    max_leaves=5,
)
_ARGS = st.dictionaries(_KEY, _VALUE, max_size=3)
_SIGNATURE = st.binary(min_size=8, max_size=48).map(lambda b: base64.b64encode(b).decode())


@st.composite
def stories(draw: st.DrawFn, dialect: Dialect, features: Features = Features()) -> Story:
    kind = draw(st.sampled_from(["answer"] * 6 + (["refusal"] if features.refusals else [])))
    error = draw(st.sampled_from(CAUSES)) if features.errors and draw(st.integers(0, 3)) == 0 else None
    thoughts: tuple[Thought, ...] = ()
    if features.reasoning and draw(st.booleans()):
        if dialect is AN:
            blocks = [Thought(draw(_TEXT), draw(_SIGNATURE)) for _ in range(draw(st.integers(1, 2)))]
            if draw(st.booleans()):
                blocks.insert(draw(st.integers(0, len(blocks))), Thought("", None, draw(_SIGNATURE)))
            thoughts = tuple(blocks)
        elif dialect is GE:
            thoughts = (Thought(draw(_TEXT), draw(st.one_of(st.none(), _SIGNATURE))),)
        else:
            thoughts = (Thought(draw(_TEXT)),)
    usage = (draw(st.integers(1, 5000)), draw(st.integers(1, 5000)))
    if kind == "refusal":
        return Story(dialect, thoughts, refusal=draw(_TEXT), error=error, usage=usage)
    calls = tuple(Call(draw(st.sampled_from(TOOL_NAMES)), draw(_ARGS)) for _ in range(draw(st.integers(0, 4))))
    text = draw(_TEXT) if not calls or draw(st.booleans()) else ""
    return Story(dialect, thoughts, text, calls, error=error, usage=usage)


def pieces(draw: st.DrawFn, text: str, *, at_least: int = 1) -> list[str]:
    """``text`` cut at random character positions (at least one piece, none empty)."""
    if len(text) <= 1:
        return [text] if text or at_least else []
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=min(6, len(text) - 1)))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def dumps(draw: st.DrawFn, obj: Any) -> str:
    """JSON as providers write it: compact or spaced, UTF-8 raw or \\u-escaped."""
    spaced = draw(st.booleans())
    return json.dumps(obj, ensure_ascii=draw(st.booleans()), separators=(", ", ": ") if spaced else (",", ":"))


# -- the events each dialect sends for a story -----------------------------------------------------


def _openai_events(draw: st.DrawFn, s: Story, features: Features) -> list[Event]:
    head = {"id": "chatcmpl-Wd1ff", "object": "chat.completion.chunk", "created": 1767225600, "model": "gpt-x"}
    if draw(st.booleans()):
        head["system_fingerprint"] = "fp_1"
    include_usage = draw(st.booleans())  # else DeepSeek's way: usage on the finish chunk
    field_name = draw(st.sampled_from(["reasoning_content", "reasoning"]))  # DeepSeek / vLLM

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Event:
        obj: dict[str, Any] = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            obj["usage"] = None
        obj.update(extra)
        return Event(None, dumps(draw, obj))

    first: dict[str, Any] = {"role": "assistant", "content": "" if s.refusal is None else None}
    if s.refusal is not None or draw(st.booleans()):
        first["refusal"] = "" if s.refusal is not None else None
    events = [chunk(first)]
    for t in s.thoughts:
        for p in pieces(draw, t.text):
            events.append(chunk({"content": None, field_name: p} if draw(st.booleans()) else {field_name: p}))
    for p in pieces(draw, s.text, at_least=0) if s.text else ():
        events.append(chunk({"content": p}))
    for p in pieces(draw, s.refusal) if s.refusal else ():
        events.append(chunk({"refusal": p}))
    queues: list[list[dict[str, Any]]] = []
    for i, c in enumerate(s.calls):
        args = pieces(draw, json.dumps(c.args, ensure_ascii=draw(st.booleans())))
        first_args = args.pop(0) if draw(st.booleans()) else ""  # some servers put a fragment in the head
        start = {"index": i, "id": f"call_{i}x{len(c.name)}", "type": "function"}
        queues.append([{**start, "function": {"name": c.name, "arguments": first_args}}])
        queues[-1].extend({"index": i, "function": {"arguments": a}} for a in args)
    # The order the deltas go out: one call after the other, or (interleave) any order that
    # keeps each call's own deltas in order and starts the calls in index order (the SDK's
    # accumulator, and every real server, need a call's head before a later index's head).
    interleave = features.interleave and draw(st.booleans())
    order: list[dict[str, Any]] = []
    started = 0
    while any(queues):
        if interleave:
            ready = [i for i, q in enumerate(queues) if q and i <= started]
            i = draw(st.sampled_from(ready))
        else:
            i = next(i for i, q in enumerate(queues) if q)
        started = max(started, i + 1)
        order.append(queues[i].pop(0))
    while order:
        take = 1 if len(order) < 2 or draw(st.integers(0, 3)) else 2  # now and then two deltas in one chunk
        events.append(chunk({"tool_calls": order[:take]}))
        del order[:take]
    finish = "tool_calls" if s.calls else "stop"
    usage = {
        "prompt_tokens": s.usage[0],
        "completion_tokens": s.usage[1],
        "total_tokens": sum(s.usage),
        "completion_tokens_details": {"reasoning_tokens": min(s.usage[1], len(s.reasoning))},
    }
    if include_usage:
        events.append(chunk({}, finish))
        events.append(Event(None, dumps(draw, {**head, "choices": [], "usage": usage})))
    else:
        events.append(chunk({}, finish, usage=usage))
    events.append(Event(None, "[DONE]"))
    return events


def _anthropic_events(draw: st.DrawFn, s: Story) -> list[Event]:
    def ev(name: str, obj: dict[str, Any]) -> Event:
        return Event(name, dumps(draw, {"type": name, **obj}))

    message = {
        "id": "msg_01Wd1ff",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-x",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": s.usage[0], "output_tokens": 1},
    }
    events = [ev("message_start", {"message": message})]
    index = 0

    def block(start: dict[str, Any], deltas: Sequence[dict[str, Any]]) -> None:
        nonlocal index
        events.append(ev("content_block_start", {"index": index, "content_block": start}))
        events.extend(ev("content_block_delta", {"index": index, "delta": d}) for d in deltas)
        events.append(ev("content_block_stop", {"index": index}))
        index += 1

    for t in s.thoughts:
        if t.redacted is not None:
            block({"type": "redacted_thinking", "data": t.redacted}, ())
        else:
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(draw, t.text)]
            block(
                {"type": "thinking", "thinking": "", "signature": ""},
                [*deltas, {"type": "signature_delta", "signature": t.signature}],
            )
    if s.text or s.refusal is not None or (not s.calls and draw(st.booleans())):
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in pieces(draw, s.text, at_least=0) if p],
        )
    for i, c in enumerate(s.calls):
        args = pieces(draw, json.dumps(c.args, ensure_ascii=draw(st.booleans())))
        deltas = [
            {"type": "input_json_delta", "partial_json": p} for p in (["", *args] if draw(st.booleans()) else args)
        ]
        block({"type": "tool_use", "id": f"toolu_{i}x{len(c.name)}", "name": c.name, "input": {}}, deltas)
    delta: dict[str, Any] = {"stop_reason": "tool_use" if s.calls else "end_turn", "stop_sequence": None}
    if s.refusal is not None:
        delta = {
            "stop_reason": "refusal",
            "stop_sequence": None,
            "stop_details": {"type": "refusal", "category": "cyber", "explanation": s.refusal},
        }
    events.append(ev("message_delta", {"delta": delta, "usage": {"output_tokens": s.usage[1]}}))
    events.append(ev("message_stop", {}))
    return events


def _gemini_events(draw: st.DrawFn, s: Story) -> list[Event]:
    meta = {"modelVersion": "gemini-x", "responseId": "Wd1ffRespId"}
    thought = s.thoughts[0] if s.thoughts else None
    parts: list[dict[str, Any]] = []
    if thought is not None:
        parts.extend({"text": p, "thought": True} for p in pieces(draw, thought.text))
    answer: list[dict[str, Any]] = [{"text": p} for p in pieces(draw, s.text, at_least=0) if p]
    answer.extend({"functionCall": {"name": c.name, "args": c.args}} for c in s.calls)
    if thought is not None and thought.signature is not None and s.refusal is None:
        if not answer:
            answer.append({"text": ""})  # a bare signature part, as Gemini sends after thoughts
        carrier = next((p for p in answer if "functionCall" in p), answer[-1])
        carrier["thoughtSignature"] = thought.signature
    parts.extend(answer)
    usage = {
        "promptTokenCount": s.usage[0],
        "candidatesTokenCount": s.usage[1] - min(s.usage[1], len(s.reasoning)),
        "totalTokenCount": sum(s.usage),
    }
    if s.reasoning:
        usage["thoughtsTokenCount"] = min(s.usage[1], len(s.reasoning))
    chunks: list[dict[str, Any]] = []
    while parts:
        take = draw(st.integers(1, min(3, len(parts))))
        chunks.append({"candidates": [{"content": {"parts": parts[:take], "role": "model"}, "index": 0}]})
        del parts[:take]
    if s.refusal is not None:
        ratings = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]
        chunks.append({"candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": ratings}]})
    elif not chunks or draw(st.booleans()):
        chunks.append(
            {
                "candidates": [
                    {"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}
                ]
            }
        )
    else:
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    every = draw(st.booleans())  # usage on every chunk (growing), or on the last only
    for i, c in enumerate(chunks):
        if every or i == len(chunks) - 1:
            c["usageMetadata"] = usage
        c.update(meta)
    return [Event(None, dumps(draw, c)) for c in chunks]


_OPENAI_ERRORS = {
    "overloaded": ("service_unavailable_error", "server_is_overloaded", "The model is overloaded."),
    "rate_limit": ("tokens", "rate_limit_exceeded", "Rate limit reached for gpt-x on tokens per min (TPM)."),
    "server_error": ("server_error", "server_error", "The server had an error while processing your request."),
}
_ANTHROPIC_ERRORS = {"overloaded": "overloaded_error", "rate_limit": "rate_limit_error", "server_error": "api_error"}
_GEMINI_ERRORS = {
    "overloaded": (503, "UNAVAILABLE"),
    "rate_limit": (429, "RESOURCE_EXHAUSTED"),
    "server_error": (500, "INTERNAL"),
}


def error_event(draw: st.DrawFn, dialect: Dialect, cause: str) -> Event:
    """A mid-stream error with the codes the dialect documents for ``cause``."""
    if dialect is OA:
        type_, code, message = _OPENAI_ERRORS[cause]
        return Event(None, dumps(draw, {"error": {"message": message, "type": type_, "param": None, "code": code}}))
    if dialect is AN:
        error = {"type": "error", "error": {"type": _ANTHROPIC_ERRORS[cause], "message": "Overloaded or limited"}}
        return Event("error", dumps(draw, error))
    status, name = _GEMINI_ERRORS[cause]
    return Event(None, dumps(draw, {"error": {"code": status, "message": "Try again later.", "status": name}}))


def events_for(draw: st.DrawFn, s: Story, features: Features) -> list[Event]:
    if s.dialect is OA:
        events = _openai_events(draw, s, features)
    elif s.dialect is AN:
        events = _anthropic_events(draw, s)
    else:
        events = _gemini_events(draw, s)
    if s.error is not None:
        # the error comes after any event but the last (a stream that had ended has no error in it)
        cut = draw(st.integers(0, len(events) - 2)) if len(events) > 1 else 0
        events = [*events[:cut], error_event(draw, s.dialect, s.error)]
    return events


# -- the bytes on the wire -------------------------------------------------------------------------

_COMMENTS = [": keep-alive", ":", ": OPENROUTER PROCESSING", ":ping"]
_ANTHROPIC_PING = Event("ping", '{"type": "ping"}')


@dataclass(frozen=True, slots=True)
class Wire:
    """The bytes of one stream, as the writes that carry them. ``oracle``: what the dialect's
    SDK is given instead, where it cannot read some valid framing (see the module docstring);
    the same writes otherwise."""

    writes: tuple[bytes, ...]
    oracle: tuple[bytes, ...]

    @property
    def body(self) -> bytes:
        return b"".join(self.writes)

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        sizes = sorted({len(w) for w in self.writes})
        return f"Wire(body={self.body!r}, {len(self.writes)} writes of {sizes} bytes)"


@dataclass(slots=True)
class _Lines:
    """Lines with their terminators; a line ended by CR is never followed by an empty line
    ended by LF (that LF would join the CR into one CRLF and swallow the blank line)."""

    draw: st.DrawFn
    wild: bool
    end: str = "\n"  # the terminator when not wild
    out: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        end = self.draw(st.sampled_from(["\n", "\r\n", "\r"])) if self.wild else self.end
        if (
            self.out
            and self.out[-1].endswith("\r")
            and not self.out[-1].endswith("\r\n")
            and line == ""
            and end[0] == "\n"
        ):
            end = "\r\n"
        self.out.append(line + end)


def write_events(draw: st.DrawFn, dialect: Dialect, events: Sequence[Event], wild: bool) -> tuple[str, str]:
    """The stream's text with the framing drawn, and the same without what the SDK cannot
    read (the oracle's text; equal for OpenAI and Anthropic)."""
    full = _Lines(draw, wild, "\r\n" if dialect is GE else "\n")
    plain = _Lines(draw, False, "\r\n") if dialect is GE else full  # Gemini's own framing: CRLF
    id_seen = False

    def blank() -> None:
        full.add("")
        if plain is not full:
            plain.add("")

    for event in events:
        if wild and draw(st.integers(0, 4)) == 0:  # a keep-alive or a comment between events
            if dialect is AN and draw(st.booleans()):
                full.add("event: ping")
                full.add("data: " + _ANTHROPIC_PING.data)
                full.add("")
            elif not (dialect is OA and id_seen):
                full.add(draw(st.sampled_from(_COMMENTS)))
                full.add("")
        fields: list[str] = []
        if event.name is not None:
            fields.append(f"event: {event.name}" if not wild or draw(st.booleans()) else f"event:{event.name}")
        space = not wild or draw(st.booleans())
        fields.append(("data: " if space else "data:") + event.data)
        if wild and draw(st.integers(0, 5)) == 0:
            fields.insert(draw(st.integers(0, len(fields))), f"id: {draw(st.integers(0, 999))}")
            id_seen = True
        if wild and draw(st.integers(0, 7)) == 0:
            fields.insert(draw(st.integers(0, len(fields))), f"retry: {draw(st.integers(0, 5000))}")
        if wild and (dialect is OA and id_seen) and draw(st.integers(0, 4)) == 0:
            fields.insert(draw(st.integers(0, len(fields))), draw(st.sampled_from(_COMMENTS)))  # inside the block
        for f in fields:
            full.add(f)
        if plain is not full:
            plain.add("data: " + event.data)
        blank()
    return "".join(full.out), "".join(plain.out)


def cut_writes(body: bytes, sizes: Sequence[int]) -> tuple[bytes, ...]:
    """``body`` in writes of the drawn sizes, in turn (so a multi-byte character is split
    wherever a size ends inside it)."""
    out: list[bytes] = []
    i = 0
    k = 0
    while i < len(body):
        size = sizes[k % len(sizes)]
        out.append(body[i : i + size])
        i += size
        k += 1
    return tuple(out)


# -- one case --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    story: Story
    events: tuple[Event, ...]
    wire: Wire

    def __repr__(self) -> str:
        return f"Case(story={self.story!r},\n     events={list(self.events)!r},\n     wire={self.wire!r})"

    def uses(self) -> set[str]:
        """The generator features this case needs (see Features)."""
        out = {"reasoning"} if self.story.thoughts else set()
        out |= {"errors"} if self.story.error else set()
        out |= {"refusals"} if self.story.refusal is not None else set()
        indexes = [
            call["index"]
            for e in self.events
            if self.story.dialect is OA and e.data.startswith("{") and '"tool_calls"' in e.data
            for choice in json.loads(e.data).get("choices", ())
            for call in choice.get("delta", {}).get("tool_calls") or ()
        ]
        return out | ({"interleave"} if indexes != sorted(indexes) else set())


@st.composite
def cases(draw: st.DrawFn, dialect: Dialect, features: Features = Features()) -> Case:
    story = draw(stories(dialect, features))
    events = events_for(draw, story, features)
    full, plain = write_events(draw, dialect, events, features.framing)
    sizes = draw(st.lists(st.integers(1, 64), min_size=1, max_size=8))
    writes = cut_writes(full.encode(), sizes)
    oracle = cut_writes(plain.encode(), sizes)
    case = Case(story, tuple(events), Wire(writes, oracle))
    check_valid(case)
    return case


def check_valid(case: Case) -> None:
    """The wire decodes, by the event-stream rules, to exactly the case's events (pings and
    comments aside): the generator writes valid streams, and the oracle's bytes say the same."""
    for body in (case.wire.body, b"".join(case.wire.oracle)):
        decoded, _ = parse_sse(body)
        got = [Event(e.event, e.data) for e in decoded if e.event != "ping"]
        assert got == list(case.events), f"the generator wrote an invalid stream:\n{got}\n!=\n{list(case.events)}"


# -- the raw server --------------------------------------------------------------------------------


@dataclass(slots=True)
class Served:
    path: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole HTTP answer: status, headers (no framing headers: the server sends the body
    chunked) and the writes of its body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    writes: tuple[bytes, ...]


_SSE_HEADERS = (("content-type", "text/event-stream; charset=utf-8"), ("x-request-id", "req_raw"))

# A client may read writes that follow each other closely in ONE read (failover's own HTTP
# client hands its SSE decoder what one read brought), so a write that ends inside a UTF-8
# character or between the CR and LF of a line end is followed by a pause: the halves then
# arrive in separate reads (as far as loopback TCP lets a test decide that).
PAUSE = 0.002


def _splits(piece: bytes, following: bytes) -> bool:
    if not piece or not following:
        return False
    return following[0] & 0xC0 == 0x80 or (piece[-1:] == b"\r" and following[:1] == b"\n")


class RawServer:
    """An HTTP/1.1 server on loopback, in a thread of its own, that answers every POST with
    what is registered for the first segment of its path (``/<key>/...``): writes (then the
    answer is ``200 text/event-stream``) or a whole :class:`Answer`. The body goes out one
    HTTP chunk per write: exactly those bytes, nothing rendered; a write that splits a
    character or a CRLF is followed by a short pause (see :data:`PAUSE`)."""

    def __init__(self) -> None:
        self.streams: dict[str, tuple[bytes, ...] | Answer] = {}
        self.requests: list[Served] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="raw-sse-server", daemon=True)
        self._ready = threading.Event()
        self._server: asyncio.AbstractServer | None = None
        self._handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    def url(self, key: str) -> str:
        return f"http://127.0.0.1:{self.port}/{key}"

    def serve(self, **streams: tuple[bytes, ...] | Answer) -> None:
        self.streams = dict(streams)
        self.requests = []

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, sock=self._sock)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def __enter__(self) -> RawServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the raw server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for writer in self._handlers.values():  # kept-alive connections wait for their next request
                writer.close()
            if self._handlers:
                await asyncio.wait(list(self._handlers), timeout=2)
            if self._server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._server.wait_closed(), 2)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers[task] = writer
        task.add_done_callback(lambda t: self._handlers.pop(t, None))
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, reader)
                if request is None:
                    return
                target, body = request
                key = target.lstrip("/").split("/", 1)[0]
                self.requests.append(Served(target, body))
                answer = self.streams.get(key)
                if answer is None:
                    data = b'{"error": {"message": "nothing registered for ' + key.encode() + b'"}}'
                    answer = Answer(404, (("content-type", "application/json"),), (data,))
                elif not isinstance(answer, Answer):
                    answer = Answer(200, _SSE_HEADERS, answer)
                head = h11.Response(
                    status_code=answer.status, headers=[*answer.headers, ("transfer-encoding", "chunked")]
                )
                writer.write(conn.send(head))
                writes = answer.writes
                for i, piece in enumerate(writes):
                    writer.write(conn.send(h11.Data(data=piece)))
                    await writer.drain()
                    if i + 1 < len(writes) and _splits(piece, writes[i + 1]):
                        await asyncio.sleep(PAUSE)
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError):
            return
        finally:
            writer.close()

    @staticmethod
    async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[str, dict[str, Any]] | None:
        target = ""
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    return None
                continue
            if isinstance(event, h11.Request):
                target = event.target.decode()
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return target, json.loads(body) if body else {}
            elif isinstance(event, h11.ConnectionClosed):
                return None


# -- cases every run includes ----------------------------------------------------------------------


def _fixed(story: Story, events: list[Event]) -> Case:
    """A hand-written case, framed the awkward way: CRLF and LF in turn, a keep-alive comment
    after the first event, an ``id:`` on the second (Anthropic, Gemini: a ``retry:``), and
    writes of 7 bytes (which cut the multi-byte characters of the texts)."""
    lines: list[str] = []
    ends = ["\r\n", "\n"]
    for i, e in enumerate(events):
        fields = [*([f"event: {e.name}"] if e.name else []), f"data: {e.data}"]
        if i == 1:
            fields.insert(0, "id: 7" if story.dialect is OA else "retry: 3000")
        lines.extend(fields)
        lines.append("")
        if i == 0:
            lines.extend([": keep-alive", ""])
    full = "".join(line + ends[k % 2] for k, line in enumerate(lines))
    plain = "".join(f"data: {e.data}\r\n\r\n" for e in events) if story.dialect is GE else full
    case = Case(story, tuple(events), Wire(_sevens(full.encode()), _sevens(plain.encode())))
    check_valid(case)
    return case


def _sevens(body: bytes) -> tuple[bytes, ...]:
    return tuple(body[i : i + 7] for i in range(0, len(body), 7))


def _oa(delta: dict[str, Any], finish: str | None = None) -> Event:
    head = {"id": "chatcmpl-K", "object": "chat.completion.chunk", "created": 1767225600, "model": "gpt-x"}
    return Event(
        None,
        json.dumps({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}, ensure_ascii=False),
    )


def _oa_usage(story: Story) -> Event:
    usage = {"prompt_tokens": story.usage[0], "completion_tokens": story.usage[1], "total_tokens": sum(story.usage)}
    head = {"id": "chatcmpl-K", "object": "chat.completion.chunk", "created": 1767225600, "model": "gpt-x"}
    return Event(None, json.dumps({**head, "choices": [], "usage": usage}))


def _an(name: str, **obj: Any) -> Event:
    return Event(name, json.dumps({"type": name, **obj}, ensure_ascii=False))


def _an_start(story: Story) -> Event:
    message = {"id": "msg_K", "type": "message", "role": "assistant", "content": [], "model": "claude-x"}
    return _an(
        "message_start",
        message={**message, "stop_reason": None, "usage": {"input_tokens": story.usage[0], "output_tokens": 1}},
    )


def _ge(parts: list[dict[str, Any]], finish: str | None = None, usage: tuple[int, int] | None = None) -> Event:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-x", "responseId": "K"}
    if usage:
        chunk["usageMetadata"] = {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": sum(usage),
        }
    return Event(None, json.dumps(chunk, separators=(",", ": "), ensure_ascii=False))


_SIG = base64.b64encode(b"signature-of-the-thought").decode()


def known(name: str) -> Case:
    """The cases every run includes: the interleaving the issue measured, reasoning in each
    dialect's shape, a mid-stream rate limit in each."""
    if name == "openai-interleaved-two-calls":
        calls = (Call("get_weather", {"city": "Paris"}), Call("search_web", {"q": "x"}))
        story = Story(OA, calls=calls, usage=(12, 30))
        events = [
            _oa({"role": "assistant", "content": None}),
            _oa(
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
            _oa({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
            _oa(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "search_web", "arguments": ""},
                        }
                    ]
                }
            ),
            _oa({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            _oa({"tool_calls": [{"index": 1, "function": {"arguments": '{"q": "x"}'}}]}),
            _oa({}, "tool_calls"),
            _oa_usage(story),
            Event(None, "[DONE]"),
        ]
        return _fixed(story, events)
    if name == "openai-index-1-first":
        # As vLLM was measured sending parallel calls: index 1's head before index 0's, the
        # fragments interleaved (two of them in one chunk). The SDK files them by index.
        calls = (Call("get_weather", {"city": "Paris"}), Call("search_web", {"q": "x"}))
        story = Story(OA, calls=calls, usage=(12, 30))
        head_a = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        head_b = {"index": 1, "id": "call_b", "type": "function", "function": {"name": "search_web", "arguments": ""}}
        events = [
            _oa({"role": "assistant", "content": None}),
            _oa({"tool_calls": [head_b]}),
            _oa({"tool_calls": [{"index": 1, "function": {"arguments": '{"q": '}}]}),
            _oa({"tool_calls": [head_a]}),
            _oa(
                {
                    "tool_calls": [
                        {"index": 1, "function": {"arguments": '"x"}'}},
                        {"index": 0, "function": {"arguments": '{"city": '}},
                    ]
                }
            ),
            _oa({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            _oa({}, "tool_calls"),
            _oa_usage(story),
            Event(None, "[DONE]"),
        ]
        return _fixed(story, events)
    if name == "openai-reasoning":
        story = Story(OA, (Thought("Paris is in France; 天气 first. "),), "Sunny, 21 °C 😀", usage=(12, 30))
        events = [
            _oa({"role": "assistant", "content": ""}),
            _oa({"content": None, "reasoning_content": "Paris is in France; "}),
            _oa({"content": None, "reasoning_content": "天气 first. "}),
            _oa({"content": "Sunny, 21 °C"}),
            _oa({"content": " 😀"}),
            _oa({}, "stop"),
            _oa_usage(story),
            Event(None, "[DONE]"),
        ]
        return _fixed(story, events)
    if name == "openai-error-rate_limit":
        story = Story(OA, text="It is", error="rate_limit")
        events = [
            _oa({"role": "assistant", "content": ""}),
            _oa({"content": "It is"}),
            Event(
                None,
                json.dumps(
                    {
                        "error": {
                            "message": "Rate limit reached",
                            "type": "tokens",
                            "param": None,
                            "code": "rate_limit_exceeded",
                        }
                    }
                ),
            ),
        ]
        return _fixed(story, events)
    if name == "anthropic-thinking-redacted-tools":
        calls = (Call("get_weather", {"city": "Zürich"}), Call("get_time", {"tz": "CET"}))
        thoughts = (Thought("Two tools. ", _SIG), Thought("", None, base64.b64encode(b"redacted").decode()))
        story = Story(AN, thoughts, "Let me check 🌍", calls, usage=(40, 90))
        events = [
            _an_start(story),
            _an("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
            _an("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Two tools. "}),
            _an("content_block_delta", index=0, delta={"type": "signature_delta", "signature": _SIG}),
            _an("content_block_stop", index=0),
            _an(
                "content_block_start",
                index=1,
                content_block={"type": "redacted_thinking", "data": thoughts[1].redacted},
            ),
            _an("content_block_stop", index=1),
            _an("content_block_start", index=2, content_block={"type": "text", "text": ""}),
            _an("content_block_delta", index=2, delta={"type": "text_delta", "text": "Let me check 🌍"}),
            _an("content_block_stop", index=2),
        ]
        for i, c in enumerate(calls, start=3):
            events.append(
                _an(
                    "content_block_start",
                    index=i,
                    content_block={"type": "tool_use", "id": f"toolu_{i}", "name": c.name, "input": {}},
                )
            )
            events.append(
                _an(
                    "content_block_delta",
                    index=i,
                    delta={"type": "input_json_delta", "partial_json": json.dumps(c.args, ensure_ascii=False)},
                )
            )
            events.append(_an("content_block_stop", index=i))
        events.append(
            _an("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None}, usage={"output_tokens": 90})
        )
        events.append(_an("message_stop"))
        return _fixed(story, events)
    if name == "anthropic-error-rate_limit":
        story = Story(AN, text="It is", error="rate_limit")
        events = [
            _an_start(story),
            _an("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            _an("content_block_delta", index=0, delta={"type": "text_delta", "text": "It is"}),
            _an("error", error={"type": "rate_limit_error", "message": "Rate limited"}),
        ]
        return _fixed(story, events)
    if name == "gemini-thought-signature-calls":
        calls = (Call("get_weather", {"city": "Paris"}), Call("get_time", {"tz": "CET"}))
        story = Story(GE, (Thought("Weather and time. ", _SIG),), "Checking ✓", calls, usage=(20, 40))
        events = [
            _ge([{"text": "Weather and time. ", "thought": True}]),
            _ge([{"text": "Checking ✓"}]),
            _ge(
                [
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": _SIG},
                    {"functionCall": {"name": "get_time", "args": {"tz": "CET"}}},
                ],
                "STOP",
                story.usage,
            ),
        ]
        return _fixed(story, events)
    if name == "gemini-error-rate_limit":
        story = Story(GE, text="It is", error="rate_limit")
        error = {
            "error": {
                "code": 429,
                "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED",
            }
        }
        return _fixed(story, [_ge([{"text": "It is"}]), Event(None, json.dumps(error))])
    raise KeyError(name)
