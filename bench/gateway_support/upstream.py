"""A minimal, fast OpenAI-compatible upstream for bench/gateway.py (loopback only).

    python bench/gateway_support/upstream.py --port 18001 [--latency 0.02]

``POST .../chat/completions`` answers a fixed ``chat.completion`` body ``--latency`` seconds
after the request is complete. With ``"stream": true`` in the body it answers Server-Sent
Events: after ``--latency`` the role chunk and the first content chunk in one write, then
``--chunks - 1`` more content chunks every ``--chunk-interval`` seconds, a finish chunk, a
usage chunk and ``data: [DONE]`` (chunked transfer, keep-alive). ``GET`` anything answers a
tiny model list (health checks). Raw asyncio protocol + httptools on uvloop, TCP_NODELAY on
every accepted socket, HTTP/1.1 keep-alive, no logging: the fake should cost as little as
possible, and it costs the same whether the load generator reaches it directly or through a
gateway. Its delays are kept to the microsecond (``precise.py``): the loop's own timers round
to whole milliseconds, which gave each run its own offset of up to 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket

import httptools
from loopback import run, serve
from precise import PreciseTimers

MODEL = "gpt-4o-mini"
BODY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
    },
    separators=(",", ":"),
).encode()
PLAIN = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(BODY)).encode()
    + b"\r\n\r\n"
    + BODY
)
MODELS_BODY = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}).encode()
MODELS = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(MODELS_BODY)).encode()
    + b"\r\n\r\n"
    + MODELS_BODY
)
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    obj: dict = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [] if usage is not None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _raw(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


WORDS = ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"]


class Upstream(asyncio.Protocol):
    __slots__ = ("args", "body", "keep", "method", "parser", "path", "timers", "transport")

    def __init__(self, args: argparse.Namespace, timers: PreciseTimers) -> None:
        self.args = args
        self.timers = timers
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.body = bytearray()
        self.path = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    def on_message_begin(self) -> None:
        self.body = bytearray()

    def on_url(self, url: bytes) -> None:
        self.path = url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        if method == b"GET":
            self._write(MODELS if b"models" in self.path else NOT_FOUND)
            return
        if not self.path.rstrip(b"/").endswith(b"/chat/completions"):
            self._write(NOT_FOUND)
            return
        body = bytes(self.body)
        stream = b'"stream":true' in body.replace(b" ", b"")
        if stream:
            self.timers.call_later(self.args.latency, self._stream, 0)
        else:
            self.timers.call_later(self.args.latency, self._write, PLAIN)

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _stream(self, i: int) -> None:
        n = self.args.chunks
        if i == 0:
            self._write(SSE_HEAD + _chunk({"role": "assistant", "content": ""}) + _chunk({"content": WORDS[0]}))
        elif i < n:
            self._write(_chunk({"content": WORDS[i % len(WORDS)]}))
        else:
            self._write(
                _chunk({}, finish="stop")
                + _chunk({}, usage={"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n})
                + _raw(b"data: [DONE]\n\n")
                + b"0\r\n\r\n"
            )
            return
        self.timers.call_later(self.args.chunk_interval, self._stream, i + 1)


async def main(args: argparse.Namespace) -> None:
    timers = PreciseTimers(asyncio.get_running_loop())
    await serve("upstream", lambda: Upstream(args, timers), args.port, args.max_seconds)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--latency", type=float, default=0.02)
    p.add_argument("--chunks", type=int, default=5)
    p.add_argument("--chunk-interval", type=float, default=0.01)
    p.add_argument("--max-seconds", type=float, default=3600)
    a = p.parse_args()
    run(main(a))
