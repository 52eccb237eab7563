"""Instructions per request of ``failover serve``, counted by callgrind: a CPU cost that does
not move when other work shares the machine (wall-clock latency and even process CPU time do).

    .bench-venv/bin/python bench/gateway_support/callgrind.py                      # this tree
    .bench-venv/bin/python bench/gateway_support/callgrind.py old=/tmp/old/src new=src --stream
    .bench-venv/bin/python bench/gateway_support/callgrind.py off=src on=src --off off --equivalents 3 --long

``--equivalents N`` serves the route from N deployments of one model (all on the one upstream),
``--balance`` names the route's strategy (left out: the tree's default, so an older tree without
the field reads the same file), and ``--long`` sends a ~1,500-token system prompt, which gives
the request a prompt-cache affinity key. ``--off NAME`` runs that variant with the balancer
switched off (``no_balancer.py``: no balancer in the plan, no load board books), so one run
measures what the balancer costs on the gateway's hot path.

Each ``name=PYTHONPATH`` runs the gateway with that source tree first on the path (e.g. an
older commit unpacked with ``git archive <commit> src | tar -x -C /tmp/old``). The gateway runs
under ``valgrind --tool=callgrind --instr-atstart=no`` (pinned to core 0, the upstream from
``upstream.py`` on core 1); after a warm-up, instrumentation is switched on for ``--requests``
requests (closed loop, ``--concurrency`` in flight) and off again, and the total instruction
count is divided by the requests answered. System calls are not counted (kernel work is
outside callgrind's view). Needs valgrind (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from gateway import free_port, wait_http  # noqa: E402

PY = sys.executable


# ~1,500 tokens of system prompt: over the 1,024 tokens from which providers cache a prefix.
LONG_SYSTEM = "You are a careful assistant. Answer in plain words and check every figure twice. " * 75


async def _load(url: str, n: int, concurrency: int, stream: bool, long: bool = False) -> int:
    body: dict[str, object] = {
        "model": "bench",
        "messages": [
            {"role": "system", "content": LONG_SYSTEM if long else "You are a helpful assistant."},
            {"role": "user", "content": "Say hello."},
        ],
        "max_tokens": 64,
    }
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    data = json.dumps(body).encode()
    ok = 0
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:

        async def one() -> None:
            nonlocal ok
            async with sem, s.post(url, data=data, headers={"content-type": "application/json"}) as r:
                await r.read()
                ok += r.status == 200

        await asyncio.gather(*(one() for _ in range(n)))
    return ok


def _total(prefix: str) -> int:
    total = 0
    for f in glob.glob(prefix + "*"):
        with open(f) as fh:
            for line in fh:
                if line.startswith("totals:"):
                    total += int(line.split()[1])
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="*", help="name=PYTHONPATH (default: this tree's src)")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--equivalents", type=int, default=1, metavar="N", help="deployments of the route's model")
    ap.add_argument("--balance", default=None, help="the route's balance strategy (default: the tree's)")
    ap.add_argument("--long", action="store_true", help="a ~1,500-token system prompt")
    ap.add_argument("--off", action="append", default=[], metavar="NAME", help="run NAME with the balancer off")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants] or [["tree", str(HERE.parent.parent / "src")]]
    work = Path(tempfile.mkdtemp(prefix="failover-callgrind-"))
    up = free_port()
    upstream = subprocess.Popen(
        ["taskset", "-c", "1", PY, str(HERE / "upstream.py"), "--port", str(up), "--max-seconds", "1800"],
        start_new_session=True,
    )
    cfg = work / "failover.yaml"
    names = ["up"] if a.equivalents == 1 else [f"up{i}" for i in range(a.equivalents)]
    targets = "".join(
        f"  {name}:\n    dialect: openai\n"
        f"    base_url: http://127.0.0.1:{up}/v1\n    model: gpt-4o-mini\n"
        "    api_key_env: BENCH_UPSTREAM_KEY\n    capabilities: [chat, streaming]\n"
        for name in names
    )
    balance = f"    balance: {a.balance}\n" if a.balance else ""
    cfg.write_text(f"targets:\n{targets}routes:\n  bench:\n    primary: [{', '.join(names)}]\n{balance}")
    try:
        if not wait_http(f"http://127.0.0.1:{up}/v1/models", 15):
            raise RuntimeError("upstream did not start")
        for name, path in variants:
            port = free_port()
            out = str(work / f"callgrind.{name}.out")
            env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench", "PYTHONPATH": str(Path(path).resolve())}
            entry = [str(HERE / "no_balancer.py")] if name in a.off else ["-m", "failover.cli"]
            cmd = [PY, *entry, "serve", "--config", str(cfg), "--port", str(port)]
            vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p"]
            log = open(work / f"{name}.log", "w")  # noqa: SIM115
            gw = subprocess.Popen(
                ["taskset", "-c", "0", *vg, *cmd], env=env, start_new_session=True, stdout=log, stderr=log
            )
            try:
                if not wait_http(f"http://127.0.0.1:{port}/healthz", 300):
                    raise RuntimeError(f"{name}: the gateway did not start (see {work})")
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                asyncio.run(_load(url, 30, a.concurrency, a.stream, a.long))  # warm-up, not counted
                subprocess.run(["callgrind_control", "-i", "on", str(gw.pid)], check=True, capture_output=True)
                t0 = time.monotonic()
                ok = asyncio.run(_load(url, a.requests, a.concurrency, a.stream, a.long))
                subprocess.run(["callgrind_control", "-i", "off", str(gw.pid)], check=True, capture_output=True)
            finally:
                os.killpg(gw.pid, signal.SIGTERM)
                gw.wait(60)
                log.close()
            total = _total(out)
            kind = "streamed" if a.stream else "plain"
            print(
                f"{name:10s} {ok} {kind} requests  {total / max(ok, 1) / 1e6:.3f} M instructions/request  "
                f"({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
    finally:
        os.killpg(upstream.pid, signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
