"""What the bench's own servers (the fake upstream, the relay) share: a protocol served on
loopback for a bounded time, on uvloop where it is installed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


async def serve(name: str, factory: Callable[[], asyncio.Protocol], port: int, max_seconds: float) -> None:
    """Serve ``factory``'s protocol on 127.0.0.1:``port``; say so on stdout once listening, and
    stop after ``max_seconds`` (a forgotten server ends by itself)."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(factory, "127.0.0.1", port, backlog=4096, reuse_address=True)
    print(f"{name} ready on 127.0.0.1:{port}", flush=True)
    try:
        await asyncio.sleep(max_seconds)
    finally:
        server.close()


def run(main: Coroutine[Any, Any, None]) -> None:
    """``main`` on uvloop, or on asyncio's own loop where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)
