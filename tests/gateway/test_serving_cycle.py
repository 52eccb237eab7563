"""``failover serve``'s request cycle (gateway/_protocol.py ``_Cycle``) against uvicorn's own:
the same requests, byte for byte the same answers, for less work per message.

Each case is sent on a fresh connection to two real servers on loopback, one with the gateway's
protocol and one with uvicorn's httptools protocol, both serving one small ASGI app whose path
says what to send (a content-length answer whole or in parts, a chunked one, a 204, a HEAD, an
HTTP/1.0 client, a ``connection: close``, a pipelined pair, a 100 Continue, a header with a
line break in its name or value). A closing request follows each case on the same connection, so
both servers end it the same way and the bytes can be compared whole."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import pytest
import uvicorn

from failover.gateway._protocol import HeadTimeoutProtocol

pytestmark = pytest.mark.e2e

CLOSING = b"GET /plain HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].rpartition(".")[2]  # startup, then shutdown
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    path = scope["path"]

    async def start(status: int, *headers: tuple[bytes, bytes]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})

    async def part(data: bytes, more: bool = False) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    if path == "/echo":  # what the app was handed: the headers (as the server cleaned them) and the body
        seen = json.dumps({"headers": [[k.decode(), v.decode()] for k, v in scope["headers"]], "body": body.decode()})
        await start(200, (b"content-type", b"application/json"), (b"content-length", str(len(seen)).encode()))
        await part(seen.encode())
    elif path == "/parts":
        await start(200, (b"Content-Length", b"9"), (b"X-Mixed-Case", b"Value"))
        for piece in (b"abc", b"def"):
            await part(piece, more=True)
        await part(b"ghi")
    elif path == "/chunked":  # no length given: the server frames it
        await start(200, (b"content-type", b"text/event-stream"))
        await part(b"data: 1\n\n", more=True)
        await part(b"", more=True)
        await part(b"data: 2\n\n", more=True)
        await part(b"")
    elif path == "/chunked-declared":
        await start(200, (b"transfer-encoding", b"chunked"))
        await part(b"x" * 300)
    elif path == "/empty":
        await start(204)
        await part(b"")
    elif path == "/close":
        await start(200, (b"content-length", b"2"), (b"connection", b"keep-alive, Close"))
        await part(b"ok")
    elif path.startswith("/bad-"):  # a header that would split the response: never sent
        name, value = (b"x-evil", b"a\r\nset-cookie: stolen=1") if path == "/bad-value" else (b"x evil", b"a")
        await start(200, (b"content-length", b"2"), (b"x-fine", b"1"), (name, value), (b"x-after", b"2"))
        await part(b"ok")
    else:
        await start(200, (b"content-type", b"text/plain"), (b"content-length", b"5"))
        await part(b"hello")


class _Server:
    def __init__(self, http: object) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="critical", lifespan="on", http=http)  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        until = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < until and self.thread.is_alive(), "the server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def exchange(self, *sends: bytes) -> bytes:
        """Send each piece (the next once an answer began), then read until the server closes."""
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            sock.settimeout(10)
            out = b""
            for i, data in enumerate(sends):
                sock.sendall(data)
                if i < len(sends) - 1:  # (a body sent after its 100 Continue)
                    out += sock.recv(65536)
            while chunk := sock.recv(65536):
                out += chunk
            return out


def _post(path: str, body: bytes, *headers: str, version: str = "1.1") -> bytes:
    lines = [f"POST {path} HTTP/{version}", "host: t", f"content-length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


CASES: dict[str, tuple[bytes, ...]] = {
    "plain": (_post("/plain", b"{}") + CLOSING,),
    "parts": (_post("/parts", b"") + CLOSING,),
    "chunked": (_post("/chunked", b"x" * 70_000) + CLOSING,),
    "chunked-declared": (_post("/chunked-declared", b"") + CLOSING,),
    "204": (_post("/empty", b"") + CLOSING,),
    "head": (b"HEAD /plain HTTP/1.1\r\nhost: t\r\n\r\n" + CLOSING,),
    "http/1.0": (_post("/plain", b"{}", version="1.0"),),
    "connection close": (_post("/close", b"") + CLOSING,),
    "pipelined": (_post("/parts", b"") + _post("/plain", b"{}") + _post("/chunked", b"") + CLOSING,),
    "trailing whitespace": (_post("/echo", b"hi", "x-a: spaced \t ", "x-b:  both  ") + CLOSING,),
    "bad header value": (_post("/bad-value", b"") + CLOSING,),
    "bad header name": (_post("/bad-name", b"") + CLOSING,),
}
# a body sent only once the server said 100 Continue
CASES["100 continue"] = (
    _post("/echo", b"", "expect: 100-continue").replace(b"length: 0", b"length: 4"),
    b"body" + CLOSING,
)


@pytest.fixture(scope="module")
def servers() -> Any:
    with _Server(HeadTimeoutProtocol) as ours, _Server("httptools") as theirs:
        yield ours, theirs


@pytest.mark.parametrize("case", list(CASES))
def test_the_gateways_cycle_answers_byte_for_byte_as_uvicorns(servers: tuple[_Server, _Server], case: str) -> None:
    ours, theirs = servers
    sends = CASES[case]
    got, want = ours.exchange(*sends), theirs.exchange(*sends)
    assert got == want
    assert want.startswith(b"HTTP/1.1 ") or case.startswith("bad")  # (a case that answers something)


@pytest.mark.parametrize("case", ["bad header value", "bad header name"])
def test_a_header_that_would_split_the_response_is_never_written(servers: tuple[_Server, _Server], case: str) -> None:
    ours, _ = servers
    got = ours.exchange(*CASES[case])
    assert b"stolen" not in got and b"x-fine" not in got  # the bad answer's head: not a byte of it
    assert got.count(b"HTTP/1.1 ") == 0  # the connection closed on the bad answer, before the next


def test_a_header_values_trailing_whitespace_is_not_part_of_it(servers: tuple[_Server, _Server]) -> None:
    ours, _ = servers
    got = ours.exchange(*CASES["trailing whitespace"])
    seen = json.loads(got.split(b"\r\n\r\n", 1)[1].split(b"HTTP/1.1", 1)[0])
    assert ["x-a", "spaced"] in seen["headers"] and ["x-b", "both"] in seen["headers"]
