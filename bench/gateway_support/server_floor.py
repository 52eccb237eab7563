"""What the HTTP server layer costs per request, apart from everything the gateway does.

    .venv/bin/python bench/gateway_support/server_floor.py                # 10 s per variant, twice
    .venv/bin/python bench/gateway_support/server_floor.py --seconds 5 --rounds 1

Three servers answer the bench's chat request with one fixed JSON answer, each pinned to core 0
while ``wrk`` (64 connections, the same body as bench/gateway.py's) runs on core 1:

* ``failover-protocol``: uvicorn with the protocol ``failover serve`` uses (its head, body and
  write bounds) and a minimal ASGI app (reads the body, sends the answer);
* ``uvicorn``: the same app on uvicorn's own httptools protocol;
* ``bare``: an httptools parser on a uvloop protocol that writes the answer from its callback:
  no ASGI, no task per request.

Printed per variant: requests per second and the CPU time of the server process per request.
The gap between the first two rows and ``bare`` is the most a server of the gateway's own
could save per request; what the gateway spends beyond the first row is its own work.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from gateway import PY, Proc, Target, ceiling, pin, wait_http  # noqa: E402

VARIANTS = ("failover-protocol", "uvicorn", "bare")
ANSWER = (
    b'{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}]}'
)


def serve_asgi(port: int, protocol: str) -> None:
    import uvicorn

    from failover.gateway._protocol import HeadTimeoutProtocol

    head = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]

    async def app(scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": ANSWER})

    http = HeadTimeoutProtocol if protocol == "failover-protocol" else "httptools"
    uvicorn.run(app, host="127.0.0.1", port=port, http=http, loop="uvloop", access_log=False, log_level="warning")


def serve_bare(port: int) -> None:
    import asyncio

    import httptools
    import uvloop

    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(ANSWER),
        ANSWER,
    )

    class Bare(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.parser = httptools.HttpRequestParser(self)

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_message_complete(self) -> None:
            self.transport.write(answer)  # type: ignore[attr-defined]

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Bare, "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(main())


class Floor(Target):
    """One of the three servers, started like bench/gateway.py's targets (pinned to core 0) so
    its ``ceiling`` measures it: the same wrk script, parsing and CPU accounting."""

    model = "bench"

    def __init__(self, variant: str, logdir: Path) -> None:
        super().__init__(0, logdir)
        self.name = variant

    def start(self) -> None:
        cmd = [PY, __file__, "--serve", self.name, "--port", str(self.port)]
        self.proc = Proc(self.name, pin(0, cmd), self.logdir)
        if not wait_http(f"http://127.0.0.1:{self.port}/healthz", 20):
            raise RuntimeError(f"{self.name} did not start:\n{self.proc.tail()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2, help="each variant this many times, alternating")
    ap.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve is not None:
        serve_bare(a.port) if a.serve == "bare" else serve_asgi(a.port, a.serve)
        return 0
    logdir = Path(tempfile.mkdtemp(prefix="failover-server-floor-"))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; wrk -c64 for {a.seconds:g} s per run")
    print("| variant | round | requests/s | CPU µs/req |\n| --- | --- | --- | --- |")
    for r in range(a.rounds):
        for variant in VARIANTS:
            t = Floor(variant, logdir)
            t.start()
            try:
                ceiling(t, 2, 64, logdir)  # warm-up, not counted
                res = ceiling(t, a.seconds, 64, logdir)
            finally:
                t.stop()
            if "failed" in res:
                raise RuntimeError(f"{variant}: wrk failed: {res['failed']}")
            print(f"| {variant} | {r + 1} | {res['rps']:,.0f} | {res['gateway_cpu_us_per_req']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
