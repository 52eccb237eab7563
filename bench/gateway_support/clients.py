"""Upstream HTTP client choice: requests/s and CPU per request of a tiny direct client loop:
httpx and aiohttp as they are, and failover's three transports (the same request through
``Transport.send``, timeouts and all).

    taskset -c 0 python bench/gateway_support/clients.py --port 18001 [--seconds 5 --concurrency 64]

Against the same loopback upstream (started separately, on the other core), each client makes
POST /v1/chat/completions with the same body from ``--concurrency`` tasks for ``--seconds``
(closed loop, keep-alive pool, uvloop), one client after the other, twice in alternation.
Prints requests/s and CPU microseconds per request (``time.process_time``). With a 20 ms
upstream, concurrency 64 caps a client at 3,200 req/s: the CPU per request is the figure
that says what the client costs a one-core gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp
import httpx

BODY = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello."}]}).encode()
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


async def loop_for(seconds: float, conc: int, call) -> tuple[int, float, float]:
    n = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal n
        while time.perf_counter() < stop:
            await call()
            n += 1

    for _ in range(conc):  # warm the pool
        await call()
    c0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    return n, time.perf_counter() - w0, time.process_time() - c0


async def main(a: argparse.Namespace) -> None:
    url = f"http://127.0.0.1:{a.port}/v1/chat/completions"
    hx = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=a.concurrency * 2, max_keepalive_connections=a.concurrency)
    )
    ah = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=a.concurrency * 2))

    async def c_httpx() -> None:
        r = await hx.post(url, content=BODY, headers=HEADERS)
        r.json()

    async def c_aiohttp() -> None:
        async with ah.post(url, data=BODY, headers=HEADERS) as r:
            json.loads(await r.read())

    cases = {"httpx.AsyncClient": c_httpx, "aiohttp.ClientSession": c_aiohttp}
    try:
        from failover.transport import AiohttpTransport, Http1Transport, HttpRequest, HttpxTransport, Transport

        req = HttpRequest(method="POST", url=url, headers=HEADERS, json=json.loads(BODY))

        def through(t: Transport):
            async def call() -> None:
                r = await t.send(req, connect_timeout=5.0, total_timeout=30.0)
                json.loads(r.body)

            return call

        for name, t in (
            ("failover HttpxTransport", HttpxTransport()),
            ("failover AiohttpTransport", AiohttpTransport()),
            ("failover Http1Transport (default)", Http1Transport()),
        ):
            await through(t)()
            cases[name] = through(t)
    except Exception as e:
        print(f"# failover transports not measured: {e!r}")
    res: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(a.repeats):
        for name, call in cases.items():
            n, wall, cpu = await loop_for(a.seconds, a.concurrency, call)
            res[name].append((n / wall, cpu / n * 1e6))
    print(f"| client | requests/s (concurrency {a.concurrency}) | CPU µs / request |")
    print("| --- | --- | --- |")
    for name, xs in res.items():
        rps = max(x[0] for x in xs)
        cpu = min(x[1] for x in xs)
        print(f"| {name} | {rps:.0f} | {cpu:.0f} |")
    await hx.aclose()
    await ah.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    import uvloop

    uvloop.run(main(a))
