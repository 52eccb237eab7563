"""A recording pass-through in front of the gateway: what each answer told the client.

The runtimes' own output does not always say what they were told (a ``Retry-After``, an error
type); this proxy does, for any client and any version of the gateway. Every request is
forwarded as it came (method, path, query, headers, body), every answer streamed back as it
goes; each exchange is kept as a :class:`Told`: the path, the status, ``retry-after`` /
``retry-after-ms`` and the first 4,000 bytes of an error body. Served by uvicorn on a free
loopback port in a thread of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import uvicorn
from starlette.types import Receive, Scope, Send

from tests._services import free_port

_HOP = {b"host", b"content-length", b"connection", b"transfer-encoding", b"keep-alive"}


@dataclass(frozen=True)
class Told:
    path: str
    status: int
    retry_after: str | None
    retry_after_ms: str | None
    error: bytes  # the head of an error answer's body (empty for a 2xx)
    at: float  # when the request arrived (time.monotonic)

    @property
    def wait(self) -> float | None:
        """The wait this answer told, in seconds (``retry-after-ms`` first, as the SDKs read it)."""
        if self.retry_after_ms is not None:
            return float(self.retry_after_ms) / 1000
        if self.retry_after is not None:
            return float(self.retry_after)
        return None


class Recorder:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.told: list[Told] = []
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        arrived = time.monotonic()
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(600.0))
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope.get("query_string", b"").decode()
        url = self.upstream + scope["path"] + (f"?{query}" if query else "")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k not in _HOP]
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        response = await self._client.send(request, stream=True)
        try:
            out = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            head = b""
            async for chunk in response.aiter_raw():
                if response.status_code >= 400 and len(head) < 4000:
                    head += chunk[: 4000 - len(head)]
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()
            self.told.append(
                Told(
                    scope["path"],
                    response.status_code,
                    response.headers.get("retry-after"),
                    response.headers.get("retry-after-ms"),
                    head,
                    arrived,
                )
            )

    def shortest_gap(self, path: str) -> float:
        """The shortest time between two requests to ``path`` (inf for fewer than two)."""
        times = sorted(t.at for t in self.told if t.path.startswith(path))
        return min((b - a for a, b in itertools.pairwise(times)), default=float("inf"))

    def longest_wait(self) -> float:
        """The longest wait any answer told (0 when none did)."""
        return max((t.wait for t in self.told if t.wait is not None), default=0.0)


@contextlib.contextmanager
def recording(upstream: str) -> Iterator[tuple[str, Recorder]]:
    """A :class:`Recorder` in front of ``upstream``, served on loopback: ``(its base URL, it)``."""
    recorder = Recorder(upstream)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(recorder, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the recording proxy did not start")
        threading.Event().wait(0.02)
    try:
        yield f"http://127.0.0.1:{port}", recorder
    finally:
        server.should_exit = True
        thread.join(10)


__all__ = ["Recorder", "Told", "recording"]
