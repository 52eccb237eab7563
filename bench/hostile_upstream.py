"""What one hostile answer costs a worker: peak RSS and the event loop's worst lag.

    PYTHONPATH=src .venv/bin/python bench/hostile_upstream.py                # every transport, every case
    PYTHONPATH=src .venv/bin/python bench/hostile_upstream.py --transport http1 --case bomb

Each case runs in a fresh subprocess (so its ``ru_maxrss`` is its own): a raw HTTP/1.1 server
in a thread answers with the case, the transport (default limits) sends one POST to it, and a
probe task sleeping 5 ms at a time records how late each wake-up is. Cases:

* ``bomb``: a 1 MiB gzip body that inflates to 1 GiB of zeros (``content-encoding: gzip``);
* ``bomb-stream``: the same as ``text/event-stream``, read through ``stream()``;
* ``endless``: a plain body with no length that never ends (about 64 MiB/s).

Printed per case: what the transport raised, the RSS before and at its peak (MiB), the worst
loop lag (ms) and the time to the failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from typing import Any

MiB = 1024 * 1024


def bomb(decoded: int = 1024 * MiB) -> bytes:
    zeros = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(zeros) + c.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(decoded // MiB):
        crc = zlib.crc32(zeros, crc)
    body = first + again * (decoded // MiB - 2) + last
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body + struct.pack("<II", crc, decoded & 0xFFFFFFFF)


def serve(case: str, payload: bytes) -> int:
    """The warm-up requests get a small plain answer, every later one the case."""
    sock = socket.create_server(("127.0.0.1", 0))
    seen = [0]

    def one(conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            seen[0] += 1
            try:
                if seen[0] <= (2 if case == "bomb-stream" else 1):
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                elif case == "endless":
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
                    end = time.monotonic() + 30
                    while time.monotonic() < end:
                        conn.sendall(b"x" * 65536)
                        time.sleep(0.001)
                else:
                    ctype = b"text/event-stream" if case == "bomb-stream" else b"application/json"
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n"
                        % (ctype, len(payload))
                    )
                    for i in range(0, len(payload), 65536):
                        conn.sendall(payload[i : i + 65536])
                        time.sleep(0.0005)
            except OSError:
                pass

    def accept() -> None:
        while True:
            conn, _ = sock.accept()
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    port: int = sock.getsockname()[1]
    return port


async def run_case(transport_name: str, case: str) -> dict[str, Any]:
    from failover.transport import AiohttpTransport, Http1Transport, HttpRequest, HttpxTransport

    payload = bomb() if case.startswith("bomb") else b""
    port = serve(case, payload)
    transport = {"http1": Http1Transport, "httpx": HttpxTransport, "aiohttp": AiohttpTransport}[transport_name]()
    req = HttpRequest(method="POST", url=f"http://127.0.0.1:{port}/v1/chat/completions", headers={}, json={"a": 1})
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            t = loop.time()
            await asyncio.sleep(0.005)
            lags.append(loop.time() - t - 0.005)

    await transport.send(req, connect_timeout=5, total_timeout=60)  # warm-up: first-use costs are not the case's
    if case == "bomb-stream":
        async with transport.stream(req, connect_timeout=5) as warm:
            await warm.aread()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    task = asyncio.create_task(probe())
    await asyncio.sleep(0.05)
    t0 = loop.time()
    outcome = "ok"
    try:
        if case == "bomb-stream":
            async with transport.stream(req, connect_timeout=5) as resp:
                async for _ in resp.aiter_bytes():
                    pass
        else:
            resp2 = await transport.send(req, connect_timeout=5, total_timeout=60)
            outcome = f"ok: {len(resp2.body)} bytes"
    except Exception as exc:
        outcome = f"{type(exc).__name__}({getattr(exc, 'phase', '')}): {exc}"
    took = loop.time() - t0
    stop.set()
    await task
    await transport.aclose()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "transport": transport_name,
        "case": case,
        "outcome": outcome[:140],
        "rss_before_mib": round(rss0, 1),
        "rss_peak_mib": round(rss1, 1),
        "max_loop_lag_ms": round(max(lags) * 1000, 1),
        "seconds": round(took, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transport", default="http1,httpx,aiohttp")
    ap.add_argument("--case", default="bomb,bomb-stream,endless")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the subprocess
    args = ap.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(run_case(args.transport, args.case))))
        return
    for t in args.transport.split(","):
        for c in args.case.split(","):
            out = subprocess.run(
                [sys.executable, __file__, "--one", "--transport", t, "--case", c],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout)
            print(
                f"{r['transport']:8} {r['case']:12} rss {r['rss_before_mib']:6.1f} -> {r['rss_peak_mib']:6.1f} MiB"
                f"  loop lag max {r['max_loop_lag_ms']:7.1f} ms  {r['seconds']:6.3f} s  {r['outcome']}"
            )


if __name__ == "__main__":
    main()
