"""Every sample of the wire corpus, served byte for byte over loopback, read by the Router.

tests/providers/ check that each dialect PARSES every sample of its provider; here the same
bytes (status, the recorded headers, the body in small writes) come from a real HTTP server
and go through ``Router.complete`` and ``Router.stream`` (a route with one target), which
must end with the sample's kind: the Completed answer with its stop reason, agreeing with the
dialect's own parse of the sample (text, tool calls), or the failure kind the sample shows
(``Unavailable.reason``, or ``PartialOutput.failure.kind`` once output had been streamed).
A JSON body, also a 200 one, is read through both calls: a server may answer a stream request
with a plain body. A sample added to the corpus fails here until the table below says what
it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from failover import Capability, Route, Router, Secret, Target, Timeouts, Unavailable
from failover.model import Completed, Dialect, FailureKind, Message, PartialOutput, Request, Response, StopReason, Tool
from failover.policy import NoBreakers, Unlimited
from failover.providers import dialect_for
from failover.transport._types import HttpResponse
from tests.conftest import WIRE
from tests.providers.test_stream_common import run, sample

from ._wire_streams import Answer, RawServer

pytestmark = pytest.mark.e2e

OA, RS, AN, GE = Dialect.OPENAI, Dialect.OPENAI_RESPONSES, Dialect.ANTHROPIC, Dialect.GEMINI
K = FailureKind
S = StopReason

# sample -> (dialect, what the router must end with)
SAMPLES: dict[str, tuple[Dialect, StopReason | FailureKind]] = {
    "openai-chat/01-nonstream-text-usage.json": (OA, S.END_TURN),
    "openai-chat/02-nonstream-parallel-tool-calls.json": (OA, S.TOOL_USE),
    "openai-chat/03-nonstream-finish-length.json": (OA, K.TRUNCATED),
    "openai-chat/04-nonstream-json-schema.json": (OA, S.END_TURN),
    "openai-chat/05-nonstream-refusal.json": (OA, K.CONTENT_FILTERED),
    "openai-chat/06-stream-text-include-usage.sse": (OA, S.END_TURN),
    "openai-chat/07-stream-text-include-usage-obfuscation.jsonl": (OA, S.END_TURN),
    "openai-chat/08-stream-parallel-tool-calls.sse": (OA, S.TOOL_USE),
    "openai-chat/09-stream-finish-length.sse": (OA, K.TRUNCATED),
    "openai-chat/10-stream-refusal.sse": (OA, K.CONTENT_FILTERED),
    "openai-chat/11-stream-content-filter-azure.sse": (OA, K.CONTENT_FILTERED),
    "openai-chat/12-error-429-rate-limit-exceeded.http": (OA, K.RATE_LIMITED),
    "openai-chat/13-error-429-insufficient-quota.json": (OA, K.QUOTA_EXHAUSTED),
    "openai-chat/14-error-400-context-length-exceeded.json": (OA, K.CONTEXT_OVERFLOW),
    "openai-chat/15-error-401-invalid-api-key.http": (OA, K.AUTHENTICATION_OR_PERMISSION),
    "openai-chat/16-error-404-model-not-found.json": (OA, K.MODEL_NOT_FOUND),
    "openai-chat/17-error-500-server-error.json": (OA, K.PROVIDER_SERVER_ERROR),
    "openai-chat/18-error-503-server-overloaded.json": (OA, K.PROVIDER_OVERLOADED),
    "deepseek/01-stream-usage-done.http": (OA, S.END_TURN),
    "deepseek/02-stream-queued-keepalive-reconstructed.sse": (OA, S.END_TURN),
    "deepseek/03-error-400-context-length-octet-stream.http": (OA, K.CONTEXT_OVERFLOW),
    "openai-responses/01-stream-text-completed-usage.http": (RS, S.END_TURN),
    "openai-responses/02-stream-reasoning-function-call-args.jsonl": (RS, S.TOOL_USE),
    "openai-responses/03-stream-error-event-insufficient-quota.jsonl": (RS, K.QUOTA_EXHAUSTED),
    "anthropic/01-nonstream-text-usage.json": (AN, S.END_TURN),
    "anthropic/02-stream-text-ratelimit-headers.http": (AN, S.END_TURN),
    "anthropic/03-stream-tool-use-input-json-delta.sse": (AN, S.TOOL_USE),
    "anthropic/04-stream-text-then-tool-use-docs.sse": (AN, S.TOOL_USE),
    "anthropic/05-stream-max-tokens-mid-tool-input.sse": (AN, K.TRUNCATED),
    "anthropic/06-stream-refusal.sse": (AN, K.CONTENT_FILTERED),
    "anthropic/07-stream-midstream-error-overloaded.sse": (AN, K.PROVIDER_OVERLOADED),
    "anthropic/08-error-429-rate-limit.http": (AN, K.RATE_LIMITED),
    "anthropic/09-error-529-overloaded.json": (AN, K.PROVIDER_OVERLOADED),
    "anthropic/10-error-400-prompt-too-long.http": (AN, K.CONTEXT_OVERFLOW),
    "anthropic/11-error-401-authentication.http": (AN, K.AUTHENTICATION_OR_PERMISSION),
    "gemini/01-generate-content-stop-usage.json": (GE, S.END_TURN),
    "gemini/02-generate-content-function-call.json": (GE, S.TOOL_USE),
    "gemini/03-stream-text-crlf.http": (GE, S.END_TURN),
    "gemini/04-stream-function-call.http": (GE, S.TOOL_USE),
    "gemini/05-max-tokens-no-parts-vertex.json": (GE, K.TRUNCATED),
    "gemini/06-finish-safety-reconstructed.json": (GE, K.CONTENT_FILTERED),
    "gemini/07-prompt-blocked-prohibited-content.jsonl": (GE, K.CONTENT_FILTERED),
    "gemini/08-error-429-resource-exhausted-retryinfo.http": (GE, K.RATE_LIMITED),
    "gemini/09-error-503-unavailable.json": (GE, K.PROVIDER_OVERLOADED),
    "gemini/10-error-400-api-key-invalid.http": (GE, K.AUTHENTICATION_OR_PERMISSION),
}
_FRAMING = {"transfer-encoding", "content-length", "content-encoding", "connection", "keep-alive"}


def test_the_table_covers_every_sample_of_the_corpus() -> None:
    on_disk = {str(p.relative_to(WIRE)) for p in WIRE.rglob("*") if p.is_file() and p.name != "README.md"}
    assert set(SAMPLES) == on_disk


def _answer(name: str) -> tuple[Answer, bool]:
    """The sample as an HTTP answer in 13-byte writes, and whether it is a stream."""
    path = WIRE / name
    if path.suffix == ".http":
        raw = path.read_bytes()
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if ":" in line]
        kept = tuple((k, v) for k, v in headers if k.lower() not in _FRAMING)
        streaming = any(k.lower() == "content-type" and "event-stream" in v for k, v in kept)
    elif path.suffix in (".sse", ".jsonl"):
        _, body = sample(WIRE, name)
        status, kept, streaming = 200, (("content-type", "text/event-stream"),), True
    else:
        body = path.read_bytes()
        status = int(name.split("-error-")[1][:3]) if "-error-" in name else 200
        kept, streaming = (("content-type", "application/json"),), False
    writes = tuple(body[i : i + 13] for i in range(0, len(body), 13)) or (b"",)
    return Answer(status, kept, writes), streaming


def _parsed(dialect: Dialect, name: str, streaming: bool) -> Response | None:
    """What the dialect's own parser makes of the sample (None for an error status)."""
    path = WIRE / name
    if streaming:
        headers, body = sample(WIRE, name)
        result = run(dialect, body, headers)
        outcome = result.raised or result.result
    else:
        answer, _ = _answer(name)
        if answer.status != 200:
            return None
        resp = HttpResponse(status=200, headers=dict(answer.headers), body=path.read_bytes())
        outcome = dialect_for(dialect).parse(_target(dialect, "http://unused"), resp)
    return outcome if isinstance(outcome, Response) else getattr(outcome, "response", None)


def _target(dialect: Dialect, base: str) -> Target:
    return Target(
        name=f"sample-{dialect.value}",
        dialect=dialect,
        model={OA: "gpt-4o", RS: "gpt-5-mini", AN: "claude-sonnet-4-5", GE: "gemini-2.5-flash"}[dialect],
        base_url=base + ("/v1beta" if dialect is GE else "/v1"),
        api_key=Secret("sk-sample-upstream"),
        capabilities=frozenset(Capability),
        timeouts=Timeouts(connect=5, first_event=10, idle=10, total=20),
        max_attempts=1,
        tokenizer="estimate",
    )


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    with RawServer() as server:
        yield server


def _key(name: str) -> str:
    return name.replace("/", "_").replace(".", "_")


async def _read(router: Router, request: Request, stream: bool) -> Completed | PartialOutput | FailureKind:
    try:
        if not stream:
            return Completed(response=await router.complete("r", request))
        async with router.stream("r", request) as s:
            events = [e async for e in s]
    except Unavailable as exc:
        return exc.reason
    terminal = events[-1]
    assert isinstance(terminal, Completed | PartialOutput), terminal
    return terminal


CALLS = [
    pytest.param(name, stream, id=f"{name}-{'stream' if stream else 'complete'}")
    for name in SAMPLES
    for stream in (False, True)
    if stream or (not name.endswith((".sse", ".jsonl")) and "-stream-" not in name)  # a stream sample: streamed only
]


@pytest.mark.parametrize(("name", "stream"), CALLS)
async def test_each_sample_ends_with_its_kind_through_the_router(raw: RawServer, name: str, stream: bool) -> None:
    dialect, expected = SAMPLES[name]
    answer, streaming = _answer(name)
    raw.serve(**{_key(name): answer})
    parsed = _parsed(dialect, name, streaming)
    tools = (
        tuple(Tool(name=n, parameters={"type": "object"}) for n in {c.name for c in parsed.tool_calls})
        if parsed
        else ()
    )
    request = Request(messages=(Message.user("hi"),), tools=tools, max_tokens=1024)
    route = Route(name="r", primary=(_target(dialect, raw.url(_key(name))),))
    async with Router([route], retry_budget=Unlimited(), breakers=NoBreakers()) as router:
        outcome = await _read(router, request, stream)
    if isinstance(expected, StopReason):
        assert isinstance(outcome, Completed), f"{name}: {outcome!r}"
        resp = outcome.response
        assert resp.stop_reason is expected
        assert parsed is not None
        assert (resp.text, _calls(resp)) == (parsed.text, _calls(parsed))  # what the parser reads, end to end
    else:
        kind = outcome.failure.kind if isinstance(outcome, PartialOutput) else outcome
        assert kind is expected, f"{name}: {outcome!r}"
    assert raw.requests, "the router never reached the server"


def _calls(resp: Response) -> list[tuple[str, Any]]:
    return [(c.name, c.parsed if c.parsed is not None else json.loads(c.arguments or "null")) for c in resp.tool_calls]
