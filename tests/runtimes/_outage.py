"""A full outage under an agent runtime at its defaults: what it costs the upstreams.

Every target of the route fails for :data:`OUTAGE` seconds (the fakes' overload: Anthropic's 529
``overloaded_error``, OpenAI's 503), then answers again. The runtime is asked one prompt through a recording proxy
in front of ``failover serve`` (:mod:`tests.runtimes._proxy`), so that what the gateway told it
is known whatever the runtime prints. :class:`OutageRun` says how many requests the runtime
sent, how many reached the upstreams, the longest wait it was told, how it ended and when.

Shared by tests/runtimes/test_outage.py (the bounds) and bench/runtimes_outage.py (the same
run against another version of the gateway, for a before / after).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from agents import Agent, Runner

from failover.testing import Reply, Script

from . import _anthropic_side as anth
from . import _openai_side as oai
from ._proxy import Recorder, recording

OUTAGE = 60.0  # seconds every target fails before it answers again


@dataclass(frozen=True)
class OutageRun:
    runtime: str
    client_requests: int  # model requests the runtime sent (retries included)
    upstream_requests: int  # model calls that reached the fake providers
    longest_wait: float  # the longest Retry-After the gateway told it (0: none)
    statuses: tuple[int, ...]  # the gateway's answers, in order
    error_types: tuple[str, ...]  # the error ``type`` each failed answer named
    answered: bool  # the runtime ended with an answer (the outage outlasted by its retries)
    seconds: float  # how long the runtime ran
    shortest_gap: float  # the least time between two of its requests (inf: fewer than two)

    @property
    def per_request(self) -> float:
        return self.upstream_requests / max(1, self.client_requests)


def _error_type(head: bytes) -> str:
    try:
        body = json.loads(head)
    except ValueError:
        return "?"
    err = body.get("error") if isinstance(body, dict) else None
    return str(err.get("type")) if isinstance(err, dict) else "?"


def anthropic_outage(
    runtime: str,
    run: Callable[[Mapping[str, str], anth.Gateway, str, Path], anth.Run],
    model: str,
    env: Mapping[str, str],
    tmp: Path,
    *,
    serve_env: Mapping[str, str] | None = None,
    outage: float = OUTAGE,
) -> OutageRun:
    """One prompt from an Anthropic runtime (``run``: Claude Code or the Agent SDK) while both
    targets of its route are down for ``outage`` seconds."""
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    down = Script.always(Reply.overloaded())
    with anth.gateway(tmp, model, down, down, serve_env=serve_env) as gw, recording(gw.base_url) as (url, rec):
        recover = threading.Timer(outage, lambda: [p.load(anth.ok("back")) for p in (gw.primary, gw.backup)])
        recover.start()
        try:
            done = run(env, dataclasses.replace(gw, base_url=url), "Say hello.", work)
        finally:
            recover.cancel()
        counts = gw.counts()
    return _summary(runtime, rec, "/v1/messages", counts["primary"] + counts["backup"], done.seconds)


def _summary(runtime: str, rec: Recorder, path: str, upstream: int, seconds: float) -> OutageRun:
    calls = [t for t in rec.told if t.path.startswith(path) and "count_tokens" not in t.path]
    return OutageRun(
        runtime,
        client_requests=len(calls),
        upstream_requests=upstream,
        longest_wait=rec.longest_wait(),
        statuses=tuple(t.status for t in calls),
        error_types=tuple(_error_type(t.error) for t in calls if t.status >= 400),
        answered=any(t.status == 200 for t in calls),
        seconds=seconds,
        shortest_gap=rec.shortest_gap(path),
    )


def codex_outage(
    runtimes: Path,
    env: dict[str, str],
    tmp: Path,
    *,
    serve_env: Mapping[str, str] | None = None,
    outage: float = OUTAGE,
) -> OutageRun:
    """One prompt from ``codex exec`` while both Responses targets are down for ``outage`` s."""
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    down = Script.always(Reply.overloaded())
    with oai.gateway(tmp, down, down, serve_env=serve_env) as gw, recording(gw.base_url) as (url, rec):
        recover = threading.Timer(outage, lambda: [p.load("ok") for p in (gw.a, gw.b)])
        recover.start()
        try:
            codex = runtimes / "node_modules" / ".bin" / "codex"
            done = oai.run_codex(codex, env, dataclasses.replace(gw, base_url=url), work, "Say hello", timeout=170)
        finally:
            recover.cancel()
        upstream = gw.count(gw.a) + gw.count(gw.b)
    return _summary("codex", rec, "/v1/responses", upstream, done.seconds)


def agents_outage(
    env: Mapping[str, str], tmp: Path, *, serve_env: Mapping[str, str] | None = None, outage: float = OUTAGE
) -> OutageRun:
    """One ``Runner.run`` of the OpenAI Agents SDK while both targets are down for ``outage`` s."""
    down = Script.always(Reply.overloaded())
    with oai.gateway(tmp, down, down, serve_env=serve_env) as gw, recording(gw.base_url) as (url, rec):
        recover = threading.Timer(outage, lambda: [p.load("ok") for p in (gw.a, gw.b)])
        recover.start()

        async def go() -> None:
            async with oai.agents_run_config(dataclasses.replace(gw, base_url=url)) as config:
                await Runner.run(Agent(name="a", model=oai.ROUTE), "Say hello", run_config=config)

        start = time.monotonic()
        try:
            # the run is judged by what it sent and was told, not by what it raised
            with mock.patch.dict(os.environ, env, clear=True), contextlib.suppress(Exception):
                asyncio.run(go())
        finally:
            recover.cancel()
        seconds = time.monotonic() - start
        upstream = gw.count(gw.a) + gw.count(gw.b)
    return _summary("openai-agents", rec, "/v1/responses", upstream, seconds)


def claude_code(runtimes: Path) -> Callable[[Mapping[str, str], anth.Gateway, str, Path], anth.Run]:
    return lambda env, gw, prompt, cwd: anth.run_claude_code(runtimes, env, gw, prompt, cwd)


__all__ = ["OUTAGE", "OutageRun", "agents_outage", "anthropic_outage", "claude_code", "codex_outage"]
