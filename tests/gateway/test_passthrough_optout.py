"""A target that declares ``passthrough: false`` takes none of a client's pass-through fields.

A strict OpenAI-compatible server refuses a field it does not know with a 400; such a target,
though of the client's own dialect, is treated as a target of another dialect for what failover
passes through: the hints are dropped (the attempt records it), any other field leaves it out
(the reason says the target takes none), and a route with no target that takes the field
answers 400 naming it. Block-level markers (``cache_control`` on blocks) are the dialect's
own and stay. The in-process gateway, with fake upstreams that record what they receive.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from failover import Route
from failover.gateway import GatewaySettings, create_app
from failover.model import Phase, Response, RouteRecord
from failover.testing import FakeNetwork, FakeProvider
from tests._sdk import fake_target, quiet_router

from ._kit import PROVIDER_KEY

ENDPOINTS = {"responses": "/v1/responses", "chat": "/v1/chat/completions", "messages": "/v1/messages"}
DIALECTS = {"responses": "openai-responses", "chat": "openai", "messages": "anthropic"}
BETA = "context-management-2025-06-27"
EPHEMERAL = {"type": "ephemeral"}


class Served:
    """Per endpoint, two upstreams of its dialect: ``strict`` (``passthrough: false``) and
    ``open``. Routes: ``<endpoint>-strict`` (the strict one alone) and ``<endpoint>-both`` (the
    strict one first, the open one as its fallback)."""

    def __init__(self) -> None:
        self.providers: dict[str, FakeProvider] = {}
        routes: list[Route] = []
        for endpoint, dialect in DIALECTS.items():
            strict = FakeProvider(f"{endpoint}-s", dialect, api_key=PROVIDER_KEY)
            open_ = FakeProvider(f"{endpoint}-o", dialect, api_key=PROVIDER_KEY)
            self.providers |= {strict.name: strict, open_.name: open_}
            s = replace(fake_target(strict, PROVIDER_KEY), passthrough=False)
            o = fake_target(open_, PROVIDER_KEY)
            routes += [
                Route(name=f"{endpoint}-strict", primary=(s,)),
                Route(name=f"{endpoint}-both", primary=(s,), fallbacks=(o,)),
            ]
        self.router = quiet_router(routes, FakeNetwork(*self.providers.values()))
        self.records: list[RouteRecord | None] = []
        complete = self.router.complete

        async def recorded(*args: Any, **kwargs: Any) -> Response:
            resp = await complete(*args, **kwargs)
            self.records.append(resp.record)
            return resp

        self.router.complete = recorded  # type: ignore[method-assign]
        self.app = create_app(self.router, GatewaySettings())

    def sent(self, name: str) -> list[dict[str, Any]]:
        return [dict(c.json or {}) for c in self.providers[name].calls if c.json is not None]


@pytest.fixture
def served() -> Served:
    return Served()


@pytest.fixture
async def client(served: Served) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=served.app), base_url="http://gateway") as c:
        yield c


def body(endpoint: str, route: str, **extra: Any) -> dict[str, Any]:
    if endpoint == "responses":
        return {"model": route, "input": "Hi", **extra}
    if endpoint == "messages":
        content = [{"type": "text", "text": "Hi", "cache_control": EPHEMERAL}]
        return {"model": route, "max_tokens": 64, "messages": [{"role": "user", "content": content}], **extra}
    return {"model": route, "messages": [{"role": "user", "content": "Hi"}], **extra}


async def post(client: httpx.AsyncClient, endpoint: str, data: dict[str, Any]) -> httpx.Response:
    headers = {"anthropic-beta": BETA} if endpoint == "messages" else {}
    return await client.post(ENDPOINTS[endpoint], content=json.dumps(data).encode(), headers=headers)


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
async def test_an_unknown_field_skips_the_strict_target_for_one_that_takes_it(
    served: Served, client: httpx.AsyncClient, endpoint: str
) -> None:
    future = {"deep": [1, {"x": None}]}
    resp = await post(client, endpoint, body(endpoint, f"{endpoint}-both", a_future_field=future, metadata={"k": "v"}))
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-failover-target"] == f"{endpoint}-o"
    assert served.providers[f"{endpoint}-s"].calls == []  # never sent the field it would refuse
    (sent,) = served.sent(f"{endpoint}-o")
    assert sent["a_future_field"] == future and sent["metadata"] == {"k": "v"}
    (record,) = served.records
    assert record is not None and record.target_used == f"{endpoint}-o"
    assert record.attempts[-1].phase is Phase.FALLBACK and record.attempts[-1].passthrough_dropped == ()
    (gone,) = record.excluded
    assert gone.target == f"{endpoint}-s" and not gone.temporary
    assert "a_future_field" in gone.reason and "metadata" not in gone.reason  # a hint excludes nothing
    assert "takes none (passthrough: false)" in gone.reason


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
async def test_hints_are_dropped_for_the_strict_target_and_recorded(
    served: Served, client: httpx.AsyncClient, endpoint: str
) -> None:
    hints = {"metadata": {"user_id": "u-1"}} if endpoint == "messages" else {"prompt_cache_key": "k", "metadata": {}}
    resp = await post(client, endpoint, body(endpoint, f"{endpoint}-both", **hints))
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-failover-target"] == f"{endpoint}-s"
    (call,) = served.providers[f"{endpoint}-s"].calls
    sent = dict(call.json or {})
    assert not set(hints) & set(sent)
    (record,) = served.records
    assert record is not None and not record.excluded
    (attempt,) = record.attempts
    dropped = sorted(hints) if endpoint != "messages" else ["anthropic-beta", "metadata"]
    assert attempt.passthrough_dropped == tuple(dropped)
    assert record.to_dict()["attempts"][0]["passthrough_dropped"] == dropped
    if endpoint == "messages":  # the client's header is not sent; its blocks keep their markers
        assert BETA not in call.headers.get("anthropic-beta", "")
        assert sent["messages"][0]["content"][0]["cache_control"] == EPHEMERAL


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
async def test_a_route_whose_only_target_of_the_dialect_takes_no_fields_is_a_400(
    served: Served, client: httpx.AsyncClient, endpoint: str
) -> None:
    resp = await post(client, endpoint, body(endpoint, f"{endpoint}-strict", a_future_field=1, metadata={}))
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    if endpoint != "messages":  # the Anthropic error envelope has a type and a message only
        assert error["param"] == "a_future_field" and error["code"] == "unsupported_parameter"
    assert error["type"] == "invalid_request_error"
    assert "a_future_field" in error["message"] and "metadata" not in error["message"]
    assert "none that takes pass-through fields" in error["message"]
    assert all(p.calls == [] for p in served.providers.values())
