"""Two source trees of ``failover serve`` side by side, in one run: CPU per request (user and
system) and latency at fixed rates, the trees alternating so a slow stretch of a shared
machine hits both alike.

    python bench/gateway_support/ab.py before=/tmp/old/src after=src --rates 300,1000 --rounds 3

Each ``name=PYTHONPATH`` is a tree (an older commit: ``git archive <commit> src | tar -x -C
/tmp/old``). Every measurement starts a new gateway pinned to core 0 (the upstream from
``upstream.py`` and the load generator on core 1), warms it for 2 s, then counts the
gateway's utime and stime (``/proc/<pid>/stat``) over ``--seconds`` of open-loop load.
Prints a line per measurement and nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from gateway import PY, Proc, free_port, loadgen, pin, wait_http  # noqa: E402


def _cpu(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read()
    fields = raw[raw.rindex(b")") + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", help="name=PYTHONPATH")
    ap.add_argument("--rates", default="300,1000")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants]
    rates = [float(r) for r in a.rates.split(",") if r]
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
    try:
        if not wait_http(f"http://127.0.0.1:{up_port}/v1/models", 15):
            raise RuntimeError("upstream did not start")
        for rnd in range(a.rounds):
            for name, path in variants:
                for rate in rates:
                    port = free_port()
                    env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench", "PYTHONPATH": str(Path(path).resolve())}
                    cmd = [PY, "-m", "failover.cli", "serve", "--config", str(cfg), "--port", str(port)]
                    gw = Proc(f"{name}-{rnd}-{rate:.0f}", pin(0, cmd), work, env)
                    try:
                        url = f"http://127.0.0.1:{port}"
                        if not wait_http(f"{url}/healthz", 60):
                            raise RuntimeError(f"{name}: the gateway did not start:\n{gw.tail()}")
                        loadgen(f"{url}/v1/chat/completions", "bench", rate, 2.0)  # warm-up
                        u0, s0 = _cpu(gw.p.pid)
                        r = loadgen(f"{url}/v1/chat/completions", "bench", rate, a.seconds)
                        u1, s1 = _cpu(gw.p.pid)
                    finally:
                        gw.stop()
                    n = max(int(r.get("ok", 0)), 1)
                    lat = r.get("latency_ms", {})
                    print(
                        f"round {rnd}  {name:10s} {rate:6.0f} rps  user {(u1 - u0) / n * 1e6:6.0f} µs/req"
                        f"  sys {(s1 - s0) / n * 1e6:5.0f} µs/req  p50 {lat.get('p50')}  p99 {lat.get('p99')}"
                        f"  ok {r.get('ok')}",
                        flush=True,
                    )
                    time.sleep(1)
    finally:
        up.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
