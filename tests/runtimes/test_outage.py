"""A full outage (every target failing for 60 s) under each agent runtime at its defaults.

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
from ._outage import OUTAGE, OutageRun, anthropic_outage, claude_code

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
