"""Hostile input and tenants: what a client sends never turns into a 500, one tenant never
reaches another's ledger task, and a fleet sharing a retry budget never overspends it.

Each test here reproduces a measured failure of an earlier version:

* a lone surrogate (``"\\ud800"`` in the JSON) in a message was a 500 (UnicodeEncodeError in
  the token counter) on both endpoints, and a UnicodeEncodeError from ``Router.complete``;
* tenant beta sending alpha's ``x-failover-task-id`` got a 409 naming alpha's tool and
  business key, and colliding task ids blocked each other;
* with ``state: redis`` the shared retry budget let a fleet make about 2.3x the extra attempts
  it allows (withdrawals made before the store's first answer, and withdrawals the store
  refused after the process had made them, were never counted fleet-wide).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover import Envelope, InvalidRequest, Message, Request, Route, Router, Tool, ToolCall
from failover.gateway import EnvelopeDefaults, GatewaySettings, Tenant, create_app, hash_key
from failover.ledger import Ledger, MaybeExecuted, MemoryStore, tenant_task_id
from failover.model._text import lone_surrogate, request_surrogate
from failover.policy import Backoff, NoBreakers, RetryBudget
from failover.router._router import check_text
from failover.state import GuardedStore, RedisStore
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from tests._services import RedisServer
from tests.gateway._kit import Kit, chat_body
from tests.router._kit import target

LONE = "caf\ud800e"  # a high surrogate with no low one after it


# -- lone surrogates ------------------------------------------------------------------------------


def _messages_body(text: str) -> dict[str, Any]:
    return {"model": "chat", "max_tokens": 16, "messages": [{"role": "user", "content": text}]}


_LONE_BODIES = {
    "/v1/chat/completions": (lambda: chat_body(text=LONE), "messages[0].content"),
    "/v1/messages": (lambda: _messages_body(LONE), "messages[0].content"),
    "/v1/responses": (lambda: {"model": "chat", "input": [{"role": "user", "content": LONE}]}, "input[0].content"),
}


@pytest.mark.parametrize("raw", [False, True], ids=["escaped", "utf8-bytes"])
@pytest.mark.parametrize("path", list(_LONE_BODIES))
async def test_a_lone_surrogate_is_a_400_naming_the_field_and_nothing_goes_upstream(path: str, raw: bool) -> None:
    kit = Kit()
    make, field = _LONE_BODIES[path]
    # json.dumps escapes it as \ud800; the other form is the (invalid) UTF-8 bytes of one,
    # which Python's JSON decoder accepts as well
    data = httpx_json(make(), raw=raw)
    async with kit.client() as c:
        r = await c.post(path, content=data, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    text = r.text
    assert field in text and "surrogate" in text and "Fix:" in text
    if path != "/v1/messages":  # OpenAI's error body names the field and the code
        err = r.json()["error"]
        assert err["param"] == field and err["code"] == "invalid_unicode"
    assert kit.net.calls == []


async def test_a_lone_surrogate_deep_in_a_tool_schema_or_a_key_is_named_too() -> None:
    kit = Kit()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "description": LONE}}}]
    async with kit.client() as c:
        r = await _post(c, chat_body(tools=tools))
        assert r.status_code == 400 and r.json()["error"]["param"] == "tools[0].function.parameters.description"
        r = await _post(c, {**chat_body(), "metadata": {LONE: "x"}})
        assert r.status_code == 400 and "metadata." in r.json()["error"]["param"]
        # a well-formed pair is an ordinary character
        r = await c.post("/v1/chat/completions", json=chat_body(text="\U0001f600 ok"))
        assert r.status_code == 200
    assert len(kit.net.calls) == 1


async def test_the_router_refuses_a_lone_surrogate_with_a_typed_error_before_any_attempt() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("a")))
    router = Router([Route(name="r", primary=(target(a),))], transport=FakeNetwork(a))
    with pytest.raises(InvalidRequest) as ei:
        await router.complete("r", Request.simple(LONE), Envelope(budget=5))
    assert ei.value.field == "messages[0].content[0].text" and "surrogate pair" in ei.value.fix
    with pytest.raises(InvalidRequest):
        router.stream("r", Request.simple("ok", system=LONE), Envelope(budget=5))
    assert a.calls == []


def httpx_json(body: dict[str, Any], *, raw: bool = False) -> bytes:
    """The body as JSON bytes: the surrogate escaped (``\\ud800``), or as its UTF-8 bytes."""
    if not raw:
        return json.dumps(body).encode()
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


async def _post(c: httpx.AsyncClient, body: dict[str, Any], path: str = "/v1/chat/completions") -> httpx.Response:
    return await c.post(path, content=httpx_json(body), headers={"content-type": "application/json"})


# -- tenants and ledger task ids ------------------------------------------------------------------

ALPHA_KEY, BETA_KEY = "gw-alpha-key-0001", "gw-beta-key-0002"


def _tenant_kit(ledger: Ledger) -> Kit:
    kit = Kit()
    kit.router.ledger = ledger
    tenants = (
        Tenant(name="alpha", key_hashes=(hash_key(ALPHA_KEY),)),
        Tenant(name="beta", key_hashes=(hash_key(BETA_KEY),)),
    )
    kit.app = create_app(kit.router, GatewaySettings(tenants=tenants, envelope=EnvelopeDefaults(deadline_ms=5_000)))
    return kit


async def _leave_uncertain(ledger: Ledger, operation: str, tool: str, key: str) -> None:
    async def call(run: object) -> None:
        raise MaybeExecuted("the API timed out after the request was sent")

    with pytest.raises(MaybeExecuted):
        await ledger.run(operation, tool, {"sku": "A-1"}, call, key=key)


TASK = {"x-failover-task-id": "task-9", "x-failover-side-effects": "write_possible"}


async def test_another_tenant_with_the_same_task_id_neither_sees_nor_is_blocked_by_it() -> None:
    ledger = Ledger(MemoryStore())
    # alpha's agent left its order uncertain; so did an agent of the open (tenant-less) namespace
    await _leave_uncertain(ledger, tenant_task_id("alpha", "task-9"), "create_order", "order-alpha-77")
    await _leave_uncertain(ledger, "task-9", "wire_money", "payout-anon-5")
    kit = _tenant_kit(ledger)
    async with kit.client(BETA_KEY) as beta:
        r = await beta.post("/v1/chat/completions", json=chat_body(), headers=TASK)
    assert r.status_code == 200, r.text
    for secret in ("create_order", "order-alpha-77", "alpha", "wire_money", "payout-anon-5"):
        assert secret not in r.text and secret not in str(r.headers)
    async with kit.client(ALPHA_KEY) as alpha:
        r = await alpha.post("/v1/chat/completions", json=chat_body(), headers=TASK)
    assert r.status_code == 409  # alpha's own task is still protected
    assert "create_order" in r.text and "wire_money" not in r.text and "beta" not in r.text
    assert len(kit.net.calls) == 1  # beta's request; alpha's was refused before any attempt


async def test_each_tenants_task_proceeds_independently() -> None:
    ledger = Ledger(MemoryStore())
    kit = _tenant_kit(ledger)
    await _leave_uncertain(ledger, tenant_task_id("beta", "task-9"), "send_invoice", "invoice-beta-3")
    async with kit.client(ALPHA_KEY) as alpha, kit.client(BETA_KEY) as beta:
        r = await beta.post("/v1/chat/completions", json=chat_body(), headers=TASK)
        assert r.status_code == 409 and "send_invoice" in r.text
        r = await alpha.post("/v1/chat/completions", json=chat_body(), headers=TASK)
        assert r.status_code == 200 and "send_invoice" not in r.text and "invoice-beta-3" not in r.text

        # alpha completes its own task-9 in its namespace; beta's stays exactly as it was
        async def ok(run: object) -> dict[str, str]:
            return {"order": "1"}

        await ledger.run(tenant_task_id("alpha", "task-9"), "create_order", {"sku": "B"}, ok, key="o-1")
        r = await alpha.post("/v1/chat/completions", json=chat_body(), headers=TASK)
        assert r.status_code == 200
        r = await beta.post("/v1/chat/completions", json=chat_body(), headers=TASK)
        assert r.status_code == 409 and "create_order" not in r.text
    beta_records = await ledger.records(tenant_task_id("beta", "task-9"))
    assert [(x.tool, x.key) for x in beta_records] == [("send_invoice", "invoice-beta-3")]


def test_a_task_id_cannot_name_another_tenants_namespace() -> None:
    assert tenant_task_id("alpha", "task-9") == "alpha/task-9"
    assert tenant_task_id(None, "task-9") == "task-9"  # an open gateway: the bare id, as before
    with pytest.raises(ValueError):
        tenant_task_id("alpha", "")


async def test_a_task_id_with_a_slash_is_refused_at_the_header() -> None:
    kit = _tenant_kit(Ledger(MemoryStore()))
    async with kit.client(BETA_KEY) as beta:
        r = await beta.post(
            "/v1/chat/completions", json=chat_body(), headers={**TASK, "x-failover-task-id": "alpha/task-9"}
        )
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-failover-task-id"


# -- the shared retry budget ----------------------------------------------------------------------

# FAILOVER_BUDGET_REQUESTS=4000 repeats the measured load (concurrency 100); the suite runs 2,000.
REQUESTS = int(os.environ.get("FAILOVER_BUDGET_REQUESTS", "2000"))
CONCURRENCY = 100
RATIO, FLOOR = 0.1, 10
# The documented bound's allowance for a shared store: the extra attempts the other processes
# make within one round trip (their answers are not in this process's view yet). Measured here:
# at most 9 over in 10 runs; the earlier version was 77 to 136 over at this load.
STALE = CONCURRENCY // 4


def _alternating(n: int) -> Script:
    """The primary fails every second call (a 503, retryable: the router wants to replay it)."""
    return Script.of(
        *(Reply.server_error(latency=0.005) if i % 2 == 0 else Reply.ok("a", latency=0.005) for i in range(n))
    )


async def _load(budgets: list[RetryBudget]) -> tuple[int, int]:
    """REQUESTS requests over len(budgets) Routers; (attempts on the primary, fallback answers)."""
    a = FakeProvider("a", "openai", _alternating(4 * REQUESTS))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("b", latency=0.005)))
    fleet = [
        Router(
            [Route(name="r", primary=(target(a, attempts=3, cap=60.0),), fallbacks=(target(b, cap=60.0),))],
            transport=FakeNetwork(a, b),
            retry_budget=budget,
            backoff=Backoff(base=0.0, cap=0.0),
            breakers=NoBreakers(),  # the budget alone decides the replays
            rng=random.Random(7),
        )
        for budget in budgets
    ]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with gate:
            resp = await fleet[i % len(fleet)].complete("r", Request.simple(f"q{i}"), Envelope(budget=120))
            assert resp.text in ("a", "b")

    await asyncio.gather(*(one(i) for i in range(REQUESTS)))
    for budget in budgets:
        await budget.drain()
    return len(a.calls), len(b.calls)


def _assert_within_bound(primary_attempts: int, stale: int = 0) -> None:
    """The documented bound: extra attempts on the pool <= floor + ratio x its first attempts,
    plus, on a shared store, what the other processes spent within one round trip."""
    extra = primary_attempts - REQUESTS  # every request's first attempt is on the primary
    allowed = FLOOR + int(RATIO * REQUESTS)
    print(f"{primary_attempts / REQUESTS:.4f} attempts per request: {extra} extra, {allowed} allowed (+{stale})")
    assert extra <= allowed + stale, f"{extra} extra attempts, the budget allows {allowed} (+{stale})"
    assert extra >= 0.85 * allowed, f"only {extra} of {allowed} allowed extra attempts were made"


async def test_the_retry_budget_is_exact_in_memory() -> None:
    primary, _ = await _load([RetryBudget(ratio=RATIO, floor=FLOOR)])
    _assert_within_bound(primary)


async def test_two_routers_sharing_one_redis_stay_within_the_budget(redis_server: RedisServer) -> None:
    prefix = f"h{uuid.uuid4().hex[:8]}:"
    stores = [GuardedStore(RedisStore(redis_server.url, prefix=prefix, timeout=10.0), timeout=10.0) for _ in range(2)]
    try:
        primary, _ = await _load([RetryBudget(ratio=RATIO, floor=FLOOR, store=s) for s in stores])
    finally:
        for s in stores:
            await s.aclose()
    assert all(s.up for s in stores)  # the fleet's count decided, not the local fallback
    _assert_within_bound(primary, STALE)


_TEXTS = st.lists(st.sampled_from(["a", "é", "\U0001f600", "\ud800", "\udfff", " "]), max_size=4).map("".join)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(user=_TEXTS, system=_TEXTS, tool_desc=_TEXTS, schema_text=_TEXTS, args=_TEXTS, stop=_TEXTS, call_name=_TEXTS)
def test_the_routers_fast_check_agrees_with_the_full_walk(
    user: str, system: str, tool_desc: str, schema_text: str, args: str, stop: str, call_name: str
) -> None:
    """The Router's per-request check (a few encodes, no walk) finds exactly what the full
    walk finds, in every text field of a Request."""
    request = Request(
        messages=(
            Message.system(system or "s"),
            Message.user(user),
            Message(role="assistant", tool_calls=(ToolCall(id="c1", name=call_name or "f", arguments=args),)),
        ),
        tools=(Tool(name="f", description=tool_desc, parameters={"type": "object", "description": schema_text}),),
        stop=(stop,) if stop else (),
    )
    fast, full = request_surrogate(request), lone_surrogate(request)
    assert fast == full
    if full is not None:
        with pytest.raises(InvalidRequest) as ei:
            check_text(request)
        assert ei.value.field == full


async def test_the_drop_in_client_answers_a_lone_surrogate_with_a_400_too() -> None:
    import failover

    a = FakeProvider("a", "openai", Script.always(Reply.ok("a")))
    router = Router([Route(name="r", primary=(target(a),))], transport=FakeNetwork(a))
    async with failover.httpx_client(router, route="r") as http:
        r = await http.post(
            "https://api.openai.com/v1/chat/completions",
            content=httpx_json({"model": "r", "messages": [{"role": "user", "content": LONE}]}),
            headers={"content-type": "application/json"},
        )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "messages[0].content[0].text" and "surrogate" in r.text
    assert a.calls == []
