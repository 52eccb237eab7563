"""Open-loop load generator for bench/gateway.py (aiohttp on uvloop, one process).

    python bench/gateway_support/loadgen.py --url http://127.0.0.1:18000/v1/chat/completions \
        --model bench --rate 300 --duration 10 [--stream]

Request i is scheduled at ``t0 + i / rate`` (``--arrivals fixed``, the default), or at the
i-th point of a Poisson process of that rate (``--arrivals poisson``: exponential gaps drawn
from a fixed seed, so every target meets the same schedule); the loop sends every request whose time has come
(a late wake-up sends the backlog at once, it never skips), and each latency is measured from
the request's *scheduled* time, so a slow server cannot slow the generator down and hide its
own queueing (no coordinated omission). Sends are timed to the microsecond (``precise.py``):
the loop's own timers round to whole milliseconds, which gave each run its own send lag.
Connections come from a keep-alive pool (``--connections``, TCP_NODELAY, as aiohttp sets
it); a request that waits for a free connection waits on the clock. Every request has a
deadline (``--timeout``), and the run is bounded: after the last send it waits at most
``--timeout`` more seconds.

Prints one JSON object: counts, errors (by kind), latency percentiles in ms (plain: to the
end of the body; stream: ``ttft`` to the first event with non-empty ``delta.content``,
``latency`` to the end of the stream), the send lag (actual send minus scheduled time: the
generator's own health), goodput and the generator's CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import time
from collections import Counter

import aiohttp
from precise import PreciseTimers

clock = time.perf_counter  # uvloop's loop.time() has 1 ms resolution


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))  # nearest rank
    return xs[k]


def summary(xs: list[float]) -> dict[str, float | None]:
    return {
        "p50": pct(xs, 50),
        "p90": pct(xs, 90),
        "p99": pct(xs, 99),
        "p999": pct(xs, 99.9),
        "max": max(xs) if xs else None,
        "mean": sum(xs) / len(xs) if xs else None,
    }


def _has_content(line: bytes) -> bool:
    if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
        return False
    try:
        obj = json.loads(line[6:])
    except ValueError:
        return False
    return any((ch.get("delta") or {}).get("content") for ch in obj.get("choices") or ())


def schedule(n: int, rate: float, arrivals: str) -> list[float]:
    """Each request's send time, in seconds from the start: evenly spaced, or a Poisson process
    (seeded: the same gaps for every target and every run)."""
    if arrivals == "fixed":
        return [i / rate for i in range(n)]
    rng = random.Random(20261204)
    return list(itertools.accumulate((rng.expovariate(rate) for _ in range(n)), initial=0.0))[:n]


async def run(a: argparse.Namespace) -> dict:
    timers = PreciseTimers(asyncio.get_running_loop())
    payload = {
        "model": a.model,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Say hello."},
        ],
        "max_tokens": 64,
    }
    if a.stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    body = json.dumps(payload).encode()
    headers = {"content-type": "application/json", "authorization": f"Bearer {a.key}"}
    for h in a.header:
        k, _, v = h.partition(":")
        headers[k.strip()] = v.strip()
    conn = aiohttp.TCPConnector(limit=a.connections, ttl_dns_cache=None, use_dns_cache=False)
    timeout = aiohttp.ClientTimeout(total=a.timeout)
    lat: list[float] = []
    at: list[float] = []  # each answered request's scheduled time, beside lat
    ttft: list[float] = []
    lag: list[float] = []
    errors: Counter[str] = Counter()
    samples: list[str] = []
    last_done = 0.0

    async with aiohttp.ClientSession(connector=conn, timeout=timeout, skip_auto_headers=("User-Agent",)) as session:

        async def one(sched: float) -> None:
            nonlocal last_done
            try:
                lag.append(clock() - sched)
                async with session.post(a.url, data=body, headers=headers) as r:
                    if r.status != 200:
                        text = await r.text()
                        errors[f"http_{r.status}"] += 1
                        if len(samples) < 3:
                            samples.append(text[:300])
                        return
                    if a.stream:
                        first = None
                        async for line in r.content:
                            if first is None and _has_content(line):
                                first = clock()
                        if first is None:
                            errors["stream_without_content"] += 1
                            return
                        ttft.append(first - sched)
                    else:
                        await r.read()
                now = clock()
                lat.append(now - sched)
                at.append(sched)
                last_done = max(last_done, now)
            except TimeoutError:
                errors["timeout"] += 1
            except aiohttp.ClientError as e:
                errors[type(e).__name__] += 1
                if len(samples) < 3:
                    samples.append(repr(e)[:300])

        # warm the pool a little so the first scheduled requests do not all pay a TCP connect
        warm = [asyncio.create_task(one(clock())) for _ in range(min(a.connections, a.warm))]
        await asyncio.gather(*warm)
        lat.clear(), at.clear(), ttft.clear(), lag.clear(), errors.clear(), samples.clear()

        n = int(a.rate * a.duration)
        offsets = schedule(n, a.rate, a.arrivals)
        cpu0 = time.process_time()
        t0 = clock() + 0.01
        tasks: set[asyncio.Task] = set()
        i = 0
        while i < n:
            now = clock()
            while i < n and t0 + offsets[i] <= now:
                t = asyncio.create_task(one(t0 + offsets[i]))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
                i += 1
            if i < n:
                await timers.sleep_until(t0 + offsets[i])
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=a.timeout + 1)
            for t in pending:
                t.cancel()
            errors["unfinished"] += len(pending)
        cpu = time.process_time() - cpu0
    ms = lambda d: {k: (None if v is None else round(v * 1000, 3)) for k, v in d.items()}  # noqa: E731
    span = (last_done - t0) if last_done > t0 else float("nan")
    # p99 per window of the run, by scheduled time: a tail that grows with the run shows here
    windows: dict[int, list[float]] = {}
    for sched, x in zip(at, lat, strict=True):
        windows.setdefault(int((sched - t0) // a.window), []).append(x)
    by_window = [round((pct(xs, 99) or 0.0) * 1000, 3) for _, xs in sorted(windows.items())]
    return {
        "rate": a.rate,
        "duration": a.duration,
        "sent": n,
        "ok": len(lat),
        "errors": dict(errors),
        "error_samples": samples,
        "latency_ms": ms(summary(lat)),
        "ttft_ms": ms(summary(ttft)) if a.stream else None,
        "send_lag_ms": ms(summary(lag)),
        "window_s": a.window,
        "p99_by_window_ms": by_window,
        "t0_perf": t0,  # perf_counter (CLOCK_MONOTONIC): lines up with a gateway trace's times
        "goodput_rps": round(len(lat) / span, 1) if span == span else None,
        "loadgen_cpu_s": round(cpu, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--key", default="bench")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--arrivals", choices=("fixed", "poisson"), default="fixed")
    p.add_argument("--header", action="append", default=[], help="extra 'name: value' header (repeatable)")
    p.add_argument("--connections", type=int, default=512)
    p.add_argument("--warm", type=int, default=32)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--window", type=float, default=10.0, help="s; p99 is also given per window of the run")
    a = p.parse_args()
    try:
        import uvloop

        res = uvloop.run(run(a))
    except ImportError:
        res = asyncio.run(run(a))
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
