"""Helpers the per-dialect stream tests share, and what every dialect's stream parser must do.

Helpers: load a streaming sample as (headers, body bytes), decode it (whole or cut at given
byte offsets) and run it through a dialect's StreamParser. Tests: the three dialects satisfy
the protocol, and each round-trips the streams the fault-injection kit's fake providers send.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import strategies as st

from failover.model import (
    Dialect,
    Failure,
    FailureKind,
    Message,
    Request,
    Response,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from failover.providers import DialectAdapter, dialect_for
from failover.providers._base import SSEComment, SSEEvent, StreamFailed
from failover.providers._sse import SSEDecoder
from failover.testing import FakeNetwork, FakeProvider, Reply

from ._wire import load_http, target

E = TypeVar("E")
REQUEST = Request(messages=(Message.user("hi"),))
WIRE = Path(__file__).resolve().parents[3] / "shared" / "wire"  # as tests/conftest.py finds it


def sample(wire: Path, name: str) -> tuple[dict[str, str], bytes]:
    """A streaming sample's headers and body bytes.

    ``.http``: the recorded headers and body; ``.jsonl`` (framing stripped by the recorder):
    each line re-framed as ``data: <line>\\n\\n``; ``.sse``: the raw body.
    """
    path = wire / name
    if path.suffix == ".http":
        response = load_http(path)
        return dict(response.headers), response.body
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        return {}, b"".join(b"data: " + line + b"\n\n" for line in raw.splitlines() if line.strip())
    return {}, raw


def chunks(body: bytes, cuts: Sequence[int] = ()) -> list[bytes]:
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    return [body[a:b] for a, b in pairwise(bounds)]


@dataclass
class Run:
    events: list[StreamEvent] = field(default_factory=list)
    comments: int = 0
    result: Response | Failure | None = None  # finish(), unless the stream raised
    raised: Failure | None = None  # StreamFailed's failure

    # ---- views
    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def done(self) -> list[ToolCallDone]:
        return [e for e in self.events if isinstance(e, ToolCallDone)]

    @property
    def stops(self) -> list[Stop]:
        return [e for e in self.events if isinstance(e, Stop)]

    @property
    def usages(self) -> list[UsageUpdate]:
        return [e for e in self.events if isinstance(e, UsageUpdate)]

    def response(self) -> Response:
        assert isinstance(self.result, Response), self.result
        return self.result

    def failure(self) -> Failure:
        assert isinstance(self.result, Failure), self.result
        return self.result


def run(
    dialect: Dialect,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    cuts: Sequence[int] = (),
) -> Run:
    """Decode ``body`` (fed in pieces cut at ``cuts``) and parse it; stop at a StreamFailed."""
    parser = dialect_for(dialect).stream_parser(target(dialect), REQUEST, headers or {})
    decoder = SSEDecoder()
    out = Run()
    pieces = [decoder.feed(c) for c in chunks(body, cuts)]
    pieces.append(decoder.flush())
    for items in pieces:
        for item in items:
            if isinstance(item, SSEComment):
                out.comments += 1
                continue
            try:
                out.events.extend(parser.feed(item))
            except StreamFailed as exc:
                out.raised = exc.failure
                return out
    out.result = parser.finish()
    return out


def sse(*payloads: object, event: str | None = None) -> bytes:
    """``data:`` events for JSON payloads (strings are sent as they are), LF framing."""
    head = f"event: {event}\n" if event else ""
    return b"".join(f"{head}data: {p if isinstance(p, str) else json.dumps(p)}\n\n".encode() for p in payloads)


def check_tool_invariants(r: Run) -> None:
    """Each call: one start, then its deltas, then at most one done whose arguments are the deltas joined."""
    starts = {e.index: e for e in r.events if isinstance(e, ToolCallStart)}
    for e in r.events:
        if isinstance(e, ToolCallDelta | ToolCallDone):
            assert e.index in starts, f"{e} before its start"
    for done in r.done:
        joined = "".join(e.arguments for e in r.events if isinstance(e, ToolCallDelta) and e.index == done.index)
        assert done.call.arguments == joined
        assert (done.call.id, done.call.name) == (starts[done.index].id, starts[done.index].name)
    assert len(r.done) == len({d.index for d in r.done})


def cut_points(body: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, len(body)), max_size=40)


# ----------------------------------------------------------------------- every dialect


ALL = [Dialect.OPENAI, Dialect.OPENAI_RESPONSES, Dialect.ANTHROPIC, Dialect.GEMINI]


@pytest.mark.parametrize("dialect", ALL)
def test_every_dialect_is_an_adapter_with_a_stream_parser(dialect: Dialect) -> None:
    adapter: DialectAdapter = dialect_for(dialect)
    parser = adapter.stream_parser(target(dialect), REQUEST, {})
    assert callable(parser.feed) and callable(parser.finish)


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("data", ["{not json", '{"a": 1', "[1, 2]", '"text"', ""])
def test_an_event_that_is_not_a_json_object_raises_provider_server_error(dialect: Dialect, data: str) -> None:
    parser = dialect_for(dialect).stream_parser(target(dialect), REQUEST, {"x-request-id": "req_9"})
    with pytest.raises(StreamFailed) as info:
        parser.feed(SSEEvent(data=data))
    f = info.value.failure
    assert f.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "malformed stream event" in f.message
    assert f.status == 200


@pytest.mark.parametrize("dialect", ALL)
def test_an_empty_body_is_an_incomplete_stream(dialect: Dialect) -> None:
    r = run(dialect, b"")
    f = r.failure()
    assert f.kind is FailureKind.TRANSPORT_TRANSIENT
    assert "stream ended before completion" in f.message
    assert f.response is not None
    assert (f.response.text, f.response.tool_calls, f.response.usage) == ("", (), Usage())


def test_malformed_event_message_redacts_the_key() -> None:
    parser = dialect_for(Dialect.OPENAI).stream_parser(target(Dialect.OPENAI), REQUEST, {})
    with pytest.raises(StreamFailed) as info:
        parser.feed(SSEEvent(data="oops sk-test-KEY-123"))
    assert "sk-test-KEY-123" not in info.value.failure.message
    assert "sk-test-KEY-123" not in (info.value.failure.detail or "")


# ----------------------------------------------------------------------- the fake providers' streams


async def fake_stream(dialect: Dialect, reply: Reply) -> tuple[dict[str, str], bytes]:
    provider = FakeProvider("p", dialect, [reply])
    t = provider.target()
    request = dialect_for(dialect).build(t, REQUEST, stream=True)
    response = await FakeNetwork(provider).send(request, connect_timeout=5.0, total_timeout=60.0)
    assert response.status == 200, response.body
    return dict(response.headers), response.body


@pytest.mark.parametrize("dialect", ALL)
async def test_fake_provider_text_stream_round_trips(dialect: Dialect) -> None:
    headers, body = await fake_stream(dialect, Reply.ok("one two three four", usage=(12, 4)))
    r = run(dialect, body, headers)
    response = r.response()
    assert response.text == r.text == "one two three four"
    assert len(r.of(TextDelta)) >= 2
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 4)
    assert r.usages[-1].usage == response.usage
    assert r.stops and r.stops[-1].reason == response.stop_reason


@pytest.mark.parametrize("dialect", ALL)
async def test_fake_provider_tool_call_stream_round_trips(dialect: Dialect) -> None:
    reply = Reply.ok("Checking.", tool_calls=[("get_weather", {"city": "Paris", "days": [1, 2]}), ("noop", {})])
    headers, body = await fake_stream(dialect, reply)
    r = run(dialect, body, headers)
    response = r.response()
    check_tool_invariants(r)
    assert [(c.name, c.parsed) for c in response.tool_calls] == [
        ("get_weather", {"city": "Paris", "days": [1, 2]}),
        ("noop", {}),
    ]
    assert [d.call for d in r.done] == list(response.tool_calls)
    assert all(c.id for c in response.tool_calls)
    assert response.stop_reason.value == "tool_use"


@pytest.mark.parametrize("dialect", ALL)
async def test_fake_provider_truncated_stream_is_truncated(dialect: Dialect) -> None:
    headers, body = await fake_stream(dialect, Reply.truncate("cut sh"))
    r = run(dialect, body, headers)
    f = r.failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.response is not None and f.response.text == r.text
