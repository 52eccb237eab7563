"""Every hostile case against a real ``failover serve``, watched.

One gateway process (two tenants, an admin key, fake providers on loopback and a hostile
upstream) takes each case in turn. While a case runs, a probe to ``/healthz`` on another
connection must answer within 100 ms: no single request, client or upstream may freeze the
event loop for everyone else. After it, the process's resident memory must come back within
20 MiB of its baseline. What each case must *answer* is checked here too, briefly; the
detailed behaviour of each defence has its own tests beside this file.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from failover.model import Dialect
from failover.testing import FakeProvider, FakeServer, Reply, Script

from ._harness import Served, serve
from ._upstream import HostileUpstream

pytestmark = pytest.mark.e2e

ALPHA_KEY = "gw-alpha-key-0001"
BETA_KEY = "gw-beta-key-0002"
ADMIN_KEY = "gw-admin-key-0003"
PROVIDER_KEY = "sk-fake-provider-key-0004"
SECRET = "TOP-SECRET-CONTENT-9d1f"
MEMORY_SLACK_MIB = 20.0
REDOS_TEXT = "a" * 28 + "!"


class _Listener:
    """A loopback socket that counts the connections made to it and never answers (a tarpit):
    a gateway that fetches a ``$ref`` would connect here and hang."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/schema.json"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self._held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for c in self._held:
            c.close()
        self.sock.close()


@dataclass
class World:
    gw: Served
    fake: FakeServer
    hostile: HostileUpstream
    listener: _Listener
    secret_file: Path

    def calls(self, provider: str) -> int:
        return sum(1 for c in self.fake.calls if c.provider == provider)


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _config(fake: FakeServer, hostile: HostileUpstream) -> str:
    caps = "[chat, tools, structured_output, streaming]"
    common = f"api_key_env: HOSTILE_PROVIDER_KEY, capabilities: {caps}, tokenizer: estimate, max_attempts: 1"
    return f"""
targets:
  ok: {{dialect: openai, base_url: "{fake.api_url_for("ok")}", model: gpt-4o-mini, {common}}}
  claude: {{dialect: anthropic, base_url: "{fake.api_url_for("claude")}", model: claude-x, {common}}}
  redos: {{dialect: openai, base_url: "{fake.api_url_for("redos")}", model: gpt-4o-mini, {common}}}
  endless: {{dialect: openai, base_url: "{hostile.url("endless")}", model: gpt-4o-mini, {common}}}
  bomb: {{dialect: openai, base_url: "{hostile.url("bomb")}", model: gpt-4o-mini, {common}}}
  flood: {{dialect: openai, base_url: "{hostile.url("flood")}", model: gpt-4o-mini, {common}}}
routes:
  chat: {{primary: [ok]}}
  messages: {{primary: [claude]}}
  redos: {{primary: [redos]}}
  endless: {{primary: [endless]}}
  bomb: {{primary: [bomb]}}
  flood: {{primary: [flood]}}
gateway:
  admin: {{key_sha256: ["{_sha(ADMIN_KEY)}"]}}
  tenants:
    alpha: {{key_sha256: ["{_sha(ALPHA_KEY)}"]}}
    beta: {{key_sha256: ["{_sha(BETA_KEY)}"]}}
  envelope: {{deadline_ms: 8000}}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with _world(tmp_path_factory.mktemp("hostile")) as w:
        yield w


@contextmanager
def _world(tmp: Path) -> Iterator[World]:
    secret_file = tmp / "secret.json"
    secret_file.write_text(json.dumps({"type": "string", "description": SECRET}))
    providers = [
        FakeProvider("ok", Dialect.OPENAI, Script.always(Reply.ok()), api_key=PROVIDER_KEY),
        FakeProvider("claude", Dialect.ANTHROPIC, Script.always(Reply.ok()), api_key=PROVIDER_KEY),
        FakeProvider("redos", Dialect.OPENAI, Script.always(Reply.ok(json={"s": REDOS_TEXT})), api_key=PROVIDER_KEY),
    ]
    listener = _Listener()
    hostile = HostileUpstream()
    with FakeServer(*providers).run_in_thread() as fake, hostile.running():
        cfg = tmp / "failover.yaml"
        cfg.write_text(_config(fake, hostile))
        with serve(cfg, env={"HOSTILE_PROVIDER_KEY": PROVIDER_KEY}) as gw:
            yield World(gw, fake, hostile, listener, secret_file)
    listener.close()


def _client(w: World, key: str = ALPHA_KEY, timeout: float = 30.0) -> httpx.Client:
    return httpx.Client(base_url=w.gw.base, headers={"authorization": f"Bearer {key}"}, timeout=timeout)


def _chat(route: str = "chat", **extra: Any) -> dict[str, Any]:
    return {"model": route, "messages": [{"role": "user", "content": "hi"}], **extra}


def _messages(**extra: Any) -> dict[str, Any]:
    return {"model": "messages", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], **extra}


def _schema_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}


def _assert_client_error(r: httpx.Response, field: str | None = None) -> None:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    if field is not None:
        assert field in r.text, r.text[:500]


# -- the cases ---------------------------------------------------------------------------------


def case_ref_to_a_url(w: World) -> None:
    """A ``$ref`` to a URL, in a response format and in a tool's parameters: refused, never fetched."""
    with _client(w) as c:
        r = c.post("/v1/chat/completions", json=_chat(response_format=_schema_format({"$ref": w.listener.url})))
        _assert_client_error(r, "response_format")
        tool = {"type": "function", "function": {"name": "f", "parameters": {"$ref": w.listener.url}}}
        r = c.post("/v1/chat/completions", json=_chat(tools=[tool]))
        _assert_client_error(r, "tools[0]")
    assert w.listener.accepted == 0


def case_ref_to_a_file(w: World) -> None:
    """A ``$ref`` to a local file: refused, and the file's content is nowhere in the answer."""
    ref = {"type": "object", "properties": {"x": {"$ref": w.secret_file.as_uri()}}}
    with _client(w) as c:
        r = c.post("/v1/chat/completions", json=_chat(response_format=_schema_format(ref)))
        _assert_client_error(r, "response_format")
        assert SECRET not in r.text
        r = c.post("/v1/messages", json=_messages(tools=[{"name": "f", "input_schema": ref}]))
        _assert_client_error(r, "tools[0]")
        assert SECRET not in r.text


# Built once, before any watchdog runs: serialising it takes the test process's CPU, not the gateway's.
_PROPERTIES_250K = json.dumps(
    _chat(
        response_format=_schema_format(
            {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(250_000)}}
        )
    )
).encode()


def case_a_schema_of_250k_properties(w: World) -> None:
    """The measured 7 MiB body: decoded off the loop, its schema refused by the limit walk."""
    with _client(w) as c:
        r = c.post("/v1/chat/completions", content=_PROPERTIES_250K, headers={"content-type": "application/json"})
    _assert_client_error(r, "response_format")


def case_a_catastrophic_pattern(w: World) -> None:
    """``^(a+)+$`` against 28 a's and a '!': a backtracking engine takes seconds; the answer
    must be judged invalid at once."""
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        "required": ["s"],
        "additionalProperties": False,
    }
    with _client(w) as c:
        t0 = time.monotonic()
        r = c.post("/v1/chat/completions", json=_chat("redos", response_format=_schema_format(schema)))
        took = time.monotonic() - t0
    assert r.status_code != 200 or json.loads(r.json()["choices"][0]["message"]["content"])["s"] != REDOS_TEXT
    assert r.status_code < 500 or r.status_code in (502, 503, 504), r.text[:300]
    assert took < 5.0, took


def case_a_header_flood(w: World) -> None:
    """8 MiB of headers on one unauthenticated connection: refused long before the end."""
    sock = socket.create_connection(("127.0.0.1", w.gw.port))
    sock.settimeout(10)
    sent = 0
    answer = b""
    try:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n")
        line = b"x-flood: " + b"a" * 8183 + b"\r\n"
        while sent < 8 * 1024 * 1024:
            sock.sendall(line)
            sent += len(line)
        sock.sendall(b"\r\n")
    except OSError:
        pass  # the gateway closed the connection: what it should do
    try:
        answer = sock.recv(65536)
    except OSError:
        answer = b""
    finally:
        sock.close()
    assert answer == b"" or answer.startswith((b"HTTP/1.1 431", b"HTTP/1.1 400")), answer[:100]


def case_lone_surrogates(w: World) -> None:
    """A lone surrogate (valid JSON, not valid Unicode text) in a message: a 400 naming the
    field, on both endpoints, and no upstream call."""
    before = w.calls("ok") + w.calls("claude")
    with _client(w) as c:
        body = b'{"model": "chat", "messages": [{"role": "user", "content": "hi \\ud800"}]}'
        r = c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        _assert_client_error(r, "messages[0]")
        body = b'{"model": "messages", "max_tokens": 64, "messages": [{"role": "user", "content": "\\udfff"}]}'
        r = c.post("/v1/messages", content=body, headers={"content-type": "application/json"})
        _assert_client_error(r, "messages[0]")
    assert w.calls("ok") + w.calls("claude") == before


def case_broken_schemas_before_any_upstream_call(w: World) -> None:
    before = w.calls("ok") + w.calls("claude")
    with _client(w) as c:
        r = c.post("/v1/chat/completions", json=_chat(response_format=_schema_format({"$ref": "#/nope"})))
        _assert_client_error(r, "response_format")
        for bad in ({"type": 12}, {"$ref": "#/nope"}, {"$dynamicRef": "#meta"}):
            r = c.post("/v1/messages", json=_messages(tools=[{"name": "f", "input_schema": bad}]))
            _assert_client_error(r, "tools[0]")
    assert w.calls("ok") + w.calls("claude") == before


def case_an_endless_answer(w: World) -> None:
    """An upstream 200 whose body never ends: the attempt fails at the size cap, long before
    the deadline, with a typed error."""
    with _client(w) as c:
        t0 = time.monotonic()
        r = c.post("/v1/chat/completions", json=_chat("endless"))
        took = time.monotonic() - t0
    assert r.status_code in (502, 503, 504), r.text[:300]
    assert r.json()["error"]["type"], r.text[:300]
    assert took < 6.0, took


def case_a_gzip_bomb(w: World) -> None:
    with _client(w) as c:
        r = c.post("/v1/chat/completions", json=_chat("bomb"))
    assert r.status_code in (502, 503, 504), r.text[:300]


def slow_readers(w: World) -> None:
    """Five clients that read a flooding stream at 4 KiB/s and then leave."""
    sent_before = w.hostile.bytes_sent

    def slow_reader() -> None:
        body = json.dumps(_chat("flood", stream=True)).encode()
        sock = socket.create_connection(("127.0.0.1", w.gw.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"authorization: Bearer " + ALPHA_KEY.encode() + b"\r\ncontent-length: %d\r\n\r\n" % len(body) + body
        )
        sock.settimeout(1)
        until = time.monotonic() + 4
        while time.monotonic() < until:
            try:
                if not sock.recv(4096):
                    break
            except TimeoutError:
                pass
            time.sleep(1)
        sock.close()

    readers = [threading.Thread(target=slow_reader) for _ in range(5)]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    time.sleep(1)
    # Backpressure: the gateway read little more than its buffers' worth of each stream.
    assert w.hostile.bytes_sent - sent_before < 5 * 16 * 1024 * 1024, w.hostile.bytes_sent - sent_before


def case_many_big_schemas(w: World) -> None:
    """Ten distinct schemas of 8 MiB each: none of them may stay pinned in a cache."""
    with _client(w) as c:
        for n in range(10):
            schema = {"type": "object", "description": f"{n}" + "x" * (8 * 1024 * 1024)}
            r = c.post("/v1/chat/completions", json=_chat(response_format=_schema_format(schema)))
            assert r.status_code < 500, r.text[:300]


CASES: dict[str, Callable[[World], None]] = {
    name.removeprefix("case_"): fn for name, fn in globals().items() if name.startswith("case_") and callable(fn)
}


def test_slow_stream_readers_on_a_gateway_of_their_own(tmp_path: Path) -> None:
    """Five slow readers on a flooding stream, twice, on a process no other case has shaped:
    the loop stays free, the upstream is held back (see slow_readers), the first round's memory
    comes back within the bound and a second round keeps next to nothing more (what the first
    left is the allocator's, reused, not held by anything)."""
    with _world(tmp_path) as w:
        with _client(w) as c:
            for _ in range(3):
                assert c.post("/v1/chat/completions", json=_chat(stream=True)).status_code == 200
        before = w.gw.settled_rss_mib(wait_s=1.0)
        with w.gw.watchdog(limit_s=0.1):
            slow_readers(w)
        first = w.gw.settled_rss_mib()
        with w.gw.watchdog(limit_s=0.1):
            slow_readers(w)
        second = w.gw.settled_rss_mib()
    print(f"slow readers: RSS {before:.1f} -> {first:.1f} -> {second:.1f} MiB")
    assert first - before <= MEMORY_SLACK_MIB, f"RSS {before:.0f} -> {first:.0f} MiB"
    assert second - first <= MEMORY_SLACK_MIB / 4, f"a second round kept more: {first:.0f} -> {second:.0f} MiB"


@pytest.fixture(scope="module")
def baseline(world: World) -> float:
    """RSS after the ordinary paths have run once (imports, caches of normal requests)."""
    ok_schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    with _client(world) as c:
        for _ in range(3):
            assert c.post("/v1/chat/completions", json=_chat()).status_code == 200
            assert c.post("/v1/chat/completions", json=_chat(stream=True)).status_code == 200
            r = c.post("/v1/chat/completions", json=_chat(response_format=_schema_format(ok_schema)))
            assert r.status_code == 200, r.text
            r = c.post(
                "/v1/messages",
                json={"model": "messages", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
            )
            assert r.status_code == 200, r.text
    return world.gw.settled_rss_mib()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_case_neither_stalls_the_loop_nor_keeps_memory(world: World, baseline: float, case: str) -> None:
    with world.gw.watchdog(limit_s=0.1) as watch:
        CASES[case](world)
    after = world.gw.settled_rss_mib()
    print(f"{case}: worst /healthz {watch.worst * 1000:.0f} ms; RSS {baseline:.1f} -> {after:.1f} MiB")
    assert after - baseline <= MEMORY_SLACK_MIB, f"RSS {baseline:.0f} -> {after:.0f} MiB after {case}"
