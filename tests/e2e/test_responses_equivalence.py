"""One model behind two OpenAI APIs: Chat Completions and Responses targets as equivalents.

A route's primary is the model on one API and its equivalent the same model on the other
(one ``equivalence_key``); the fault kit serves both over real HTTP on loopback. When one API
is overloaded the request fails over to the other, plain and streamed, in both directions,
and the RouteRecord names both targets. A tool loop that moves between the two keeps what each
can read: the Responses reasoning (its encrypted content) goes back to a Responses target and
never into a Chat Completions body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from failover import Capability, Envelope, Message, Phase, Request, Route, Router, Timeouts, Tool, Workflow
from failover.model import Completed, ReasoningDone, Response, TextDelta
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeProvider, FakeServer, Reply, Script

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

MODEL = "gpt-5-mini"
CAPS = frozenset({Capability.CHAT, Capability.TOOLS, Capability.STREAMING})
CALC = Tool(name="calculator", parameters={"type": "object", "properties": {"a": {"type": "number"}}})


@dataclass
class Pair:
    chat: FakeProvider
    resp: FakeProvider
    srv: FakeServer

    def router(self, first: str) -> Router:
        """A route whose primary is the model on ``first``'s API, with the other as its equivalent."""
        targets = {
            p.name: self.srv.target_for(
                p,
                model=MODEL,
                equivalence_key=MODEL,
                timeouts=Timeouts(connect=1.0, first_event=1.0, idle=1.0, total=2.0),
                max_attempts=2,
                tokenizer="estimate",
                capabilities=CAPS,
            )
            for p in (self.chat, self.resp)
        }
        order = (targets[first], targets["resp" if first == "chat" else "chat"])
        return Router(
            [Route(name="r", primary=order)],
            retry_budget=Unlimited(),
            breakers=NoBreakers(),
            backoff=Backoff(base=0.1, cap=0.1),
        )


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    chat = FakeProvider("chat", "openai", model=MODEL)
    resp = FakeProvider("resp", "openai-responses", model=MODEL)
    async with FakeServer(chat, resp) as srv:
        yield Pair(chat, resp, srv)


async def _ask(router: Router, request: Request, stream: bool) -> tuple[Response, list[object]]:
    if not stream:
        return await router.complete("r", request, Envelope(budget=10.0)), []
    async with router.stream("r", request, Envelope(budget=10.0)) as s:
        events = [e async for e in s]
    end = events[-1]
    assert isinstance(end, Completed), end
    return end.response, events


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("first", "then"), [("chat", "resp"), ("resp", "chat")], ids=["chat-to-responses", "responses-to-chat"]
)
async def test_an_overloaded_api_fails_over_to_the_other(pair: Pair, first: str, then: str, stream: bool) -> None:
    down, up = (pair.chat, pair.resp) if first == "chat" else (pair.resp, pair.chat)
    down.load(Script.always(Reply.overloaded(latency=0.1)))
    up.load(Script.always(Reply.ok(f"answered by {then}", latency=0.2)))
    router = pair.router(first)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp, events = await _ask(router, Request.simple("hi", max_tokens=64), stream)
    elapsed = loop.time() - t0
    await router.aclose()
    assert resp.text == f"answered by {then}"
    if stream:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == resp.text
    rec = resp.record
    assert rec is not None
    assert [(a.target, a.phase, a.outcome) for a in rec.attempts] == [
        (first, Phase.PRIMARY, "provider_overloaded"),
        (first, Phase.PRIMARY, "provider_overloaded"),  # its replay
        (then, Phase.FAILOVER, "ok"),
    ]
    assert {a.model for a in rec.attempts} == {MODEL}  # the same model: failover, not fallback
    assert (rec.target_used, rec.workflow, rec.recovered) == (then, Workflow.RETRY_FAILOVER, True)
    assert (len(down.calls), len(up.calls)) == (2, 1)
    assert [c.path for c in pair.chat.calls] == ["/v1/chat/completions"] * len(pair.chat.calls)
    assert [c.path for c in pair.resp.calls] == ["/v1/responses"] * len(pair.resp.calls)
    assert all(c.stream is stream for c in (*pair.chat.calls, *pair.resp.calls))
    assert all(c.json is not None and c.json["store"] is False for c in pair.resp.calls)
    # two refusals (0.1 s each), one backoff (full jitter up to 0.1 s), the answer (0.2 s)
    assert [round(a.duration, 3) for a in rec.attempts] == [0.1, 0.1, 0.2]
    assert [w.reason for w in rec.waits] == ["backoff"] and rec.waits[0].end - rec.waits[0].start <= 0.1
    spent = sum(a.duration for a in rec.attempts) + sum(w.end - w.start for w in rec.waits)
    assert elapsed == pytest.approx(spent, abs=0.01)  # and nothing else on the clock


async def test_a_tool_loop_across_both_apis_keeps_what_each_can_read(pair: Pair) -> None:
    turn = Reply.ok(tool_calls=[("calculator", {"a": 19})], reasoning="Add 12 and 7 first.")
    # 1: Chat Completions down, the Responses target answers with a tool call and its reasoning
    pair.chat.load(Script.always(Reply.overloaded()))
    pair.resp.load([turn])
    router = pair.router("chat")
    ask = Request(messages=(Message.user("12 + 7?"),), tools=(CALC,), reasoning_effort="low")
    first, events = await _ask(router, ask, stream=True)
    assert first.record is not None and first.record.target_used == "resp"
    (block,) = first.reasoning
    assert block.signature and block.origin == MODEL  # encrypted, and written by the model's key
    assert [e.block for e in events if isinstance(e, ReasoningDone)] == [block]
    history = (*ask.messages, first.message(), Message.tool(first.tool_calls[0].id, "19"))
    follow = Request(messages=history, tools=(CALC,), reasoning_effort="low")

    # 2: now the Responses target is down; Chat Completions carries on with the same history
    pair.resp.load(Script.always(Reply.overloaded()))
    pair.chat.load(["ok('It is 19.')"])
    second, _ = await _ask(pair.router("resp"), follow, stream=False)
    assert second.text == "It is 19." and second.record is not None and second.record.target_used == "chat"
    sent = pair.chat.calls[-1].json
    assert sent is not None
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]
    assert "reasoning_content" not in sent["messages"][1]  # Chat Completions cannot read it
    assert sent["messages"][1]["tool_calls"][0]["id"] == first.tool_calls[0].id

    # 3: and back: the Responses target gets its own reasoning again, by its encrypted content
    pair.resp.load(["ok('It is 19.')"])
    pair.chat.load(Script.always(Reply.overloaded()))
    third, _ = await _ask(router, follow, stream=False)
    assert third.record is not None and third.record.target_used == "resp"
    sent = pair.resp.calls[-1].json
    assert sent is not None
    assert [item["type"] for item in sent["input"]] == ["message", "reasoning", "function_call", "function_call_output"]
    assert sent["input"][1]["encrypted_content"] == block.signature
    assert sent["include"] == ["reasoning.encrypted_content"]
    await router.aclose()
