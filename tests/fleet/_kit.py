"""The pieces of a fleet on one machine: ``failover serve`` processes over one config file
(the Redis that can be killed and started again is tests/_services.py's ``RedisServer``).

Plain classes, no fixtures: tests/fleet/conftest.py builds its fixtures from them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests._services import ServiceError, free_port, stop_process, tail


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
