"""Every OpenAI-chat and DeepSeek wire sample through a real Router, over real HTTP on loopback.

The parser tests read each sample's bytes directly; here a loopback server answers the
Router's request with the sample (status, recorded headers, body written in pieces), and the
outcome is what a caller of ``Router.complete`` or ``Router.stream`` gets: the answer, a
PartialOutput after content, or Unavailable with the sample's kind. Bodies are answered to
both kinds of request where a server can do that: an error status to either, and a plain
JSON answer to a stream request too (servers that ignore ``stream: true``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from failover import Capability, Route, Router, Target, Timeouts
from failover.model import (
    Completed,
    Dialect,
    FailureKind,
    Message,
    PartialOutput,
    ReasoningDelta,
    ReasoningDone,
    Request,
    StreamEvent,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    Unavailable,
)
from failover.policy import NoBreakers, Unlimited

from ._wire import load_http, load_json
from .test_stream_common import WIRE

CONSTRUCTED = Path(__file__).resolve().parent / "constructed"
_DROP = {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def answer_for(path: Path) -> Answer:
    """A sample as the server sends it: ``.http`` with its recorded headers (the framing ones
    are the server's own), ``.json`` as an application/json body with its status, ``.sse``/``.jsonl`` as an
    event stream (``.jsonl`` re-framed: its recorder stripped ``data:``)."""
    if path.suffix == ".http":
        r = load_http(path)
        headers = {k: v for k, v in r.headers.items() if k not in _DROP}
        return Answer(r.status, headers, r.body)
    raw = path.read_bytes()
    if path.suffix == ".json":  # the status its name states (-error-429-), else 200
        return Answer(load_json(path).status, {"content-type": "application/json"}, raw)
    if path.suffix == ".jsonl":
        raw = b"".join(b"data: " + line + b"\n\n" for line in raw.splitlines() if line.strip())
    return Answer(200, {"content-type": "text/event-stream"}, raw)


@dataclass
class Upstream:
    """A loopback HTTP/1.1 server that answers every request with ``answer``, its body written
    in ``piece``-byte writes with chunked framing; the request bodies it received are kept."""

    answer: Answer
    piece: int = 97
    bodies: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                self.bodies.append(json.loads(await reader.readexactly(length)))
                a = self.answer
                lines = [
                    f"HTTP/1.1 {a.status} X",
                    "transfer-encoding: chunked",
                    *(f"{k}: {v}" for k, v in a.headers.items()),
                ]
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                for at in range(0, len(a.body), self.piece):
                    part = a.body[at : at + self.piece]
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        writer.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Upstream]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await server.wait_closed()

    def target(self, **kw: Any) -> Target:
        return Target(
            name="t",
            dialect=Dialect.OPENAI,
            model="gpt-4o",
            base_url=f"http://127.0.0.1:{self.port}/v1",
            capabilities=frozenset({Capability.CHAT, Capability.TOOLS, Capability.STREAMING}),
            timeouts=Timeouts(connect=2, first_event=5, idle=5, total=10),
            max_attempts=1,  # the sample is the answer, not a schedule: no replays
            tokenizer="estimate",
            **kw,
        )


TOOLS = tuple(Tool(name=n, parameters={"type": "object"}) for n in ("GetWeatherArgs", "get_stock_price", "get_weather"))
REQUEST = Request(messages=(Message.user("What is the weather in Edinburgh?"),), tools=TOOLS, max_tokens=200)


def router_for(target: Target) -> Router:
    # hold_tokens=0: the first content commits, so a sample's mid-stream failure after text is
    # read as the partial answer it is (a hold would recover it, which these samples do not test)
    route = Route(name="r", primary=(target,), hold_tokens=0)
    return Router([route], retry_budget=Unlimited(), breakers=NoBreakers())


@dataclass
class Outcome:
    """What a caller got: ``kind`` None for an answer, else the failure's kind;
    ``partial``: the failure came after content reached a streaming caller."""

    kind: FailureKind | None
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    partial: bool = False
    events: list[StreamEvent] = field(default_factory=list)


async def complete(target: Target, request: Request = REQUEST) -> Outcome:
    router = router_for(target)
    try:
        resp = await router.complete("r", request)
    except Unavailable as exc:
        return Outcome(exc.reason)
    finally:
        await router.aclose()
    return Outcome(None, resp.text, resp.tool_calls)


async def stream(target: Target, request: Request = REQUEST) -> Outcome:
    router = router_for(target)
    events: list[Any] = []
    try:
        async with router.stream("r", request) as s:
            events = [e async for e in s]
    except Unavailable as exc:
        return Outcome(exc.reason, events=events)
    finally:
        await router.aclose()
    end = events[-1]
    if isinstance(end, PartialOutput):
        return Outcome(end.failure.kind, end.text, end.tool_calls, partial=True, events=events[:-1])
    assert isinstance(end, Completed)
    return Outcome(None, end.response.text, end.response.tool_calls, events=events[:-1])


# (sample, kind via complete, kind via stream, partial on the stream): None is an answer
OK = None
K = FailureKind
CASES: list[tuple[str, FailureKind | None, FailureKind | None, bool]] = [
    ("openai-chat/01-nonstream-text-usage.json", OK, OK, False),
    ("openai-chat/02-nonstream-parallel-tool-calls.json", OK, OK, False),
    ("openai-chat/03-nonstream-finish-length.json", K.TRUNCATED, K.TRUNCATED, False),
    ("openai-chat/04-nonstream-json-schema.json", OK, OK, False),
    ("openai-chat/05-nonstream-refusal.json", K.CONTENT_FILTERED, K.CONTENT_FILTERED, False),
    ("openai-chat/06-stream-text-include-usage.sse", None, OK, False),
    ("openai-chat/07-stream-text-include-usage-obfuscation.jsonl", None, OK, False),
    ("openai-chat/08-stream-parallel-tool-calls.sse", None, OK, False),
    ("openai-chat/09-stream-finish-length.sse", None, K.TRUNCATED, True),
    ("openai-chat/10-stream-refusal.sse", None, K.CONTENT_FILTERED, False),
    ("openai-chat/11-stream-content-filter-azure.sse", None, K.CONTENT_FILTERED, True),
    ("openai-chat/12-error-429-rate-limit-exceeded.http", K.RATE_LIMITED, K.RATE_LIMITED, False),
    ("openai-chat/13-error-429-insufficient-quota.json", K.QUOTA_EXHAUSTED, K.QUOTA_EXHAUSTED, False),
    ("openai-chat/14-error-400-context-length-exceeded.json", K.CONTEXT_OVERFLOW, K.CONTEXT_OVERFLOW, False),
    (
        "openai-chat/15-error-401-invalid-api-key.http",
        K.AUTHENTICATION_OR_PERMISSION,
        K.AUTHENTICATION_OR_PERMISSION,
        False,
    ),
    ("openai-chat/16-error-404-model-not-found.json", K.MODEL_NOT_FOUND, K.MODEL_NOT_FOUND, False),
    ("openai-chat/17-error-500-server-error.json", K.PROVIDER_SERVER_ERROR, K.PROVIDER_SERVER_ERROR, False),
    ("openai-chat/18-error-503-server-overloaded.json", K.PROVIDER_OVERLOADED, K.PROVIDER_OVERLOADED, False),
    ("deepseek/01-stream-usage-done.http", None, OK, False),
    ("deepseek/02-stream-queued-keepalive-reconstructed.sse", None, OK, False),
    ("deepseek/03-error-400-context-length-octet-stream.http", K.CONTEXT_OVERFLOW, K.CONTEXT_OVERFLOW, False),
    # constructed (no real capture of a Chat Completions mid-stream error exists: constructed/README.md)
    ("constructed/openai-chat-midstream-01-server-is-overloaded.sse", None, K.PROVIDER_OVERLOADED, True),
    ("constructed/openai-chat-midstream-02-rate-limit-exceeded.sse", None, K.RATE_LIMITED, True),
    ("constructed/openai-chat-midstream-03-insufficient-quota.sse", None, K.QUOTA_EXHAUSTED, True),
    ("constructed/openai-chat-midstream-04-server-error.sse", None, K.PROVIDER_SERVER_ERROR, True),
    ("constructed/openai-chat-midstream-05-openrouter-finish-error.sse", None, K.PROVIDER_SERVER_ERROR, True),
    ("constructed/openai-chat-midstream-06-vllm-status-code.sse", None, K.PROVIDER_OVERLOADED, True),
    ("constructed/openai-chat-midstream-07-error-before-content.sse", None, K.RATE_LIMITED, False),
]


def _path(name: str) -> Path:
    return CONSTRUCTED / name.split("/", 1)[1] if name.startswith("constructed/") else WIRE / name


def test_every_sample_is_covered() -> None:
    listed = {name for name, *_ in CASES}
    on_disk = {f"{d}/{p.name}" for d in ("openai-chat", "deepseek") for p in (WIRE / d).iterdir()}
    on_disk |= {f"constructed/{p.name}" for p in CONSTRUCTED.glob("*.sse")}
    assert listed == on_disk


@pytest.mark.parametrize(("name", "via_complete", "via_stream", "partial"), CASES, ids=[c[0] for c in CASES])
async def test_sample_through_the_router(
    name: str, via_complete: FailureKind | None, via_stream: FailureKind | None, partial: bool
) -> None:
    path = _path(name)
    answer = answer_for(path)
    is_stream = answer.headers.get("content-type", "").startswith("text/event-stream")
    async with Upstream(answer).running() as up:
        got = await stream(up.target())
        assert (got.kind, got.partial) == (via_stream, partial), name
        status = re.search(r"-error-(\d{3})-", name)
        assert up.answer.status == (int(status.group(1)) if status else 200)
        assert up.bodies[-1]["stream"] is True
        if not is_stream:  # a plain body answers a plain request the same way
            plain = await complete(up.target())
            assert plain.kind == via_complete, name
            assert (plain.text, plain.calls) == (got.text, got.calls)
    if got.kind is None or got.partial:  # what the caller was shown adds up to what it got
        assert "".join(e.text for e in got.events if isinstance(e, TextDelta)) == got.text
        assert tuple(e.call for e in got.events if isinstance(e, ToolCallDone)) == got.calls


async def test_08_tool_calls_through_the_router() -> None:
    async with Upstream(answer_for(WIRE / "openai-chat/08-stream-parallel-tool-calls.sse"), piece=13).running() as up:
        got = await stream(up.target())
    assert [(c.name, c.parsed) for c in got.calls] == [
        ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
        ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]
    for done in (e for e in got.events if isinstance(e, ToolCallDone)):
        deltas = [e.arguments for e in got.events if isinstance(e, ToolCallDelta) and e.index == done.index]
        assert "".join(deltas) == done.call.arguments


# ----------------------------------------------------------------------- interleaved, reasoning, plain JSON


def _chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def _sse(*chunks: dict[str, Any]) -> Answer:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    return Answer(200, {"content-type": "text/event-stream"}, body)


async def test_interleaved_calls_through_the_router() -> None:
    def frag(i: int, args: str, head: tuple[str, str] | None = None) -> dict[str, Any]:
        f: dict[str, Any] = {"index": i, "function": {"arguments": args}}
        if head:
            f |= {"id": head[0], "type": "function"}
            f["function"]["name"] = head[1]
        return _chunk({"tool_calls": [f]})

    answer = _sse(
        frag(0, "", ("call_a", "get_weather")),
        frag(0, '{"city": '),
        frag(1, "", ("call_b", "get_stock_price")),
        frag(0, '"Paris"}'),
        frag(1, '{"ticker": "X"}'),
        _chunk({}, "tool_calls"),
    )
    async with Upstream(answer, piece=7).running() as up:
        got = await stream(up.target())
        plain_kind = got.kind
    assert plain_kind is None
    assert [(c.id, c.parsed) for c in got.calls] == [("call_a", {"city": "Paris"}), ("call_b", {"ticker": "X"})]


async def test_deepseek_reasoning_through_the_router_and_back() -> None:
    # A thinking-mode tool turn: the reasoning reaches the caller (held until the call begins),
    # and goes back to the same target beside the call in the next request of the loop.
    head = {"index": 0, "id": "call_00_kw", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    answer = _sse(
        _chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        _chunk({"content": None, "reasoning_content": "I need "}),
        _chunk({"content": None, "reasoning_content": "the weather."}),
        _chunk({"tool_calls": [head]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Hangzhou"}'}}]}),
        _chunk({}, "tool_calls"),
    )
    async with Upstream(answer).running() as up:
        target = up.target()
        router = router_for(target)
        async with router.stream("r", REQUEST) as s:
            events = [e async for e in s]
        end = events[-1]
        assert isinstance(end, Completed)
        kinds = [type(e) for e in events[:4]]
        assert kinds == [ReasoningDelta, ReasoningDelta, ReasoningDone, type(events[3])]
        assert end.response.reasoning_text == "I need the weather."
        assert end.response.reasoning[0].origin == target.key
        follow = Request(
            messages=(*REQUEST.messages, end.response.message(), Message.tool("call_00_kw", "Cloudy")),
            tools=TOOLS,
            max_tokens=200,
        )
        async with router.stream("r", follow) as s:
            _ = [e async for e in s]
        await router.aclose()
    sent = up.bodies[-1]["messages"][1]
    assert sent["role"] == "assistant"
    assert sent["reasoning_content"] == "I need the weather."
    assert sent["tool_calls"][0]["id"] == "call_00_kw"


@pytest.mark.parametrize(
    "ctype",
    ["application/json; charset=utf-8", "text/event-stream", "text/plain", None],
    ids=["json", "labelled-a-stream", "text", "no-type"],
)
async def test_plain_json_answer_to_a_stream_request_through_the_router(ctype: str | None) -> None:
    # A compatible server that ignores stream: true: its JSON body, reasoning and calls
    # included, reaches the streaming caller as the events a stream of it would have carried,
    # whatever content type it labels the body with (some say text/event-stream, or nothing).
    message = {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "Weather needs a tool.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    }
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    answer = Answer(200, {} if ctype is None else {"content-type": ctype}, json.dumps(body, indent=1).encode())
    async with Upstream(answer).running() as up:
        got = await stream(up.target())
    assert got.kind is None
    assert got.text == "Checking." and [c.parsed for c in got.calls] == [{"city": "Paris"}]
    reasoning = [e for e in got.events if isinstance(e, ReasoningDone)]
    assert [r.block.text for r in reasoning] == ["Weather needs a tool."]
