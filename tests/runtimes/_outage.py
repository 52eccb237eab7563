"""A full outage under an agent runtime at its defaults: what it costs the upstreams.

Every target of the route fails for :data:`OUTAGE` seconds (Anthropic's 529 ``overloaded_error``
from both fakes), then answers again. The runtime is asked one prompt through a recording proxy
in front of ``failover serve`` (:mod:`tests.runtimes._proxy`), so that what the gateway told it
is known whatever the runtime prints. :class:`OutageRun` says how many requests the runtime
sent, how many reached the upstreams, the longest wait it was told, how it ended and when.

Shared by tests/runtimes/test_outage.py (the bounds) and bench/runtimes_outage.py (the same
run against another version of the gateway, for a before / after).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from failover.testing import Reply, Script

from . import _anthropic_side as anth
from ._proxy import recording

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

    @property
    def per_request(self) -> float:
        return self.upstream_requests / max(1, self.client_requests)


def _error_type(head: bytes) -> str:
    import json

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
        model_calls = [t for t in rec.told if t.path.startswith("/v1/messages") and "count_tokens" not in t.path]
        counts = gw.counts()
    answered = any(t.status == 200 for t in model_calls)
    return OutageRun(
        runtime,
        client_requests=len(model_calls),
        upstream_requests=counts["primary"] + counts["backup"],
        longest_wait=rec.longest_wait(),
        statuses=tuple(t.status for t in model_calls),
        error_types=tuple(_error_type(t.error) for t in model_calls if t.status >= 400),
        answered=answered,
        seconds=done.seconds,
    )


def claude_code(runtimes: Path) -> Callable[[Mapping[str, str], anth.Gateway, str, Path], anth.Run]:
    return lambda env, gw, prompt, cwd: anth.run_claude_code(runtimes, env, gw, prompt, cwd)


__all__ = ["OUTAGE", "OutageRun", "anthropic_outage", "claude_code"]
