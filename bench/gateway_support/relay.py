"""The least a Python gateway adds: a byte relay on uvloop, for bench/gateway.py's ``relay`` row.

    python bench/gateway_support/relay.py --port 18003 --upstream 18001

Each client connection gets its own kept-alive connection to the upstream (opened when the
client connects, TCP_NODELAY both ways), and bytes are passed on as they arrive in each
direction: no parsing, no headers added, no JSON. A request through it pays what every
gateway written in Python pays and nothing more: one more process woken twice (the request
in, the answer back), two more sends and receives, and the event loop between them. The
``relay`` row is that floor on the machine the bench runs on; what a gateway adds beyond it
is its own work.
"""

from __future__ import annotations

import argparse
import asyncio
import socket

from loopback import run, serve


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Back(asyncio.Protocol):
    """The upstream side of one client connection: its bytes go to the client."""

    def __init__(self, front: _Front) -> None:
        self.front = front

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        if self.front.transport is not None:
            self.front.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.front.transport is not None:
            self.front.transport.close()


class _Front(asyncio.Protocol):
    """One client connection: its bytes go to its own upstream connection."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.transport: asyncio.Transport | None = None
        self.back: asyncio.Transport | None = None
        self.early: list[bytes] = []  # bytes that came before the upstream connection was up

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        _nodelay(transport)
        self.transport = transport  # type: ignore[assignment]
        asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        back, _ = await loop.create_connection(lambda: _Back(self), "127.0.0.1", self.upstream)
        self.back = back  # type: ignore[assignment]
        for data in self.early:
            back.write(data)
        self.early.clear()

    def data_received(self, data: bytes) -> None:
        if self.back is None:
            self.early.append(data)
        else:
            self.back.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.back is not None:
            self.back.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--max-seconds", type=float, default=3600)
    a = p.parse_args()
    run(serve("relay", lambda: _Front(a.upstream), a.port, a.max_seconds))
