"""Work proportional to a body never runs on the gateway's event loop, watched on a real
``failover serve``.

Each case sends one large body (many tools, messages or content blocks, on every endpoint
that takes them) or asks for one large answer (2,048 embeddings of 3,072 dimensions), while
a probe asks ``/healthz`` every 20 ms on a connection of its own: the worst probe must answer
within 100 ms. A body over a count limit is refused (``too_many_items``) after being decoded
off the loop; one at the limits goes all the way upstream and back. Each case prints one line,
``<case>: worst /healthz N ms; RSS A -> B MiB`` (settled before and after it), for a before/after table
(``pytest tests/hostile -s``). The config sets no limit, so the same cases run on a gateway
that predates them.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from failover.model import Dialect
from failover.testing import FakeProvider, FakeServer, Reply, Script

from ._harness import Served, serve

pytestmark = pytest.mark.e2e

KEY = "gw-loop-key-0001"
PROVIDER_KEY = "sk-fake-provider-key-0005"
DIMS = 3072
INPUTS = 2048
LAG_LIMIT_S = 0.1
MEMORY_SLACK_MIB = 40.0  # per case: a 63 MB answer leaves some of its pages with the allocator


class _Embedder(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: one fixed vector of 3,072 floats per input (a body built from
    cached bytes, so the test process spends nothing on it while the gateway is watched)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        texts = body["input"]
        data = b",".join(
            b'{"object":"embedding","index":%d,"embedding":%s}' % (i, _vector()) for i in range(len(texts))
        )
        out = (
            b'{"object":"list","data":[%s],"model":"text-embedding-3-large","usage":{"prompt_tokens":%d,"total_tokens":%d}}'
            % (
                data,
                len(texts),
                len(texts),
            )
        )
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@cache
def _vector() -> bytes:
    return json.dumps([round(math.sin(i) / 40, 6) for i in range(DIMS)], separators=(",", ":")).encode()


@dataclass
class World:
    gw: Served

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.gw.base, headers={"authorization": f"Bearer {KEY}"}, timeout=60)


def _config(fake: FakeServer, embed_url: str) -> str:
    caps = "[chat, tools, structured_output, streaming]"
    common = f"api_key_env: LOOP_PROVIDER_KEY, capabilities: {caps}, max_attempts: 1"
    return f"""
targets:
  ok: {{dialect: openai, base_url: "{fake.api_url_for("ok")}", model: gpt-4o-mini, {common}}}
  claude: {{dialect: anthropic, base_url: "{fake.api_url_for("claude")}", model: claude-x, {common}}}
  embed: {{dialect: openai, base_url: "{embed_url}", model: text-embedding-3-large, api_key_env: LOOP_PROVIDER_KEY}}
routes:
  chat: {{primary: [ok]}}
  messages: {{primary: [claude]}}
  embed: {{primary: [embed]}}
gateway:
  tenants:
    alpha: {{key_sha256: ["{hashlib.sha256(KEY.encode()).hexdigest()}"]}}
  envelope: {{deadline_ms: 30000}}
"""


@contextmanager
def _world(tmp: Path) -> Iterator[World]:
    providers = [
        FakeProvider("ok", Dialect.OPENAI, Script.always(Reply.ok()), api_key=PROVIDER_KEY),
        FakeProvider("claude", Dialect.ANTHROPIC, Script.always(Reply.ok()), api_key=PROVIDER_KEY),
    ]
    embedder = ThreadingHTTPServer(("127.0.0.1", 0), _Embedder)
    thread = threading.Thread(target=embedder.serve_forever, daemon=True)
    thread.start()
    try:
        with FakeServer(*providers).run_in_thread() as fake:
            cfg = tmp / "failover.yaml"
            cfg.write_text(_config(fake, f"http://127.0.0.1:{embedder.server_address[1]}/v1"))
            with serve(cfg, env={"LOOP_PROVIDER_KEY": PROVIDER_KEY}) as gw:
                yield World(gw)
    finally:
        embedder.shutdown()
        embedder.server_close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with _world(tmp_path_factory.mktemp("loop")) as w:
        yield w


# -- the bodies (built before the watchdog starts: the test process's CPU is not the gateway's) --


def _encode(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _chat_tools(n: int, *, schema: bool = False) -> list[dict[str, Any]]:
    params = {"type": "object", "properties": {"q": {"type": "string", "description": "what to look up"}}}
    return [
        {
            "type": "function",
            "function": {"name": f"t{i}", **({"description": "a tool", "parameters": params} if schema else {})},
        }
        for i in range(n)
    ]


def _hi(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(n)]


def _blocks(messages: int, per: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": "hi"}] * per}
        for i in range(messages)
    ]


@dataclass(frozen=True)
class Case:
    path: str
    body: Callable[[], bytes]
    status: int
    param: str | None = None  # the field a refusal names
    setting: str | None = None  # the limit a refusal names
    memory_mib: float = MEMORY_SLACK_MIB  # what it may leave in the process's RSS


CASES: dict[str, Case] = {
    # over a limit: refused, after the body was decoded off the loop
    "chat_180k_tools": Case(
        "/v1/chat/completions",
        lambda: _encode({"model": "chat", "messages": _hi(1), "tools": _chat_tools(180_000)}),
        400,
        "tools",
        "max_tools",
    ),
    "responses_50k_tools": Case(
        "/v1/responses",
        lambda: _encode(
            {"model": "chat", "input": "hi", "tools": [{"type": "function", "name": f"t{i}"} for i in range(50_000)]}
        ),
        400,
        "tools",
        "max_tools",
    ),
    "count_tokens_150k_tools": Case(
        "/v1/messages/count_tokens",
        lambda: _encode(
            {
                "model": "messages",
                "messages": _hi(1),
                "tools": [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(150_000)],
            }
        ),
        400,
        "tools",
        "max_tools",
    ),
    "chat_300k_messages": Case(
        "/v1/chat/completions",
        lambda: _encode({"model": "chat", "messages": _hi(300_001)}),
        400,
        "messages",
        "max_messages",
    ),
    "messages_150k_blocks": Case(
        "/v1/messages",
        lambda: _encode({"model": "messages", "max_tokens": 64, "messages": _blocks(15_001, 10)}),
        400,
        "messages",
        "max_blocks",
    ),
    # at the limits: answered, every step of the way off the loop or bounded
    "chat_2000_tools": Case(
        "/v1/chat/completions",
        lambda: _encode({"model": "chat", "messages": _hi(1), "tools": _chat_tools(2_000, schema=True)}),
        200,
    ),
    "responses_2000_tools": Case(
        "/v1/responses",
        lambda: _encode(
            {
                "model": "chat",
                "input": "hi",
                "tools": [
                    {"type": "function", "name": f"t{i}", "parameters": {"type": "object", "properties": {}}}
                    for i in range(2_000)
                ],
            }
        ),
        200,
    ),
    "count_tokens_2000_tools": Case(
        "/v1/messages/count_tokens",
        lambda: _encode(
            {
                "model": "messages",
                "messages": _hi(1),
                "tools": [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(2_000)],
            }
        ),
        200,
    ),
    "chat_20k_messages": Case("/v1/chat/completions", lambda: _encode({"model": "chat", "messages": _hi(19_999)}), 200),
    "messages_20k_blocks": Case(
        "/v1/messages",
        lambda: _encode({"model": "messages", "max_tokens": 64, "messages": _blocks(2_001, 10)[:-1] + _hi(1)}),
        200,
    ),
    # A 63 MB answer: decoded in worker threads in slices of one vector (a batch's JSON parse in
    # one call held the GIL ~30 ms, and a probe waited behind two or three of them: 40-115 ms),
    # written in a worker thread one vector at a time and sent in 1 MB slices, never joined.
    # Its pages partly stay with the allocator's thread arenas.
    "embeddings_2048x3072": Case(
        "/v1/embeddings",
        lambda: _encode({"model": "embed", "input": [f"text {i}" for i in range(INPUTS)]}),
        200,
        memory_mib=64.0,
    ),
}


@pytest.fixture(scope="module")
def baseline(world: World) -> float:
    with world.client() as c:
        for _ in range(3):
            r = c.post("/v1/chat/completions", json={"model": "chat", "messages": _hi(1)})
            assert r.status_code == 200, r.text
            r = c.post("/v1/embeddings", json={"model": "embed", "input": ["a", "b"]})
            assert r.status_code == 200, r.text
    return world.gw.settled_rss_mib()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_large_body_never_stalls_the_loop(world: World, baseline: float, name: str) -> None:
    case = CASES[name]
    raw = case.body()
    before = world.gw.settled_rss_mib(wait_s=0.3)  # the previous case's end settled it already
    with world.client() as c, world.gw.watchdog(limit_s=math.inf) as watch:  # judged below, after the print
        r = c.post(case.path, content=raw, headers={"content-type": "application/json"})
    del raw
    after = world.gw.settled_rss_mib(wait_s=2.0)  # the reclaim runs 1 s after the request
    print(f"{name}: worst /healthz {watch.worst * 1000:.0f} ms; RSS {before:.1f} -> {after:.1f} MiB")
    assert r.status_code == case.status, r.text[:500]
    if case.status == 400:
        error = r.json()["error"]
        code = (
            error["details"]["error_code"] if "details" in error else error["code"]
        )  # Anthropic's envelope or OpenAI's
        assert code == "too_many_items", error
        assert error["message"].startswith(f"{case.param}: "), error
        assert f"gateway.limits.{case.setting}" in error["message"], error
    elif name.startswith("embeddings"):
        data = r.json()["data"]
        assert len(data) == INPUTS and len(data[-1]["embedding"]) == DIMS and data[-1]["index"] == INPUTS - 1
    assert watch.worst <= LAG_LIMIT_S, (
        f"/healthz took {watch.worst * 1000:.0f} ms (limit {LAG_LIMIT_S * 1000:.0f} ms) "
        f"over {len(watch.times)} probes: {name} stalled the event loop"
    )
    assert after - before <= case.memory_mib, f"RSS {before:.0f} -> {after:.0f} MiB after {name}"
    assert after - baseline <= 2 * MEMORY_SLACK_MIB, f"RSS {baseline:.0f} -> {after:.0f} MiB since the first case"
