"""Tenants, keys, admin endpoints, models list, CORS, and the open (loopback-only) mode."""

from __future__ import annotations

import httpx

from failover.gateway import GatewaySettings, create_app, hash_key
from failover.gateway._settings import Tenant

from ._kit import ACME_KEY, ADMIN_KEY, OTHER_KEY, Kit, chat_body


async def test_missing_and_wrong_keys_are_401() -> None:
    kit = Kit()
    async with kit.client(key=None) as c:
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"authorization": "Basic abc"})
        assert r.status_code == 401
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"authorization": "Bearer nope-nope"})
        assert r.status_code == 401
        assert "nope-nope" not in r.text  # the key is never echoed
        r = await c.get("/v1/models")
        assert r.status_code == 401
    assert kit.net.calls == []


async def test_another_tenants_route_is_403() -> None:
    kit = Kit()
    async with kit.client(ACME_KEY) as c:
        r = await c.post("/v1/chat/completions", json=chat_body("secret"))
        assert r.status_code == 403
        err = r.json()["error"]
        assert err["code"] == "route_not_allowed" and err["type"] == "permission_error"
    async with kit.client(OTHER_KEY) as c:
        r = await c.post("/v1/chat/completions", json=chat_body("secret"))
        assert r.status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body("chat"))
        assert r.status_code == 403


async def test_models_lists_the_tenants_routes() -> None:
    kit = Kit()
    async with kit.client(ACME_KEY) as c:
        r = await c.get("/v1/models")
        assert r.status_code == 200
        body = r.json()
        assert body["object"] == "list"
        ids = {m["id"] for m in body["data"]}
        assert "chat" in ids and "secret" not in ids
        assert all(m["object"] == "model" and m["owned_by"] == "failover" for m in body["data"])
        r = await c.get("/v1/models/chat")
        assert r.status_code == 200 and r.json()["id"] == "chat"
        r = await c.get("/v1/models/secret")
        assert r.status_code == 404
    async with kit.client(OTHER_KEY) as c:
        r = await c.get("/v1/models")
        assert [m["id"] for m in r.json()["data"]] == ["secret"]


async def test_admin_health_needs_the_admin_key() -> None:
    kit = Kit()
    async with kit.client(key=None) as c:
        assert (await c.get("/admin/health")).status_code == 401
        r = await c.get("/admin/health", headers={"authorization": "Bearer wrong"})
        assert r.status_code == 401
        r = await c.get("/admin/health", headers={"authorization": f"Bearer {ACME_KEY}"})
        assert r.status_code == 403
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"authorization": f"Bearer {ACME_KEY}"})
        assert r.status_code == 200
        r = await c.get("/admin/health", headers={"authorization": f"Bearer {ADMIN_KEY}"})
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "ok"
        assert "chat" in body["routes"]
        assert isinstance(body["breakers"], list) and isinstance(body["limiters"], dict)
        # the admin key is not a tenant key
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"authorization": f"Bearer {ADMIN_KEY}"})
        assert r.status_code == 401


async def test_admin_health_shows_breakers_and_limiters() -> None:
    from dataclasses import replace

    from failover import Limits, Route, Router
    from failover.testing import FakeNetwork, FakeProvider

    p = FakeProvider("a", "openai")
    target = p.target(limits=Limits(rpm=600), tokenizer="estimate")
    router = Router([Route(name="chat", primary=(replace(target),))], transport=FakeNetwork(p))
    settings = GatewaySettings(
        tenants=(Tenant(name="t", key_hashes=(hash_key("k"),)),), admin_key_hashes=(hash_key("adm"),)
    )
    app = create_app(router, settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"authorization": "Bearer k"})
        assert r.status_code == 200
        r = await c.get("/admin/health", headers={"authorization": "Bearer adm"})
    body = r.json()
    assert body["breakers"][0]["state"] == "closed"
    assert body["breakers"][0]["calls"] == 1
    assert body["limiters"]["a"]["granted"] == 1


async def test_health_and_unknown_paths() -> None:
    kit = Kit()
    async with kit.client(key=None) as c:
        r = await c.get("/healthz")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        r = await c.get("/v2/whatever")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        r = await c.get("/v1/chat/completions")
        assert r.status_code == 405 and "error" in r.json()


async def test_cors_is_off_unless_configured() -> None:
    preflight = {
        "origin": "https://app.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
    }
    kit = Kit()
    async with kit.client() as c:
        r = await c.options("/v1/chat/completions", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = await c.post("/v1/chat/completions", json=chat_body(), headers={"origin": "https://app.example.com"})
        assert "access-control-allow-origin" not in r.headers
    from dataclasses import replace

    app = create_app(kit.router, replace(kit.settings, cors_origins=("https://app.example.com",)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        r = await c.options("/v1/chat/completions", headers=preflight)
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://app.example.com"
        r = await c.options("/v1/chat/completions", headers={**preflight, "origin": "https://evil.example"})
        assert r.headers.get("access-control-allow-origin") != "https://evil.example"


async def test_open_gateway_serves_loopback_only() -> None:
    kit = Kit(open=True)
    async with kit.client(key=None) as c:
        r = await c.post("/v1/chat/completions", json=chat_body("secret"))
        assert r.status_code == 200
    remote = httpx.ASGITransport(app=kit.app, client=("203.0.113.9", 40000))
    async with httpx.AsyncClient(transport=remote, base_url="http://gw") as c:
        r = await c.post("/v1/chat/completions", json=chat_body())
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "loopback_only"


def test_key_hashes_are_compared_not_keys() -> None:
    s = GatewaySettings(tenants=(Tenant(name="t", key_hashes=(hash_key("k1"), hash_key("k2"))),))
    assert s.tenant_for("k2") is not None
    assert s.tenant_for("k3") is None
    assert "k1" not in repr(s)
    assert not s.open
    assert GatewaySettings().open
