"""The seed case end to end: an agent loop over the router and the fault kit.

The model asks for ``create_order``; the app runs it; the request that carries the result
times out; the app replays the turn and the model asks for ``create_order`` again, under a
new tool_call_id. Through the ledger the order is created once and the model gets the first
order's result.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from failover import (
    Capability,
    Envelope,
    Message,
    Request,
    Route,
    Router,
    SideEffectMode,
    Timeouts,
    Tool,
    Unavailable,
)
from failover.ledger import Ledger, LedgerStore, Run, State, Verdict, side_effect_decision
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply

from ._kit import Shop

CREATE_ORDER = Tool(
    name="create_order",
    description="Place an order",
    parameters={
        "type": "object",
        "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
        "required": ["sku", "qty"],
    },
)
ORDER = ("create_order", {"sku": "A-1", "qty": 2})


def make_router(provider: FakeProvider, attempts: int) -> Router:
    target = provider.target(
        capabilities=frozenset({Capability.CHAT, Capability.TOOLS}),
        timeouts=Timeouts(connect=0.1, total=0.1, min_useful=0.01),
        max_attempts=attempts,
        tokenizer="estimate",
    )
    return Router(
        [Route(name="shop", primary=(target,))],
        transport=FakeNetwork(provider),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.01, cap=0.02),
        rng=random.Random(1),
        breakers=NoBreakers(),
    )


async def agent_turn(router: Router, ledger: Ledger, task_id: str, text: str, shop: Shop) -> str:
    """A minimal agent loop: every tool call goes through the ledger under the task's id."""
    messages = [Message.system("You are a shop assistant."), Message.user(text)]
    env = Envelope(budget=5.0, side_effects=SideEffectMode.WRITE_POSSIBLE)
    for _ in range(5):
        resp = await router.complete("shop", Request(messages=tuple(messages), tools=(CREATE_ORDER,)), env)
        if not resp.tool_calls:
            return resp.text
        messages.append(Message.assistant(resp.text, tool_calls=resp.tool_calls))
        for call in resp.tool_calls:
            result = await ledger.run(task_id, call.name, call.arguments, shop.create_order)
            messages.append(Message.tool(call.id, json.dumps(result)))
    raise AssertionError("the loop did not end")


def tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


def tool_call_ids(body: dict[str, Any]) -> list[str]:
    return [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]


async def test_the_order_is_created_once_when_the_app_replays_the_turn(store: LedgerStore) -> None:
    model = FakeProvider(
        "model",
        "openai",
        [
            Reply.ok(tool_calls=[ORDER]),  # 1: the model asks for create_order (call id A)
            Reply.hang(),  # 2: the request carrying the order's result times out
            Reply.ok(tool_calls=[ORDER]),  # 3: the turn, replayed from scratch: asked again (call id B)
            Reply.ok("Your order ord_1 is placed."),  # 4: the model sees the first order's result
        ],
    )
    shop, ledger = Shop(), Ledger(store)
    ledger.tool("create_order", reconcile=shop.find_order)
    async with make_router(model, attempts=1) as router:
        with pytest.raises(Unavailable) as info:
            await agent_turn(router, ledger, "task-7", "Buy two A-1", shop)
        assert info.value.reason == "timeout"
        answer = await agent_turn(router, ledger, "task-7", "Buy two A-1", shop)  # the app's retry

    assert answer == "Your order ord_1 is placed."
    assert shop.calls == 1 and shop.orders == {f"task-7/{(await ledger.records('task-7'))[0].key}": "ord_1"}
    assert model.kinds == ["ok", "hang", "ok", "ok"]
    second, fourth = model.calls[1].json, model.calls[3].json
    first_id, replay_id = tool_call_ids(second)[0], tool_call_ids(fourth)[0]
    assert first_id != replay_id  # the model's second request for the order had a new id
    (result_1,) = tool_results(second)
    (result_2,) = tool_results(fourth)
    assert result_1[1] == result_2[1] == json.dumps({"order_id": "ord_1", "sku": "A-1"})
    (rec,) = await ledger.records("task-7")
    assert rec.state is State.SUCCEEDED and rec.attempts == 1 and rec.external_ref == "ord_1"


async def test_the_order_is_created_once_when_the_router_replays_the_request(store: LedgerStore) -> None:
    # workflow 1 inside one complete(): the hang is replayed on the same target, whose
    # answer asks for the order again; the ledger answers it from the first execution
    model = FakeProvider(
        "model",
        "openai",
        [Reply.ok(tool_calls=[ORDER]), Reply.hang(), Reply.ok(tool_calls=[ORDER]), Reply.ok("Done: ord_1.")],
    )
    shop, ledger = Shop(), Ledger(store)
    async with make_router(model, attempts=2) as router:
        answer = await agent_turn(router, ledger, "task-8", "Buy two A-1", shop)
    assert answer == "Done: ord_1." and shop.calls == 1
    assert model.kinds == ["ok", "hang", "ok", "ok"]
    results = {content for _, content in tool_results(model.calls[3].json)}
    assert results == {json.dumps({"order_id": "ord_1", "sku": "A-1"})}


async def test_a_task_with_an_uncertain_order_is_refused_until_it_resumes(store: LedgerStore) -> None:
    shop, ledger = Shop(), Ledger(store)
    await ledger.checkpoint("task-9", {"messages": ["Buy two A-1"], "step": 0})

    async def cut_off(run: Run) -> Any:
        await shop.place(run)
        raise TimeoutError("the shop did not answer in time")

    with pytest.raises(TimeoutError):
        await ledger.run("task-9", "create_order", ORDER[1], cut_off)

    decision = side_effect_decision(SideEffectMode.WRITE_POSSIBLE, await ledger.task_state("task-9"))
    assert decision.refused and decision.kind == "side_effect_uncertain"
    assert decision.operation is not None and decision.operation.tool == "create_order"
    assert decision.operation_name is not None and "create_order (operation task-9" in decision.reason

    via_ledger = await ledger.side_effects("task-9", "write_possible")  # what the router would call
    assert via_ledger.refused and via_ledger.operation == decision.operation
    assert not (await ledger.side_effects("task-9", "write_possible", resumed_from=1)).refused
    assert not (await ledger.side_effects("task-9", "none")).refused

    resumed = await ledger.resume("task-9")  # a fallback continues from the saved state...
    assert side_effect_decision(SideEffectMode.WRITE_POSSIBLE, resumed).verdict == "proceed"
    assert resumed.state == {"messages": ["Buy two A-1"], "step": 0}

    async def find(rec: Any) -> Verdict:  # ...and asking for the order again reconciles it
        return await shop.find_order(rec)

    result = await ledger.run("task-9", "create_order", ORDER[1], shop.create_order, reconcile=find)
    assert result == {"order_id": "ord_1"} and shop.calls == 1
    after = await ledger.task_state("task-9")
    assert side_effect_decision(SideEffectMode.WRITE_POSSIBLE, after).verdict == "proceed"
    assert after.results == {after.records[0].key: {"order_id": "ord_1"}}
