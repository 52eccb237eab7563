"""Contract with failover's own dialects: each fake reply is classified as the kind it imitates.

The kit imitates real providers, and the providers/ parsers were written against real
captures; if they disagree about a reply, one of them is wrong about the wire.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from failover.model import (
    Dialect,
    Failure,
    FailureKind,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    ResponseFormat,
    StreamEvent,
    Tool,
    ToolCallDone,
)
from failover.providers import dialect_for
from failover.providers._base import SSEEvent, StreamFailed
from failover.providers._sse import stream_decoder
from failover.testing import FakeNetwork, FakeProvider, Reply
from failover.testing._dialects import SPOKEN
from failover.transport._types import TransportError

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
    "required": ["city", "temperature"],
    "additionalProperties": False,
}

ERRORS: list[tuple[str, FailureKind]] = [
    ("rate_limit(retry_after=2)", FailureKind.RATE_LIMITED),
    ("quota", FailureKind.QUOTA_EXHAUSTED),
    ("overloaded", FailureKind.PROVIDER_OVERLOADED),
    ("server_error", FailureKind.PROVIDER_SERVER_ERROR),
    ("unauthorized", FailureKind.AUTHENTICATION_OR_PERMISSION),
    ("not_found", FailureKind.MODEL_NOT_FOUND),
    ("context_overflow", FailureKind.CONTEXT_OVERFLOW),
    ("invalid", FailureKind.INVALID_REQUEST),
    ("truncate", FailureKind.TRUNCATED),
    ("refuse", FailureKind.CONTENT_FILTERED),
    ("content_filter", FailureKind.CONTENT_FILTERED),
    ("malformed_tool_args('lookup')", FailureKind.TOOL_CALL_MALFORMED),
]


async def _parse(dialect: Dialect, reply: str, request: Request) -> Response | Failure:
    p = FakeProvider("p", dialect, [reply])
    target = p.target()
    adapter = dialect_for(dialect)
    http = adapter.build(target, request)
    resp = await FakeNetwork(p).send(http, connect_timeout=1, total_timeout=5)
    assert p.calls[0].scripted, f"the fake rejected the dialect's request: {resp.body!r}"
    return adapter.parse(target, resp)


@pytest.mark.parametrize("dialect", sorted(SPOKEN))
@pytest.mark.parametrize(("reply", "kind"), ERRORS)
async def test_each_failure_reply_is_classified_as_its_kind(dialect: Dialect, reply: str, kind: FailureKind) -> None:
    request = Request.simple("What is the weather in Paris?", max_tokens=64)
    if "tool" in reply:
        request = Request(messages=request.messages, tools=(Tool(name="lookup"),), max_tokens=64)
    outcome = await _parse(dialect, reply, request)
    assert isinstance(outcome, Failure), outcome
    assert outcome.kind is kind, outcome


@pytest.mark.parametrize("dialect", [Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.BEDROCK])
async def test_retry_after_reaches_the_failure(dialect: Dialect) -> None:
    outcome = await _parse(dialect, "rate_limit(retry_after=2, retry_after_ms=1500)", Request.simple("hi"))
    assert isinstance(outcome, Failure) and outcome.retry_after == pytest.approx(1.5)


async def test_gemini_retry_info_reaches_the_failure() -> None:
    outcome = await _parse(Dialect.GEMINI, "rate_limit(retry_after=48)", Request.simple("hi"))
    assert isinstance(outcome, Failure) and outcome.retry_after == pytest.approx(48)


@pytest.mark.parametrize("dialect", sorted(SPOKEN))
async def test_ok_parses_to_a_response(dialect: Dialect) -> None:
    outcome = await _parse(dialect, "ok('Sunny, 21 C.')", Request.simple("What is the weather in Paris?"))
    assert isinstance(outcome, Response), outcome
    assert outcome.text == "Sunny, 21 C."
    assert outcome.usage.input_tokens == 8 and outcome.usage.output_tokens == 3


@pytest.mark.parametrize("dialect", sorted(SPOKEN))
async def test_default_ok_for_structured_output_parses(dialect: Dialect) -> None:
    request = Request(
        messages=Request.simple("weather?").messages, response_format=ResponseFormat.json_schema(SCHEMA, name="w")
    )
    outcome = await _parse(dialect, "ok", request)
    assert isinstance(outcome, Response), outcome
    assert outcome.parsed == {"city": "ok from p", "temperature": 0} or outcome.text == (
        '{"city":"ok from p","temperature":0}'
    )


@pytest.mark.parametrize("dialect", sorted(SPOKEN))
async def test_reset_is_a_read_transport_error(dialect: Dialect) -> None:
    with pytest.raises(TransportError) as info:
        await _parse(dialect, "reset", Request.simple("hi"))
    assert info.value.phase == "read"


# -- streams: what the dialects' stream parsers make of the kit's streamed replies -----------------


async def _stream(dialect: Dialect, reply: Reply, request: Request) -> tuple[list[StreamEvent], Response | Failure]:
    """The events the dialect's stream parser emits for the streamed ``reply``, and its
    outcome: the Response or Failure of ``finish``, or the Failure of a mid-stream error."""
    p = FakeProvider("p", dialect, [reply])
    target = p.target()
    adapter = dialect_for(dialect)
    http = adapter.build(target, request, stream=True)
    resp = await FakeNetwork(p).send(http, connect_timeout=1, total_timeout=5)
    assert p.calls[0].scripted and resp.status == 200, resp.body
    parser = adapter.stream_parser(target, request, resp.headers)
    decoder = stream_decoder(adapter)  # SSE, or Bedrock's event-stream framing
    events: list[StreamEvent] = []
    try:
        for item in [*decoder.feed(resp.body), *decoder.flush()]:
            if isinstance(item, SSEEvent):
                events.extend(parser.feed(item))
    except StreamFailed as exc:
        return events, exc.failure
    return events, parser.finish()


CAUSE_KINDS = {
    "overloaded": FailureKind.PROVIDER_OVERLOADED,
    "rate_limit": FailureKind.RATE_LIMITED,
    "server_error": FailureKind.PROVIDER_SERVER_ERROR,
}


@pytest.mark.parametrize("cause", list(CAUSE_KINDS))
@pytest.mark.parametrize("dialect", sorted(SPOKEN))
async def test_a_mid_stream_error_is_classified_by_its_cause(dialect: Dialect, cause: str) -> None:
    reply = Reply.error_event_after(3, cause=cause, text="one two three four five")
    _, outcome = await _stream(dialect, reply, Request.simple("hi"))
    assert isinstance(outcome, Failure), outcome
    assert outcome.kind is CAUSE_KINDS[cause], outcome


TOOLS = (Tool(name="get_weather"), Tool(name="search"), Tool(name="get_time"))
CALLS = [("get_weather", {"city": "Paris"}), ("search", {"q": "météo à Paris"}), ("get_time", {"tz": "CET"})]


@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("dialect", sorted(SPOKEN))
async def test_parallel_tool_calls_are_read_whole_and_in_order(dialect: Dialect, interleave: bool) -> None:
    request = Request(messages=Request.simple("hi").messages, tools=TOOLS)
    events, outcome = await _stream(dialect, Reply.ok(tool_calls=CALLS, interleave=interleave), request)
    assert isinstance(outcome, Response), outcome
    assert [(c.name, c.parsed) for c in outcome.tool_calls] == CALLS
    done = [e.call for e in events if isinstance(e, ToolCallDone)]
    assert [(c.name, c.parsed) for c in done] == CALLS  # the events say what the response says
    assert sorted(e.index for e in events if isinstance(e, ToolCallDone)) == [0, 1, 2]


THOUGHT = "The user asks about Paris; the weather tool answers that."


@pytest.mark.parametrize("dialect", sorted(SPOKEN))
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_reasoning_is_read_with_its_signature(dialect: Dialect, stream: bool) -> None:
    reply = Reply.ok("Sunny.", reasoning=THOUGHT, redacted_thinking=True, tool_calls=CALLS[:1])
    request = Request(messages=Request.simple("hi").messages, tools=TOOLS)
    if dialect is Dialect.OPENAI_RESPONSES:  # the encrypted reasoning comes back only to a request that reasons
        request = replace(request, reasoning_effort="low")
    if stream:
        events, outcome = await _stream(dialect, reply, request)
    else:
        outcome = await _parse(dialect, reply.to_string(), request)
    assert isinstance(outcome, Response), outcome
    assert outcome.reasoning_text == THOUGHT
    assert all(b.source == dialect_for(dialect).reasoning_source for b in outcome.reasoning)
    signatures = [b.signature for b in outcome.reasoning if b.signature]
    redacted = [b.redacted for b in outcome.reasoning if b.redacted is not None]
    if dialect is Dialect.OPENAI:
        assert (signatures, redacted) == ([], [])  # reasoning_content has neither
    elif dialect is Dialect.OPENAI_RESPONSES:
        assert len(signatures) == 1 and redacted == []  # the item's encrypted_content
    elif dialect in (Dialect.ANTHROPIC, Dialect.BEDROCK):  # Bedrock carries Claude's blocks as they are
        assert len(signatures) == 1 and len(redacted) == 1
    else:
        assert len(signatures) == 1 and redacted == []  # the thoughtSignature on the function call
    if stream:
        assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == THOUGHT
        assert tuple(e.block for e in events if isinstance(e, ReasoningDone)) == outcome.reasoning
