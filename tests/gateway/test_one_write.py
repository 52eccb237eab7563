"""A response's head leaves with the start of its body (gateway/_protocol.py, ``_OneWrite``):
one write per plain answer instead of uvicorn's two, a stream's head never held past the
loop's next turn, a 100 Continue never held at all."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from failover.gateway import create_app
from failover.gateway._protocol import _OneWrite

from ._kit import Kit
from .test_slow_clients import _chat_request, _HeadTimeoutServer, _read_response


class Recording:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


async def test_head_and_body_of_a_plain_answer_are_one_write() -> None:
    t = Recording()
    w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
    w.write(HEAD)
    w.write(b"{}")
    await asyncio.sleep(0)  # the loop's next turn: nothing more to send
    assert t.writes == [HEAD + b"{}"]


async def test_a_head_without_a_body_yet_goes_out_on_the_next_turn() -> None:
    t = Recording()
    w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
    w.write(HEAD)
    assert t.writes == []
    await asyncio.sleep(0)
    assert t.writes == [HEAD]  # a stream's head is not kept waiting for its first event
    w.write(b"HTTP/ is just text in a later chunk")
    assert t.writes == [HEAD, b"HTTP/ is just text in a later chunk"]


async def test_100_continue_is_sent_at_once_and_the_real_head_is_still_joined() -> None:
    t = Recording()
    w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
    w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert t.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    w.write(HEAD)
    w.write(b"{}")
    assert t.writes[1:] == [HEAD + b"{}"]


async def test_close_sends_a_held_head_first() -> None:
    t = Recording()
    w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
    w.write(HEAD)
    w.close()
    assert t.writes == [HEAD] and t.closed
    await asyncio.sleep(0)
    assert t.writes == [HEAD]  # not twice


@pytest.mark.e2e
def test_kept_alive_plain_answers_and_a_stream_over_the_serving_protocol() -> None:
    kit = Kit()
    app = create_app(kit.router, kit.settings)
    body, head = _chat_request()
    with _HeadTimeoutServer(app, 10.0) as server, socket.create_connection(("127.0.0.1", server.port)) as sock:
        for _ in range(3):  # one connection, three answers, each whole and parseable
            sock.sendall(head + body)
            answer = _read_response(sock)
            status, _, rest = answer.partition(b"\r\n")
            assert status == b"HTTP/1.1 200 OK"
            assert json.loads(rest.partition(b"\r\n\r\n")[2])["object"] == "chat.completion"
        stream_body = json.dumps({**json.loads(body), "stream": True}).encode()
        stream_head = head.replace(
            f"content-length: {len(body)}".encode(), f"content-length: {len(stream_body)}".encode()
        )
        sock.sendall(stream_head + stream_body)
        sock.settimeout(10)
        data = b""
        while not data.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, f"closed early: {data[-200:]!r}"
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in data.lower()
