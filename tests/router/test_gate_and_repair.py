"""A quality gate that cannot judge, and the request's one repair. On virtual time, over the fault kit.

A judge that is too slow or raises is a typed, recorded failure of the gate: the paid answer stays
in the RouteRecord with its cost, the engine moves on to the next model as after any failed
gate, and the caller only ever gets an answer, an Unavailable or a PartialOutput. The one repair
of a request is spent when a repair attempt is made, not when one is built and then refused.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from failover import (
    Capability,
    Envelope,
    FailureKind,
    Message,
    Request,
    Response,
    Route,
    Router,
    Unavailable,
)
from failover.model import Completed, Price, TextDelta, Timeouts
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.validation import GateVerdict, QualityGate

from ._kit import target

pytestmark = pytest.mark.looptime

BUDGET = 10.0
ASK = Request(messages=(Message.user("x"),), max_tokens=100)  # a repair after truncation doubles it


def routed(*ps: FakeProvider, gate: QualityGate | None = None, route: Route | None = None) -> Router:
    a, *rest = ps
    route = route or Route(name="r", primary=(target(a, cap=5.0),), fallbacks=tuple(target(p, cap=5.0) for p in rest))
    return Router(
        [route],
        transport=FakeNetwork(*ps),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
        gates={"r": gate} if gate is not None else None,
    )


def slow_on(text: str) -> QualityGate:
    """A judge that never answers about ``text`` (and passes everything else at once)."""

    async def gate(request: Request, response: Response, /) -> GateVerdict:
        if text in response.text:
            await asyncio.sleep(1_000)
        return GateVerdict(passed=True)

    return gate


def raises_on(text: str) -> QualityGate:
    async def gate(request: Request, response: Response, /) -> GateVerdict:
        if text in response.text:
            raise RuntimeError("judge crashed")
        return GateVerdict(passed=True)

    return gate


JUDGES = {"slow": (slow_on, "the judge gave no verdict"), "raising": (raises_on, "RuntimeError: judge crashed")}


@pytest.mark.parametrize("judge", JUDGES)
async def test_a_judge_that_cannot_judge_fails_the_gate_and_the_fallback_answers(judge: str) -> None:
    make, said = JUDGES[judge]
    a = FakeProvider("a", "openai", Script.always(Reply.ok("from a")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await routed(a, b, gate=make("from a")).complete("r", Request.simple("x"), Envelope(budget=BUDGET))
    assert resp.text == "from b"
    assert loop.time() - t0 < BUDGET
    assert (len(a.calls), len(b.calls)) == (1, 1)
    rec = resp.record
    assert rec is not None and rec.target_used == "b" and rec.workflow == "fallback"
    assert [(x.target, x.outcome, x.contract_ok, x.task_ok) for x in rec.attempts] == [
        ("a", "contract_failure", True, False),
        ("b", "ok", True, True),
    ]
    first = rec.attempts[0]
    assert first.cost > 0 and rec.total_cost == pytest.approx(first.cost + rec.attempts[1].cost)
    assert first.failure is not None and first.failure.quality_gate
    assert said in first.failure.message


@pytest.mark.parametrize("judge", JUDGES)
async def test_a_judge_that_cannot_judge_the_only_answer_is_an_unavailable(judge: str) -> None:
    make, said = JUDGES[judge]
    a = FakeProvider("a", "openai", Script.always(Reply.ok("from a")))
    with pytest.raises(Unavailable) as ei:
        await routed(a, gate=make("from a")).complete("r", Request.simple("x"), Envelope(budget=BUDGET))
    exc = ei.value
    # the slow judge is cut at the deadline; the raising one fails the gate as a contract failure
    assert exc.reason is (FailureKind.DEADLINE_EXHAUSTED if judge == "slow" else FailureKind.CONTRACT_FAILURE)
    assert len(a.calls) == 1
    [only] = exc.record.attempts
    assert only.target == "a" and only.outcome == "contract_failure" and only.cost > 0
    assert exc.record.total_cost == pytest.approx(only.cost)
    assert only.failure is not None and said in only.failure.message


@pytest.mark.parametrize("judge", JUDGES)
async def test_a_streamed_answer_the_judge_cannot_judge_is_never_shown(judge: str) -> None:
    make, _ = JUDGES[judge]
    a = FakeProvider("a", "openai", Script.always(Reply.ok("from a")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b")))
    events: list[object] = []
    caps = (Capability.CHAT, Capability.STREAMING)
    route = Route(name="r", primary=(target(a, caps=caps, cap=5.0),), fallbacks=(target(b, caps=caps, cap=5.0),))
    router = routed(a, b, gate=make("from a"), route=route)
    async with router.stream("r", Request.simple("x"), Envelope(budget=BUDGET)) as s:
        async for ev in s:
            events.append(ev)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from b"
    end = events[-1]
    assert isinstance(end, Completed) and end.response.record is not None
    assert [(x.target, x.outcome) for x in end.response.record.attempts] == [("a", "contract_failure"), ("b", "ok")]
    assert (len(a.calls), len(b.calls)) == (1, 1)


async def test_a_repair_refused_after_it_was_built_leaves_the_fallback_its_repair() -> None:
    # a truncates late: its repair would leave b less than the 3 s kept for it, so it is refused
    # after being built. b truncates too, and its own repair is the request's one repair.
    slow = Timeouts(connect=5.0, total=10.0, min_useful=1.0)
    a = FakeProvider("a", "openai", Script.always(Reply.truncate("cut", latency=6.5)))
    b = FakeProvider("b", "anthropic", Script.of(Reply.truncate("cut"), Reply.ok("whole")))
    route = Route(
        name="r",
        primary=(a.target(timeouts=slow, price=Price(input_per_mtok=1.0, output_per_mtok=2.0)),),
        fallbacks=(b.target(timeouts=slow, price=Price(input_per_mtok=1.0, output_per_mtok=2.0)),),
        fallback_reserve=3.0,
    )
    resp = await routed(a, b, route=route).complete("r", ASK, Envelope(budget=BUDGET))
    assert resp.text == "whole"
    assert (len(a.calls), len(b.calls)) == (1, 2)
    assert b.calls[1].json is not None and b.calls[1].json["max_tokens"] == 200
    rec = resp.record
    assert rec is not None and rec.target_used == "b"
    assert [(x.target, x.phase, x.outcome) for x in rec.attempts] == [
        ("a", "primary", "truncated"),
        ("b", "fallback", "truncated"),
        ("b", "repair", "ok"),
    ]
    assert any(e.target == "a" and "kept back for it" in e.reason for e in rec.excluded), rec.excluded
    assert not any("no repair left" in e.reason for e in rec.excluded), rec.excluded


async def test_a_repair_that_was_made_is_the_only_one() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.truncate("cut")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.truncate("cut")))
    with pytest.raises(Unavailable) as ei:
        await routed(a, b).complete("r", ASK, Envelope(budget=BUDGET))
    assert ei.value.reason is FailureKind.TRUNCATED
    assert (len(a.calls), len(b.calls)) == (2, 1)
    rec = ei.value.record
    assert [(x.target, x.phase) for x in rec.attempts] == [("a", "primary"), ("a", "repair"), ("b", "fallback")]
    assert any(e.target == "b" and "no repair left" in e.reason for e in rec.excluded), rec.excluded
