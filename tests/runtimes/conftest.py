"""The agent runtimes, installed once (scripts/runtimes.sh) and run at their DEFAULT settings.

``runtimes`` is the npm install of the Claude Code and Codex CLIs (pinned in
scripts/runtimes.sh, cached outside the clone); the Python runtimes (claude-agent-sdk,
openai-agents) are pinned in pyproject's test extra. A runtime that cannot be installed fails
the test with the installer's output: never a skip.

``runtime_env`` is the environment a runtime process starts with: a throwaway HOME (no login,
no user config, no session history shared between tests), and the switches every runtime
documents for telemetry, error reporting and self-update turned off. Nothing else: retries,
timeouts, models and streaming stay at the runtime's defaults.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Telemetry, error reporting and update checks off: the runtime talks to the gateway only.
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CODEX_DISABLE_TELEMETRY": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
}


@pytest.fixture(scope="session")
def runtimes() -> Path:
    """The npm install: ``runtimes / "node_modules/.bin/claude"`` and ``.../codex``."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / "runtimes.sh")], capture_output=True, text=True, timeout=900, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/runtimes.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}", pytrace=False)
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def runtime_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment for one runtime process: its own HOME, no provider keys of ours."""
    home = tmp_path / "home"
    home.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "PYTHONPATH", "TIKTOKEN_CACHE_DIR", "SSL_CERT_FILE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(QUIET)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"))
    return env
