"""Every failure kind, injected by the fault kit over real HTTP on loopback, per dialect.

Each case checks what the caller sees, how many requests reached each provider, how long
it took on the (virtual) loop clock, and what the RouteRecord says.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from failover import (
    Capability,
    Envelope,
    FailureKind,
    Message,
    Phase,
    Request,
    ResponseFormat,
    Route,
    Router,
    Timeouts,
    Tool,
    Unavailable,
    Workflow,
)
from failover.policy import Backoff, Unlimited
from failover.testing import FakeProvider, FakeServer, Outcome, Reply, Script
from failover.transport import AiohttpTransport, Http1Transport, HttpxTransport, Transport

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
WEATHER = Tool(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
DIALECTS = ["openai", "openai-responses", "anthropic", "gemini", "bedrock"]
CAPS = frozenset({Capability.CHAT, Capability.TOOLS, Capability.STRUCTURED_OUTPUT})


@dataclass(frozen=True)
class Case:
    reply: Reply
    kind: str  # the attempt outcome label in the RouteRecord
    a_calls: int  # requests A receives (2 attempts allowed on A)
    b_calls: int  # requests the fallback B receives
    caller: str  # "ok" or the Unavailable reason
    phase_used: Phase | None = None
    request: str = "chat"  # chat | json | tools


CASES = {
    "rate_limited": Case(Reply.rate_limit(retry_after=0.5, latency=0.1), "rate_limited", 2, 1, "ok", Phase.FALLBACK),
    "provider_overloaded": Case(Reply.overloaded(latency=0.1), "provider_overloaded", 2, 1, "ok", Phase.FALLBACK),
    "provider_server_error": Case(Reply.server_error(latency=0.1), "provider_server_error", 2, 1, "ok", Phase.FALLBACK),
    "transport_transient": Case(Reply.reset(latency=0.1), "transport_transient", 2, 1, "ok", Phase.FALLBACK),
    # a target that just hung is not replayed while a fallback is eligible: B at once
    "timeout": Case(Reply.hang(), "timeout:total", 1, 1, "ok", Phase.FALLBACK),
    "quota_exhausted": Case(Reply.quota(latency=0.1), "quota_exhausted", 1, 1, "ok", Phase.FALLBACK),
    "authentication_or_permission": Case(
        Reply.unauthorized(latency=0.1), "authentication_or_permission", 1, 1, "ok", Phase.FALLBACK
    ),
    "model_not_found": Case(Reply.not_found(latency=0.1), "model_not_found", 1, 1, "ok", Phase.FALLBACK),
    "context_overflow": Case(Reply.context_overflow(latency=0.1), "context_overflow", 1, 1, "ok", Phase.FALLBACK),
    "invalid_request": Case(Reply.invalid(latency=0.1), "invalid_request", 1, 0, "invalid_request"),
    "content_filtered(refusal)": Case(Reply.refuse(latency=0.1), "content_filtered", 1, 0, "content_filtered"),
    "content_filtered(filter)": Case(Reply.content_filter(latency=0.1), "content_filtered", 1, 0, "content_filtered"),
    "truncated": Case(Reply.truncate("Once upon", latency=0.1), "truncated", 2, 0, "ok", Phase.REPAIR),
    "schema_invalid": Case(
        Reply.schema_invalid({"wrong": 1}, latency=0.1), "schema_invalid", 2, 0, "ok", Phase.REPAIR, "json"
    ),
    "tool_call_malformed": Case(
        Reply.malformed_tool_args("get_weather", latency=0.1), "tool_call_malformed", 2, 0, "ok", Phase.REPAIR, "tools"
    ),
}


def request_for(kind: str) -> Request:
    msgs = (Message.user("Weather in Paris, as JSON?"),)
    if kind == "json":
        return Request(messages=msgs, response_format=ResponseFormat.json_schema(SCHEMA), max_tokens=100)
    if kind == "tools":
        return Request(messages=msgs, tools=(WEATHER,), max_tokens=100)
    return Request(messages=msgs, max_tokens=100)


def good_reply(kind: str, text: str) -> Reply:
    if kind == "json":
        return Reply.ok(json={"answer": text}, latency=0.2)
    if kind == "tools":
        return Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})], latency=0.2)
    return Reply.ok(text, latency=0.2)


@pytest.fixture(params=[HttpxTransport, AiohttpTransport, Http1Transport], ids=["httpx", "aiohttp", "http1"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    t: Transport = request.param()
    yield t
    await t.aclose()


# Bedrock targets sign with botocore's chain: fixed test credentials from the environment,
# which the fake checks (key id and the recomputed signature).
AWS_KEY_ID, AWS_SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


@pytest.fixture(autouse=True)
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
async def test_failure_kind_over_loopback(dialect: str, name: str, transport: Transport) -> None:
    case = CASES[name]
    signed = {"api_key": AWS_KEY_ID, "secret_key": AWS_SECRET} if dialect == "bedrock" else {}
    a = FakeProvider("a", dialect, Script.of(case.reply, default=good_reply(case.request, "repaired")), **signed)
    if case.phase_used is not Phase.REPAIR:
        a.load(Script.always(case.reply))
    b = FakeProvider(
        "b", "anthropic" if dialect != "anthropic" else "openai", Script.always(good_reply(case.request, "b"))
    )
    async with FakeServer(a, b) as srv:
        ta = srv.target_for(
            a, timeouts=Timeouts(connect=1.0, total=1.0), max_attempts=2, tokenizer="estimate", capabilities=CAPS
        )
        tb = srv.target_for(
            b,
            timeouts=Timeouts(connect=1.0, total=1.0),
            max_attempts=1,
            tokenizer="estimate",
            # large enough for what a's provider reports on an overflow (a fake Gemini's 1,048,577
            # tokens > 1,048,576): a smaller declared window is rightly not tried after it
            context_window=2 * 10**6,
            capabilities=CAPS,
        )
        router = Router(
            [Route(name="r", primary=(ta,), fallbacks=(tb,))],
            transport=transport,
            retry_budget=Unlimited(),
            backoff=Backoff(base=0.2, cap=0.2),
            rng=random.Random(3),
        )
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        if case.caller == "ok":
            resp = await router.complete("r", request_for(case.request), Envelope(budget=10.0))
            rec = resp.record
            assert rec is not None
            assert rec.target_used == ("a" if case.phase_used is Phase.REPAIR else "b")
            assert rec.attempts[-1].phase is case.phase_used
            assert rec.recovered
            if case.request == "json":
                assert resp.parsed == {"answer": "repaired"}
            if case.request == "tools":
                assert resp.tool_calls[0].parsed == {"city": "Paris"}
        else:
            with pytest.raises(Unavailable) as ei:
                await router.complete("r", request_for(case.request), Envelope(budget=10.0))
            assert ei.value.reason == FailureKind(case.caller)
            rec = ei.value.record
            assert rec.workflow is Workflow.STOP
        elapsed = loop.time() - t0
        assert (len(a.calls), len(b.calls)) == (case.a_calls, case.b_calls)
        assert rec.attempts[0].outcome == case.kind
        assert all(x.outcome == case.kind for x in rec.attempts if x.target == "a" and x.phase is Phase.PRIMARY)
        # the loop clock accounts for every attempt and every wait, and nothing else
        spent = sum(x.duration for x in rec.attempts) + sum(w.end - w.start for w in rec.waits)
        assert elapsed == pytest.approx(spent, abs=0.01)
        assert rec.elapsed_ms == pytest.approx(elapsed * 1000, abs=1.0)
        if case.kind == "timeout:total":
            assert [c.outcome for c in a.calls] == [Outcome.CLIENT_DISCONNECTED]
            assert rec.attempts[0].duration == pytest.approx(1.0, abs=0.01)
        if case.kind == "rate_limited":
            assert [w.reason for w in rec.waits] == ["retry_after"]
            assert rec.waits[0].end - rec.waits[0].start == pytest.approx(0.5, abs=0.01)
        await router.aclose()


async def test_when_the_deadline_fires_mid_request_the_server_sees_the_connection_close(
    transport: Transport,
) -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.hang()))
    async with FakeServer(a) as srv:
        ta = srv.target_for(a, timeouts=Timeouts(connect=5.0, total=30.0), tokenizer="estimate")
        router = Router([Route(name="r", primary=(ta,))], transport=transport, retry_budget=Unlimited())
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(Unavailable) as ei:
            await router.complete("r", Request.simple("hi"), Envelope(budget=2.5))
        assert ei.value.reason is FailureKind.DEADLINE_EXHAUSTED
        assert loop.time() - t0 == pytest.approx(2.5, abs=0.01)
        for _ in range(100):  # let the server's read of the closed socket run
            if a.calls[0].outcome is not Outcome.PENDING:
                break
            await asyncio.sleep(0)
        (call,) = a.calls
        assert call.outcome is Outcome.CLIENT_DISCONNECTED
        assert call.disconnected_at is not None
        assert call.disconnected_at - t0 == pytest.approx(2.5, abs=0.01)
        await router.aclose()
