"""Capture what each agent runtime really sends, as fixtures: ``python -m tests.runtimes.capture``.

Each runtime runs at its default settings (the clean environment of ``tests/runtimes/conftest.py``:
its own HOME, telemetry and self-update off) against a *recording* loopback endpoint: the fault
kit's fake provider of the runtime's dialect (``failover.testing.FakeServer`` / ``FakeProvider``),
scripted to answer with text or with a call of one of the runtime's own tools, so the runtime
sends the next request of its tool loop with the tool's result. Every request it sent to the API
is written to ``tests/inbound/captured/<runtime>-<version>/<n>-<what>.json``: method, path,
query, headers and the JSON body. Secrets are replaced by a fixed placeholder, and the values
that change from run to run are normalised (ids and session UUIDs by their order of first
appearance, the temporary directories, today's date, the clock, the kernel release, the host's
port), so a re-capture of the same versions changes nothing that matters.
``tests/inbound/test_captured_requests.py`` parses every fixture and posts it to the gateway.

What is captured, per runtime (the versions are pinned in ``scripts/runtimes.sh`` for the two
CLIs and in pyproject's test extra for the two Python packages):

* Claude Code CLI (Anthropic Messages): a plain request; the request after a ``Read`` of a file.
* Codex CLI (OpenAI Responses): a plain request; the request after a shell ``cat``; and, for a
  model Codex knows (``gpt-5.5``), its first request (the freeform ``apply_patch`` tool) and the
  one after a ``custom_tool_call`` of it, with its ``custom_tool_call_output``.
* claude-agent-sdk (Anthropic Messages): as Claude Code; it runs the CLI it bundles.
* openai-agents (OpenAI Responses, then Chat Completions): a plain request and the request after
  a function tool, in each API.

**Re-capture whenever a pinned version moves** (a bump in ``scripts/runtimes.sh`` or in the test
extra), in the same change: the old directory is deleted and the new one written, and the
parser tests then run against what the new version sends. Claude Code also sends a ``HEAD /``
to its base URL before its first request (a reachability probe); only the API requests
(``/v1/...``) are kept. It did not call ``/v1/messages/count_tokens`` in these runs.

Needs the runtimes installed (``scripts/runtimes.sh``, the test extra) and takes about a minute.
``python -m tests.runtimes.capture claude-code codex`` captures only those.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from failover.testing import FakeProvider, FakeServer, ReceivedCall, Reply

from .conftest import QUIET, ROOT

OUT = ROOT / "tests" / "inbound" / "captured"
API_KEY = "sk-capture-redacted"  # what every runtime is given, and what every fixture shows
NOTES = "notes.txt"
NOTES_TEXT = "the answer is 42\n"
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
_DROPPED_HEADERS = frozenset({"host", "content-length", "connection"})  # the transport's, not the runtime's
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"})


@dataclass(frozen=True)
class Run:
    """One run of a runtime: the fake's script, the prompt, and what each request is called."""

    names: tuple[str, ...]  # "<n>-<what>" per API request, in order ("_...": not kept)
    prompt: str
    script: Callable[[Path], list[Reply]]  # the fake's replies, given the project directory
    model: str | None = None  # Codex: the model named in its config (None: a route name it does not know)


def _tool_call(name: str, **arguments: Any) -> Reply:
    return Reply.ok(tool_calls=[{"name": name, "arguments": arguments}])


# ------------------------------------------------------------------------------------ the environment


def clean_env(home: Path) -> dict[str, str]:
    """The environment of ``tests/runtimes/conftest.py``'s ``runtime_env``: nothing of ours."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(QUIET)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"))
    return env


def npm_runtimes() -> Path:
    """The npm install of Claude Code and Codex (installed on first use)."""
    out = subprocess.run([str(ROOT / "scripts" / "runtimes.sh")], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip().splitlines()[-1])


def npm_version(install: Path, package: str) -> str:
    return str(json.loads((install / "node_modules" / package / "package.json").read_text())["version"])


@contextmanager
def workspace() -> Iterator[Path]:
    """A throwaway directory with ``home/`` and a project ``proj/`` holding ``notes.txt``."""
    with tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        root = Path(tmp).resolve()
        (root / "home").mkdir()
        (root / "proj").mkdir()
        (root / "proj" / NOTES).write_text(NOTES_TEXT)
        yield root


def _run(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> None:
    proc = subprocess.run(
        list(argv), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


# ------------------------------------------------------------------------------------ normalising


class Normaliser:
    """Volatile values out, stable placeholders in; the same value gets the same placeholder
    throughout one runtime's fixtures (a session id in a header and in the body stay equal)."""

    _UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    _HEX64 = re.compile(r"\b[0-9a-f]{64}\b")
    _MILLIS = re.compile(r"\b1[6-9]\d{11}\b")  # a Unix time in milliseconds (2020..2033)
    _PORT = re.compile(r"127\.0\.0\.1:\d+")

    def __init__(self, workdir: Path) -> None:
        self.workdir = str(workdir)
        self.uuids: dict[str, str] = {}
        today = datetime.date.today()
        self.dates = {today.isoformat(): "2026-01-01", (today - datetime.timedelta(days=1)).isoformat(): "2025-12-31"}

    def _uuid(self, m: re.Match[str]) -> str:
        return self.uuids.setdefault(m.group(0), f"00000000-0000-4000-8000-{len(self.uuids) + 1:012d}")

    def text(self, s: str) -> str:
        s = s.replace(self.workdir, "/capture")
        s = s.replace(re.sub(r"[^A-Za-z0-9]", "-", self.workdir), "-capture")  # Claude Code's project slug
        s = self._UUID.sub(self._uuid, s)
        s = self._HEX64.sub("0" * 64, s)
        s = self._MILLIS.sub("1767225600000", s)
        s = self._PORT.sub("127.0.0.1:8000", s)
        for day, fixed in self.dates.items():
            s = s.replace(day, fixed)
        release = platform.release()
        return s.replace(release, "<kernel-release>") if release else s

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {self.text(k): self.value(x) for k, x in v.items()}
        return v

    def headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in sorted(headers.items()):
            name = name.lower()
            if name in _DROPPED_HEADERS:
                continue
            if name in _SECRET_HEADERS:
                value = f"Bearer {API_KEY}" if name in ("authorization", "proxy-authorization") else API_KEY
            out[name] = self.text(value)
        return out


def record(call: ReceivedCall, norm: Normaliser, runtime: str, version: str, dialect: str) -> dict[str, Any]:
    return {
        "runtime": runtime,
        "version": version,
        "dialect": dialect,
        "method": call.method,
        "path": call.path,
        "query": call.query,
        "headers": norm.headers(call.headers),
        "body": norm.value(dict(call.json or {})),
    }


def api_calls(provider: FakeProvider) -> list[ReceivedCall]:
    """The calls of the API: a reachability probe (Claude Code's ``HEAD /``) is not one."""
    return [c for c in provider.calls if c.method == "POST" and "/v1/" in c.path]


def write(directory: Path, files: Mapping[str, dict[str, Any]]) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for name, data in files.items():
        text = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False)
        if API_KEY not in text and "***" in text:
            raise RuntimeError(f"{name}: a redacted value that is not the placeholder")
        (directory / f"{name}.json").write_text(text + "\n")
    print(f"wrote {len(files)} fixture(s) to {directory.relative_to(ROOT)}")


# ------------------------------------------------------------------------------------ the runtimes


def capture(
    runtime: str,
    version: str,
    dialect: str,
    runs: Sequence[Run],
    drive: Callable[[Run, FakeServer, FakeProvider, Path], None],
) -> dict[str, dict[str, Any]]:
    """Each run against a fresh recording fake; every API request of every run, named by ``Run.names``."""
    files: dict[str, dict[str, Any]] = {}
    with workspace() as root:
        norm = Normaliser(root)
        for run in runs:
            shutil.rmtree(root / "home")
            (root / "home").mkdir()
            provider = FakeProvider("rec", dialect, run.script(root / "proj"), validate=False)
            with FakeServer(provider).run_in_thread() as server:
                drive(run, server, provider, root)
            calls = api_calls(provider)
            if len(calls) != len(run.names):
                seen = [f"{c.method} {c.path}" for c in provider.calls]
                raise RuntimeError(f"{runtime}: expected {len(run.names)} API request(s) for {run.names}, got {seen}")
            for name, call in zip(run.names, calls, strict=True):
                if not name.startswith("_"):
                    files[name] = record(call, norm, runtime, version, dialect)
    return files


CLAUDE_RUNS = (
    Run(("1-plain",), "Say hello.", lambda proj: [Reply.ok("Hello.")]),
    Run(
        ("_read-tool-call", "2-read-tool-result"),
        f"Read {NOTES} and tell me the answer.",
        lambda proj: [_tool_call("Read", file_path=str(proj / NOTES)), Reply.ok("42")],
    ),
)


def claude_code(install: Path) -> None:
    def drive(run: Run, server: FakeServer, provider: FakeProvider, root: Path) -> None:
        env = clean_env(root / "home")
        env.update(ANTHROPIC_BASE_URL=server.base_url_for(provider), ANTHROPIC_API_KEY=API_KEY)
        claude = install / "node_modules" / ".bin" / "claude"
        _run([str(claude), "-p", run.prompt, "--allowedTools", "Read"], cwd=root / "proj", env=env)

    version = npm_version(install, "@anthropic-ai/claude-code")
    write(OUT / f"claude-code-{version}", capture("claude-code", version, "anthropic", CLAUDE_RUNS, drive))


CODEX_RUNS = (
    Run(("1-plain",), "Say hello.", lambda proj: [Reply.ok("Hello.")]),
    Run(
        ("_shell-tool-call", "2-shell-tool-result"),
        f"Run cat {NOTES} and tell me the answer.",
        lambda proj: [_tool_call("exec_command", cmd=f"cat {NOTES}"), Reply.ok("42")],
    ),
    Run(
        ("3-known-model-plain", "4-known-model-custom-tool-result"),
        "Create hello.txt saying hello.",
        lambda proj: [_tool_call("apply_patch", input=PATCH), Reply.ok("Done.")],
        model="gpt-5.5",
    ),
)


def codex(install: Path) -> None:
    def drive(run: Run, server: FakeServer, provider: FakeProvider, root: Path) -> None:
        home = root / "home" / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'model = "{run.model or "agent"}"\n'
            'model_provider = "failover"\n\n'
            "[model_providers.failover]\n"
            'name = "failover"\n'
            f'base_url = "{server.base_url_for(provider)}"\n'
            'env_key = "FAILOVER_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        env = clean_env(root / "home")
        env.update(CODEX_HOME=str(home), FAILOVER_API_KEY=API_KEY)
        codex = install / "node_modules" / ".bin" / "codex"
        argv = [str(codex), "exec", "--skip-git-repo-check", "--sandbox", "workspace-write", run.prompt]
        _run(argv, cwd=root / "proj", env=env)

    version = npm_version(install, "@openai/codex")
    write(OUT / f"codex-{version}", capture("codex", version, "openai-responses", CODEX_RUNS, drive))


def _python_child(kind: str, run: Run, server: FakeServer, provider: FakeProvider, root: Path, api: str) -> None:
    """A Python runtime in its own process, with the clean environment (nothing of ours leaks)."""
    env = clean_env(root / "home")
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        CAPTURE_BASE_URL=server.base_url_for(provider),
        CAPTURE_PROMPT=run.prompt,
        CAPTURE_API=api,
    )
    _run([sys.executable, "-m", "tests.runtimes.capture", "--child", kind], cwd=root / "proj", env=env)


def claude_agent_sdk() -> None:
    def drive(run: Run, server: FakeServer, provider: FakeProvider, root: Path) -> None:
        _python_child("claude-agent-sdk", run, server, provider, root, "messages")

    version = metadata.version("claude-agent-sdk")
    write(OUT / f"claude-agent-sdk-{version}", capture("claude-agent-sdk", version, "anthropic", CLAUDE_RUNS, drive))


AGENTS_RUNS = {
    "responses": (
        Run(("1-responses-plain",), "Say hello.", lambda proj: [Reply.ok("Hello.")]),
        Run(
            ("_responses-tool-call", "2-responses-tool-result"),
            "What does the notes file say?",
            lambda proj: [_tool_call("read_notes"), Reply.ok("42")],
        ),
    ),
    "chat_completions": (
        Run(("3-chat-plain",), "Say hello.", lambda proj: [Reply.ok("Hello.")]),
        Run(
            ("_chat-tool-call", "4-chat-tool-result"),
            "What does the notes file say?",
            lambda proj: [_tool_call("read_notes"), Reply.ok("42")],
        ),
    ),
}


def openai_agents() -> None:
    files: dict[str, dict[str, Any]] = {}
    version = metadata.version("openai-agents")
    for api, runs in AGENTS_RUNS.items():
        dialect = "openai-responses" if api == "responses" else "openai"

        def drive(run: Run, server: FakeServer, provider: FakeProvider, root: Path, api: str = api) -> None:
            _python_child("openai-agents", run, server, provider, root, api)

        files.update(capture("openai-agents", version, dialect, runs, drive))
    write(OUT / f"openai-agents-{version}", files)


# ------------------------------------------------------------------------------------ the children


def _child(kind: str) -> None:
    base, prompt, api = os.environ["CAPTURE_BASE_URL"], os.environ["CAPTURE_PROMPT"], os.environ["CAPTURE_API"]
    if kind == "claude-agent-sdk":
        from claude_agent_sdk import ClaudeAgentOptions, query

        options = ClaudeAgentOptions(
            cwd=os.getcwd(),
            allowed_tools=["Read"],
            env={"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": API_KEY},
        )

        async def main() -> None:
            async for _ in query(prompt=prompt, options=options):
                pass

    else:
        from agents import Agent, OpenAIProvider, RunConfig, Runner, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)

        @function_tool
        def read_notes() -> str:
            """Read the notes file."""
            return Path(NOTES).read_text()

        async def main() -> None:
            client = AsyncOpenAI(base_url=base, api_key=API_KEY, max_retries=0)
            provider = OpenAIProvider(openai_client=client, use_responses=api == "responses")
            agent = Agent(name="helper", instructions="Be brief.", model="agent", tools=[read_notes])
            await Runner.run(agent, prompt, run_config=RunConfig(model_provider=provider))

    asyncio.run(main())


CAPTURES: dict[str, Callable[[], None]] = {
    "claude-code": lambda: claude_code(npm_runtimes()),
    "codex": lambda: codex(npm_runtimes()),
    "claude-agent-sdk": claude_agent_sdk,
    "openai-agents": openai_agents,
}


def main(argv: Sequence[str]) -> None:
    if argv[:1] == ["--child"]:
        _child(argv[1])
        return
    for name in argv or CAPTURES:
        if name not in CAPTURES:
            raise SystemExit(f"unknown runtime {name!r}; one of {', '.join(CAPTURES)}")
        CAPTURES[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
