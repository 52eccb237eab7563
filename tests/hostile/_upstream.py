"""A hostile upstream on loopback, for what the fault kit does not script: answers that never
end, a gzip bomb, a stream that floods as fast as the socket takes it.

Each path's first segment names the behaviour (``/endless/v1/chat/completions``...). It speaks
just enough HTTP/1.1: it reads the request head and its ``content-length`` body, then writes its
answer until the gateway stops reading or closes the connection.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import zlib
from collections.abc import Iterator
from functools import cache


@cache
def gzip_bomb(decoded_mib: int = 1024) -> bytes:
    """A gzip body of about 1 MiB that decodes to ``decoded_mib`` MiB of zeros."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1024 * 1024)
    out = bytearray()
    for _ in range(decoded_mib):
        out += comp.compress(zeros)
    out += comp.flush()
    return bytes(out)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


_SSE_CHUNK = (
    b"data: "
    + json.dumps(
        {
            "id": "chatcmpl-flood",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": "flood " * 100}, "finish_reason": None}],
        }
    ).encode()
    + b"\n\n"
)


class _Handler(socketserver.BaseRequestHandler):
    server: HostileUpstream._Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(30)
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = sock.recv(65536)
            if not data:
                return
            buf += data
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(rest) < length:
            data = sock.recv(65536)
            if not data:
                return
            rest += data
        self.server.owner.requests.append(path)
        behaviour = path.strip("/").split("/", 1)[0]
        with contextlib.suppress(OSError):
            getattr(self, f"_{behaviour}")(sock)

    def _endless(self, sock: socket.socket) -> None:
        """A 200 whose JSON body never ends: a valid start, then spaces forever."""
        sock.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            + _chunk(b'{"id": "x", "object": "chat.completion", "choices": [')
        )
        filler = _chunk(b" " * 65536)
        while True:
            sock.sendall(filler)
            self.server.owner.bytes_sent += len(filler)

    def _bomb(self, sock: socket.socket) -> None:
        """A 200 with ``content-encoding: gzip``: about 1 MiB on the wire, 1 GiB decoded."""
        body = gzip_bomb()
        sock.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            b"content-length: %d\r\n\r\n" % len(body)
        )
        sock.sendall(body)
        self.server.owner.bytes_sent += len(body)
        with contextlib.suppress(OSError):
            sock.recv(1)  # until the gateway closes

    def _flood(self, sock: socket.socket) -> None:
        """A stream that never ends, written as fast as the gateway reads it."""
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        piece = _chunk(_SSE_CHUNK * 16)
        while True:
            sock.sendall(piece)
            self.server.owner.bytes_sent += len(piece)


class HostileUpstream:
    """``with HostileUpstream() as up: up.url("endless")`` -> a ``base_url`` for a target."""

    class _Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        owner: HostileUpstream

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.bytes_sent = 0
        self._server = self._Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self

    def url(self, behaviour: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{behaviour}/v1"

    @contextlib.contextmanager
    def running(self) -> Iterator[HostileUpstream]:
        thread = threading.Thread(target=self._server.serve_forever, name="hostile-upstream", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
