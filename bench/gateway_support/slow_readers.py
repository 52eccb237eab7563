"""Memory of ``failover serve`` while slow clients sit on big streams.

    python bench/gateway_support/slow_readers.py                                  # this tree
    python bench/gateway_support/slow_readers.py old=/tmp/old/src new=src --mb 25 --clients 5

An upstream of its own (``--upstream-only`` mode of this file, a subprocess) answers every
``POST`` with one big OpenAI-style SSE stream (``--mb`` megabytes of 4 KB content events),
written as fast as its socket accepts it, and counts the bytes it managed to write. Each
variant's gateway (``name=PYTHONPATH``) is started on a config routing to it; ``--clients``
raw sockets (a 4 KiB receive buffer) ask for a stream each and read 1 KiB every 0.25 s
(4 KiB/s) for ``--seconds``, then close. After one whole stream as a warm-up, printed per
variant: the gateway's RSS before the clients and its peak while they read
(``/proc/<pid>/status``), what the upstream wrote, and the statuses of the gateway's access
lines once the clients left (the warm-up's 200 first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import ClassVar

HERE = Path(__file__).resolve().parent
PY = sys.executable
EVENT_TEXT = "x" * 4000


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-slow",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return _chunked(b"data: " + json.dumps(body).encode() + b"\n\n")


class BigStream(asyncio.Protocol):
    """One upstream connection: every POST gets ``total`` bytes of SSE, written while the
    socket takes them (pause_writing stops the writer: the gateway's backpressure)."""

    written: ClassVar[list[int]] = []  # bytes each stream managed to write, in order of arrival

    def __init__(self, total: int) -> None:
        self.total = total
        self.buf = b""
        self.paused = False
        self.left = 0
        self.slot = -1
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head, sep, body = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        m = re.search(rb"content-length:\s*(\d+)", head, re.I)
        if len(body) < (int(m.group(1)) if m else 0):
            return
        self.buf = b""
        assert self.transport is not None
        if head.startswith(b"GET /stats"):
            out = json.dumps(BigStream.written).encode()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(out), out)
            )
            return
        if head.startswith(b"GET"):
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
            return
        self.slot = len(BigStream.written)
        BigStream.written.append(0)
        first = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + _event(
            {"role": "assistant", "content": ""}
        )
        self._send(first)
        self.left = self.total
        self._pump()

    def _send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        BigStream.written[self.slot] += len(data)

    def _pump(self) -> None:
        event = _event({"content": EVENT_TEXT})
        while self.left > 0 and not self.paused and self.transport is not None and not self.transport.is_closing():
            self._send(event)
            self.left -= len(event)
        if self.left <= 0 and self.transport is not None and not self.transport.is_closing():
            self._send(_event({}, finish="stop") + _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            self.left = -1

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.left > 0:
            self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def _upstream(port: int, total: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: BigStream(total), "127.0.0.1", port)
    print(f"upstream ready on 127.0.0.1:{port}", flush=True)
    async with server:
        await asyncio.sleep(3600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, limit: float) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _request(port: int) -> bytes:
    body = json.dumps(
        {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "Tell me everything."}]}
    ).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (port, len(body), body)
    )


def run_variant(name: str, path: str, up: int, a: argparse.Namespace, work: Path) -> None:
    cfg = work / "failover.yaml"
    cfg.write_text(
        "targets:\n  up:\n    dialect: openai\n"
        f"    base_url: http://127.0.0.1:{up}/v1\n    model: gpt-4o-mini\n"
        "    api_key_env: BENCH_UPSTREAM_KEY\n    capabilities: [chat, streaming]\n"
        "    timeouts: {total: 600, idle: 600}\n"
        "routes:\n  bench:\n    primary: [up]\n"
        "gateway:\n  envelope: {deadline_ms: 600000}\n"
    )
    port = _free_port()
    env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench", "PYTHONPATH": str(Path(path).resolve())}
    log_path = work / f"{name}.log"
    with open(log_path, "w") as log:
        gw = subprocess.Popen(
            [PY, "-m", "failover.cli", "serve", "--config", str(cfg), "--port", str(port)],
            env=env,
            start_new_session=True,
            stdout=log,
            stderr=log,
        )
        try:
            if not _wait_http(f"http://127.0.0.1:{port}/healthz", 60):
                raise RuntimeError(f"{name}: the gateway did not start (see {log_path})")
            _warm(port)  # one whole stream first: lazy imports and first-request caches are not growth
            before = _stats(up)
            base = peak = _rss(gw.pid)
            socks = []
            for _ in range(a.clients):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", port))
                s.sendall(_request(port))
                socks.append(s)
            t0 = time.monotonic()
            while time.monotonic() - t0 < a.seconds:
                for s in socks:
                    s.settimeout(0.01)
                    with contextlib.suppress(TimeoutError):
                        s.recv(1024)
                peak = max(peak, _rss(gw.pid))
                time.sleep(0.25)
            wrote = _stats(up)[len(before) :]
            for s in socks:
                s.close()
            time.sleep(2)
        finally:
            os.killpg(gw.pid, signal.SIGTERM)
            gw.wait(60)
    statuses = re.findall(r"status=(\d+)", log_path.read_text())
    mb = sum(wrote) / 1e6
    print(
        f"{name:6s} RSS {base / 2**20:6.1f} -> peak {peak / 2**20:6.1f} MiB (+{(peak - base) / 2**20:.1f}); "
        f"upstream wrote {mb:.1f} MB of {a.clients * a.mb} MB; access statuses {statuses}",
        flush=True,
    )


def _warm(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(_request(port))
        s.settimeout(30)
        tail = b""
        while not tail.endswith(b"0\r\n\r\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            tail = (tail + chunk)[-16:]


def _stats(up: int) -> list[int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{up}/stats", timeout=5) as r:
        return list(json.loads(r.read()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="name=PYTHONPATH (default: this tree's src)")
    ap.add_argument("--mb", type=int, default=25, help="megabytes per stream")
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--upstream-only", type=int, metavar="PORT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.upstream_only:
        asyncio.run(_upstream(a.upstream_only, a.mb * 1_000_000))
        return 0
    variants = [v.split("=", 1) for v in a.variants] or [["tree", str(HERE.parent.parent / "src")]]
    work = Path(tempfile.mkdtemp(prefix="failover-slow-readers-"))
    up = _free_port()
    upstream = subprocess.Popen([PY, __file__, "--upstream-only", str(up), "--mb", str(a.mb)], start_new_session=True)
    try:
        if not _wait_http(f"http://127.0.0.1:{up}/stats", 15):
            raise RuntimeError("upstream did not start")
        for name, path in variants:
            run_variant(name, path, up, a, work)
    finally:
        os.killpg(upstream.pid, signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
