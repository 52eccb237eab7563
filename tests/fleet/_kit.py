"""The pieces of a fleet on one machine: a Redis that can be stopped and started again, and
``failover serve`` processes over one config file.

Plain classes, no fixtures: tests/fleet/conftest.py builds its fixtures from them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml


class ServiceError(RuntimeError):
    """A service of the fleet did not start; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class RedisServer:
    """A redis-server on a fixed loopback port, with an append-only file fsynced on every write.

    ``kill()`` stops it the hard way (SIGKILL, as a crash or a lost node would) and
    ``start()`` brings it back on the same port with the same data directory, so what it
    acknowledged before the kill is there again: the fleet tests stop Redis mid-load and
    then check that no ledger record was lost. Durability costs a write per command; the
    fleet's short tests do not notice.
    """

    def __init__(self, *, persistent: bool = True) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServiceError(
                "redis-server is not installed: run scripts/services.sh (apt-get install -y redis-server) "
                "or install Redis 6+ some other way"
            )
        self.exe = exe
        self.persistent = persistent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="failover-fleet-redis-"))
        self.log = self.dir / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> None:
        persist = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        cmd = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persist]
        cmd += ["--dir", str(self.dir), "--daemonize", "no", "--logfile", str(self.log)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise ServiceError(f"redis-server exited with {self.proc.returncode} at start-up:\n{tail(self.log)}")
            if self.ping():
                return
            time.sleep(0.02)
        raise ServiceError(f"redis-server did not answer PING on port {self.port} within {timeout}s:\n{tail(self.log)}")

    def ping(self) -> bool:
        """True once Redis answers (and has loaded its data: LOADING answers are not PONG)."""
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
        return False

    def kill(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, signal.SIGKILL)
            self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def write_config(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False))
    return path


class Gateway:
    """One ``failover serve --config`` process on its own port."""

    def __init__(self, config: Path, *, name: str, workdir: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.port = free_port()
        self.log = workdir / f"{name}.log"
        self._out = self.log.open("wb")
        cmd = [sys.executable, "-m", "failover.cli", "serve", "--config", str(config), "--port", str(self.port)]
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=workdir
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, deadline: float) -> None:
        """Block until ``/readyz`` answers 200 (``deadline`` is a time.monotonic() value)."""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"{self.name} exited with {self.proc.returncode}:\n{tail(self.log)}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise ServiceError(f"{self.name} was not ready on port {self.port} in time:\n{tail(self.log)}")

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", timeout=5)

    def post(self, route: str) -> httpx.Response:
        """One chat request on ``route``."""
        body = {"model": route, "messages": [{"role": "user", "content": "hi"}]}
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=10)

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGTERM, timeout=20)
        self._out.close()


def start_gateways(config: Path, n: int, workdir: Path, *, timeout: float = 60.0) -> list[Gateway]:
    """Start ``n`` gateways at once (their imports overlap) and wait until all are ready."""
    gws = [Gateway(config, name=f"gw{i + 1}", workdir=workdir) for i in range(n)]
    try:
        deadline = time.monotonic() + timeout
        for gw in gws:
            gw.wait_ready(deadline)
    except BaseException:
        for gw in gws:
            gw.stop()
        raise
    return gws
