"""Connecting to a host name: its addresses tried in turn, families alternating ("Happy Eyeballs").

The addresses are tried in the resolver's order with families alternating (RFC 8305); the
next attempt starts when the one before fails or has not connected within 250 ms, and the
first to connect wins. uvloop's ``create_connection`` has no such option, hence this.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

_STAGGER_S = 0.25  # RFC 8305's connection attempt delay


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def interleave(infos: list[tuple[Any, ...]]) -> list[tuple[int, Any]]:
    """(family, address) in the resolver's order, alternating address families (RFC 8305)."""
    by_family: dict[int, list[tuple[int, Any]]] = {}
    for family, _, _, _, addr in infos:
        by_family.setdefault(family, []).append((family, addr))
    queues = list(by_family.values())
    out: list[tuple[int, Any]] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


async def dial(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A connected socket to one of ``host``'s addresses ("Happy Eyeballs", RFC 8305).

    The addresses are tried in the resolver's order with families alternating; the next
    attempt starts when the one before fails or has not connected within 250 ms, and the first
    to connect wins (the others are closed). So an address that silently drops packets (an
    IPv6 route that goes nowhere, say) costs 250 ms, not the whole connect timeout. uvloop's
    create_connection has no such option, hence this."""
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addrs = interleave(infos)
    if not addrs:
        raise OSError(f"no address found for {host}")
    errors: list[BaseException] = []
    pending: set[asyncio.Task[socket.socket]] = set()
    winner: socket.socket | None = None

    def settle(done: set[asyncio.Task[socket.socket]]) -> None:
        nonlocal winner
        for t in done:
            pending.discard(t)
            exc = t.exception()
            if exc is not None:
                errors.append(exc)
            elif winner is None:
                winner = t.result()
            else:
                t.result().close()  # connected too, but second

    try:
        for family, addr in addrs:
            pending.add(loop.create_task(_attempt(loop, family, addr)))
            done, _ = await asyncio.wait(pending, timeout=_STAGGER_S, return_when=asyncio.FIRST_COMPLETED)
            settle(done)
            if winner is not None:
                return winner
        while pending and winner is None:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            settle(done)
        if winner is not None:
            return winner
        raise OSError("; ".join(dict.fromkeys(str(e) for e in errors)))
    finally:
        for t in pending:
            t.cancel()


async def _attempt(loop: asyncio.AbstractEventLoop, family: int, addr: Any) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await loop.sock_connect(sock, addr)
    except BaseException:
        sock.close()
        raise
    return sock
