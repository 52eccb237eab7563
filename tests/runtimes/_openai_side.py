"""The OpenAI side of the runtime tests: the fake upstreams, a real ``failover serve`` over
them, and running the Codex CLI / the OpenAI Agents SDK against it at their DEFAULT settings.

Upstreams: two fault-kit providers speaking the Responses API (``openai-responses``) on one
``FakeServer`` (real loopback HTTP, its own thread): ``a`` (model ``model-a``) is the route's
primary, ``b`` (model ``model-b``) its approved fallback. Each checks that the gateway's
provider key arrives (never the runtime's key). The route is ``agent``: the model name both
runtimes are given. Everything of the gateway is default (deadline 30 s, 2 attempts per
target, commit point 100 tokens / 2 s) except the JSON access log, which is how a test reads
the RouteRecord of each request the runtime made (target, attempts, workflow, status).

Codex: ``codex exec --json`` with its own ``CODEX_HOME`` whose config.toml says only what
points it at the gateway (model = the route, a provider with ``base_url``, ``env_key``,
``wire_api = "responses"``); retries, timeouts, sandbox, approvals and reasoning settings are
its defaults. Agents SDK: an ``AsyncOpenAI`` client at its defaults (``max_retries`` 2, its
default timeout) given to the SDK's default provider per run (``RunConfig(model_provider=
OpenAIProvider(openai_client=...))``, so no global state leaks between tests), tracing off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
from agents import Agent, OpenAIProvider, RunConfig, Runner
from openai.types.responses import ResponseErrorEvent, ResponseTextDeltaEvent

from failover.testing import FakeProvider, FakeServer
from failover.testing._script import ScriptSpec
from tests._services import serving

ROUTE = "agent"  # the model name the runtimes ask for: a route
TENANT_KEY = "rt-openai-tenant-key-5d1c"  # what the runtime presents to the gateway
PROVIDER_KEY = "sk-rt-openai-provider-8e2f"  # what the gateway presents upstream
MODELS = {"a": "model-a", "b": "model-b"}

# A Responses stream from the fake: response.created, response.in_progress, then (when the
# request offers web_search, as Codex's does) a web_search_call item's added + done, then the
# message's output_item.added and content_part.added, then one output_text.delta per word.
HEAD_EVENTS = 4
SEARCH_EVENTS = 2


def words(prefix: str, n: int) -> str:
    """``n`` distinct words (``a000 a001 ...``): a splice, a repeat or a lost word shows."""
    return " ".join(f"{prefix}{i:03d}" for i in range(n))


def after_words(k: int, *, web_search: bool) -> int:
    """The ``after`` of a stream fault that cuts the message after its ``k``-th text delta."""
    return HEAD_EVENTS + (SEARCH_EVENTS if web_search else 0) + k


# -- the gateway over the fakes ------------------------------------------------------------------


@dataclass
class Gateway:
    """A running ``failover serve`` whose route ``agent`` is primary ``a``, fallback ``b``."""

    base_url: str
    a: FakeProvider
    b: FakeProvider
    lines: list[str] = field(default_factory=list)

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    def access(self, at_least: int = 0, timeout: float = 5.0) -> list[dict[str, Any]]:
        """The gateway's access records (one per request it answered), waiting up to
        ``timeout`` for ``at_least`` of them (a stream's line is written as it ends)."""
        until = time.monotonic() + timeout
        while True:
            records = []
            for line in list(self.lines):
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict) and entry.get("logger") == "failover.gateway.access":
                        records.append(entry)
            if len(records) >= at_least or time.monotonic() > until:
                return records
            time.sleep(0.02)

    def summary(self, at_least: int = 0) -> list[tuple[int, str | None, int, str]]:
        """(status, target, attempts, workflow) of each request the gateway answered."""
        return [(r["status"], r["target"], r["attempts"], r["workflow"]) for r in self.access(at_least)]

    def sent(self, provider: FakeProvider) -> list[dict[str, Any]]:
        """The bodies of the scripted requests ``provider`` received (its key checked)."""
        return [dict(c.json or {}) for c in provider.calls if c.scripted]

    def count(self, provider: FakeProvider) -> int:
        return len(self.sent(provider))


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _config(fake: FakeServer, a: FakeProvider, b: FakeProvider, *, fallback: bool) -> str:
    targets = "\n".join(
        f"  {p.name}: {{dialect: openai-responses, base_url: '{fake.api_url_for(p)}', model: {MODELS[p.name]},"
        f" api_key_env: RT_OPENAI_PROVIDER_KEY, tokenizer: estimate, capabilities: [chat, tools, streaming]}}"
        for p in (a, b)
    )
    fallbacks = "[b]" if fallback else "[]"
    return f"""
targets:
{targets}
routes:
  {ROUTE}: {{primary: [a], fallbacks: {fallbacks}}}
gateway:
  tenants:
    runtimes: {{key_sha256: ["{_sha(TENANT_KEY)}"]}}
  logging: {{format: json}}
"""


@contextlib.contextmanager
def gateway(
    tmp_path: Path,
    primary: ScriptSpec,
    fallback: ScriptSpec = "ok",
    *,
    with_fallback: bool = True,
    serve_env: Mapping[str, str] | None = None,
) -> Iterator[Gateway]:
    """The fakes (``a`` answering ``primary``, ``b`` answering ``fallback``) and a real
    ``failover serve`` over them. ``with_fallback=False`` leaves ``b`` off the route.
    ``serve_env``: more environment for ``failover serve`` (a ``PYTHONPATH`` of another version)."""
    a = FakeProvider("a", "openai-responses", primary, model=MODELS["a"], api_key=PROVIDER_KEY)
    b = FakeProvider("b", "openai-responses", fallback, model=MODELS["b"], api_key=PROVIDER_KEY)
    with FakeServer(a, b).run_in_thread() as fake:
        config = tmp_path / "failover.yaml"
        config.write_text(_config(fake, a, b, fallback=with_fallback))
        env = {"RT_OPENAI_PROVIDER_KEY": PROVIDER_KEY, **(serve_env or {})}
        with serving("--config", str(config), env=env) as (base, proc):
            gw = Gateway(base, a, b)
            assert proc.stdout is not None
            stdout = proc.stdout
            # drain the process's output as it comes: a full pipe would block the gateway
            reader = threading.Thread(target=lambda: gw.lines.extend(stdout), daemon=True)
            reader.start()
            yield gw


# -- Codex CLI -----------------------------------------------------------------------------------


@dataclass
class CodexRun:
    """What ``codex exec --json`` printed: its JSONL events, stderr, exit status, wall time."""

    returncode: int
    events: list[dict[str, Any]]
    stdout: str
    stderr: str
    seconds: float

    def items(self, kind: str) -> list[dict[str, Any]]:
        """The completed items of one type (``agent_message``, ``command_execution``, ``reasoning``...)."""
        return [e["item"] for e in self.events if e.get("type") == "item.completed" and e["item"].get("type") == kind]

    @property
    def messages(self) -> list[str]:
        """The agent's messages, as it printed them."""
        return [i["text"] for i in self.items("agent_message")]

    @property
    def failures(self) -> list[str]:
        """What it reported as failed: ``error`` events and ``turn.failed``."""
        out = []
        for e in self.events:
            if e.get("type") == "error":
                out.append(str(e.get("message")))
            elif e.get("type") == "turn.failed":
                out.append(str(e.get("error", {}).get("message")))
        return out

    def __str__(self) -> str:
        head = f"codex exit {self.returncode} after {self.seconds:.1f}s"
        return f"{head}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr[-3000:]}"


def codex_config(base_url: str) -> str:
    """config.toml: only what points Codex at the gateway (docs/clients.md, "Codex CLI")."""
    return f"""model = "{ROUTE}"
model_provider = "failover"

[model_providers.failover]
name = "failover"
base_url = "{base_url}/v1"
env_key = "FAILOVER_API_KEY"
wire_api = "responses"
"""


def run_codex(
    codex: Path, env: dict[str, str], gw: Gateway, workdir: Path, prompt: str, *, timeout: float = 90
) -> CodexRun:
    """``codex exec --json --skip-git-repo-check -C workdir prompt`` against ``gw``."""
    home = workdir.parent / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(codex_config(gw.base_url))
    run_env = {**env, "CODEX_HOME": str(home), "FAILOVER_API_KEY": TENANT_KEY}
    cmd = [str(codex), "exec", "--json", "--skip-git-repo-check", "-C", str(workdir), prompt]
    start = time.monotonic()
    proc = subprocess.run(
        cmd, env=run_env, cwd=workdir, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    seconds = time.monotonic() - start
    events = []
    for line in proc.stdout.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                events.append(event)
    return CodexRun(proc.returncode, events, proc.stdout, proc.stderr, seconds)


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def agents_run_config(gw: Gateway) -> AsyncIterator[RunConfig]:
    """A RunConfig whose default model provider (Responses API) talks to ``gw`` through an
    ``AsyncOpenAI`` client at its default settings; tracing off."""
    async with openai.AsyncOpenAI(base_url=gw.v1, api_key=TENANT_KEY) as client:
        yield RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)


@dataclass
class Streamed:
    """What ``Runner.run_streamed`` gave its caller: the text deltas as they came, the error
    events among the raw events, the exception the stream ended with (if any), the final output."""

    deltas: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    raised: Exception | None = None
    final_output: Any = None

    @property
    def text(self) -> str:
        return "".join(self.deltas)


async def stream_agent(agent: Agent[Any], prompt: str, run_config: RunConfig) -> Streamed:
    """Run ``agent`` streamed, the way an application shows a stream: every text delta as it
    comes. An exception ends the run and is kept, not raised."""
    seen = Streamed()
    result = Runner.run_streamed(agent, prompt, run_config=run_config)
    try:
        async for event in result.stream_events():
            if event.type != "raw_response_event":
                continue
            if isinstance(event.data, ResponseTextDeltaEvent):
                seen.deltas.append(event.data.delta)
            elif isinstance(event.data, ResponseErrorEvent):
                seen.errors.append(f"{event.data.code}: {event.data.message}")
    except Exception as exc:  # what the SDK raises is what the application gets
        seen.raised = exc
    seen.final_output = result.final_output
    return seen
