from __future__ import annotations

import asyncio

import pytest

import failover
from failover import Envelope, Request, Route, Router, SyncRouter, Unavailable
from failover.testing import FakeNetwork, FakeProvider, Reply, Script


def test_public_api_is_exactly_the_curated_names() -> None:
    assert sorted(failover.__all__) == failover.__all__
    for name in failover.__all__:
        assert getattr(failover, name) is not None
    public = {n for n in dir(failover) if not n.startswith("_")}
    subpackages = {
        "auth",
        "config",
        "gateway",
        "inbound",
        "integrations",
        "ledger",
        "model",
        "policy",
        "providers",
        "router",
        "state",
        "telemetry",
        "testing",
        "tokens",
        "transport",
        "validation",
    }
    assert public - subpackages - {"lab", "cli"} == set(failover.__all__)


def test_sync_facade_runs_the_router_on_its_own_loop() -> None:
    a = FakeProvider("a", "openai", Script.of(Reply.server_error(), default=Reply.ok("hello")))
    route = Route(name="r", primary=(a.target(tokenizer="estimate", max_attempts=2),))

    with SyncRouter(lambda: Router([route], transport=FakeNetwork(a))) as router:
        resp = router.complete("r", Request.simple("hi"), Envelope(budget=30.0))
        assert resp.text == "hello"
        assert resp.record is not None and resp.record.recovered
        b = FakeProvider("b", "openai", Script.always(Reply.invalid()))
        bad = Route(name="bad", primary=(b.target(tokenizer="estimate"),))
        router.router.routes["bad"] = bad
        router.router.transport.add(b)  # type: ignore[attr-defined]
        with pytest.raises(Unavailable) as ei:
            router.complete("bad", Request.simple("hi"))
        assert ei.value.reason.value == "invalid_request"


def test_unknown_route_names_the_known_ones() -> None:
    router = Router([Route(name="triage")], transport=FakeNetwork())
    with pytest.raises(failover.UnknownRoute, match="configured routes: triage"):
        asyncio.run(router.complete("nope", Request.simple("x")))
