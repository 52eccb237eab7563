"""What ``failover serve``'s protocol (gateway/_protocol.py) adds to uvicorn's, beside the head
deadline (test_slow_clients.py):

* a response's head leaves with the start of its body (``_OneWrite``): one write per plain
  answer instead of uvicorn's two, a stream's head never held past the loop's next turn, a
  100 Continue never held at all;
* the app hears of a lost connection from the protocol's own future (the
  ``failover.connection_lost`` scope extension) and cancels the upstream call at once, with
  no task per request waiting on ``receive()``; without the extension (any other server) it
  falls back to that task."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

from failover.gateway import _disconnect, create_app
from failover.gateway._disconnect import CONNECTION_LOST
from failover.gateway._disconnect import Disconnect as _Disconnect
from failover.gateway._protocol import _OneWrite
from failover.testing import FakeProvider, Outcome, ReceivedCall, Reply

from ._kit import Kit, chat_body, chat_scope
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
        stream_body, stream_head = _chat_request(stream=True)
        sock.sendall(stream_head + stream_body)
        sock.settimeout(10)
        data = b""
        while not data.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, f"closed early: {data[-200:]!r}"
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked" in data.lower()


async def test_disconnect_comes_from_the_protocols_future_when_offered() -> None:
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def receive() -> dict[str, Any]:
        raise AssertionError("receive() must not be awaited when the protocol reports disconnects")

    gone = _Disconnect({"type": "http", "extensions": {CONNECTION_LOST: lost}}, receive)
    assert gone.future is lost
    gone.close()
    await gone.aclose()
    assert not lost.cancelled()  # the connection's future is never the request's to cancel


async def test_without_the_extension_a_task_waits_on_receive() -> None:
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    gone = _Disconnect({"type": "http"}, messages.get)
    await messages.put({"type": "http.request", "body": b"", "more_body": False})
    await asyncio.sleep(0)
    assert not gone.future.done()
    await messages.put({"type": "http.disconnect"})
    await asyncio.wait_for(gone.future, 1.0)
    await gone.aclose()


async def test_a_streams_events_are_sent_from_the_requests_own_task() -> None:
    """The stream is pumped in the task the server gave the request: no second task and no
    wait on three futures per stream, and no turn of the loop before the upstream call."""
    kit = Kit()
    kit.providers["a"].load([Reply.ok("one two three", chunk_interval=0.01)])
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    scope = {**chat_scope(hold_tokens=0), "extensions": {CONNECTION_LOST: lost}}
    body = json.dumps(chat_body(stream=True)).encode()
    messages: list[dict[str, Any]] = []
    senders: list[asyncio.Task[Any] | None] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        senders.append(asyncio.current_task())
        messages.append(message)

    serving = asyncio.create_task(kit.app(scope, receive, send))
    await asyncio.wait_for(serving, 10)
    assert messages[0]["type"] == "http.response.start" and messages[0]["status"] == 200
    text = b"".join(m.get("body", b"") for m in messages[1:]).decode()
    assert "three" in text and text.endswith("data: [DONE]\n\n")
    assert len(messages) > 3 and set(senders) == {serving}
    assert len(kit.providers["a"].calls) == 1


async def _stream_messages(kit: Kit) -> list[dict[str, Any]]:
    """The ASGI messages of one streamed chat request, the app driven directly."""
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    scope = {**chat_scope(hold_tokens=0), "extensions": {CONNECTION_LOST: lost}}
    body = json.dumps(chat_body(stream=True)).encode()
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await asyncio.wait_for(kit.app(scope, receive, send), 10)
    return messages


@pytest.mark.parametrize(("interval", "bodies"), [(0.0, 1), (0.05, 5)], ids=["together", "apart"])
async def test_events_that_arrive_together_leave_in_one_write(interval: float, bodies: int) -> None:
    kit = Kit()
    kit.providers["a"].load([Reply.ok("one two three four", chunk_interval=interval)])
    messages = await _stream_messages(kit)
    sent = [m["body"] for m in messages if m["type"] == "http.response.body"]
    text = b"".join(sent).decode()
    assert all(word in text for word in ("one", "two", "three", "four")) and text.endswith("data: [DONE]\n\n")
    assert len(sent) == bodies  # together: the whole stream in one write; apart: one per gap, and the end


@pytest.mark.parametrize("when", ["mid-stream", "sending-its-refusal"])
async def test_a_server_cancelling_a_stream_request_sees_it_cancelled(when: str) -> None:
    """The server's own cancel (its shutdown) is never swallowed by the pump's watch: the
    request's task ends cancelled, also when the pump had already ended the request."""
    kit = Kit()
    mid = when == "mid-stream"
    route = "chat" if mid else "solo"
    provider = kit.providers["a" if mid else "s"]
    provider.load([Reply.ok(" ".join(["w"] * 400), chunk_interval=0.05)] if mid else [Reply.invalid()])
    lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    scope = {**chat_scope(hold_tokens=0), "extensions": {CONNECTION_LOST: lost}}
    body = json.dumps(chat_body(route, stream=True)).encode()
    started = asyncio.Event()
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        started.set()
        if not mid:
            await never.wait()  # the refusal's head never leaves: the server cancels meanwhile

    serving = asyncio.create_task(kit.app(scope, receive, send))
    await asyncio.wait_for(started.wait(), 10)
    serving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(serving, 10)
    assert provider.calls


def _ended(provider: FakeProvider, limit: float = 10.0) -> ReceivedCall:
    """The provider's one call once it has ended (real time: the server runs in a thread)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if provider.calls and provider.calls[-1].outcome is not Outcome.PENDING:
            break
        time.sleep(0.005)
    (call,) = provider.calls
    return call


@pytest.mark.e2e
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_client_that_leaves_cancels_the_upstream_call_through_the_protocols_signal(
    stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[object] = []

    async def no_watcher(receive: object) -> None:  # the fallback must not be what noticed
        waited.append(receive)
        await asyncio.sleep(3600)

    monkeypatch.setattr(_disconnect, "_wait_disconnect", no_watcher)
    kit = Kit()
    a = kit.providers["a"]
    a.load([Reply.hang()] if not stream else [Reply.ok(" ".join(["w"] * 400), chunk_interval=0.05)])
    body, head = _chat_request(stream=stream)
    with _HeadTimeoutServer(kit.app, 10.0) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(head + body)
        until = time.monotonic() + 10
        while not a.calls and time.monotonic() < until:
            time.sleep(0.005)
        if stream:
            sock.settimeout(10)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")  # output began
        t0 = time.monotonic()
        sock.close()
        call = _ended(a)
        noticed = time.monotonic() - t0
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert noticed < 2.0  # at once (wide margin on a shared machine), not after the 400 words or a hang
    if stream:
        assert call.events_sent < 100
    assert waited == []
