"""The metrics registry belongs to the Gateway, not to a router: a reload (and a reload back to
an earlier router) keeps counting on it, plain and streamed, with nothing registered twice."""

from __future__ import annotations

import httpx

from failover.gateway import create_app

from ._kit import ACME_KEY, ADMIN_KEY, Kit, chat_body


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def _metrics(app: object) -> str:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway", headers=headers) as c:
        r = await c.get("/metrics")
    assert r.status_code == 200
    return r.text


async def _chat(app: object, **body: object) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    headers = {"authorization": f"Bearer {ACME_KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway", headers=headers) as c:
        return await c.post("/v1/chat/completions", json={**chat_body(), **body})


async def test_metrics_follow_a_reload_without_double_registration() -> None:
    old, new = Kit(), Kit()
    app = create_app(old.router, old.settings)
    gw = app.state.gateway
    assert (await _chat(app)).status_code == 200
    gw.swap(new.router, new.settings)
    assert (await _chat(app)).status_code == 200
    assert (await _chat(app, stream=True)).status_code == 200  # streams count through the same hook
    gw.swap(old.router, old.settings)  # back to a router that already has the hook
    assert (await _chat(app)).status_code == 200
    assert not old.router.hooks and not new.router.hooks  # counted from the record: no events built
    m = await _metrics(app)
    assert _sample(m, "failover_attempts_total", target="a", outcome="ok") == 4
    assert _sample(m, "failover_gateway_requests_total", route="chat", status="200") == 4
    assert _sample(m, "failover_cost_usd_total", route="chat", tenant="acme") > 0
