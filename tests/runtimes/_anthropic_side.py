"""The Anthropic side of the runtime tests: Claude Code and the Claude Agent SDK against a real
``failover serve`` whose upstreams are the fault kit's fake Anthropic providers.

Two fake upstreams on one :class:`~failover.testing.FakeServer` (real loopback HTTP),
``primary`` and ``backup``, behind ONE route of the gateway named after the model the
runtime asks for at its DEFAULT settings (:data:`CLI_MODEL`, :data:`SDK_MODEL`: found by
logging what each sends; nothing is set to choose them). The route's primary target serves
that very model, as a deployment that names a route after a Claude model does (Claude Code
sends thinking back only on a message from the model it asked for); its approved fallback
serves another model, :data:`BACKUP_MODEL` (or the fallback is left off, to break the rescue
on purpose). The gateway is at its defaults otherwise (timeouts, two attempts per target, the
commit point at 100 tokens / 2 s), plus a tenant key and the lab's live view, read with the
admin key, for the gateway's :class:`~failover.model.RouteRecord` of every request.

The runtimes run at their defaults: only where to send requests (``ANTHROPIC_BASE_URL``, the
tenant key as ``ANTHROPIC_API_KEY``) and the clean environment of ``runtime_env`` (own HOME,
telemetry and self-update off). Claude Code prints ``--output-format stream-json --verbose``
(how it reports, not how it retries), so every assistant message, retry notice and the final
result is read as data.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx

from failover.testing import FakeProvider, FakeServer, ReceivedCall, Reply, Script
from failover.testing._script import ScriptSpec
from tests._services import serving

ADMIN_KEY = "rt-admin-key-41c7"
TENANT_KEY = "rt-tenant-key-8e02"
PROVIDER_KEY = "sk-rt-provider-5b9a"  # what the gateway sends upstream

CLI_MODEL = "claude-opus-4-8"  # what Claude Code 2.1.197 asks for at its defaults
SDK_MODEL = "claude-opus-5-5"  # what the Agent SDK 0.2.189 (its bundled CLI 2.1.332) asks for
BACKUP_MODEL = "claude-backup"  # the approved fallback: another model

# A long answer: 240 words, about 1.5 tokens each (the gateway counts about four characters a
# token), so it passes the commit point (100 tokens) well before its end. Each word says where
# it is, so a splice, a repeat or a lost piece shows in the text.
LONG_WORDS = 240


def long_answer(tag: str) -> str:
    """``tag000 tag001 ... tag239``: one stream delta per word."""
    return " ".join(f"{tag}{i:03d}" for i in range(LONG_WORDS))


def fake_signature(provider: str, serial: int) -> str:
    """The signature the fake gives the thinking block of ``provider``'s answer number ``serial``
    (1-based, count_tokens calls included): what the model would need back, byte for byte."""
    return base64.b64encode(f"failover-fake-thinking:{provider}:msg_{provider}_{serial}".encode()).decode()


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# -- the upstreams and the gateway -------------------------------------------------------------


def _config(
    fake: FakeServer, model: str, primary: FakeProvider, backup: FakeProvider, *, fallback: bool, served: str | None
) -> str:
    def target(p: FakeProvider, served: str) -> str:
        return (
            f"  {p.name}: {{dialect: {p.dialect.value}, base_url: '{fake.api_url_for(p)}', model: {served},"
            " api_key_env: RT_PROVIDER_KEY, max_output_tokens: 128000,"
            " capabilities: [chat, tools, streaming, vision, structured_output]}"
        )

    fallbacks = ", fallbacks: [backup]" if fallback else ""
    return f"""
targets:
{target(primary, served or model)}
{target(backup, BACKUP_MODEL)}
routes:
  {model}: {{primary: [primary]{fallbacks}}}
gateway:
  admin: {{key_sha256: ["{_sha(ADMIN_KEY)}"]}}
  tenants:
    acme: {{key_sha256: ["{_sha(TENANT_KEY)}"]}}
  lab: true
  lab_live: {{enabled: true, keep: 100}}
"""


@dataclass
class Gateway:
    """A running ``failover serve`` and the fakes behind it."""

    base_url: str
    route: str
    primary: FakeProvider
    backup: FakeProvider

    def records(self) -> list[dict[str, Any]]:
        """The gateway's RouteRecords (the lab's public form), oldest first."""
        answer = httpx.get(
            f"{self.base_url}/lab/api/live", headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=10
        )
        answer.raise_for_status()
        records: list[dict[str, Any]] = answer.json()["records"]
        return sorted(records, key=lambda r: r["seq"])

    @staticmethod
    def calls(provider: FakeProvider) -> list[ReceivedCall]:
        """The model calls ``provider`` got, each answered from its script (not token counts,
        not the runtime's reachability probes)."""
        return [c for c in provider.calls if c.scripted]

    def counts(self) -> dict[str, int]:
        """How many model calls reached each fake upstream."""
        return {p.name: len(self.calls(p)) for p in (self.primary, self.backup)}

    def attempts(self, record: Mapping[str, Any]) -> list[tuple[str, str, int | None]]:
        """A record's attempts as ``(target, outcome, HTTP status)``."""
        return [(a["target"], a["outcome"], a["status"]) for a in record["attempts"]]

    def fell_back(self, run: Run, records: list[dict[str, Any]], primary_calls: int) -> dict[str, Any]:
        """The runtime's one request was answered by the backup (``ok("BACKUP-CANARY hello")``)
        without the runtime retrying anything, after ``primary_calls`` calls to the primary:
        that request's record."""
        assert run.answer == "BACKUP-CANARY hello"
        assert run.retries() == []
        assert self.counts() == {"primary": primary_calls, "backup": 1}
        [record] = records
        return record


@contextlib.contextmanager
def gateway(
    tmp_path: Path,
    model: str,
    primary: ScriptSpec,
    backup: ScriptSpec = "ok",
    *,
    fallback: bool = True,
    primary_dialect: str = "anthropic",
    served: str | None = None,
    serve_env: Mapping[str, str] | None = None,
) -> Iterator[Gateway]:
    """The fakes and ``failover serve`` in front of them, with ONE route named ``model`` (the
    model the runtime asks for): its primary target serves that model (as a deployment that
    names a route after a Claude model does), its fallback :data:`BACKUP_MODEL`.
    ``fallback=False`` leaves the fallback off the route. ``primary_dialect="openai"``: the
    primary speaks Chat Completions (its overload is a 503, where Anthropic's is a 529).
    ``served``: the primary serves this model instead (a route named otherwise than its model).
    ``serve_env``: more environment for ``failover serve`` (a ``PYTHONPATH`` of another version)."""
    first = FakeProvider("primary", primary_dialect, Script.parse(primary))
    second = FakeProvider("backup", "anthropic", Script.parse(backup))
    with FakeServer(first, second).run_in_thread() as fake:
        config = tmp_path / "failover.yaml"
        config.write_text(_config(fake, model, first, second, fallback=fallback, served=served))
        env = {"RT_PROVIDER_KEY": PROVIDER_KEY, **(serve_env or {})}
        with serving("--config", str(config), env=env) as (base, _proc):
            yield Gateway(base, model, first, second)


def runtime_vars(env: Mapping[str, str], gw: Gateway) -> dict[str, str]:
    """``env`` plus where a runtime sends its requests: the gateway, with the tenant key."""
    return {**env, "ANTHROPIC_BASE_URL": gw.base_url, "ANTHROPIC_API_KEY": TENANT_KEY}


# -- what a runtime did ------------------------------------------------------------------------


@dataclass
class Run:
    """What a runtime printed or returned: its events (Claude Code's stream-json lines, the SDK's
    messages as dicts), its final ``result`` event, its exit status and how long it took."""

    events: list[dict[str, Any]]
    returncode: int | None
    stderr: str
    seconds: float
    error: str | None = None  # the SDK: the exception its query() raised

    @property
    def result(self) -> dict[str, Any]:
        found = [e for e in self.events if e.get("type") == "result"]
        assert len(found) == 1, f"expected one result event, got {len(found)}: {self.describe()}"
        return found[0]

    @property
    def answer(self) -> str:
        """The final answer the runtime reports (the result's text)."""
        text = self.result.get("result")
        assert isinstance(text, str), self.describe()
        return text

    def assistant_blocks(self, kind: str) -> list[dict[str, Any]]:
        """Every content block of ``kind`` in the assistant messages it reported, in order."""
        out = []
        for e in self.events:
            if e.get("type") == "assistant":
                out += [b for b in e["message"]["content"] if b.get("type") == kind]
        return out

    def retries(self) -> list[dict[str, Any]]:
        """Its own retry notices (``system`` / ``api_retry`` events)."""
        return [e for e in self.events if e.get("type") == "system" and e.get("subtype") == "api_retry"]

    def describe(self) -> str:
        shown = [e for e in self.events if (e.get("type"), e.get("subtype")) != ("system", "init")]
        lines = [json.dumps(e, default=repr)[:600] for e in shown]
        return (
            f"rc={self.returncode} error={self.error} seconds={self.seconds:.1f}\n"
            + "\n".join(lines)
            + f"\nstderr: {self.stderr[-2000:]}"
        )


def run_claude_code(runtimes: Path, env: Mapping[str, str], gw: Gateway, prompt: str, cwd: Path) -> Run:
    """``claude -p PROMPT --output-format stream-json --verbose`` in ``cwd``, against ``gw``."""
    cli = runtimes / "node_modules" / ".bin" / "claude"
    start = time.monotonic()
    proc = subprocess.run(
        [str(cli), "-p", prompt, "--output-format", "stream-json", "--verbose"],
        env=runtime_vars(env, gw),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return Run(events, proc.returncode, proc.stderr, time.monotonic() - start)


def run_agent_sdk(env: Mapping[str, str], gw: Gateway, prompt: str, cwd: Path) -> Run:
    """``claude_agent_sdk.query(prompt, options)`` with default options but ``env`` (the gateway,
    the tenant key) and ``cwd``; every message it yields, as a dict, and what it raised.

    The SDK starts its CLI with this process's environment under ``options.env``; the test
    process's own environment is swapped for ``env`` (``runtime_env``: own HOME, telemetry
    off) meanwhile, so nothing of the machine's (an ``ANTHROPIC_MODEL``, a retry setting)
    reaches the CLI, as for Claude Code's own process."""
    from claude_agent_sdk import ClaudeAgentOptions, query

    options = ClaudeAgentOptions(env=runtime_vars(env, gw), cwd=str(cwd))
    events: list[dict[str, Any]] = []

    async def go() -> None:
        async for message in query(prompt=prompt, options=options):
            events.append(_as_event(message))

    start = time.monotonic()
    error = None
    with mock.patch.dict(os.environ, env, clear=True):
        try:
            asyncio.run(asyncio.wait_for(go(), timeout=90))
        except Exception as exc:  # the test judges it: a run that fails must say how
            error = f"{type(exc).__name__}: {exc}"
    return Run(events, None, "", time.monotonic() - start, error=error)


def _as_event(message: object) -> dict[str, Any]:
    """An SDK message in the shape of Claude Code's stream-json line (``type``, ``message``...)."""
    from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, UserMessage

    def block(b: object) -> dict[str, Any]:
        data = dict(vars(b)) if hasattr(b, "__dict__") else {"value": repr(b)}
        kind = type(b).__name__.removesuffix("Block")
        names = {"Text": "text", "Thinking": "thinking", "ToolUse": "tool_use", "ToolResult": "tool_result"}
        return {"type": names.get(kind, kind), **data}

    if isinstance(message, AssistantMessage):
        blocks = [block(b) for b in message.content]
        return {"type": "assistant", "message": {"content": blocks, "model": message.model}, "error": message.error}
    if isinstance(message, UserMessage):
        said = message.content if isinstance(message.content, str) else [block(b) for b in message.content]
        return {"type": "user", "message": {"content": said}}
    if isinstance(message, ResultMessage):
        return {"type": "result", **vars(message)}
    if isinstance(message, SystemMessage):
        return {"type": "system", "subtype": message.subtype, **message.data}
    return {"type": type(message).__name__, "raw": message}


# -- scripts -------------------------------------------------------------------------------------


def ok(text: str | None, **kw: Any) -> Reply:
    """A fast healthy answer (tiny pacing between stream events)."""
    return Reply.ok(text, chunk_interval=0.001, **kw)
