"""Every Anthropic and Gemini sample, served over loopback HTTP, through the Router.

The parser tests read each sample's bytes directly; here the same bytes come back from a real
socket to ``Router.complete`` (bodies) or ``Router.stream`` (event streams), over the default
transport, and each ends as the kind the parser gives it: a Completed answer (with its
reasoning), a PartialOutput after the answer began, or Unavailable whose attempt failed with
that kind. The mid-stream ``event: error`` sample is classified by its error type.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from failover import Capability, Route, Router, Target
from failover.model import (
    Completed,
    Dialect,
    Envelope,
    FailureKind,
    Message,
    PartialOutput,
    ReasoningDone,
    Request,
    Response,
    TextDelta,
    Tool,
    Unavailable,
)
from failover.policy import NoBreakers, Unlimited

from ._wire import load_http
from .test_stream_common import WIRE

OURS = Path(__file__).parent / "wire"  # the reasoning samples built from the docs
# The tools the samples call, declared so that their calls pass the contract check.
TOOLS = tuple(
    Tool(name=n, parameters={"type": "object"})
    for n in ("get_weather", "weather", "make_file", "best_language_to_learn", "get_current_temperature")
)
REQUEST = Request(messages=(Message.user("hi"),), tools=TOOLS, max_tokens=256)
Served = tuple[int, dict[str, str], bytes]


def served(path: Path) -> Served:
    """The status, headers and body a sample answers with (de-chunked, so sent with a length)."""
    if path.suffix == ".http":
        r = load_http(path)
        skip = {"transfer-encoding", "content-length", "content-encoding", "connection"}
        return r.status, {k: v for k, v in r.headers.items() if k not in skip}, r.body
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        body = b"".join(b"data: " + line + b"\n\n" for line in raw.splitlines() if line.strip())
        return 200, {"content-type": "text/event-stream"}, body
    if path.suffix == ".sse":
        return 200, {"content-type": "text/event-stream"}, raw
    status = int(path.name.split("-error-")[1][:3]) if "-error-" in path.name else 200
    return status, {"content-type": "application/json"}, raw


@asynccontextmanager
async def upstream(answer: Served) -> AsyncIterator[str]:
    """A loopback HTTP/1.1 server that answers every request with ``answer`` and closes."""
    status, headers, body = answer

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in headers.items())]
        lines += [f"content-length: {len(body)}", "connection: close"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


def _router(dialect: Dialect, base: str) -> Router:
    model, suffix = ("claude-x", "/v1") if dialect is Dialect.ANTHROPIC else ("gemini-2.5-flash", "/v1beta")
    target = Target(
        name="t",
        dialect=dialect,
        model=model,
        base_url=base + suffix,
        max_attempts=1,
        tokenizer="estimate",
        capabilities=frozenset({Capability.CHAT, Capability.STREAMING, Capability.TOOLS}),
    )
    # hold_tokens=0: the first content commits, so a sample's mid-stream failure after text is
    # read as the partial answer it is (a hold would recover it, which these samples do not test)
    route = Route(name="r", primary=(target,), hold_tokens=0)
    return Router([route], retry_budget=Unlimited(), breakers=NoBreakers())


Outcome = tuple[str, FailureKind | None, Any]


async def _complete(dialect: Dialect, path: Path) -> Outcome:
    async with upstream(served(path)) as base, _router(dialect, base) as router:
        try:
            resp = await router.complete("r", REQUEST, Envelope(max_attempts=1))
        except Unavailable as exc:
            failure = exc.record.attempts[-1].failure
            return "unavailable", failure.kind if failure else None, failure
        return "completed", None, resp


async def _stream(dialect: Dialect, path: Path) -> tuple[Outcome, list[Any]]:
    async with upstream(served(path)) as base, _router(dialect, base) as router:
        seen: list[Any] = []
        try:
            async with router.stream("r", REQUEST, Envelope(max_attempts=1)) as s:
                async for event in s:
                    seen.append(event)
        except Unavailable as exc:
            failure = exc.record.attempts[-1].failure
            return ("unavailable", failure.kind if failure else None, failure), seen
        end = seen[-1]
        if isinstance(end, PartialOutput):
            return ("partial", end.failure.kind, end.failure), seen
        assert isinstance(end, Completed)
        return ("completed", None, end.response), seen


K = FailureKind
BODIES = [
    ("anthropic/01-nonstream-text-usage.json", "completed", None),
    ("anthropic/08-error-429-rate-limit.http", "unavailable", K.RATE_LIMITED),
    ("anthropic/09-error-529-overloaded.json", "unavailable", K.PROVIDER_OVERLOADED),
    ("anthropic/10-error-400-prompt-too-long.http", "unavailable", K.CONTEXT_OVERFLOW),
    ("anthropic/11-error-401-authentication.http", "unavailable", K.AUTHENTICATION_OR_PERMISSION),
    ("gemini/01-generate-content-stop-usage.json", "completed", None),
    ("gemini/02-generate-content-function-call.json", "completed", None),
    ("gemini/05-max-tokens-no-parts-vertex.json", "unavailable", K.TRUNCATED),
    ("gemini/06-finish-safety-reconstructed.json", "unavailable", K.CONTENT_FILTERED),
    ("gemini/08-error-429-resource-exhausted-retryinfo.http", "unavailable", K.RATE_LIMITED),
    ("gemini/09-error-503-unavailable.json", "unavailable", K.PROVIDER_OVERLOADED),
    ("gemini/10-error-400-api-key-invalid.http", "unavailable", K.AUTHENTICATION_OR_PERMISSION),
]
STREAMS = [
    ("anthropic/02-stream-text-ratelimit-headers.http", "completed", None),
    ("anthropic/03-stream-tool-use-input-json-delta.sse", "completed", None),
    ("anthropic/04-stream-text-then-tool-use-docs.sse", "completed", None),
    ("anthropic/05-stream-max-tokens-mid-tool-input.sse", "partial", K.TRUNCATED),
    ("anthropic/06-stream-refusal.sse", "unavailable", K.CONTENT_FILTERED),
    ("anthropic/07-stream-midstream-error-overloaded.sse", "partial", K.PROVIDER_OVERLOADED),
    ("gemini/03-stream-text-crlf.http", "completed", None),
    ("gemini/04-stream-function-call.http", "completed", None),
    ("gemini/07-prompt-blocked-prohibited-content.jsonl", "unavailable", K.CONTENT_FILTERED),
]


def _dialect(name: str) -> Dialect:
    return Dialect.ANTHROPIC if name.startswith("anthropic/") else Dialect.GEMINI


def test_every_sample_of_both_dialects_is_here() -> None:
    listed = {name for name, _, _ in BODIES + STREAMS}
    on_disk = {f"{d}/{p.name}" for d in ("anthropic", "gemini") for p in (WIRE / d).iterdir()}
    assert listed == on_disk


@pytest.mark.parametrize(("name", "end", "kind"), BODIES)
async def test_body_sample_through_the_router(name: str, end: str, kind: FailureKind | None) -> None:
    got, got_kind, detail = await _complete(_dialect(name), WIRE / name)
    assert (got, got_kind) == (end, kind), detail
    if end == "completed":
        assert isinstance(detail, Response) and (detail.text or detail.tool_calls)


@pytest.mark.parametrize(("name", "end", "kind"), STREAMS)
async def test_stream_sample_through_the_router(name: str, end: str, kind: FailureKind | None) -> None:
    (got, got_kind, detail), _ = await _stream(_dialect(name), WIRE / name)
    assert (got, got_kind) == (end, kind), detail
    if end == "completed":
        assert isinstance(detail, Response) and (detail.text or detail.tool_calls)


async def test_midstream_error_sample_is_classified_by_its_type() -> None:
    (end, kind, failure), seen = await _stream(
        Dialect.ANTHROPIC, WIRE / "anthropic/07-stream-midstream-error-overloaded.sse"
    )
    assert (end, kind) == ("partial", FailureKind.PROVIDER_OVERLOADED)
    assert failure.provider_code == "overloaded_error"
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "Hello"


@pytest.mark.parametrize(
    ("name", "blocks"),
    [
        ("anthropic/01-stream-thinking-docs.sse", 1),
        ("anthropic/02-stream-thinking-redacted-tool-use-docs.sse", 2),
        ("gemini/01-stream-thought-summary-signature-docs.sse", 2),
        ("gemini/02-stream-parallel-calls-signature-docs.sse", 1),
    ],
)
async def test_reasoning_samples_reach_the_caller_and_the_response(name: str, blocks: int) -> None:
    (end, _, resp), seen = await _stream(_dialect(name), OURS / name)
    assert end == "completed"
    assert isinstance(resp, Response) and len(resp.reasoning) == blocks
    assert tuple(e.block for e in seen if isinstance(e, ReasoningDone)) == resp.reasoning
    model = "claude-x" if name.startswith("anthropic/") else "gemini-2.5-flash"
    assert {r.origin for r in resp.reasoning} == {f"{_dialect(name)}:{model}"}  # the target that wrote them
