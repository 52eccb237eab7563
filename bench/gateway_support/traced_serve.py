"""``failover serve`` with a loop-lag and GC-pause trace, for finding where a latency tail comes from.

    python bench/gateway_support/traced_serve.py --trace out.json [--suspend gc,access_log,...] \
        serve --config cfg.yaml --port 18001

Runs the CLI as ``failover`` would, with three additions, all in this process:

* **GC pauses**: ``gc.callbacks`` times every collection (generation, milliseconds, objects
  collected) on ``perf_counter``.
* **Loop lag**: a timer due every ``--tick`` ms (default 5) records how late it fired. A late
  timer means the loop was busy (or the process was not scheduled) for that long; the trace
  keeps every sample with its time, so a spike can be matched with a collection.
* **Suspects removed** (``--suspend``, comma-separated), to measure the tail without each:
  ``gc`` (no automatic collections at all), ``gc_default`` (Python's own thresholds, not the
  gateway's), ``freeze`` (no ``gc.freeze()``), ``access_log`` (the per-request access line
  off), ``metrics`` (the Prometheus counters not updated).

On exit (SIGTERM, as bench/gateway.py stops its targets) the trace is written as JSON:
``{"gc": [[t, gen, ms, collected], ...], "lag": [[t, ms], ...], "t0": ..., "suspended": [...]}``,
times in seconds from the trace's start. ``summarise()`` turns one into the numbers the bench
prints. Nothing here is part of the product.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

clock = time.perf_counter
SUSPECTS = ("gc", "gc_default", "freeze", "access_log", "metrics")


class Trace:
    def __init__(self, tick_s: float) -> None:
        self.t0 = clock()
        self.tick_s = tick_s
        self.gc: list[list[float]] = []
        self.lag: list[list[float]] = []
        self._gc_start = 0.0
        self._due = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = clock()
        else:
            now = clock()
            self.gc.append(
                [
                    round(now - self.t0, 4),
                    info["generation"],
                    round((now - self._gc_start) * 1000, 3),
                    info["collected"],
                ]
            )

    def start_probe(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop = loop
        self._due = clock() + self.tick_s
        loop.call_later(self.tick_s, self._tick)

    def _tick(self) -> None:
        now = clock()
        late = now - self._due
        self.lag.append([round(now - self.t0, 4), round(max(0.0, late) * 1000, 3)])
        self._due = now + self.tick_s
        assert self._loop is not None
        self._loop.call_later(self.tick_s, self._tick)

    def dump(self, path: Path, suspended: list[str]) -> None:
        path.write_text(
            json.dumps(
                {"t0": self.t0, "tick_ms": self.tick_s * 1000, "suspended": suspended, "gc": self.gc, "lag": self.lag}
            )
        )


def summarise(trace: dict[str, Any], start: float = 0.0, end: float = float("inf")) -> dict[str, Any]:
    """Pauses and lag inside [start, end) s of the trace: counts, totals, the worst, lag percentiles."""
    pauses = [p for p in trace["gc"] if start <= p[0] < end]
    lags = sorted(lag for t, lag in trace["lag"] if start <= t < end)

    def pct(q: float) -> float | None:
        return lags[min(len(lags) - 1, int(q / 100 * len(lags)))] if lags else None

    by_gen = {}
    for gen in (0, 1, 2):
        ms = [p[2] for p in pauses if p[1] == gen]
        by_gen[f"gen{gen}"] = {"n": len(ms), "total_ms": round(sum(ms), 2), "max_ms": round(max(ms), 2) if ms else 0.0}
    return {
        "gc": by_gen,
        "lag_ms": {"p50": pct(50), "p99": pct(99), "p999": pct(99.9), "max": lags[-1] if lags else None},
        "lag_over_5ms": sum(1 for lag in lags if lag > 5),
        "worst_lags": sorted(([t, lag] for t, lag in trace["lag"] if start <= t < end), key=lambda x: -x[1])[:5],
        "worst_pauses": sorted(pauses, key=lambda p: -p[2])[:5],
    }


def suspend(names: list[str]) -> None:
    """Take the named suspects out before the gateway starts (see the module docstring)."""
    from failover.gateway import _serve

    unknown = sorted(set(names) - set(SUSPECTS))
    if unknown:
        raise SystemExit(f"--suspend: unknown {unknown}; choose from {', '.join(SUSPECTS)}")
    tune = _serve.tune_gc

    def tuned() -> None:
        if "freeze" in names:
            gc.freeze = lambda: None  # type: ignore[assignment]
        tune()
        if "gc_default" in names:
            gc.set_threshold(700, 10, 10)
        if "gc" in names:
            gc.disable()

    _serve.tune_gc = tuned  # type: ignore[assignment]
    if "access_log" in names:
        # Through the logging configuration uvicorn applies at start-up: that dictConfig
        # enables again a logger disabled before it.
        from failover.gateway._logs import ACCESS_LOGGER

        make = _serve.uvicorn_log_config

        def quiet() -> dict[str, Any]:
            config = make()
            config.setdefault("loggers", {})[ACCESS_LOGGER] = {"level": "WARNING"}
            return config

        _serve.uvicorn_log_config = quiet  # type: ignore[assignment]
    if "metrics" in names:
        from failover.gateway._metrics import GatewayMetrics

        GatewayMetrics.observe = lambda *args, **kw: None  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True, type=Path)
    ap.add_argument("--tick", type=float, default=5.0, help="ms between loop-lag samples")
    ap.add_argument("--suspend", default="", help=f"comma-separated, of: {', '.join(SUSPECTS)}")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="the failover CLI's arguments (serve ...)")
    a = ap.parse_args()
    names = [n for n in a.suspend.split(",") if n]
    trace = Trace(a.tick / 1000)
    gc.callbacks.append(trace.on_gc)
    suspend(names)

    from failover.gateway import _serve

    build = _serve.build_app

    def traced_app(*args: Any, **kw: Any) -> Any:
        app = build(*args, **kw)

        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            trace.start_probe()  # the first lifespan message runs on uvicorn's loop
            await app(scope, receive, send)

        return wrapped

    _serve.build_app = traced_app  # type: ignore[assignment]
    from failover.cli import main as cli

    # uvicorn re-raises the SIGTERM it caught once it has shut down: exit through Python, so
    # the trace below is written
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        cli(a.rest)
    except SystemExit:
        pass
    finally:
        trace.dump(a.trace, names)


if __name__ == "__main__":
    main()
