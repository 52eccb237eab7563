"""No secret in any log line at any level: ``failover serve --log-level debug`` is sent tenant
keys (Bearer and x-api-key, right and wrong), the admin key, a WebSocket upgrade with an
authorization header, and calls that reach its upstreams with the provider key; every line
it writes (the gateway's, uvicorn's, the HTTP libraries') is scanned for each of them."""

from __future__ import annotations

import hashlib
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from failover.gateway._logs import SecretFilter
from failover.model import Dialect
from failover.testing import FakeProvider, FakeServer, Reply, Script

from ._harness import SCAN, Served, serve

pytestmark = pytest.mark.e2e

TENANT_KEY = "gw-tenant-key-LOGSCAN-0001"
WRONG_KEY = "gw-wrong-key-LOGSCAN-0002"
ADMIN_KEY = "gw-admin-key-LOGSCAN-0003"
PROVIDER_KEY = "sk-provider-key-LOGSCAN-0004"
WS_TOKEN = "ws-token-LOGSCAN-0005"
SECRETS = (TENANT_KEY, WRONG_KEY, ADMIN_KEY, PROVIDER_KEY, WS_TOKEN)


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _config(fake: FakeServer) -> str:
    common = "api_key_env: LOGSCAN_PROVIDER_KEY, capabilities: [chat, streaming], tokenizer: estimate"
    return f"""
targets:
  ok: {{dialect: openai, base_url: "{fake.api_url_for("ok")}", model: gpt-4o-mini, {common}}}
  claude: {{dialect: anthropic, base_url: "{fake.api_url_for("claude")}", model: claude-x, {common}}}
  refused: {{dialect: openai, base_url: "{fake.api_url_for("refused")}", model: gpt-4o-mini, {common}}}
routes:
  chat: {{primary: [ok]}}
  messages: {{primary: [claude]}}
  refused: {{primary: [refused]}}
gateway:
  admin: {{key_sha256: ["{_sha(ADMIN_KEY)}"]}}
  tenants:
    acme: {{key_sha256: ["{_sha(TENANT_KEY)}"]}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    providers = [
        FakeProvider("ok", Dialect.OPENAI, Script.always(Reply.ok()), api_key=PROVIDER_KEY),
        FakeProvider("claude", Dialect.ANTHROPIC, Script.always(Reply.ok()), api_key=PROVIDER_KEY),
        FakeProvider("refused", Dialect.OPENAI, Script.always(Reply.unauthorized()), api_key=PROVIDER_KEY),
    ]
    tmp: Path = tmp_path_factory.mktemp("logscan")
    with FakeServer(*providers).run_in_thread() as fake:
        cfg = tmp / "failover.yaml"
        cfg.write_text(_config(fake))
        with serve(cfg, env={"LOGSCAN_PROVIDER_KEY": PROVIDER_KEY}, log_level="debug") as gw:
            yield gw


def _websocket_upgrade(port: int, path: str) -> bytes:
    head = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"authorization: Bearer {WS_TOKEN}\r\nx-api-key: {WS_TOKEN}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        sock.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def test_no_secret_appears_in_any_debug_log_line(served: Served) -> None:
    chat = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=served.base, timeout=30) as c:
        bearer = {"authorization": f"Bearer {TENANT_KEY}"}
        assert c.post("/v1/chat/completions", json=chat, headers=bearer).status_code == 200
        assert c.post("/v1/chat/completions", json={**chat, "stream": True}, headers=bearer).status_code == 200
        messages = {"model": "messages", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
        assert c.post("/v1/messages", json=messages, headers={"x-api-key": TENANT_KEY}).status_code == 200
        assert c.post("/v1/chat/completions", json={**chat, "model": "refused"}, headers=bearer).status_code >= 500
        wrong = {"authorization": f"Bearer {WRONG_KEY}"}
        assert c.post("/v1/chat/completions", json=chat, headers=wrong).status_code == 401
        assert c.post("/v1/messages", json=messages, headers={"x-api-key": WRONG_KEY}).status_code >= 400
        assert c.get("/admin/health", headers={"authorization": f"Bearer {ADMIN_KEY}"}).status_code == 200
        assert c.get(f"/v1/models?key={WRONG_KEY}", headers={"x-api-key": WRONG_KEY}).status_code >= 400
    answer = _websocket_upgrade(served.port, "/v1/chat/completions")
    assert not answer.startswith(b"HTTP/1.1 101"), answer  # no WebSocket is served
    answer = _websocket_upgrade(served.port, "/")
    assert not answer.startswith(b"HTTP/1.1 101"), answer
    time.sleep(0.5)  # the batching log handler writes within 50 ms
    out = served.output
    assert " DEBUG " in out or '"level":"debug"' in out, out[-2000:]  # the level took effect
    leaked = [s for s in SECRETS if s in out]
    assert not leaked, [line for line in out.splitlines() if any(s in line for s in leaked)][:10]


@pytest.mark.parametrize(
    "line",
    [
        # httpcore / h11 / hpack / websockets / uvicorn's asgi trace, as each prints headers
        "HPACK encoding [(b':method', b'POST'), (b'authorization', b'Bearer {k}'), (b'x-api-key', b'{k}')]",
        "send_request_headers.started request=<Request [b'POST']> headers=[(b'Authorization', b'Bearer {k}')]",
        "< authorization: Bearer {k}",
        "> x-goog-api-key: {k}",
        "ASGI [1] Started scope={{'headers': [(b'x-api-key', b'{k}'), (b'api-key', b'{k}')]}}",
        '{{"authorization": "Basic {k}", "cookie": "session={k}"}}',
        "HTTP Request: POST https://generativelanguage.googleapis.com/v1beta/models/x?key={k} 200",
        "AWS4-HMAC-SHA256 Credential=AKIA/x authorization: AWS4-HMAC-SHA256 Credential={k}",
    ],
)
def test_the_secret_filter_scrubs_header_values_however_a_library_prints_them(line: str) -> None:
    key = "gw-any-shape-of-key-77"
    record = logging.LogRecord("httpcore.http11", logging.DEBUG, __file__, 1, "%s", (line.format(k=key),), None)
    assert SecretFilter().filter(record)
    assert key not in record.getMessage(), record.getMessage()


def test_every_handler_serve_writes_through_has_the_filter() -> None:
    from failover.gateway._logs import guard_handlers
    from failover.gateway._serve import uvicorn_log_config

    config = uvicorn_log_config()
    assert config["handlers"] and all("secrets" in h["filters"] for h in config["handlers"].values())
    logger = logging.getLogger("test.logscan")
    handler = logging.StreamHandler()
    logger.addHandler(handler)
    try:
        guard_handlers(logger)
        guard_handlers(logger)  # idempotent
        assert sum(isinstance(f, SecretFilter) for f in handler.filters) == 1
    finally:
        logger.removeHandler(handler)


def test_the_suite_wide_scan_sees_a_secret_in_any_log_line() -> None:
    """The scan every hostile module ends with (conftest): a DEBUG record holding one of the
    suite's keys, from any logger, is caught (and taken back here, so this module passes)."""
    before = len(SCAN.leaks)
    logging.getLogger("some.library").debug("sending with %s", TENANT_KEY)
    caught = SCAN.leaks[before:]
    del SCAN.leaks[before:]
    assert len(caught) == 1 and "in-process some.library" in caught[0], caught


def test_the_suite_wide_scan_reads_every_line_a_served_gateway_writes(served: Served) -> None:
    """Each ``serve`` of the suite is scanned line by line as its output is read: a request's
    DEBUG lines reach the scan, and a line holding a key would be a leak."""
    before = SCAN.lines
    with httpx.Client(base_url=served.base, timeout=10) as c:
        body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
        assert (
            c.post("/v1/chat/completions", json=body, headers={"authorization": f"Bearer {TENANT_KEY}"}).status_code
            == 200
        )
    until = time.monotonic() + 5
    while SCAN.lines == before and time.monotonic() < until:
        time.sleep(0.05)
    assert SCAN.lines > before, "no line of the served gateway reached the scan"
    leaks = len(SCAN.leaks)
    SCAN.check(f"a line with {PROVIDER_KEY} in it", "serve (this test)")
    caught = SCAN.leaks[leaks:]
    del SCAN.leaks[leaks:]
    assert caught == [f"serve (this test): a line with {PROVIDER_KEY} in it"]
