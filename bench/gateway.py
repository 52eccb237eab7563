"""Gateway added latency: failover's gateway (and, where they install, LiteLLM's proxy and
Portkey's gateway) against direct calls to the same loopback upstream.

    .bench-venv/bin/python bench/gateway.py                       # everything that is installed
    .bench-venv/bin/python bench/gateway.py --targets direct,failover --duration 5

Processes (127.0.0.1 only):

* **upstream** (``bench/gateway_support/upstream.py``): a minimal OpenAI-compatible fake,
  raw asyncio + httptools on uvloop, TCP_NODELAY, a fixed 20 ms before the answer (plain), or
  before the first content chunk (stream: 5 content chunks 10 ms apart, finish, usage, [DONE]).
* **gateways**, each pinned to core 0 (``taskset -c 0``), one worker, all started (and
  warmed) before the first measurement and measured one after the other within each step:
  ``failover serve --config <generated yaml>`` (route ``bench`` -> one OpenAI-dialect target
  at the upstream with ``hold_tokens: 0``, so a stream's events go out as they come; route
  ``bench-held``, the same with the default commit point, measured in the stream phase as
  its own row: what holding output until 100 tokens costs; everything else default),
  ``litellm --config`` (one deployment ``openai/gpt-4o-mini`` at the upstream), Portkey's
  ``@portkey-ai/gateway`` (node, headless, ``x-portkey-provider: openai`` +
  ``x-portkey-custom-host``).
* **relay** (``bench/gateway_support/relay.py``, when asked: ``--targets direct,relay,...``),
  pinned to core 0 like the gateways: bytes passed on as they come, nothing parsed. What it
  adds is what any gateway written in Python adds on this machine; a gateway's own work is
  what it adds beyond the relay.
* **load generator** (``bench/gateway_support/loadgen.py``), a new process per measurement,
  pinned with the upstream on core 1: open loop, latency from each request's scheduled time;
  requests evenly spaced, or (``--arrivals poisson``) at the points of a seeded Poisson process
  of the same rate, the same schedule for every target.

Phases, all in one run, the targets alternating within each step so drift hits all alike:

1. fixed rates (100, 300, 1,000 RPS, ``--duration`` s each): p50/p99 latency; "added" is the
   target's percentile minus direct's percentile at the same rate, in the same run;
2. streaming at 100 RPS: time to the first content event, and to the end of the stream;
3. ladder: rising rates (``--step-duration`` s each) until a step is not *sustained*
   (any error, goodput < 97% of offered, or p99 > ``--p99-limit`` ms): the highest sustained
   rate is reported. Direct's ladder shows where the load generator itself (one Python
   process on a shared core) stops being able to tell.
4. workers (``--workers N``): failover's ceiling with N workers on every core against one
   worker on core 0, alternating, with what the harness itself took of the cores
   (``workers_phase``).

Beside latency, every measurement records the CPU time the gateway's process group used
(``/proc/<pid>/stat`` utime + stime, read before and after) divided by the answered requests:
``gateway_cpu_us_per_req`` in the JSON, the "CPU µs/req" column (min-max over the fixed
rates). It is robust to other work on the machine, where wall-clock latency is not: one core
sustains roughly 1e6 / (CPU µs per request) requests per second. The stream column gives the
time to the first content event and, in parentheses, what the target adds to direct's.

LiteLLM's proxy needs more than ``pip install litellm``: the ``proxy`` extra of litellm
1.110.2 requires a ``litellm-proxy`` package that the package index here does not have, so
its imports are installed by hand (see docs/benchmarks.md); it starts without a master key
(``LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY``) and with the packaged cost map.

Prints a markdown table and writes all raw results to ``--json``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent / "gateway_support"))
from harness import HELD_ROUTE, UPSTREAM_MODEL, failover_config, interpreter, use_shared_encodings, wait_http
from traced_serve import summarise

HERE = Path(__file__).resolve().parent
SUPPORT = HERE / "gateway_support"
use_shared_encodings(os.environ)  # the gateway counts tokens exactly, as online
PY = sys.executable
BIN = Path(PY).parent
HAS_TASKSET = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
LITELLM_ENV = {
    "LITELLM_LOG": "ERROR",
    "LITELLM_TELEMETRY": "False",
    "LITELLM_MODE": "PRODUCTION",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no network: the cost map shipped in the package
    # no master key: the proxy is on loopback and answers the load generator unauthenticated
    "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",
}


def pin(core: int, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *cmd] if HAS_TASKSET else cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_cpu_seconds(pgid: int) -> dict[int, float]:
    """User + system CPU seconds of each live process in the process group ``pgid`` (Linux
    /proc): a gateway's supervisor and each of its workers."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        if int(fields[2]) == pgid:  # field 5 of stat: pgrp
            out[int(entry)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
    return out


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU time of every live process in the process group ``pgid``.

    Contention-robust cost measure: it counts the gateway's own CPU, not the time it waited
    for the core. Children that already exited are not counted (gateways here do not fork
    per request)."""
    return sum(process_cpu_seconds(pgid).values())


class Proc:
    def __init__(self, name: str, cmd: list[str], logdir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = logdir / f"{name}.log"
        self.fh = open(self.log, "wb")  # noqa: SIM115
        self.p = subprocess.Popen(cmd, stdout=self.fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(5)
        self.fh.close()

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def loadgen(
    url: str,
    model: str,
    rate: float,
    duration: float,
    *,
    stream: bool = False,
    headers: list[str] = (),
    key: str = "bench",
    connections: int = 512,
    arrivals: str = "fixed",
) -> dict:
    cmd = pin(
        1,
        [
            PY,
            str(SUPPORT / "loadgen.py"),
            "--url",
            url,
            "--model",
            model,
            "--rate",
            str(rate),
            "--duration",
            str(duration),
            "--key",
            key,
            "--connections",
            str(connections),
            "--arrivals",
            arrivals,
        ],
    )
    if stream:
        cmd.append("--stream")
    for h in headers:
        cmd += ["--header", h]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    if out.returncode != 0:
        return {"rate": rate, "failed": out.stderr[-800:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


WRK_SCRIPT = """-- bench/gateway.py: one POST, the same body as the load generator's
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
%s
"""


def ceiling(t: Target, seconds: float, connections: int, logdir: Path, *, pinned: bool = True) -> dict:
    """The most requests per second ``t`` answers, closed loop: ``wrk`` with ``connections``
    keep-alive connections, one thread, pinned with the upstream to core 1 (so the gateway has
    core 0 to itself), or anywhere (``pinned=False``). Non-2xx answers and socket errors are
    counted, not hidden; wrk's own CPU time is ``wrk_cpu_s``."""
    body = json.dumps(
        {
            "model": t.model,
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Say hello."},
            ],
            "max_tokens": 64,
        }
    )
    extra = "\n".join(
        f'wrk.headers["{k.strip()}"] = "{v.strip()}"' for k, _, v in (h.partition(":") for h in t.headers)
    )
    script = logdir / f"wrk-{t.name}.lua"
    script.write_text(WRK_SCRIPT % (body, t.key, extra))
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:.0f}s", "--latency", "-s", str(script), t.url]
    k0 = process_cpu_seconds(t.proc.p.pid) if t.proc is not None else {}
    w0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(pin(1, cmd) if pinned else cmd, capture_output=True, text=True, timeout=seconds + 60)
    w1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res: dict = {"connections": connections, "seconds": seconds}
    res["wrk_cpu_s"] = round(w1.ru_utime + w1.ru_stime - w0.ru_utime - w0.ru_stime, 3)
    k1 = process_cpu_seconds(t.proc.p.pid) if t.proc is not None else {}
    if k1:
        res["cpu_s_by_process"] = {pid: round(k1[pid] - k0.get(pid, 0.0), 3) for pid in k1}
    if out.returncode != 0:
        res["failed"] = out.stderr[-800:]
        return res
    text = out.stdout
    for line in text.splitlines():
        words = line.split()
        if line.startswith("Requests/sec:"):
            res["rps"] = float(words[1])
        elif "requests in" in line:
            res["requests"] = int(words[0])
        elif line.startswith("  Non-2xx"):
            res["non_2xx"] = int(words[-1])
        elif line.startswith("  Socket errors"):
            res["socket_errors"] = line.split(":", 1)[1].strip()
        elif len(words) == 2 and words[0] in ("50%", "99%"):
            res[f"p{words[0][:-1]}"] = words[1]
    if k1 and res.get("requests"):
        res["gateway_cpu_us_per_req"] = round((sum(k1.values()) - sum(k0.values())) / res["requests"] * 1e6, 1)
    return res


def settle(url: str, model: str, headers: list[str], key: str, limit: float = 90.0) -> float:
    """Wait until one request is answered within 0.5 s (or ``limit`` s pass): a target that
    collapsed in the previous step may still be working off its backlog (LiteLLM keeps
    calling the upstream for requests whose clients gave up), and the next measurement should
    not inherit it. Returns the seconds waited."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello."}]}).encode()
    hdrs = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    for h in headers:
        k, _, v = h.partition(":")
        hdrs[k.strip()] = v.strip()
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=hdrs), timeout=10) as r:
                r.read()
            if time.monotonic() - start < 0.5:
                break
        except Exception:
            pass
        time.sleep(0.5)
    return time.monotonic() - t0


# ---------------------------------------------------------------- targets


class Target:
    name = ""
    model = UPSTREAM_MODEL
    headers: ClassVar[list[str]] = []
    key = "bench"

    def __init__(self, up_port: int, logdir: Path) -> None:
        self.up_port = up_port
        self.logdir = logdir
        self.proc: Proc | None = None
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def available(self) -> str | None:
        return None

    def start(self) -> None: ...

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


class Direct(Target):
    name = "direct"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.up_port}/v1/chat/completions"


class Relay(Target):
    """``bench/gateway_support/relay.py``: a byte relay on uvloop, the least any Python gateway
    adds (a process woken twice, two more sends and receives, the loop between them)."""

    name = "relay"

    def start(self) -> None:
        cmd = [PY, str(SUPPORT / "relay.py"), "--port", str(self.port), "--upstream", str(self.up_port)]
        self.proc = Proc(self.name, pin(0, cmd), self.logdir)
        if not wait_http(f"http://127.0.0.1:{self.port}/v1/models", 15):
            raise RuntimeError(f"relay did not start:\n{self.proc.tail()}")


class Failover(Target):
    """``failover serve``; ``failover:gc+access_log`` runs it with those suspects removed, and
    ``trace`` under bench/gateway_support/traced_serve.py (loop lag and GC pauses)."""

    name = "failover"
    model = "bench"

    def __init__(
        self, up_port: int, logdir: Path, spec: str = "failover", trace: bool = False, workers: int = 1
    ) -> None:
        super().__init__(up_port, logdir)
        self.name = spec if workers == 1 else f"{spec} x{workers}"
        self.workers = workers
        self.suspend = spec.partition(":")[2].replace("+", ",")
        self.trace_path = logdir / f"trace-{spec.replace(':', '-').replace('+', '-')}.json" if trace else None

    def trace(self) -> dict | None:
        """The trace, once the gateway has stopped (it is written at exit)."""
        if self.trace_path is None or not self.trace_path.exists():
            return None
        return json.loads(self.trace_path.read_text())

    def start(self) -> None:
        cfg = self.logdir / "failover.yaml"
        cfg.write_text(failover_config(self.up_port))
        env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench"}
        serve = ["serve", "--config", str(cfg), "--port", str(self.port)]
        if self.workers > 1:  # uvicorn's supervisor and N workers, on every core (see workers_phase)
            serve += ["--workers", str(self.workers)]
        if self.trace_path is not None or self.suspend:
            trace = self.trace_path or (self.logdir / f"trace-{self.port}.json")
            cmd = [PY, str(SUPPORT / "traced_serve.py"), "--trace", str(trace), "--suspend", self.suspend, *serve]
        else:
            cmd = [str(BIN / "failover"), *serve]
        name = self.name.replace(":", "-").replace(" ", "-")
        self.proc = Proc(name, pin(0, cmd) if self.workers == 1 else cmd, self.logdir, env)
        if not wait_http(f"http://127.0.0.1:{self.port}/healthz", 30):
            raise RuntimeError(f"failover gateway did not start:\n{self.proc.tail()}")


class LiteLLM(Target):
    name = "litellm"
    model = "bench"

    def available(self) -> str | None:
        if not (BIN / "litellm").exists():
            return "the litellm CLI is not installed in this venv"
        r = subprocess.run(
            [PY, "-c", "import litellm.proxy.proxy_server"],
            capture_output=True,
            text=True,
            env={**os.environ, **LITELLM_ENV},
        )
        if r.returncode != 0:
            return "litellm's proxy does not import: " + (r.stderr.strip().splitlines() or ["?"])[-1]
        return None

    def start(self) -> None:
        cfg = self.logdir / "litellm.yaml"
        cfg.write_text(
            "model_list:\n"
            "  - model_name: bench\n"
            "    litellm_params:\n"
            f"      model: openai/{UPSTREAM_MODEL}\n"
            f"      api_base: http://127.0.0.1:{self.up_port}/v1\n"
            "      api_key: sk-bench\n"
            "litellm_settings:\n"
            "  telemetry: false\n"
        )
        env = {**os.environ, **LITELLM_ENV}
        self.proc = Proc(
            "litellm",
            pin(
                0,
                [
                    str(BIN / "litellm"),
                    "--config",
                    str(cfg),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--num_workers",
                    "1",
                ],
            ),
            self.logdir,
            env,
        )
        if not wait_http(f"http://127.0.0.1:{self.port}/health/liveliness", 120):
            raise RuntimeError(f"litellm proxy did not start:\n{self.proc.tail()}")


class Portkey(Target):
    name = "portkey"
    key = "sk-bench"

    def __init__(self, up_port: int, logdir: Path, node_dir: Path) -> None:
        super().__init__(up_port, logdir)
        self.node_dir = node_dir
        self.headers = ["x-portkey-provider: openai", f"x-portkey-custom-host: http://127.0.0.1:{up_port}/v1"]

    @property
    def script(self) -> Path:
        return self.node_dir / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"

    def available(self) -> str | None:
        if shutil.which("node") is None:
            return "node is not installed"
        if not self.script.exists():
            return f"@portkey-ai/gateway is not installed under {self.node_dir} (see --portkey-dir)"
        return None

    def start(self) -> None:
        env = {**os.environ, "NODE_ENV": "production"}
        self.proc = Proc(
            "portkey", pin(0, ["node", str(self.script), f"--port={self.port}", "--headless"]), self.logdir, env
        )
        if not wait_http(f"http://127.0.0.1:{self.port}/", 30):
            raise RuntimeError(f"portkey gateway did not start:\n{self.proc.tail()}")


# ---------------------------------------------------------------- phases


def ok_step(r: dict, rate: float, p99_limit: float) -> bool:
    if "failed" in r:
        return False
    if any(v for v in r["errors"].values()):
        return False
    if (r.get("goodput_rps") or 0) < 0.97 * rate:
        return False
    p99 = r["latency_ms"]["p99"]
    return p99 is not None and p99 <= p99_limit


def fmt(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--targets",
        default="direct,failover,litellm,portkey",
        help="comma-separated; failover:SUSPECTS (e.g. failover:gc+access_log) runs failover with those"
        " removed (see bench/gateway_support/traced_serve.py)",
    )
    ap.add_argument("--rates", default="100,300,1000")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--stream-rate", type=float, default=100.0)
    ap.add_argument("--stream-duration", type=float, default=10.0)
    ap.add_argument("--ladder", default="100,200,300,500,750,1000,1250,1500,1750,2000,2500,3000")
    ap.add_argument("--step-duration", type=float, default=5.0)
    ap.add_argument("--p99-limit", type=float, default=100.0, help="ms; a ladder step above it is not sustained")
    ap.add_argument(
        "--portkey-dir",
        default=os.environ.get("PORTKEY_DIR", "/tmp/portkey"),
        help="npm prefix where @portkey-ai/gateway (+ @hono/node-server 1.13.x) is installed",
    )
    ap.add_argument("--json", default=None, help="write raw results here")
    ap.add_argument("--skip", default="", help="phases to skip: fixed,stream,ladder,ceiling")
    ap.add_argument("--connections", type=int, default=512, help="the open-loop load generator's pool")
    ap.add_argument(
        "--arrivals",
        choices=("fixed", "poisson"),
        default="fixed",
        help="the open-loop schedule: evenly spaced sends, or a seeded Poisson process of the same rate",
    )
    ap.add_argument("--ceiling-seconds", type=float, default=20.0, help="each target's wrk run")
    ap.add_argument("--ceiling-connections", type=int, default=64, help="wrk's connections (closed loop)")
    ap.add_argument("--trace", action="store_true", help="trace failover's loop lag and GC pauses")
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="also measure failover's ceiling with this many workers on every core, against one worker",
    )
    ap.add_argument("--workers-connections", type=int, default=256, help="wrk's connections in the workers phase")
    ap.add_argument("--workers-rounds", type=int, default=2, help="one worker, then N, this many times")
    a = ap.parse_args()
    rates = [float(x) for x in a.rates.split(",") if x]
    ladder = [float(x) for x in a.ladder.split(",") if x]
    skip = set(a.skip.split(","))
    if "ceiling" not in skip and shutil.which("wrk") is None:
        print("# ceiling: wrk is not installed (apt-get install wrk); the ladder gives the ceiling", flush=True)
        skip.add("ceiling")
    elif "ceiling" not in skip and "ladder" not in a.skip.split(","):
        skip.add("ladder")  # wrk measures the ceiling; the ladder runs when asked (--skip ceiling)
    logdir = Path(tempfile.mkdtemp(prefix="failover-gwbench-"))
    up_port = free_port()
    up = Proc(
        "upstream", pin(1, [PY, str(SUPPORT / "upstream.py"), "--port", str(up_port), "--max-seconds", "3600"]), logdir
    )
    targets: list[Target] = []
    unavailable: dict[str, str] = {}
    try:
        if not wait_http(f"http://127.0.0.1:{up_port}/v1/models", 15):
            raise RuntimeError(f"upstream did not start:\n{up.tail()}")
        for name in a.targets.split(","):
            t: Target = {
                "direct": lambda: Direct(up_port, logdir),
                "relay": lambda: Relay(up_port, logdir),
                "failover": lambda n=name: Failover(up_port, logdir, n, a.trace),
                "litellm": lambda: LiteLLM(up_port, logdir),
                "portkey": lambda: Portkey(up_port, logdir, Path(a.portkey_dir)),
            }[name.partition(":")[0]]()
            why = t.available()
            if why:
                unavailable[name] = why
                print(f"# {name}: not measured: {why}", flush=True)
            else:
                targets.append(t)

        res: dict = {"fixed": {}, "stream": {}, "ladder": {}, "ceiling": {}, "trace": {}, "unavailable": unavailable}

        def measure(t: Target, rate: float, duration: float, stream: bool = False, model: str | None = None) -> dict:
            waited = settle(t.url, t.model, t.headers, t.key)
            if waited > 2:
                print(f"# {t.name}: waited {waited:.0f}s for the previous step's backlog", flush=True)
            c0 = group_cpu_seconds(t.proc.p.pid) if t.proc is not None else None
            r = loadgen(
                t.url,
                model or t.model,
                rate,
                duration,
                stream=stream,
                headers=t.headers,
                key=t.key,
                connections=a.connections,
                arrivals=a.arrivals,
            )
            if c0 is not None and t.proc is not None and "failed" not in r:
                cpu = group_cpu_seconds(t.proc.p.pid) - c0
                r["gateway_cpu_s"] = round(cpu, 3)
                r["gateway_cpu_us_per_req"] = round(cpu / r["ok"] * 1e6, 1) if r["ok"] else None
            # a target that fell behind drains its backlog now, before the next target is measured
            waited = settle(t.url, t.model, t.headers, t.key)
            if waited > 2:
                print(f"# {t.name}: {waited:.0f}s to drain its backlog", flush=True)
            return r

        # Every gateway is started and warmed first, all pinned to core 0 (an idle one costs
        # next to nothing); then each step measures the targets one after the other, so a slow
        # stretch of a shared machine hits all of them alike and the ratios stay comparable.
        live: list[Target] = []
        for t in targets:
            try:
                t.start()
            except Exception as e:
                unavailable[t.name] = f"did not start: {e}"
                print(f"# {t.name}: {unavailable[t.name]}", flush=True)
                t.stop()
                continue
            w = measure(t, 50, 2)  # warm-up (imports, pools, JITs)
            if "failed" in w or w["ok"] == 0:
                unavailable[t.name] = f"warm-up failed: {w.get('failed') or w.get('error_samples')}"
                print(f"# {t.name}: {unavailable[t.name]}", flush=True)
                t.stop()
                continue
            if "stream" not in skip:
                ws = measure(t, 20, 1, stream=True)
                if "failed" in ws or ws["ok"] == 0:
                    print(f"# {t.name}: streaming warm-up failed: {ws.get('failed') or ws.get('error_samples')}")
            live.append(t)
        if "fixed" not in skip:
            for rate in rates:
                for t in live:
                    r = measure(t, rate, a.duration)
                    res["fixed"].setdefault(t.name, {})[str(rate)] = r
                    print(f"{t.name:9s} {rate:6.0f} rps  {json.dumps(r)}", flush=True)
                    time.sleep(1)
        if "stream" not in skip:
            for t in live:
                r = measure(t, a.stream_rate, a.stream_duration, stream=True)
                res["stream"][t.name] = r
                print(f"{t.name:9s} stream {a.stream_rate:.0f} rps  {json.dumps(r)}", flush=True)
                time.sleep(1)
                if isinstance(t, Failover):  # the same stream through the default commit point
                    held = f"{t.name} ({HELD_ROUTE})"
                    r = measure(t, a.stream_rate, a.stream_duration, stream=True, model=HELD_ROUTE)
                    res["stream"][held] = r
                    print(f"{held} stream {a.stream_rate:.0f} rps  {json.dumps(r)}", flush=True)
                    time.sleep(1)
        if "ceiling" not in skip:
            for t in live:
                settle(t.url, t.model, t.headers, t.key)
                r = ceiling(t, a.ceiling_seconds, a.ceiling_connections, logdir)
                res["ceiling"][t.name] = r
                print(f"{t.name:9s} ceiling  {json.dumps(r)}", flush=True)
                time.sleep(1)
        if a.workers > 1 and shutil.which("wrk") is None:
            print("# workers: wrk is not installed (apt-get install wrk)", flush=True)
        elif a.workers > 1:
            one = next((t for t in live if isinstance(t, Failover) and t.name == "failover"), None)
            if one is None:
                print("# workers: needs the target failover", flush=True)
            else:
                res["workers"] = workers_phase(one, up, logdir, a)
        if "ladder" not in skip:
            climbing = list(live)
            for t in live:
                res["ladder"][t.name] = {"max_sustained_rps": 0.0, "steps": []}
            for rate in ladder:
                for t in list(climbing):
                    r = measure(t, rate, a.step_duration)
                    good = ok_step(r, rate, a.p99_limit)
                    res["ladder"][t.name]["steps"].append(
                        {
                            "rate": rate,
                            "sustained": good,
                            **{
                                k: r.get(k)
                                for k in ("ok", "errors", "latency_ms", "goodput_rps", "loadgen_cpu_s", "failed")
                            },
                        }
                    )
                    print(
                        f"{t.name:9s} ladder {rate:6.0f} rps  sustained={good}"
                        f"  p50={r.get('latency_ms', {}).get('p50')}"
                        f" p99={r.get('latency_ms', {}).get('p99')} goodput={r.get('goodput_rps')}"
                        f" errors={r.get('errors')}",
                        flush=True,
                    )
                    if good:
                        res["ladder"][t.name]["max_sustained_rps"] = rate
                    else:
                        climbing.remove(t)
                    time.sleep(1)
                if not climbing:
                    break
    finally:
        for t in targets:
            t.stop()
        up.stop()
    for t in targets:
        if isinstance(t, Failover) and (trace := t.trace()) is not None:
            res["trace"][t.name] = trace_windows(trace, res["fixed"].get(t.name, {}))

    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        "interpreter": interpreter(),
        "pinned": HAS_TASKSET,
        "command": " ".join([Path(PY).name, *sys.argv]),
    }
    res["meta"] = meta
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    print_table(res, rates, a)
    if "workers" in res:
        print_workers(res["workers"])
    print(f"\nlogs: {logdir}")
    return 0


def workers_phase(one: Failover, up: Proc, logdir: Path, a: argparse.Namespace) -> dict:
    """failover's ceiling with ``--workers N`` on every core against one worker on core 0.

    One worker is measured as in the ceiling phase (the gateway on core 0, wrk and the upstream
    on core 1); N workers are measured with nothing pinned, so they share the cores with wrk
    and the upstream, as they would share a machine with anything else. Both with
    ``--workers-connections`` connections (64 would cap N workers at 64 / 20 ms = 3,200 RPS),
    alternating ``--workers-rounds`` times. Besides requests per second, each run records what
    the harness took (the upstream's and wrk's CPU, in cores), the gateway's CPU per request,
    and each worker's share of the gateway's CPU (how evenly the kernel's accept spread the
    kept-alive connections)."""
    many = Failover(one.up_port, logdir, "failover", workers=a.workers)
    many.start()
    everywhere = set(range(os.cpu_count() or 1))
    rounds: list[dict] = []
    try:
        ceiling(many, 3, a.workers_connections, logdir, pinned=False)  # warm every worker
        for _ in range(a.workers_rounds):
            for t, pinned in ((one, True), (many, False)):
                if HAS_TASKSET:  # the upstream on core 1 for one worker, anywhere for N
                    os.sched_setaffinity(up.p.pid, {1} if pinned else everywhere)
                settle(t.url, t.model, t.headers, t.key)
                u0 = group_cpu_seconds(up.p.pid)
                r = ceiling(t, a.ceiling_seconds, a.workers_connections, logdir, pinned=pinned)
                r["upstream_cpu_s"] = round(group_cpu_seconds(up.p.pid) - u0, 3)
                r["workers"] = t.workers
                rounds.append(r)
                print(f"{t.name:9s} workers ceiling  {json.dumps(r)}", flush=True)
                time.sleep(1)
    finally:
        many.stop()
        if HAS_TASKSET:
            os.sched_setaffinity(up.p.pid, {1})
    return {"n": a.workers, "connections": a.workers_connections, "rounds": rounds}


def print_workers(w: dict) -> None:
    print(f"\nfailover: one worker (core 0) against {w['n']} workers (every core), wrk -c{w['connections']}")
    print(
        "| workers | RPS | x one worker (same round) | gateway cores | RPS per gateway core, x one worker"
        " | harness cores (upstream + wrk) | gateway CPU µs/req | each worker's share of the gateway's CPU |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ref = None
    for r in w["rounds"]:
        if not r.get("rps"):
            print(f"| {r['workers']} | failed: {r.get('failed', '?')[:80]} | | | | | | |")
            continue
        by = r.get("cpu_s_by_process", {})
        gw = sum(by.values())
        busy = sorted((v for v in by.values() if v > 0.05 * gw), reverse=True)
        share = " / ".join(f"{v / gw:.0%}" for v in busy) if gw else "-"
        cores = gw / r["seconds"]
        if r["workers"] == 1:
            ref = (r["rps"], cores)
        many = ref is not None and r["workers"] > 1 and cores > 0
        ratio = f"{r['rps'] / ref[0]:.2f}x" if many else "-"
        per_core = f"{r['rps'] / cores / (ref[0] / ref[1]):.2f}x" if many else "-"
        harness = (r["upstream_cpu_s"] + r["wrk_cpu_s"]) / r["seconds"]
        print(
            f"| {r['workers']} | {r['rps']:,.0f} | {ratio} | {cores:.2f} | {per_core} | {harness:.2f}"
            f" | {r.get('gateway_cpu_us_per_req', 0):.0f} | {share} |"
        )


def trace_windows(trace: dict, fixed: dict) -> dict:
    """The trace's pauses and loop lag during each fixed-rate measurement (matched by the
    load generator's start time and duration, both on CLOCK_MONOTONIC)."""
    out = {}
    for rate, r in fixed.items():
        if not isinstance(r, dict) or "t0_perf" not in r:
            continue
        start = r["t0_perf"] - trace["t0"]
        out[rate] = summarise(trace, start, start + r["duration"])
    return out


def print_table(res: dict, rates: list[float], a: argparse.Namespace) -> None:
    fixed, stream, lad, ceil = res["fixed"], res["stream"], res["ladder"], res.get("ceiling", {})
    names = list(dict.fromkeys([*fixed, *stream, *lad, *ceil]))
    base = fixed.get("direct", {})
    print(f"\n{res['meta']['date']}; {res['meta']['machine']}; pinned={res['meta']['pinned']}")
    print(res["meta"]["interpreter"])
    head = ["target"]
    for r in rates:
        head += [f"{r:.0f} rps p50 (added)", f"{r:.0f} rps p99 (added)"]
    top = f"max RPS (wrk, {a.ceiling_connections} conns)" if ceil else "max sustained rps"
    head += [f"stream first event p50 / p99 (added) @{a.stream_rate:.0f}", top, "CPU µs/req"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for n in names:
        row = [n]
        for r in rates:
            cur = fixed.get(n, {}).get(str(r))
            ref = base.get(str(r))
            for q in ("p50", "p99"):
                if not cur or "failed" in cur or cur["latency_ms"][q] is None:
                    row.append("-")
                    continue
                v = cur["latency_ms"][q]
                err = sum(cur["errors"].values()) if cur.get("errors") else 0
                e = f", {err} err" if err else ""
                if n != "direct" and ref and ref["latency_ms"][q] is not None:
                    row.append(f"{v:.2f} ({v - ref['latency_ms'][q]:+.2f}){e}")
                else:
                    row.append(f"{v:.2f}{e}")
        s = stream.get(n)
        sref = stream.get("direct")
        if s and s.get("ttft_ms") and s["ttft_ms"]["p50"] is not None:
            cell = f"{s['ttft_ms']['p50']:.2f} / {s['ttft_ms']['p99']:.2f}"
            if n != "direct" and sref and sref.get("ttft_ms") and sref["ttft_ms"]["p50"] is not None:
                d50 = s["ttft_ms"]["p50"] - sref["ttft_ms"]["p50"]
                d99 = s["ttft_ms"]["p99"] - sref["ttft_ms"]["p99"]
                cell += f" ({d50:+.2f} / {d99:+.2f})"
            row.append(cell)
        else:
            row.append("-")
        direct_rps = ceil.get("direct", {}).get("rps")
        if n in ceil and ceil[n].get("rps"):
            c = ceil[n]
            cell = f"{c['rps']:,.0f}"
            if n != "direct" and direct_rps:
                cell += f" ({c['rps'] / direct_rps:.2f}x)"
            bad = c.get("non_2xx", 0) + (1 if c.get("socket_errors") else 0)
            row.append(cell + (f", {c.get('non_2xx', 0)} non-2xx, errors {c.get('socket_errors')}" if bad else ""))
        else:
            row.append(f"{lad[n]['max_sustained_rps']:.0f}" if n in lad else "-")
        cpu = [x.get("gateway_cpu_us_per_req") for x in fixed.get(n, {}).values() if isinstance(x, dict)]
        cpu = [c for c in cpu if c is not None]
        row.append(f"{min(cpu):.0f}-{max(cpu):.0f}" if cpu and n != "direct" else "-")
        print("| " + " | ".join(row) + " |")
    for n, why in res["unavailable"].items():
        print(f"- {n}: not measured: {why}")
    for n, by_rate in res.get("trace", {}).items():
        print(f"\n{n}: loop lag and GC pauses during each fixed rate (traced_serve)")
        print(
            "| rate | p99 per window (ms) | loop lag p99 / max (ms) | lags > 5 ms"
            " | gen0 / gen1 / gen2 collections | longest pause (ms, gen) |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for rate, t in by_rate.items():
            win = fixed.get(n, {}).get(rate, {}).get("p99_by_window_ms", [])
            gens = t["gc"]
            worst = t["worst_pauses"][0] if t["worst_pauses"] else None
            print(
                f"| {float(rate):.0f} | {' '.join(f'{w:.1f}' for w in win)}"
                f" | {t['lag_ms']['p99']} / {t['lag_ms']['max']}"
                f" | {t['lag_over_5ms']} | {gens['gen0']['n']} / {gens['gen1']['n']} / {gens['gen2']['n']}"
                f" | {f'{worst[2]:.1f} (gen{worst[1]})' if worst else '-'} |"
            )


if __name__ == "__main__":
    sys.exit(main())
