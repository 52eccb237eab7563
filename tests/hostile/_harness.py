"""A real ``failover serve`` in its own process, watched while a hostile case runs.

- :meth:`Served.watchdog`: a process of its own sends ``GET /healthz`` every 20 ms on a
  connection of its own and records how long each answer took. One tenant's hostile request
  must not freeze the event loop for everyone else: the worst probe must answer within the
  limit (100 ms by default, a wide margin over the ~1 ms a probe takes on an idle loop).
- :meth:`Served.rss_mib`: the gateway process's resident memory, read from ``/proc``. A
  hostile case may use memory while it runs; once it is over the process must come back near
  its baseline (memory that stays is memory the next attacker adds to).

The gateway runs with one worker, so the process that ``serve`` starts is the one that serves.
Where the tests may (as root, as in CI), the gateway and the probe run at a raised CPU
priority: on a two-core machine the attacker, the fake upstreams and anything else running
share the cores with them, and the watchdog is there to see the gateway's event loop stall,
not the scheduler hand a core to the attacker for a moment (seen: a 164 ms probe with two
busy processes beside an unstalled gateway).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

PROBE_EVERY_S = 0.02
PRIORITY = -10  # nice value for the gateway and the probe, when the tests may raise it


class LogScan:
    """Every log line of the hostile suite, scanned for every secret it uses.

    Each ``serve`` runs at ``--log-level debug`` unless a test asks for another level, and each
    line it writes is checked as it is read; the in-process gateways' records are checked by a
    DEBUG handler on the root logger (see conftest). The secrets: every ``*_KEY``/``*_TOKEN``
    string of the suite's modules, and every credential-like value a gateway's environment is
    given. A line holding one is kept in ``leaks``, which the suite's end asserts is empty."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()
        self.leaks: list[str] = []
        self.lines = 0
        self._lock = threading.Lock()

    def add(self, *secrets: str) -> None:
        with self._lock:
            self.secrets.update(s for s in secrets if len(s) >= 8)

    def check(self, line: str, where: str) -> None:
        self.lines += 1
        for secret in self.secrets:
            if secret in line:
                with self._lock:
                    self.leaks.append(f"{where}: {line.rstrip()[:300]}")
                return


SCAN = LogScan()
_SECRET_ENV = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def _raise_priority(proc: subprocess.Popen[str]) -> None:
    """A higher CPU priority for a child just started, if allowed (its threads, all started
    later, inherit it); the inherited one if not."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, proc.pid, PRIORITY)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Watch:
    """What the watchdog saw: every probe's time to answer, worst first on request."""

    times: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def worst(self) -> float:
        return max(self.times, default=0.0)


@dataclass
class Served:
    base: str
    proc: subprocess.Popen[str]
    lines: collections.deque[str]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def rss_mib(self) -> float:
        """Resident memory of the gateway process now, in MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS in /proc/<pid>/status")

    def settled_rss_mib(self, *, wait_s: float = 3.0) -> float:
        """The lowest RSS seen over ``wait_s``: memory a finished case still holds, once the
        connections it opened are closed and its tasks have ended."""
        low = self.rss_mib()
        until = time.monotonic() + wait_s
        while time.monotonic() < until:
            time.sleep(0.1)
            low = min(low, self.rss_mib())
        return low

    @contextmanager
    def watchdog(self, limit_s: float = 0.1) -> Iterator[Watch]:
        """Probe ``/healthz`` every 20 ms while the block runs; fail if any probe took longer
        than ``limit_s`` or failed. The probe runs in a process of its own (a thread of the
        test would share the test's GIL: building a hostile body would be measured as the
        gateway's stall), on a connection it opens before the block."""
        watch = Watch()
        probe = subprocess.Popen(
            [sys.executable, "-c", _PROBE, str(self.port), str(PROBE_EVERY_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        _raise_priority(probe)
        assert probe.stdout is not None and probe.stdin is not None
        assert probe.stdout.readline().strip() == "ready", "the watchdog did not start"
        try:
            yield watch
        finally:
            out, _ = probe.communicate("stop\n", timeout=90)
            for line in out.splitlines():
                kind, _, value = line.partition(" ")
                if kind == "t":
                    watch.times.append(float(value))
                elif kind == "f":
                    watch.failures.append(value)
        assert not watch.failures, watch.failures[:3]
        assert watch.times, "the watchdog sent no probe"
        assert watch.worst <= limit_s, (
            f"/healthz took {watch.worst * 1000:.0f} ms (limit {limit_s * 1000:.0f} ms) "
            f"over {len(watch.times)} probes: the hostile case stalled the event loop"
        )


# The watchdog's process: keep-alive GET /healthz until stdin says stop, one line per probe.
_PROBE = r"""
import http.client, sys, threading, time
port, every = int(sys.argv[1]), float(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
conn.request("GET", "/healthz"); conn.getresponse().read()
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
print("ready", flush=True)
out = []
while not stop.is_set():
    t0 = time.perf_counter()
    try:
        conn.request("GET", "/healthz")
        r = conn.getresponse(); r.read()
        if r.status != 200:
            out.append(f"f /healthz answered {r.status}")
    except Exception as exc:
        out.append(f"f /healthz failed: {exc!r}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    out.append(f"t {time.perf_counter() - t0}")
    stop.wait(every)
print("\n".join(out), flush=True)
"""


@contextmanager
def serve(
    config: Path | None = None, *, env: dict[str, str] | None = None, log_level: str | None = None
) -> Iterator[Served]:
    """``failover serve`` (the embedded default without ``config``) on a free loopback port;
    ``log_level``: its ``--log-level`` (``debug`` when not given, every line scanned by
    :data:`SCAN`; when given, every line is also kept in ``lines``)."""
    port = free_port()
    args = [sys.executable, "-m", "failover.cli", "serve", "--port", str(port)]
    if config is not None:
        args += ["--config", str(config)]
    args += ["--log-level", log_level or "debug"]  # the whole suite's lines are scanned for secrets (LogScan)
    SCAN.add(*(v for k, v in (env or {}).items() if any(w in k.upper() for w in _SECRET_ENV)))
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    _raise_priority(proc)
    lines: collections.deque[str] = collections.deque(maxlen=2000 if log_level is None else None)
    where = f"serve {config.name if config is not None else '(default)'}"

    def drain() -> None:  # a full pipe would block the gateway's log writes
        assert proc.stdout is not None
        for line in proc.stdout:
            SCAN.check(line, where)
            lines.append(line)

    threading.Thread(target=drain, name="serve-output", daemon=True).start()
    served = Served(f"http://127.0.0.1:{port}", proc, lines)
    try:
        until = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                time.sleep(0.2)
                raise AssertionError(f"serve exited with {proc.returncode}:\n{served.output}")
            try:
                if httpx.get(f"{served.base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > until:
                raise AssertionError(f"serve did not come up in 30 s:\n{served.output}")
            time.sleep(0.1)
        yield served
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
