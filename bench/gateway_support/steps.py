"""Where a streamed request's first event spends its time inside failover's gateway, step by step.

    python bench/gateway_support/steps.py [--rate 100] [--duration 10] [--arrivals fixed]

Starts the bench's fake upstream (``upstream.py``, core 1), ``failover serve`` with timestamps
taken at fixed points of the stream path (core 0), and the open-loop load generator
(``loadgen.py``, core 1, streamed requests); after the run it prints, for each step between two
points, the median and p90 over all requests, and the two legs a first event crosses: the
client's request in -> the upstream request out, and the upstream's first bytes in -> the first
event out. The same route as ``bench/gateway.py``'s (``hold_tokens: 0``).

Each point costs about a microsecond and a wrapped call a little more, so the steps add up to
more than an untraced gateway spends (compare the load generator's time to first event with
``bench/gateway.py``'s): read them as shares, not as absolute costs. The points wrap internal
names of the gateway; when one is renamed this tool says which one and stops. Nothing here is
part of the product.
"""

from __future__ import annotations

import argparse
import contextvars
import functools
import inspect
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness import failover_config, use_shared_encodings, wait_http

HERE = Path(__file__).resolve().parent
PY = sys.executable
ns = time.perf_counter_ns
SEQ: contextvars.ContextVar[int] = contextvars.ContextVar("steps_seq", default=-1)
MARKS: list[tuple[int, str, int]] = []
_numbers = itertools.count()
SERVER = ("srv.data", "srv.headers_complete", "srv.task")  # before the request has a number


def mark(label: str, seq: int | None = None) -> None:
    MARKS.append((ns(), label, SEQ.get() if seq is None else seq))


def wrap(owner: Any, name: str, label: str, *, after: bool = False) -> None:
    """Mark ``label`` when ``owner.name`` is called (and ``label.end`` when it returns)."""
    original = getattr(owner, name, None)
    if original is None:
        raise SystemExit(f"steps.py: {owner.__name__}.{name} no longer exists; update the points")

    if inspect.iscoroutinefunction(original):

        async def traced(*args: Any, **kwargs: Any) -> Any:
            mark(label)
            result = await original(*args, **kwargs)
            if after:
                mark(label + ".end")
            return result

    else:

        def traced(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            mark(label)
            result = original(*args, **kwargs)
            if after:
                mark(label + ".end")
            return result

    functools.update_wrapper(traced, original)
    setattr(owner, name, traced)


def install(out: Path) -> None:
    """Put the points in (in the gateway's process), and write the marks to ``out`` at shutdown."""
    from uvicorn.protocols.http import httptools_impl

    from failover.gateway import _app, _chat, _endpoint, _gateway, _logs, _protocol, _stream_reply
    from failover.providers import openai
    from failover.router import _attempt, _generate, _router, _run, _stream
    from failover.transport import _http1, _http1_conn

    def server(owner: Any, name: str, label: str) -> None:  # a point outside any request's context
        original = getattr(owner, name)

        def traced(self: Any, *args: Any) -> Any:
            MARKS.append((ns(), label, -1))
            return original(self, *args)

        setattr(owner, name, traced)

    server(_protocol.HeadTimeoutProtocol, "data_received", "srv.data")
    server(_protocol.HeadTimeoutProtocol, "on_headers_complete", "srv.headers_complete")
    server(httptools_impl.HttpToolsProtocol, "_start_asgi_task", "srv.task")
    app_call = _app.GatewayApp.__call__

    async def numbered(self: Any, scope: Any, receive: Any, send: Any) -> None:  # (uvicorn reads the signature)
        SEQ.set(next(_numbers))
        mark("app")
        await app_call(self, scope, receive, send)

    _app.GatewayApp.__call__ = numbered  # type: ignore[method-assign]
    wrap(_endpoint, "read_body", "read_body")
    wrap(_chat.ChatCompletions, "parse", "parse")
    wrap(_endpoint, "envelope_from", "envelope_from")
    wrap(_chat.ChatCompletions, "to_request", "to_request")
    wrap(_endpoint, "with_affinity", "with_affinity")
    wrap(_endpoint, "vet", "vet")
    wrap(_gateway.Gateway, "enter", "gw.enter")
    wrap(_chat.ChatCompletions, "wire", "wire")
    wrap(_stream_reply.StreamReply, "__init__", "reply.init")
    wrap(_router.Router, "stream", "router.stream")
    wrap(_stream.RouteStream, "__init__", "routestream.init")
    wrap(_stream_reply.StreamReply, "_pump", "reply.pump")
    wrap(_stream.RouteStream, "_produce", "produce")
    wrap(_run.Run, "execute", "run.execute")
    wrap(_run.Run, "run_lane", "run.lane")
    wrap(_attempt.Attempts, "attempt", "attempt")
    wrap(_generate.Generation, "exchange", "exchange")
    wrap(openai.OpenAIDialect, "build", "dialect.build", after=True)
    wrap(_http1.Http1Transport, "stream", "transport.stream")
    conn = _http1_conn.Connection
    begin, received = conn.begin, conn.data_received

    def sent(self: Any, *args: Any, **kwargs: Any) -> None:
        begin(self, *args, **kwargs)
        self._steps_seq = SEQ.get()
        mark("upstream.sent")

    def upstream_data(self: Any, data: bytes) -> None:
        seq = getattr(self, "_steps_seq", -1)
        if seq >= 0:  # the first bytes of the answer
            MARKS.append((ns(), "upstream.data", seq))
            self._steps_seq = -1
        received(self, data)

    conn.begin = sent  # type: ignore[method-assign]
    conn.data_received = upstream_data  # type: ignore[method-assign]
    wrap(openai._ChunkStream, "feed", "dialect.feed")
    wrap(_stream.Output, "deliver", "deliver")
    wrap(_stream_reply.StreamReply, "_start", "reply.head", after=True)
    one_write = _protocol._OneWrite
    write = one_write.write

    def client_write(self: Any, data: bytes) -> None:
        write(self, data)
        if self._held is None:  # written, not held back
            mark("client.write")

    one_write.write = client_write  # type: ignore[method-assign]
    drain = _logs.drain_logs

    def dump_then_drain(*args: Any, **kwargs: Any) -> None:
        out.write_text(json.dumps(MARKS))
        drain(*args, **kwargs)

    _app.drain_logs = dump_then_drain  # type: ignore[assignment]


def steps(marks: list[list[Any]], skip: int = 40) -> dict[str, list[float]]:
    """Per step (``a -> b``, in the order they come), the microseconds of each request."""
    marks.sort()
    by: dict[int, list[tuple[int, str]]] = defaultdict(list)
    server: dict[str, int] = {}
    for t, label, seq in marks:
        if label in SERVER:
            if label == "srv.data":
                server = {}
            server[label] = t
            continue
        if label == "app":
            by[seq].extend((v, k) for k, v in server.items())
        by[seq].append((t, label))
    out: dict[str, list[float]] = defaultdict(list)
    for seq, events in by.items():
        if seq < skip:  # the warm-up
            continue
        events.sort()
        seen: dict[str, int] = {}
        prev: tuple[int, str] | None = None
        for t, label in events:
            if label in seen:
                continue
            seen[label] = t
            if prev is not None:
                out[f"{prev[1]} -> {label}"].append((t - prev[0]) / 1000)
            prev = (t, label)
        if {"srv.data", "upstream.sent", "upstream.data", "client.write"} <= seen.keys():
            out["= request in -> upstream request out"].append((seen["upstream.sent"] - seen["srv.data"]) / 1000)
            out["= upstream bytes in -> first event out"].append((seen["client.write"] - seen["upstream.data"]) / 1000)
    return out


def table(out: dict[str, list[float]]) -> str:
    rows = ["| step | requests | p50 µs | p90 µs |", "| --- | --- | --- | --- |"]
    for name, xs in out.items():
        if "upstream.sent -> upstream.data" in name:
            continue  # the upstream's own 20 ms
        xs = sorted(xs)
        rows.append(f"| {name} | {len(xs)} | {statistics.median(xs):.1f} | {xs[int(len(xs) * 0.9)]:.1f} |")
    return "\n".join(rows)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-traced":  # the gateway's process
        install(Path(sys.argv[2]))
        from failover.cli import main as cli

        sys.exit(cli(sys.argv[3:]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--arrivals", choices=("fixed", "poisson"), default="fixed")
    p.add_argument("--port", type=int, default=18300, help="the gateway's; the upstream takes the next")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="failover-steps-"))
    up = a.port + 1
    cfg = work / "failover.yaml"
    cfg.write_text(failover_config(up))
    marks = work / "marks.json"
    env = {**os.environ, "BENCH_UPSTREAM_KEY": "sk-bench"}
    use_shared_encodings(env)  # counted exactly, as online
    serve = ["serve", "--config", str(cfg), "--port", str(a.port), "--log-level", "warning"]
    procs = [
        subprocess.Popen(["taskset", "-c", "1", PY, str(HERE / "upstream.py"), "--port", str(up)]),
        subprocess.Popen(["taskset", "-c", "0", PY, __file__, "--serve-traced", str(marks), *serve], env=env),
    ]
    try:
        if not wait_http(f"http://127.0.0.1:{a.port}/healthz", 30):
            raise SystemExit("steps.py: the traced gateway did not answer")
        load = ["taskset", "-c", "1", PY, str(HERE / "loadgen.py"), "--stream", "--arrivals", a.arrivals]
        load += ["--url", f"http://127.0.0.1:{a.port}/v1/chat/completions", "--model", "bench"]
        subprocess.run([*load, "--rate", "50", "--duration", "2"], check=True, capture_output=True)  # warm-up
        res = json.loads(
            subprocess.run(
                [*load, "--rate", str(a.rate), "--duration", str(a.duration)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
    finally:
        procs[1].send_signal(signal.SIGTERM)
        procs[1].wait(30)
        procs[0].terminate()
        procs[0].wait(10)
    print(f"time to first event (load generator, traced gateway): {res['ttft_ms']}")
    print(table(steps(json.loads(marks.read_text()))))


if __name__ == "__main__":
    main()
