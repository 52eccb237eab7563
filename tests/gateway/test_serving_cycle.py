"""``failover serve``'s request cycle (gateway/_protocol.py ``_Cycle``) against uvicorn's own:
the same requests, byte for byte the same answers, for less work per message.

Each case is sent on a fresh connection to two real servers on loopback, one with the gateway's
protocol and one with uvicorn's httptools protocol, both serving one small ASGI app whose path
says what to send (a content-length answer whole or in parts, a chunked one, a 204, a HEAD, an
HTTP/1.0 client, a ``connection: close``, a pipelined pair, a 100 Continue, a header with a
line break in its name or value). A closing request follows each case on the same connection, so
both servers end it the same way and the bytes can be compared whole."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
import uvicorn

from failover.gateway._disconnect import BODY_RECEIVED
from failover.gateway._protocol import HeadTimeoutProtocol

from ._kit import ServerThread

pytestmark = pytest.mark.e2e

CLOSING = b"GET /plain HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].rpartition(".")[2]  # startup, then shutdown
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    received = scope.get("extensions", {}).get(BODY_RECEIVED)
    here = received is not None and received()  # asked before the first receive(), as the gateway does
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
    elif path == "/here":  # whether the server said the whole body had arrived before it was read
        await start(200, (b"content-length", b"1"))
        await part(b"1" if here else b"0")
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


class _Server(ServerThread):
    """The kit's server thread with this module's app, on the given HTTP protocol."""

    def __init__(self, http: object) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        config = uvicorn.Config(app, log_level="critical", lifespan="on", http=http)  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)

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
_head, _, _body = _post("/echo", b"body", "expect: 100-continue").partition(b"\r\n\r\n")
CASES["100 continue"] = (_head + b"\r\n\r\n", _body + CLOSING)


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


def test_a_body_that_came_with_its_head_is_said_to_be_here_and_one_still_coming_is_not(
    servers: tuple[_Server, _Server],
) -> None:
    """What lets the gateway read a body without arming its timer: the protocol says, before the
    first receive(), whether the whole body has arrived; a body of which only a part came with
    the head has not."""
    ours, _ = servers
    whole = ours.exchange(_post("/here", b"{}") + CLOSING)
    assert whole.split(b"\r\n\r\n")[1].startswith(b"1")
    request = _post("/here", b"{}")
    with socket.create_connection(("127.0.0.1", ours.port)) as sock:
        sock.settimeout(10)
        sock.sendall(request[:-1])  # the head and the body's first byte
        time.sleep(0.2)
        sock.sendall(request[-1:] + CLOSING)
        partial = b""
        while chunk := sock.recv(65536):
            partial += chunk
    assert partial.split(b"\r\n\r\n")[1].startswith(b"0")
