"""What ``bench/gateway.py`` and ``steps.py`` share: failover's config for the fake upstream,
the token encodings an online install would have, waiting for a server to answer, and how the
interpreter they run on was built."""

from __future__ import annotations

import platform
import sys
import sysconfig
import time
import urllib.request
from collections.abc import MutableMapping
from pathlib import Path

UPSTREAM_MODEL = "gpt-4o-mini"
# failover's route with the default commit point: a stream's output is held until 100 tokens
# (or 2 s) have arrived, so a failure inside it is recovered invisibly. The upstream's streams
# are shorter than that, so on this route the first event goes out when the stream ends.
HELD_ROUTE = "bench-held"
# The shared copy of the encodings an online install downloads (beside the project's folder).
SHARED_TIKTOKEN = Path(__file__).resolve().parents[3] / "shared" / "tiktoken"


def use_shared_encodings(env: MutableMapping[str, str]) -> None:
    """Let the gateway count tokens exactly, as it does for users online: offline, without an
    encoding, it falls back to an estimate, which costs less than what users run."""
    if "TIKTOKEN_CACHE_DIR" not in env and SHARED_TIKTOKEN.is_dir():
        env["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)


def failover_config(up_port: int) -> str:
    """Route ``bench``: one OpenAI-dialect target at the upstream, with a commit point that holds
    nothing (every event goes out as it comes); route ``bench-held``: the same with the default
    commit point (100 tokens or 2 s), what the hold costs."""
    return (
        "targets:\n"
        "  up:\n"
        "    dialect: openai\n"
        f"    base_url: http://127.0.0.1:{up_port}/v1\n"
        f"    model: {UPSTREAM_MODEL}\n"
        "    api_key_env: BENCH_UPSTREAM_KEY\n"
        "    capabilities: [chat, streaming]\n"
        "routes:\n"
        "  bench:\n"
        "    primary: [up]\n"
        "    hold_tokens: 0\n"
        f"  {HELD_ROUTE}:\n"
        "    primary: [up]\n"
    )


def wait_http(url: str, timeout: float, headers: dict[str, str] | None = None) -> bool:
    """True once ``url`` answers below 500 (within ``timeout`` seconds), else False."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            req = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status < 500:
                    return True
        except Exception:
            pass
        time.sleep(0.2)
    return False


def interpreter() -> str:
    """The interpreter (this one, which the gateway also runs on) and how it was built.

    On the bench's host a pyenv build with its defaults (libpython a shared library, no
    profile-guided or link-time optimization) ran a pure-Python loop 1.55 times slower than
    Debian's ``/usr/bin/python3.11`` (libpython in the executable, PGO and LTO, as the official
    Docker images and most distributions build it), though the gateway itself within the
    runs' spread (docs/benchmarks.md). The tables say which one ran, so rows stay comparable."""
    shared = False
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps") as fh:
                shared = "libpython" in fh.read()
        except OSError:
            pass
    args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    flags = [f for f in ("--enable-optimizations", "--with-lto") if f in args]
    how = "libpython shared" if shared else "libpython in the executable"
    return f"Python {platform.python_version()} at {sys.executable} ({how}{'; ' + ' '.join(flags) if flags else ''})"
