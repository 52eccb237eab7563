"""Agent runtimes in a full outage: upstream requests per client request, before and after.

    .venv/bin/python bench/runtimes_outage.py                  # before = 8f7963b, after = this tree
    .venv/bin/python bench/runtimes_outage.py --before <ref> --runtimes claude-code

Each runtime at its DEFAULT settings asks one prompt through ``failover serve`` while every
target of its route fails (Anthropic's 529, OpenAI's 503) for 60 s. The set-up is the test's
(tests/runtimes/_outage.py): fault-kit upstreams over loopback HTTP, a recording proxy in front
of the gateway that keeps what each answer told the runtime. The same run is made twice in one
invocation: against the gateway of ``--before`` (a git ref, checked out into a temporary
worktree and served from there) and against this tree's. Per runtime and version it prints the
requests the runtime sent, the calls that reached the upstreams, their ratio, the longest wait
the gateway told, the error types it named, and how long the runtime took to give up.

Needs the runtimes (scripts/runtimes.sh) and network to nothing but loopback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.runtimes import _anthropic_side as anth  # noqa: E402
from tests.runtimes._outage import (  # noqa: E402
    OUTAGE,
    OutageRun,
    agents_outage,
    anthropic_outage,
    claude_code,
    codex_outage,
)
from tests.runtimes.conftest import QUIET  # noqa: E402

RUNTIMES = ("claude-code", "claude-agent-sdk", "codex", "openai-agents")


def _env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(QUIET)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"))
    home.mkdir(parents=True, exist_ok=True)
    return env


def _one(runtime: str, installed: Path, src: Path, tmp: Path, outage: float) -> OutageRun:
    served = {"PYTHONPATH": str(src)}
    env = _env(tmp / "home")
    if runtime == "claude-code":
        cc = claude_code(installed)
        return anthropic_outage(runtime, cc, anth.CLI_MODEL, env, tmp, serve_env=served, outage=outage)
    if runtime == "claude-agent-sdk":
        sdk = anth.run_agent_sdk
        return anthropic_outage(runtime, sdk, anth.SDK_MODEL, env, tmp, serve_env=served, outage=outage)
    if runtime == "codex":
        return codex_outage(installed, env, tmp, serve_env=served, outage=outage)
    return agents_outage(env, tmp, serve_env=served, outage=outage)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="8f7963b", help="the git ref to compare with (default: %(default)s)")
    ap.add_argument("--outage", type=float, default=OUTAGE, help="seconds every target fails (default: %(default)s)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="comma-separated, of " + ", ".join(RUNTIMES))
    args = ap.parse_args()
    chosen = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    installed = Path(
        subprocess.run([str(ROOT / "scripts/runtimes.sh")], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    with tempfile.TemporaryDirectory(prefix="failover-before-") as old:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", old, args.before], check=True)
        try:
            rows: list[tuple[str, OutageRun]] = []
            for runtime in chosen:
                for version, src in ((args.before, Path(old) / "src"), ("this tree", ROOT / "src")):
                    with tempfile.TemporaryDirectory(prefix="outage-") as tmp:
                        rows.append((version, _one(runtime, installed, src, Path(tmp), args.outage)))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", old], check=False)
    print(
        f"every target down for {args.outage:.0f} s (529 / 503), runtimes at their defaults; before = {args.before}\n"
    )
    print(
        "| runtime | gateway | client requests | upstream requests | per client request "
        "| longest wait told | error types | answered | ran for |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    for version, r in rows:
        types = ", ".join(sorted(set(r.error_types))) or "-"
        print(
            f"| {r.runtime} | {version} | {r.client_requests} | {r.upstream_requests} | {r.per_request:.1f} "
            f"| {r.longest_wait:.0f} s | {types} | {'yes' if r.answered else 'no'} | {r.seconds:.1f} s |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
