"""Variants of ``failover serve`` side by side, in one run: CPU per request (user and system)
and latency at fixed rates, or the ceiling under ``wrk``, the variants alternating so a slow
stretch of a shared machine hits them all alike.

    python bench/gateway_support/ab.py before=/tmp/old/src after=src --rates 300,1000 --rounds 3
    python bench/gateway_support/ab.py py311=src py313=src,PYTHON=/tmp/venv-313/bin/python --ceiling 10
    python bench/gateway_support/ab.py plain=src malloc=src,PYTHONMALLOC=malloc --ceiling 10

Each variant is ``name=PYTHONPATH`` (a tree: an older commit is ``git archive <commit> src | tar
-x -C /tmp/old``), optionally followed by ``,KEY=VALUE`` pairs: environment variables of that
gateway, and ``PYTHON``, the interpreter it runs on (another venv's ``python``, with the
gateway's dependencies installed). Every measurement starts a new gateway pinned to core 0 (the
upstream from ``upstream.py`` and the load on core 1), with the shared tiktoken encodings when
they are there (exact counts, as an online install), and warms it first. Then either
``--rates``: ``--seconds`` of open-loop load at each rate, with p50 and p99; or ``--ceiling
S``: ``wrk`` with ``--connections`` keep-alive connections for S seconds, with the requests
per second. Both count the gateway's utime and stime (``/proc/<pid>/stat``) per answered
request. Prints a line per measurement and a mean per variant; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from gateway import PY, Proc, ceiling, free_port, loadgen, pin, wait_http  # noqa: E402
from gateway_support.harness import use_shared_encodings  # noqa: E402


def _cpu(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read()
    fields = raw[raw.rindex(b")") + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def variant(spec: str) -> tuple[str, str, dict[str, str]]:
    """``name=PATH[,KEY=VALUE...]`` -> (name, PATH, {KEY: VALUE})."""
    name, sep, rest = spec.partition("=")
    if not sep or not name:
        raise SystemExit(f"{spec!r}: write a variant as name=PYTHONPATH[,KEY=VALUE...]")
    path, *pairs = rest.split(",")
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{spec!r}: {pair!r} is not KEY=VALUE")
        env[key] = value
    return name, path, env


class _Gateway:
    """What ``gateway.ceiling`` reads of a target: its name, URL, model, key, headers and process."""

    def __init__(self, name: str, url: str, proc: Proc) -> None:
        self.name, self.url, self.model, self.key, self.proc = name, url, "bench", "bench", proc
        self.headers: list[str] = []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="name=PYTHONPATH[,KEY=VALUE...] (PYTHON=<interpreter>)")
    ap.add_argument("--rates", default="300,1000")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--ceiling", type=float, default=0.0, metavar="S", help="wrk for S seconds instead of --rates")
    ap.add_argument("--connections", type=int, default=64, help="wrk's connections (--ceiling)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    variants = [variant(v) for v in a.variants]
    rates = [0.0] if a.ceiling else [float(r) for r in a.rates.split(",") if r]
    work = Path(tempfile.mkdtemp(prefix="failover-ab-"))
    up_port = free_port()
    up = Proc("upstream", pin(1, [PY, str(HERE / "upstream.py"), "--port", str(up_port)]), work)
    cfg = work / "failover.yaml"
    cfg.write_text(
        "targets:\n  up:\n    dialect: openai\n"
        f"    base_url: http://127.0.0.1:{up_port}/v1\n    model: gpt-4o-mini\n"
        "    api_key_env: BENCH_UPSTREAM_KEY\n    capabilities: [chat, streaming]\n"
        "routes:\n  bench:\n    primary: [up]\n"
    )
    results: dict[str, list[float]] = {}
    try:
        if not wait_http(f"http://127.0.0.1:{up_port}/v1/models", 15):
            raise RuntimeError("upstream did not start")
        for rnd in range(a.rounds):
            for name, path, extra in variants:
                for rate in rates:
                    port = free_port()
                    env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench", "PYTHONPATH": str(Path(path).resolve())}
                    use_shared_encodings(env)
                    env.update(extra)
                    python = env.pop("PYTHON", PY)
                    cmd = [python, "-m", "failover.cli", "serve", "--config", str(cfg), "--port", str(port)]
                    gw = Proc(f"{name}-{rnd}-{rate:.0f}", pin(0, cmd), work, env)
                    try:
                        url = f"http://127.0.0.1:{port}"
                        if not wait_http(f"{url}/healthz", 60):
                            raise RuntimeError(f"{name}: the gateway did not start:\n{gw.tail()}")
                        if a.ceiling:
                            t = _Gateway(name, f"{url}/v1/chat/completions", gw)
                            ceiling(t, 3, a.connections, work)  # warm-up
                            u0, s0 = _cpu(gw.p.pid)
                            r = ceiling(t, a.ceiling, a.connections, work)
                            u1, s1 = _cpu(gw.p.pid)
                            n = max(int(r.get("requests", 0)), 1)
                            bad = r.get("non_2xx", 0) or r.get("failed", "")
                            shown = f"{r.get('rps', 0):8.0f} rps" + (f"  FAILED/NON-2XX {bad}" if bad else "")
                            results.setdefault(name, []).append(float(r.get("rps", 0)))
                        else:
                            loadgen(f"{url}/v1/chat/completions", "bench", rate, 2.0)  # warm-up
                            u0, s0 = _cpu(gw.p.pid)
                            r = loadgen(f"{url}/v1/chat/completions", "bench", rate, a.seconds)
                            u1, s1 = _cpu(gw.p.pid)
                            n = max(int(r.get("ok", 0)), 1)
                            lat = r.get("latency_ms", {})
                            shown = f"{rate:6.0f} rps  p50 {lat.get('p50')}  p99 {lat.get('p99')}  ok {r.get('ok')}"
                            results.setdefault(f"{name} @{rate:.0f}", []).append((u1 - u0 + s1 - s0) / n * 1e6)
                    finally:
                        gw.stop()
                    print(
                        f"round {rnd}  {name:10s} {shown}  user {(u1 - u0) / n * 1e6:6.0f} µs/req"
                        f"  sys {(s1 - s0) / n * 1e6:5.0f} µs/req",
                        flush=True,
                    )
                    time.sleep(1)
    finally:
        up.stop()
    what = "requests per second" if a.ceiling else "CPU µs per request"
    for name, values in results.items():
        print(f"mean {what:20s} {name:16s} {statistics.fmean(values):8.1f}  ({len(values)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
