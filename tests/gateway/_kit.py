"""Shared set-up for the gateway tests: fake providers, a router, tenants, the app."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.types import Message

from failover.gateway import EnvelopeDefaults, GatewaySettings, Tenant, create_app, hash_key
from failover.gateway._envelope import RecentRequests
from failover.gateway._serve import http_protocol
from failover.policy import HealthBoard
from failover.testing import FakeNetwork, FakeProvider
from failover.testing._script import ScriptSpec
from tests._sdk import ALL, RouteTable, fake_target, quiet_router, table_routes

__all__ = ["ALL"]  # the tests import the capability set from here, with the rest of the kit

PROVIDER_KEY = "sk-live-PROVIDER-SECRET-7f3a9c2e41d8"  # what OUR targets send upstream
ACME_KEY = "gw-acme-key-0001"
OTHER_KEY = "gw-other-key-0002"
ADMIN_KEY = "gw-admin-key-0003"

# route -> (primary providers, fallback providers)
ROUTES: RouteTable = {
    "chat": (("a",), ("b", "c")),
    "solo": (("s",), ()),
    "flaky": (("x",), ("c",)),
    "tools": (("t",), ()),
    "secret": (("a",), ()),
    "misconfigured": (("m",), ()),
}
DIALECTS = {"a": "openai", "b": "anthropic", "c": "gemini", "s": "openai", "x": "openai", "t": "openai", "m": "openai"}


class Kit:
    """Fake providers (every one checks that OUR provider key arrives), a router, an app."""

    def __init__(self, scripts: Mapping[str, ScriptSpec] | None = None, *, open: bool = False) -> None:
        scripts = dict(scripts or {})
        self.providers = {n: FakeProvider(n, d, scripts.get(n), api_key=PROVIDER_KEY) for n, d in DIALECTS.items()}
        targets = {
            n: fake_target(p, "sk-wrong-key-for-m" if n == "m" else PROVIDER_KEY) for n, p in self.providers.items()
        }
        routes = table_routes(ROUTES, targets)
        self.net = FakeNetwork(*self.providers.values())
        self.router = quiet_router(routes, self.net)
        tenants = (
            Tenant(name="acme", key_hashes=(hash_key(ACME_KEY),), routes=frozenset(ROUTES) - {"secret"}),
            Tenant(name="other", key_hashes=(hash_key(OTHER_KEY),), routes=frozenset({"secret"})),
        )
        self.settings = GatewaySettings(
            tenants=() if open else tenants,
            admin_key_hashes=(hash_key(ADMIN_KEY),),
            envelope=EnvelopeDefaults(deadline_ms=5_000),
            max_body_bytes=64 * 1024,
            max_json_depth=32,
        )
        self.app: Starlette = create_app(self.router, self.settings)

    def reset(self) -> Kit:
        """Ready for the next test on a module-scoped server: every provider answers "ok"
        again, the router forgets the cool-downs (a 429, say) an earlier test left, and the
        gateway the bodies that failed (the same body again would be a client's retry)."""
        for p in self.providers.values():
            p.load("ok")
        self.router.health = HealthBoard()
        self.app.state.gateway.recent = RecentRequests()
        return self

    def client(self, key: str | None = ACME_KEY) -> httpx.AsyncClient:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://gateway", headers=headers, timeout=30
        )


def chat_body(route: str = "chat", text: str = "Hello", **extra: Any) -> dict[str, Any]:
    return {"model": route, "messages": [{"role": "user", "content": text}], **extra}


class ServerThread:
    """One real uvicorn server on a loopback port, in a thread with its own event loop, with
    the HTTP protocol ``failover serve`` uses (httptools, the head deadline, one write per
    answer, the connection-lost signal)."""

    def __init__(self, app: Starlette) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        http = http_protocol(GatewaySettings())
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", http=http))  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self._run, name="gateway-uvicorn", daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        until = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > until or not self.thread.is_alive():
                raise RuntimeError("the gateway server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


# The header that turns a stream's commit hold off: its first content event commits it, so a
# test can put a fault after output reached the client.
NO_HOLD = {"x-failover-hold-tokens": "0"}


def chat_scope(*, hold_tokens: int | None = None) -> dict[str, Any]:
    """A raw ASGI scope for POST /v1/chat/completions as tenant acme, for tests that drive the
    app directly (disconnects, drains) rather than through an HTTP client."""
    hold = [] if hold_tokens is None else [(b"x-failover-hold-tokens", str(hold_tokens).encode())]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", f"Bearer {ACME_KEY}".encode()), (b"content-type", b"application/json"), *hold],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


class LeavingClient:
    """A hand-made ASGI client that goes away after the first body chunk: call the app with
    ``(scope, client.receive, client.send)`` and read what it sent from ``messages``."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = json.dumps(body).encode()
        self.sent_request = False
        self.gone = asyncio.Event()
        self.messages: list[Message] = []

    async def receive(self) -> Message:
        if not self.sent_request:
            self.sent_request = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.messages.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            self.gone.set()
