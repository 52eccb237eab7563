"""Requests as each dialect's real clients send them, for driving fakes directly."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, NamedTuple

from failover.model import Dialect
from failover.testing import FakeNetwork, FakeProvider
from failover.transport._types import HttpRequest, HttpResponse, TransportError

PROMPT = "What is the weather in Paris today?"  # 35 characters: 9 tokens by the chars/4 estimate

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "number"},
        "units": {"type": "string", "enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "temperature", "units", "tags"],
    "additionalProperties": False,
}
TOOL_PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def body(dialect: Dialect, **extra: Any) -> dict[str, Any]:
    if dialect is Dialect.OPENAI:
        return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}], **extra}
    if dialect is Dialect.ANTHROPIC:
        return {
            "model": "claude-haiku-4-5",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": PROMPT}],
            **extra,
        }
    return {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}], **extra}


def headers(dialect: Dialect, key: str = "sk-secret-123") -> dict[str, str]:
    if dialect is Dialect.OPENAI:
        return {"authorization": f"Bearer {key}", "content-type": "application/json"}
    if dialect is Dialect.ANTHROPIC:
        return {"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    return {"x-goog-api-key": key, "content-type": "application/json"}


def url(p: FakeProvider, *, stream: bool = False, model: str = "gemini-2.5-flash") -> str:
    if p.dialect is Dialect.OPENAI:
        return f"{p.base_url}/chat/completions"
    if p.dialect is Dialect.ANTHROPIC:
        return f"{p.base_url}/messages"
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{p.base_url}/models/{model}:{method}"


def request(p: FakeProvider, *, stream: bool = False, **extra: Any) -> HttpRequest:
    data = body(p.dialect, **extra)
    if stream and p.dialect is not Dialect.GEMINI:
        data["stream"] = True
    return HttpRequest(method="POST", url=url(p, stream=stream), headers=headers(p.dialect), json=data)


async def send(
    p: FakeProvider, *, net: FakeNetwork | None = None, stream: bool = False, total: float = 60.0, **extra: Any
) -> HttpResponse:
    network = net or FakeNetwork(p)
    return await network.send(request(p, stream=stream, **extra), connect_timeout=5.0, total_timeout=total)


def as_json(resp: HttpResponse) -> Any:
    return json.loads(resp.body)


def sse_data(resp: HttpResponse) -> list[Any]:
    """The JSON payload of each SSE event (``[DONE]`` kept as the string)."""
    out: list[Any] = []
    for block in resp.body.decode().replace("\r\n", "\n").split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                payload = line[6:]
                out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def sse_events(resp: HttpResponse) -> list[str]:
    return [line[7:] for line in resp.body.decode().split("\n") if line.startswith("event: ")]


class SSE(NamedTuple):
    """One decoded server-sent event (``event`` None when the stream gave no ``event:`` field)."""

    event: str | None
    data: str


def parse_sse(raw: bytes) -> tuple[list[SSE], list[str]]:
    """Decode an event stream by the WHATWG rules (any of CRLF, LF, CR ends a line; a blank
    line dispatches; ``:`` starts a comment). Returns the events and the comments. Raises
    AssertionError on bytes a real decoder would reject or drop (an unterminated event)."""
    text = raw.decode("utf-8")
    events: list[SSE] = []
    comments: list[str] = []
    name: str | None = None
    data: list[str] = []
    lines = re.split(r"\r\n|\r|\n", text)
    assert lines[-1] == "", f"the stream does not end with a line break: {text[-40:]!r}"
    for line in lines[:-1]:
        if not line:
            if data or name is not None:
                events.append(SSE(name, "\n".join(data)))
            name, data = None, []
        elif line.startswith(":"):
            comments.append(line[1:].strip())
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
    assert not data and name is None, "the last event is not terminated by a blank line"
    return events, comments


async def stream_pieces(
    net: FakeNetwork, req: HttpRequest, *, leave_after: int | None = None
) -> tuple[list[tuple[float, bytes]], TransportError | None]:
    """Open ``req`` as a stream and read it: each chunk with its loop time relative to the
    moment the headers arrived. ``leave_after``: stop after that many chunks. A TransportError
    from the body is returned, not raised."""
    loop = asyncio.get_running_loop()
    out: list[tuple[float, bytes]] = []
    error: TransportError | None = None
    async with net.stream(req, connect_timeout=5.0) as resp:
        assert resp.status == 200
        start = loop.time()
        try:
            async for piece in resp.aiter_bytes():
                out.append((loop.time() - start, piece))
                if leave_after is not None and len(out) >= leave_after:
                    break
        except TransportError as exc:
            error = exc
    return out, error
