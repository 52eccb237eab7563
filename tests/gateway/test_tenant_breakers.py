"""No tenant opens a breaker for another: over a real gateway on loopback (uvicorn in a thread,
the fault kit's providers behind it), two tenants share one route, and what tenant A does to it
(streams it reads slowly, embeddings on a chat route, requests the provider refuses as
malformed) neither fails tenant B's requests on that route nor moves its breaker.

Each case reproduces a measured failure: 12 streams read at 4 KiB/s, each cut by the target's
total timeout while the gateway held it back for its reader, opened the route's breaker (503
``circuit open`` for the other tenant); 12 embeddings on a chat route did the same with 404s.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from failover import Capability as C
from failover import Route, Router, Timeouts
from failover.gateway import EnvelopeDefaults, GatewaySettings, Tenant, create_app, hash_key
from failover.policy import BreakerBoard, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import ServerThread, chat_body

KEY_A, KEY_B, ADMIN = "gw-tenant-a-0001", "gw-tenant-b-0002", "gw-admin-0003"
SLOW_STREAMS = 12
READ_RATE = 4096  # bytes a second each slow reader takes
TOTAL = 1.5  # each target's total timeout: the slow readers are held back far longer
# a long answer in big deltas (4 KiB each): far more than the buffers between the provider and
# a reader at 4 KiB/s hold in TOTAL seconds, so the gateway holds the upstream back
LONG = " ".join(["x" * 4000] * 600)
EMBED_VOLUME = 12
MALFORMED = 40


class TwoTenants:
    def __init__(self) -> None:
        # A's slow streams come first, each a long answer; B's requests after them short ones
        long = Reply.ok(LONG, chunk_interval=0.0)
        self.chat = FakeProvider("chat", "openai", Script.of(*[long] * SLOW_STREAMS, default="ok"))
        # a chat model under a name that says nothing: only its answer to an embeddings call does
        self.house = FakeProvider(
            "house", "openai", Script.of(*[Reply.not_found()] * EMBED_VOLUME, default="ok"), model="house-model"
        )
        self.strict = FakeProvider("strict", "openai", Script.of(*[Reply.invalid()] * MALFORMED, default="ok"))
        timeouts = Timeouts(connect=2.0, first_event=5.0, idle=5.0, total=TOTAL)

        def target(p: FakeProvider, **kw: Any) -> Any:
            return p.target(timeouts=timeouts, max_attempts=1, tokenizer="estimate", **kw)

        routes = [
            Route(name="chat", primary=(target(self.chat, capabilities=frozenset({C.CHAT, C.STREAMING})),)),
            Route(name="house", primary=(target(self.house),)),
            Route(name="strict", primary=(target(self.strict),)),
        ]
        self.router = Router(
            routes,
            transport=FakeNetwork(self.chat, self.house, self.strict),
            retry_budget=Unlimited(),
            breakers=BreakerBoard(),
        )
        settings = GatewaySettings(
            tenants=(
                Tenant(name="a", key_hashes=(hash_key(KEY_A),)),
                Tenant(name="b", key_hashes=(hash_key(KEY_B),)),
            ),
            envelope=EnvelopeDefaults(deadline_ms=30_000),
            admin_key_hashes=(hash_key(ADMIN),),
        )
        self.app = create_app(self.router, settings)


@pytest.fixture
def served() -> Iterator[tuple[TwoTenants, ServerThread]]:
    kit = TwoTenants()
    server = ServerThread(kit.app)
    # A small send buffer on the gateway's connections (accepted sockets inherit it), as over a
    # network where a slow reader's window keeps it small: on loopback the kernel would grow it
    # to megabytes and hold a whole answer for the reader, so the gateway would never wait.
    server.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    with server:
        yield kit, server


def _client(server: ServerThread, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{server.port}", headers={"authorization": f"Bearer {key}"}, timeout=30
    )


def _breaker(kit: TwoTenants, server: ServerThread, route: str) -> dict[str, Any]:
    """The breaker of ``route``'s target on /admin/health (closed and empty before its first call)."""
    scope = kit.router.routes[route].primary[0].scope
    with _client(server, ADMIN) as c:
        body = c.get("/admin/health").json()
    for b in body["breakers"]:
        if b["layer"] == "target" and b["scope"] == scope:
            return dict(b)
    return {"state": "closed", "calls": 0, "failures": 0}


def _b_succeeds(server: ServerThread, route: str, n: int) -> int:
    """Tenant B's plain requests on ``route`` that succeed, of ``n``."""
    ok = 0
    with _client(server, KEY_B) as c:
        for _ in range(n):
            r = c.post("/v1/chat/completions", json=chat_body(route, max_tokens=16))
            ok += r.status_code == 200
    return ok


def _slow_reader(port: int, seconds: float, got: list[int]) -> None:
    """One stream read at READ_RATE for ``seconds`` on a socket with a small receive buffer."""
    body = json.dumps(chat_body("chat", stream=True)).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\n"
        f"authorization: Bearer {KEY_A}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(head + body)
    read = 0
    step = 0.25
    until = time.monotonic() + seconds
    try:
        while time.monotonic() < until:
            data = s.recv(int(READ_RATE * step))
            if not data:
                break
            read += len(data)
            time.sleep(step)
    finally:
        got.append(read)
        s.close()


def test_slow_readers_of_one_tenant_open_no_breaker_for_another(served: tuple[TwoTenants, ServerThread]) -> None:
    kit, server = served
    got: list[int] = []
    # each reader reads well past the total timeout: the cut happens while it still reads
    readers = [threading.Thread(target=_slow_reader, args=(server.port, TOTAL + 2.5, got)) for _ in range(SLOW_STREAMS)]
    for t in readers:
        t.start()
    for t in readers:
        t.join(timeout=30)
    assert len(got) == SLOW_STREAMS and all(n > 0 for n in got), got
    assert len(kit.chat.calls) == SLOW_STREAMS
    assert max(got) < len(LONG) // 4, got  # far less than the answer: each stream was cut
    # 12 attempts ended, none of them an answer, and none of them lowered the target's health
    health = kit.router.health.of(kit.router.routes["chat"].primary[0])
    assert (health.observations, health.latency, health.success) == (SLOW_STREAMS, None, 1.0)
    breaker = _breaker(kit, server, "chat")
    assert breaker["state"] == "closed" and breaker["failures"] == 0, breaker
    assert _b_succeeds(server, "chat", 10) == 10
    assert _breaker(kit, server, "chat")["state"] == "closed"


def test_embeddings_on_a_chat_route_are_refused_before_any_call(served: tuple[TwoTenants, ServerThread]) -> None:
    kit, server = served
    with _client(server, KEY_A) as c:
        for _ in range(EMBED_VOLUME):
            r = c.post("/v1/embeddings", json={"model": "chat", "input": ["a text"]})
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["code"] == "embeddings_unsupported" and err["param"] == "model"
            assert "'chat'" in err["message"] and "Fix:" in err["message"]
    assert kit.chat.calls == []
    assert _breaker(kit, server, "chat")["calls"] == 0


def test_a_model_that_answers_embeddings_with_404_opens_no_breaker(served: tuple[TwoTenants, ServerThread]) -> None:
    kit, server = served
    with _client(server, KEY_A) as c:
        for _ in range(EMBED_VOLUME):
            r = c.post("/v1/embeddings", json={"model": "house", "input": ["a text"]})
            assert 400 <= r.status_code < 600 and r.status_code != 503, r.text
    assert len(kit.house.calls) == EMBED_VOLUME  # each reached the provider, which refused it
    breaker = _breaker(kit, server, "house")
    assert breaker["state"] == "closed" and breaker["failures"] == 0, breaker
    assert _b_succeeds(server, "house", 5) == 5


def test_malformed_requests_at_volume_open_no_breaker(served: tuple[TwoTenants, ServerThread]) -> None:
    kit, server = served
    bodies: list[Any] = [
        b"{not json",
        {"model": "strict"},
        {"model": "strict", "messages": "hello"},
        {"model": "strict", "messages": [{"role": "wizard", "content": "x"}]},
        {"model": "strict", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1},
    ]
    with _client(server, KEY_A) as c:
        for i in range(MALFORMED):
            raw = bodies[i % len(bodies)]
            data = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
            r = c.post("/v1/chat/completions", content=data, headers={"content-type": "application/json"})
            assert 400 <= r.status_code < 500, r.text
        # well-formed for the gateway, refused by the provider as malformed (400 invalid_request)
        for _ in range(MALFORMED):
            r = c.post("/v1/chat/completions", json=chat_body("strict", max_tokens=16))
            assert 400 <= r.status_code < 500, r.text
    assert len(kit.strict.calls) == MALFORMED
    breaker = _breaker(kit, server, "strict")
    assert breaker["state"] == "closed" and breaker["failures"] == 0, breaker
    assert _b_succeeds(server, "strict", 5) == 5
