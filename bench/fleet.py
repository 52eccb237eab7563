"""Shared state on Redis: what it adds per request, and what a fleet of gateways does with it.

    .venv/bin/python bench/fleet.py                         # about a minute
    .venv/bin/python bench/fleet.py --requests 2000 --duration 10 --json fleet.json

Processes, all on 127.0.0.1, in one run:

* **upstream**: ``bench/gateway_support/upstream.py`` (raw asyncio + httptools, uvloop), which
  answers a fixed chat completion after ``--upstream-latency`` seconds (default 0: the
  gateway's own cost is what shows);
* **redis-server**: no persistence, a fresh one per run;
* **gateways**: ``failover serve --config <generated yaml>``, one worker each, one route
  ``bench`` -> one OpenAI-dialect target at the upstream with ``limits`` (rpm, input/output
  tpm, concurrency) set far above the load, so every request goes through the breaker
  admission, the rate-limit reservation and settlement and the retry budget, without ever
  being limited. ``state:`` is the only thing that differs between configurations.
* **client**: this process, aiohttp on uvloop, closed loop (each of ``--concurrency``
  workers sends its next request when the previous one is answered), round-robin over the
  gateways' ports.

Phases:

1. **added latency**: one gateway with ``state: {backend: memory}`` and one with
   ``state: {backend: redis}``, both running, measured alternately in blocks of 100
   sequential requests (one in flight) so that drift hits both alike: p50 / p90 / p99 of each
   and the difference. Redis's ``INFO commandstats`` before and after give the Redis
   commands per request.
2. **fleet throughput**: 1, 2 and 4 gateway processes on ``state: redis`` (and 1 on
   ``memory`` as the reference), ``--duration`` seconds of closed-loop load each: requests per
   second, p50 / p99, errors, the CPU Redis used per 1,000 requests, and how often a gateway
   switched to local state (its log says so), and the Lua scripts Redis ran per request (5
   when every decision was shared; fewer when calls timed out and the process used local
   state). A saturated gateway's event loop handles Redis's replies late, so a tight
   ``timeout_ms`` expires under this load although Redis is fast: one row at 50 ms (the old
   default) shows it, the others use ``--load-timeout-ms`` (250 ms, the default).

3. **loop lag**: in this process, one :class:`~failover.state.RedisStore` on the same Redis
   while ``N`` tasks keep the event loop busy (each burns ``--busy-ms`` of CPU, then yields),
   as the request handlers of a saturated worker do: the loop's lag (a 10 ms sleep measured
   against the loop clock) and the time from issuing one reservation to having its answer,
   with the share of calls that a 50 ms and a 250 ms ``timeout_ms`` would have cut. Redis
   answers in well under a millisecond throughout; what grows is the time the loop takes
   to get back to the reply, several turns per call.

The machine's core count is printed with the table: on 2 cores the client, the upstream,
Redis and the gateways share them, so throughput stops growing at about two busy
processes, whatever the state backend. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent
PY = sys.executable
UPSTREAM = HERE / "gateway_support" / "upstream.py"
BODY = {"model": "bench", "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 16}
clock = time.perf_counter


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


class Proc:
    def __init__(self, name: str, cmd: list[str], logdir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = logdir / f"{name}.log"
        self.fh = self.log.open("wb")
        self.p = subprocess.Popen(
            cmd,
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=logdir,
            env=None if env is None else {**os.environ, **env},
        )

    def alive(self) -> bool:
        return self.p.poll() is None

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(5)
        self.fh.close()

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def wait_http(url: str, proc: Proc, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not proc.alive():
            raise SystemExit(f"{proc.name} exited:\n{proc.tail()}")
        with contextlib.suppress(Exception), urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                return
        time.sleep(0.1)
    raise SystemExit(f"{proc.name} not ready at {url}:\n{proc.tail()}")


class Redis:
    """redis-server without persistence, and the few INFO numbers the bench reads."""

    def __init__(self, logdir: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise SystemExit("redis-server is not installed (scripts/services.sh installs it)")
        self.port = free_port()
        self._info_reads = 0
        self._calls = 0
        self.proc = Proc(
            "redis",
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            logdir,
        )
        end = time.monotonic() + 15
        while self.info("server") == {}:
            if time.monotonic() > end or not self.proc.alive():
                raise SystemExit(f"redis-server did not start:\n{self.proc.tail()}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def info(self, section: str) -> dict[str, str]:
        """``INFO <section>`` as a dict (raw RESP over a socket: no client library needed)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(f"INFO {section}\r\n".encode())
                data = b""
                while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    head, _, rest = data.partition(b"\r\n")
                    if head.startswith(b"$") and len(rest) >= int(head[1:]) + 2:
                        break
        except OSError:
            return {}
        out: dict[str, str] = {}
        for line in data.decode(errors="replace").splitlines()[1:]:
            if ":" in line and not line.startswith("#"):
                k, _, v = line.partition(":")
                out[k] = v
        return out

    def counters(self) -> dict[str, float]:
        """One ``INFO all``: scripts (EVAL/EVALSHA from clients), commands (also those the scripts
        run inside Redis), reads (read events: one per round trip when one request is in
        flight), cpu (seconds). The INFO call itself is left out of every counter."""
        info = self.info("all")
        scripts = commands = 0
        for k, v in info.items():
            if k.startswith("cmdstat_") and k != "cmdstat_info":
                calls = int(v.split(",")[0].split("=")[1])
                commands += calls
                if k in ("cmdstat_evalsha", "cmdstat_eval"):
                    scripts += calls
        return {
            "scripts": scripts,
            "commands": commands,
            "reads": int(info.get("total_reads_processed", 0)) - self._info_reads * self._next_call(),
            "cpu": float(info.get("used_cpu_user", 0)) + float(info.get("used_cpu_sys", 0)),
        }

    def _next_call(self) -> int:
        self._calls += 1
        return self._calls

    def calibrate(self) -> None:
        """Read events that our own INFO calls add (so they can be taken off)."""
        self._info_reads = 0
        a, b = self.counters(), self.counters()
        self._info_reads = int(b["reads"] - a["reads"])
        self._calls = 0

    def stop(self) -> None:
        self.proc.stop()


def write_config(path: Path, up_port: int, state: dict[str, Any]) -> Path:
    import yaml

    cfg = {
        "targets": {
            "up": {
                "dialect": "openai",
                "base_url": f"http://127.0.0.1:{up_port}/v1",
                "model": "gpt-4o-mini",
                "limits": {"rpm": 10_000_000, "input_tpm": 10**10, "output_tpm": 10**10, "concurrency": 10_000},
            }
        },
        "routes": {"bench": {"primary": ["up"]}},
        "state": state,
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def start_gateways(
    config: Path, n: int, logdir: Path, tag: str, env: dict[str, str] | None = None
) -> list[tuple[Proc, int]]:
    gws = []
    for i in range(n):
        port = free_port()
        cmd = [PY, "-m", "failover.cli", "serve", "--config", str(config), "--port", str(port)]
        gws.append((Proc(f"gw-{tag}-{i}", cmd, logdir, env), port))
    for proc, port in gws:
        wait_http(f"http://127.0.0.1:{port}/readyz", proc)
    return gws


def stop_all(gws: list[tuple[Proc, int]]) -> int:
    """Stop the gateways; return how often they switched to local state (their logs say so)."""
    switches = 0
    for proc, _ in gws:
        proc.stop()
        with contextlib.suppress(OSError):
            switches += proc.log.read_text(errors="replace").count("using local state")
    return switches


async def closed_loop(
    urls: list[str], concurrency: int, *, requests: int | None = None, duration: float | None = None
) -> dict[str, Any]:
    """``concurrency`` workers, each sending its next request when the last is answered."""
    lat: list[float] = []
    errors: dict[str, int] = {}
    conn = aiohttp.TCPConnector(limit=0, force_close=False)
    sent = 0
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=10)) as session:
        t0 = clock()
        end = t0 + duration if duration is not None else None

        async def worker(w: int) -> None:
            nonlocal sent
            i = w
            while True:
                if requests is not None and sent >= requests:
                    return
                if end is not None and clock() >= end:
                    return
                sent += 1
                url = urls[i % len(urls)]
                i += 1
                start = clock()
                try:
                    async with session.post(url, json=BODY) as r:
                        await r.read()
                        if r.status != 200:
                            errors[str(r.status)] = errors.get(str(r.status), 0) + 1
                            continue
                except Exception as exc:
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    continue
                lat.append((clock() - start) * 1000)

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        elapsed = clock() - t0
    return {
        "ok": len(lat),
        "errors": errors,
        "seconds": elapsed,
        "rps": len(lat) / elapsed if elapsed > 0 else 0.0,
        "p50": pct(lat, 50),
        "p90": pct(lat, 90),
        "p99": pct(lat, 99),
    }


async def _loop_lag(url: str, busy_tasks: int, busy_ms: float, seconds: float) -> dict[str, Any]:
    """Store calls on a loop that ``busy_tasks`` CPU-bound tasks keep busy (see phase 3)."""
    from failover.state import RedisStore

    store = RedisStore(url, prefix=f"bench-lag-{uuid.uuid4().hex[:6]}:", timeout=30.0)
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    calls: list[float] = []
    stop = False

    async def burner() -> None:
        while not stop:
            t = clock()
            while clock() - t < busy_ms / 1000:
                pass
            await asyncio.sleep(0)

    async def lag_probe() -> None:
        while not stop:
            t = loop.time()
            await asyncio.sleep(0.01)
            lags.append((loop.time() - t - 0.01) * 1000)

    async def caller() -> None:
        while not stop:
            t = clock()
            await store.reserve("lag", {"rpm": 1.0}, {"rpm": 1e12}, window=60.0, reservation_id="r")
            calls.append((clock() - t) * 1000)
            await asyncio.sleep(0.005)

    await store.reserve("lag", {"rpm": 1.0}, {"rpm": 1e12}, window=60.0, reservation_id="r")  # connect, load
    tasks = [asyncio.create_task(f()) for f in [burner] * busy_tasks + [lag_probe, caller]]
    await asyncio.sleep(seconds)  # (late by up to one busy turn)
    stop = True
    await asyncio.gather(*tasks)
    await store.aclose()
    return {
        "busy_tasks": busy_tasks,
        "busy_ms": busy_ms,
        "lag_p50": pct(lags, 50),
        "lag_p99": pct(lags, 99),
        "call_p50": pct(calls, 50),
        "call_p99": pct(calls, 99),
        "calls": len(calls),
        "over_50": sum(c > 50 for c in calls) / max(1, len(calls)),
        "over_250": sum(c > 250 for c in calls) / max(1, len(calls)),
    }


def loop_lag(args: argparse.Namespace, redis: Redis) -> list[dict[str, Any]]:
    rows = []
    for n in args.busy_tasks:
        row = asyncio.run(_loop_lag(redis.url, n, args.busy_ms, args.lag_seconds))
        rows.append(row)
        print(f"  {n} busy tasks: loop lag p99 {row['lag_p99']:.1f} ms, call p99 {row['call_p99']:.1f} ms", flush=True)
    return rows


def render_lag(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    out = [
        f"Loop lag (one RedisStore in a process whose loop N tasks keep busy, {args.busy_ms:g} ms of CPU each "
        f"per turn, {args.lag_seconds:g} s each):",
        "",
        "| busy tasks | loop lag p50 / p99 ms | store call p50 / p99 ms | calls > 50 ms | calls > 250 ms |",
        "| ---: | --- | --- | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['busy_tasks']} | {r['lag_p50']:.1f} / {r['lag_p99']:.1f} "
            f"| {r['call_p50']:.1f} / {r['call_p99']:.1f} | {r['over_50']:.0%} | {r['over_250']:.0%} |"
        )
    return "\n".join(out)


def chat_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/chat/completions"


def added_latency(args: argparse.Namespace, up_port: int, redis: Redis, logdir: Path) -> dict[str, Any]:
    mem_cfg = write_config(logdir / "memory.yaml", up_port, {"backend": "memory"})
    red_cfg = write_config(logdir / "redis.yaml", up_port, redis_state(redis, args.timeout_ms))
    mem = start_gateways(mem_cfg, 1, logdir, "lat-memory")
    red = start_gateways(red_cfg, 1, logdir, "lat-redis")
    runs = [("memory", mem), ("redis", red)]
    if _parser() == "hiredis":  # the same gateway with redis-py's pure-Python reply parser
        runs.append(
            ("redis_python_parser", start_gateways(red_cfg, 1, logdir, "lat-redis-py", _without_hiredis(logdir)))
        )
    lat: dict[str, list[float]] = {name: [] for name, _ in runs}
    scripts = cmds = reads = 0
    try:
        for _, gws in runs:  # warm-up: connections, scripts, tokenizer
            asyncio.run(closed_loop([chat_url(gws[0][1])], 1, requests=50))
        block = 100
        for _ in range(max(1, args.requests // block)):
            for name, gws in runs:
                before = redis.counters()
                res = asyncio.run(_timed(chat_url(gws[0][1]), block))
                after = redis.counters()
                if name == "redis":
                    scripts += int(after["scripts"] - before["scripts"])
                    cmds += int(after["commands"] - before["commands"])
                    reads += int(after["reads"] - before["reads"])
                lat[name] += res
    finally:
        switches = stop_all([g for _, gws in runs for g in gws])
    n = len(lat["redis"])
    out: dict[str, Any] = {}
    for name, xs in lat.items():
        out[name] = {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99)}
    out["redis_scripts_per_request"] = scripts / n if n else float("nan")
    out["redis_commands_per_request"] = cmds / n if n else float("nan")
    out["redis_round_trips_per_request"] = reads / n if n else float("nan")
    out["switches_to_local"] = switches
    return out


async def _timed(url: str, n: int) -> list[float]:
    out: list[float] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            start = clock()
            async with session.post(url, json=BODY) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"{url} answered {r.status}: {(await r.text())[:300]}")
            out.append((clock() - start) * 1000)
    return out


def redis_state(redis: Redis, timeout_ms: float) -> dict[str, Any]:
    return {"backend": "redis", "url": redis.url, "prefix": f"bench-{uuid.uuid4().hex[:6]}:", "timeout_ms": timeout_ms}


def throughput(args: argparse.Namespace, up_port: int, redis: Redis, logdir: Path) -> list[dict[str, Any]]:
    rows = []
    # memory as the reference; redis at the old default of 50 ms once (a saturated loop handles
    # replies late: watch the switches and the scripts per request), then at --load-timeout-ms
    plan: list[tuple[str, int, float | None]] = [("memory", 1, None), ("redis", 1, args.tight_timeout_ms)]
    plan += [("redis", n, args.load_timeout_ms) for n in args.processes]
    for backend, n, timeout in plan:
        state = {"backend": "memory"} if timeout is None else redis_state(redis, timeout)
        tag = f"tp-{backend}-{n}-{timeout or 0:g}"
        cfg = write_config(logdir / f"{tag}.yaml", up_port, state)
        gws = start_gateways(cfg, n, logdir, tag)
        try:
            urls = [chat_url(p) for _, p in gws]
            asyncio.run(closed_loop(urls, args.concurrency, duration=1.0))  # warm-up
            c0 = redis.counters()
            res = asyncio.run(closed_loop(urls, args.concurrency, duration=args.duration))
            c1 = redis.counters()
        finally:
            switches = stop_all(gws)
        ok = max(res["ok"], 1)
        res.update(
            backend=backend,
            processes=n,
            timeout_ms=timeout,
            switches_to_local=switches,
            redis_cpu_ms_per_1k=(c1["cpu"] - c0["cpu"]) * 1000 / ok * 1000 if backend == "redis" else None,
            redis_scripts_per_request=(c1["scripts"] - c0["scripts"]) / ok if backend == "redis" else None,
        )
        rows.append(res)
        print(f"  {tag}: {res['rps']:.0f} req/s, p50 {res['p50']:.1f} ms, errors {res['errors']}", flush=True)
    return rows


def _without_hiredis(logdir: Path) -> dict[str, str]:
    """An environment in which ``import hiredis`` fails, so redis-py uses its Python parser."""
    stub = logdir / "no-hiredis"
    stub.mkdir(exist_ok=True)
    (stub / "hiredis.py").write_text("raise ImportError('hidden by bench/fleet.py')\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(stub), os.environ.get("PYTHONPATH")]))}


def _parser() -> str:
    """hiredis (the C parser of the ``redis`` extra) or redis-py's pure-Python one, as the gateways load it."""
    try:
        import hiredis  # noqa: F401
    except ImportError:
        return "python"
    return "hiredis"


def _python_parser_rows(lat: dict[str, Any]) -> list[str]:
    py = lat.get("redis_python_parser")
    if py is None:
        return []
    m = lat["memory"]
    return [
        f"| redis, pure-Python parser | {py['p50']:.2f} | {py['p90']:.2f} | {py['p99']:.2f} |",
        f"| **added by redis, pure-Python parser** | **{py['p50'] - m['p50']:+.2f}** "
        f"| **{py['p90'] - m['p90']:+.2f}** | **{py['p99'] - m['p99']:+.2f}** |",
    ]


def render(lat: dict[str, Any], rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    cores = os.cpu_count()
    m, r = lat["memory"], lat["redis"]
    out = [
        f"bench/fleet.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {cores} cores, "
        f"Python {platform.python_version()}, upstream latency {args.upstream_latency * 1000:.0f} ms, "
        f"redis-py reply parser: {_parser()}",
        "",
        f"Added latency of `state: redis` (timeout_ms {args.timeout_ms:g}; one gateway, one request in flight, "
        f"{r['n']} requests each, alternating in blocks of 100):",
        "",
        "| state | p50 ms | p90 ms | p99 ms |",
        "| --- | ---: | ---: | ---: |",
        f"| memory | {m['p50']:.2f} | {m['p90']:.2f} | {m['p99']:.2f} |",
        f"| redis | {r['p50']:.2f} | {r['p90']:.2f} | {r['p99']:.2f} |",
        f"| **added by redis** | **{r['p50'] - m['p50']:+.2f}** | **{r['p90'] - m['p90']:+.2f}** "
        f"| **{r['p99'] - m['p99']:+.2f}** |",
        *_python_parser_rows(lat),
        "",
        f"Per request: {lat['redis_round_trips_per_request']:.1f} round trips (Redis read events), "
        f"{lat['redis_scripts_per_request']:.1f} Lua scripts (EVALSHA), "
        f"{lat['redis_commands_per_request']:.1f} Redis commands counting those the scripts run; "
        f"switches to local state: {lat['switches_to_local']}.",
        "",
        f"Fleet throughput ({args.concurrency} requests in flight, closed loop, "
        f"{args.duration:g} s each; client, upstream, Redis and gateways share the machine's {cores} cores):",
        "",
        "| state | timeout_ms | gateway processes | req/s | p50 ms | p99 ms | errors | switches to local state "
        "| Redis CPU ms / 1k req | scripts / req |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        errs = sum(row["errors"].values())
        cpu = "" if row["redis_cpu_ms_per_1k"] is None else f"{row['redis_cpu_ms_per_1k']:.0f}"
        scr = "" if row["redis_scripts_per_request"] is None else f"{row['redis_scripts_per_request']:.1f}"
        out.append(
            f"| {row['backend']} | {row['timeout_ms'] or ''} | {row['processes']} | {row['rps']:.0f} "
            f"| {row['p50']:.1f} | {row['p99']:.1f} "
            f"| {errs} | {row['switches_to_local']} | {cpu} | {scr} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1000, help="sequential requests per backend (phase 1)")
    p.add_argument("--duration", type=float, default=6.0, help="seconds of load per fleet size (phase 2)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight (phase 2)")
    p.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4], help="fleet sizes on redis (phase 2)")
    p.add_argument("--timeout-ms", type=float, default=250.0, help="state.timeout_ms in phase 1 (the default)")
    p.add_argument("--load-timeout-ms", type=float, default=250.0, help="state.timeout_ms of the fleet rows in phase 2")
    p.add_argument(
        "--tight-timeout-ms",
        type=float,
        default=50.0,
        help="one phase-2 row at this timeout_ms: a saturated event loop handles replies late",
    )
    p.add_argument("--busy-tasks", type=int, nargs="+", default=[0, 4, 16, 48], help="loop-lag rows (phase 3)")
    p.add_argument("--busy-ms", type=float, default=1.0, help="CPU per busy task per loop turn (phase 3)")
    p.add_argument("--lag-seconds", type=float, default=3.0, help="seconds per loop-lag row (phase 3)")
    p.add_argument("--upstream-latency", type=float, default=0.0, help="seconds the upstream waits before answering")
    p.add_argument("--json", type=Path, help="write the raw results here")
    args = p.parse_args()
    logdir = Path(tempfile.mkdtemp(prefix="failover-bench-fleet-"))
    up_port = free_port()
    up = Proc(
        "upstream",
        [PY, str(UPSTREAM), "--port", str(up_port), "--latency", str(args.upstream_latency)],
        logdir,
    )
    redis = Redis(logdir)
    redis.calibrate()
    try:
        wait_http(f"http://127.0.0.1:{up_port}/v1/models", up)
        print("phase 1: added latency (memory vs redis)", flush=True)
        lat = added_latency(args, up_port, redis, logdir)
        print("phase 2: fleet throughput", flush=True)
        rows = throughput(args, up_port, redis, logdir)
        print("phase 3: loop lag", flush=True)
        lag = loop_lag(args, redis)
    finally:
        up.stop()
        redis.stop()
    print()
    print(render(lat, rows, args))
    print()
    print(render_lag(lag, args))
    print(f"\n(logs in {logdir})")
    if args.json:
        out = {"latency": lat, "throughput": rows, "loop_lag": lag, "cores": os.cpu_count()}
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
