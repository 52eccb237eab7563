"""Contract with failover's own dialects: each fake reply is classified as the kind it imitates.

The kit imitates real providers, and the providers/ parsers were written against real
captures; if they disagree about a reply, one of them is wrong about the wire.
"""

from __future__ import annotations

import pytest

from failover.model import Dialect, Failure, FailureKind, Request, Response, ResponseFormat, Tool
from failover.providers import dialect_for
from failover.testing import FakeNetwork, FakeProvider
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


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize(("reply", "kind"), ERRORS)
async def test_each_failure_reply_is_classified_as_its_kind(dialect: Dialect, reply: str, kind: FailureKind) -> None:
    request = Request.simple("What is the weather in Paris?", max_tokens=64)
    if "tool" in reply:
        request = Request(messages=request.messages, tools=(Tool(name="lookup"),), max_tokens=64)
    outcome = await _parse(dialect, reply, request)
    assert isinstance(outcome, Failure), outcome
    assert outcome.kind is kind, outcome


@pytest.mark.parametrize("dialect", [Dialect.OPENAI, Dialect.ANTHROPIC])
async def test_retry_after_reaches_the_failure(dialect: Dialect) -> None:
    outcome = await _parse(dialect, "rate_limit(retry_after=2, retry_after_ms=1500)", Request.simple("hi"))
    assert isinstance(outcome, Failure) and outcome.retry_after == pytest.approx(1.5)


async def test_gemini_retry_info_reaches_the_failure() -> None:
    outcome = await _parse(Dialect.GEMINI, "rate_limit(retry_after=48)", Request.simple("hi"))
    assert isinstance(outcome, Failure) and outcome.retry_after == pytest.approx(48)


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_ok_parses_to_a_response(dialect: Dialect) -> None:
    outcome = await _parse(dialect, "ok('Sunny, 21 C.')", Request.simple("What is the weather in Paris?"))
    assert isinstance(outcome, Response), outcome
    assert outcome.text == "Sunny, 21 C."
    assert outcome.usage.input_tokens == 8 and outcome.usage.output_tokens == 3


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_default_ok_for_structured_output_parses(dialect: Dialect) -> None:
    request = Request(
        messages=Request.simple("weather?").messages, response_format=ResponseFormat.json_schema(SCHEMA, name="w")
    )
    outcome = await _parse(dialect, "ok", request)
    assert isinstance(outcome, Response), outcome
    assert outcome.parsed == {"city": "ok from p", "temperature": 0} or outcome.text == (
        '{"city":"ok from p","temperature":0}'
    )


@pytest.mark.parametrize("dialect", list(Dialect))
async def test_reset_is_a_read_transport_error(dialect: Dialect) -> None:
    with pytest.raises(TransportError) as info:
        await _parse(dialect, "reset", Request.simple("hi"))
    assert info.value.phase == "read"
