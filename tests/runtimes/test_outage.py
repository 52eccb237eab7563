"""A full outage (every target failing for 60 s) under each agent runtime at its defaults.

Codex and the OpenAI Agents SDK speak the Responses API to the same gateway, over OpenAI-style
fakes whose overload is a 503. The Agents SDK obeys ``x-should-retry: false``: one request.
Codex does not (nor does it read the error type): it sends up to 30 requests for one turn (five
reconnects of its stream, each with four request retries), sleeping the ``Retry-After`` it is
told in whole seconds. Each of its retries is known for one (the same body after a failure),
replays no target, and is answered at once, with no upstream request, while the breakers hold;
it is never told 0 (it once retried a 0 two dozen times in 150 ms) nor more than the breaker's
5 s cap. So its requests are spread over the outage, where its own backoff would have spent
them in seconds: bench/runtimes_outage.py shows it answered after a 30 s outage.

Before, Claude Code retried the gateway's 529s itself (it retries every ``overloaded_error``
whatever ``x-should-retry`` says) and each retry ran the whole routing again: three requests and
twelve upstream calls for one prompt. Now the gateway names ``overloaded_error`` only with a
moment to come back; after trying every candidate with nothing known, it answers ``api_error``
and the runtime stops: one request, each target tried twice, no wait told beyond 30 s.
bench/runtimes_outage.py runs the same outage against an earlier version for the before / after.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import _anthropic_side as anth
from ._outage import OUTAGE, OutageRun, agents_outage, anthropic_outage, claude_code, codex_outage

pytestmark = pytest.mark.timeout(180)


def _bounded(run: OutageRun) -> None:
    assert not run.answered, run
    assert run.seconds < OUTAGE, run  # it gave up: nobody is kept waiting for the outage to pass
    assert run.client_requests == 1, run  # no retry on top of the gateway's own
    assert run.upstream_requests <= 4, run  # two attempts per target, as for any request
    assert run.longest_wait <= 30, run
    assert set(run.error_types) == {"api_error"}, run


def test_claude_code_in_a_full_outage(runtimes: Path, runtime_env: dict[str, str], tmp_path: Path) -> None:
    _bounded(anthropic_outage("claude-code", claude_code(runtimes), anth.CLI_MODEL, runtime_env, tmp_path))


def test_the_claude_agent_sdk_in_a_full_outage(runtime_env: dict[str, str], tmp_path: Path) -> None:
    _bounded(anthropic_outage("claude-agent-sdk", anth.run_agent_sdk, anth.SDK_MODEL, runtime_env, tmp_path))


def test_codex_in_a_full_outage(runtimes: Path, runtime_env: dict[str, str], tmp_path: Path) -> None:
    run = codex_outage(runtimes, runtime_env, tmp_path)
    assert 6 < run.client_requests <= 30, run  # it retries on top of the gateway, up to its own 30
    assert set(run.error_types) == {"service_unavailable"}, run
    assert run.per_request <= 2.0, run  # at most one attempt per target, and none while held
    assert 1 <= run.longest_wait <= 5, run  # the breaker's next probe: its cap, never the 30 s bound
    assert run.shortest_gap >= 0.15, run  # never a burst (Codex's own backoff starts at 0.2 s)


def test_the_openai_agents_sdk_in_a_full_outage(runtime_env: dict[str, str], tmp_path: Path) -> None:
    run = agents_outage(runtime_env, tmp_path)
    assert run.client_requests == 1 and not run.answered, run  # its SDK obeys x-should-retry: false
    assert run.upstream_requests == 4, run  # two attempts on each target
    assert run.seconds < OUTAGE, run
