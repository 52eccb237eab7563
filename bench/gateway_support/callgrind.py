"""Instructions per request of ``failover serve``, counted by callgrind: a CPU cost that does
not move when other work shares the machine (wall-clock latency and even process CPU time do).

    .bench-venv/bin/python bench/gateway_support/callgrind.py                      # this tree
    .bench-venv/bin/python bench/gateway_support/callgrind.py old=/tmp/old/src new=src --stream

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


async def _load(url: str, n: int, concurrency: int, stream: bool) -> int:
    body: dict[str, object] = {
        "model": "bench",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
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
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants] or [["tree", str(HERE.parent.parent / "src")]]
    work = Path(tempfile.mkdtemp(prefix="failover-callgrind-"))
    up = free_port()
    upstream = subprocess.Popen(
        ["taskset", "-c", "1", PY, str(HERE / "upstream.py"), "--port", str(up), "--max-seconds", "1800"],
        start_new_session=True,
    )
    cfg = work / "failover.yaml"
    cfg.write_text(
        "targets:\n  up:\n    dialect: openai\n"
        f"    base_url: http://127.0.0.1:{up}/v1\n    model: gpt-4o-mini\n"
        "    api_key_env: BENCH_UPSTREAM_KEY\n    capabilities: [chat, streaming]\n"
        "routes:\n  bench:\n    primary: [up]\n"
    )
    try:
        if not wait_http(f"http://127.0.0.1:{up}/v1/models", 15):
            raise RuntimeError("upstream did not start")
        for name, path in variants:
            port = free_port()
            out = str(work / f"callgrind.{name}.out")
            env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench", "PYTHONPATH": str(Path(path).resolve())}
            cmd = [PY, "-m", "failover.cli", "serve", "--config", str(cfg), "--port", str(port)]
            vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}.%p"]
            log = open(work / f"{name}.log", "w")  # noqa: SIM115
            gw = subprocess.Popen(
                ["taskset", "-c", "0", *vg, *cmd], env=env, start_new_session=True, stdout=log, stderr=log
            )
            try:
                if not wait_http(f"http://127.0.0.1:{port}/healthz", 300):
                    raise RuntimeError(f"{name}: the gateway did not start (see {work})")
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                asyncio.run(_load(url, 30, a.concurrency, a.stream))  # warm-up, not counted
                subprocess.run(["callgrind_control", "-i", "on", str(gw.pid)], check=True, capture_output=True)
                t0 = time.monotonic()
                ok = asyncio.run(_load(url, a.requests, a.concurrency, a.stream))
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
