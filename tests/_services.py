"""Starting the real services the tests need (redis-server, and the process plumbing the
PostgreSQL and gateway fixtures and the tests' child processes share), on free loopback ports.

One copy of this code serves tests/ledger, tests/state and tests/fleet. Each of them still
starts its OWN server where it needs one: the state and fleet tests stop, freeze (SIGSTOP),
kill and restart theirs, which must not disturb the ledger's session server. Plain
functions and classes, no fixtures; a failure to start raises :class:`ServiceError` with the
tail of the service's log, and :func:`fail_on_service_error` turns it into a test failure
(the tests are never skipped when a service is missing).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_MISSING = (
    "redis-server is not installed: run scripts/services.sh (it runs `apt-get install -y redis-server` "
    "as root) or install Redis 6+ some other way"
)


class ServiceError(RuntimeError):
    """A service did not start; the message carries the tail of its log."""


@contextlib.contextmanager
def fail_on_service_error() -> Iterator[None]:
    """Inside a fixture: a service that cannot start fails the test with its log, no traceback."""
    try:
        yield
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


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
    """Send ``sig`` and wait; a process that does not go within ``timeout`` is killed."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def append_synced(path: Path, line: str) -> None:
    """Append ``line`` and fsync it: the child processes of the crash and fleet tests record
    what they did this way, so a process killed right after has left the line on disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path, timeout: float = 15.0) -> None:
    """Block until something listens on 127.0.0.1:``port``; raise if ``proc`` exits first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise ServiceError(f"{what} exited with {proc.returncode} at start-up:\n{tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise ServiceError(f"{what} did not listen on 127.0.0.1:{port} within {timeout}s:\n{tail(log)}")


class RedisServer:
    """A redis-server on a fixed free loopback port that a test can stop, kill, freeze and
    start again (on the same port, with the same data directory).

    ``persistent=False`` (the store tests): no RDB, no append-only file. ``persistent=True``
    (the fleet): an append-only file fsynced on every write, so what Redis acknowledged before
    a ``kill()`` (SIGKILL, as a crash or a lost node would) is there again after ``start()``.
    """

    def __init__(self, *, persistent: bool = False, prefix: str = "failover-redis-") -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServiceError(REDIS_MISSING)
        self.exe = exe
        self.persistent = persistent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.log = self.dir / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> None:
        """Start it and block until it answers PING (so it has loaded its data, if any)."""
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

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), thawing it first if it is frozen."""
        if self.proc is not None:
            self.resume()
            stop_process(self.proc)
            self.proc = None

    def kill(self) -> None:
        """The hard way (SIGKILL): what a crash or a lost node looks like to its clients."""
        if self.proc is not None:
            stop_process(self.proc, signal.SIGKILL)
            self.proc = None

    def freeze(self) -> None:
        """SIGSTOP: the server holds its connections open and answers nothing."""
        assert self.proc is not None, "freeze() needs a running server"
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def started_redis(*, persistent: bool = False, prefix: str = "failover-redis-") -> Iterator[RedisServer]:
    """A started :class:`RedisServer` for a fixture's lifetime; a failure to start fails the test."""
    with fail_on_service_error():
        server = RedisServer(persistent=persistent, prefix=prefix)
        try:
            server.start()
        except BaseException:
            server.close()
            raise
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``failover serve`` as a real process on a free loopback port (``args``: ``--config F``...),
    yielded once its /healthz answers, as ``(base_url, process)``; stopped with SIGINT (a
    graceful drain), killed if it does not stop in 20 s. The process's output is on
    ``process.stdout`` (stderr merged)."""
    import sys

    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "failover.cli", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        until = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise AssertionError(f"serve exited with {proc.returncode}:\n{out}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > until:
                raise AssertionError("serve did not come up in 30s")
            time.sleep(0.05)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
