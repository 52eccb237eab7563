"""Quality gates: rules, all_of, and a judge model asked through a real Router (fault kit)."""

from __future__ import annotations

import random

import pytest

from failover import Capability, Message, Request, Response, Route, Router, Timeouts
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.validation import JUDGE_SCHEMA, GateVerdict, QualityGate, all_of, judge_gate, rule_gate

REQ = Request.simple("Where is my parcel 4417-2231?", system="You are a support agent.")
ANSWER = Response(text="Your parcel 4417-2231 left the warehouse on Tuesday.")


def judge_router(*replies: Reply | str, default: Reply | str = "ok") -> tuple[Router, FakeProvider]:
    j = FakeProvider("judge", "openai", Script.of(*replies, default=default))
    t = j.target(
        capabilities=frozenset({Capability.CHAT, Capability.STRUCTURED_OUTPUT}),
        timeouts=Timeouts(connect=1.0, total=1.0, min_useful=0.05),
        max_attempts=2,
        tokenizer="estimate",
    )
    router = Router(
        [Route(name="judge", primary=(t,))],
        transport=FakeNetwork(j),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.01, cap=0.1),
        rng=random.Random(1),
        breakers=NoBreakers(),
    )
    return router, j


# -- rule gates ----------------------------------------------------------------------------


async def test_rule_gate_from_a_predicate() -> None:
    def mentions_order(request: Request, response: Response) -> bool:
        return "4417-2231" in response.text

    gate = rule_gate(mentions_order)
    assert await gate(REQ, ANSWER) == GateVerdict(passed=True)
    v = await gate(REQ, Response(text="It is on its way."))
    assert not v.passed and v.reason == "rule 'mentions_order' failed"


async def test_rule_gate_returning_a_reason_or_none() -> None:
    gate = rule_gate(lambda req, resp: None if "parcel" in resp.text else "the answer does not talk about the parcel")
    assert (await gate(REQ, ANSWER)).passed
    v = await gate(REQ, Response(text="Hello!"))
    assert v == GateVerdict(passed=False, reason="the answer does not talk about the parcel")


async def test_rule_gate_may_be_async_and_may_return_a_verdict() -> None:
    async def graded(request: Request, response: Response) -> GateVerdict:
        return GateVerdict(passed=True, score=0.7)

    assert await rule_gate(graded)(REQ, ANSWER) == GateVerdict(passed=True, score=0.7)


async def test_a_rule_returning_nonsense_is_a_bug() -> None:
    with pytest.raises(TypeError, match="expected bool, str, None or GateVerdict"):
        await rule_gate(lambda req, resp: 3)(REQ, ANSWER)  # type: ignore[arg-type,return-value]


async def test_all_of_stops_at_the_first_failure_and_keeps_its_reason() -> None:
    ran: list[str] = []

    def rule(name: str, ok: bool) -> QualityGate:
        def fn(request: Request, response: Response) -> bool:
            ran.append(name)
            return ok

        return rule_gate(fn, name=name)

    assert (await all_of(rule("a", True), rule("b", True))(REQ, ANSWER)).passed
    v = await all_of(rule("c", True), rule("d", False), rule("e", True))(REQ, ANSWER)
    assert not v.passed and v.reason == "rule 'd' failed"
    assert ran == ["a", "b", "c", "d"]  # "e" never ran


async def test_all_of_reports_the_lowest_score() -> None:
    a = rule_gate(lambda req, resp: GateVerdict(passed=True, score=0.9))
    b = rule_gate(lambda req, resp: GateVerdict(passed=True, score=0.6))
    assert await all_of(a, b)(REQ, ANSWER) == GateVerdict(passed=True, score=0.6)
    assert await all_of()(REQ, ANSWER) == GateVerdict(passed=True)


# -- judge gate, through a real Router -----------------------------------------------------


@pytest.mark.looptime
async def test_judge_passes() -> None:
    router, j = judge_router(Reply.ok(json={"pass": True, "reason": "fine"}))
    gate = judge_gate(router, "judge", prompt="The answer must give the parcel's status.")
    assert await gate(REQ, ANSWER) == GateVerdict(passed=True, reason="fine", score=1.0)
    sent = j.calls[0].json
    assert sent is not None
    assert sent["response_format"]["json_schema"]["schema"] == JUDGE_SCHEMA
    system, user = sent["messages"][0]["content"], sent["messages"][1]["content"]
    assert "The answer must give the parcel's status." in system
    assert "Where is my parcel 4417-2231?" in user and "left the warehouse on Tuesday" in user


@pytest.mark.looptime
async def test_judge_fails_with_its_reason() -> None:
    router, _ = judge_router(Reply.ok(json={"pass": False, "reason": "no status given"}))
    gate = judge_gate(router, "judge", prompt="Give the status.")
    assert await gate(REQ, ANSWER) == GateVerdict(passed=False, reason="judge: no status given", score=0.0)


@pytest.mark.looptime
async def test_judge_unavailable_fails_closed() -> None:
    router, j = judge_router(default=Reply.overloaded())
    gate = judge_gate(router, "judge", prompt="Give the status.", max_attempts=2)
    v = await gate(REQ, ANSWER)
    assert not v.passed and v.reason is not None and v.reason.startswith("judge unavailable: provider_overloaded")
    assert len(j.calls) == 2  # the judge's own envelope bounds it


@pytest.mark.looptime
async def test_judge_unavailable_passes_with_on_error_pass() -> None:
    router, _ = judge_router(default=Reply.server_error())
    gate = judge_gate(router, "judge", prompt="Give the status.", on_error="pass")
    v = await gate(REQ, ANSWER)
    assert v.passed and v.reason is not None and v.reason.startswith("judge unavailable: ")


@pytest.mark.looptime
async def test_judge_reply_that_never_parses_fails_closed() -> None:
    # schema-invalid twice (the router repairs once): the judge never gave a verdict
    router, j = judge_router(default=Reply.schema_invalid({"verdict": "yes"}))
    v = await judge_gate(router, "judge", prompt="Give the status.")(REQ, ANSWER)
    assert not v.passed and v.reason is not None and v.reason.startswith("judge unavailable: ")
    assert len(j.calls) == 2


@pytest.mark.looptime
async def test_judge_budget_bounds_a_hanging_judge() -> None:
    router, _ = judge_router(default=Reply.hang())
    v = await judge_gate(router, "judge", prompt="Give the status.", budget=0.5)(REQ, ANSWER)
    assert not v.passed and "judge unavailable" in (v.reason or "")


async def test_an_unparseable_verdict_from_a_lenient_judge_fails_closed() -> None:
    class Loose:
        async def complete(self, route: str, request: Request, envelope: object = None) -> Response:
            return Response(text="I think it passes")

    v = await judge_gate(Loose(), "judge", prompt="x")(REQ, ANSWER)  # type: ignore[arg-type]
    assert v == GateVerdict(passed=False, reason="judge unavailable: unparseable verdict 'I think it passes'")


async def test_long_requests_are_cut_for_the_judge() -> None:
    seen: list[Request] = []

    class Recording:
        async def complete(self, route: str, request: Request, envelope: object = None) -> Response:
            seen.append(request)
            return Response(text='{"pass": true, "reason": "ok"}')

    long = Request(messages=(Message.user("x" * 50_000),))
    await judge_gate(Recording(), "judge", prompt="x", max_chars=1000)(long, ANSWER)  # type: ignore[arg-type]
    text = seen[0].messages[-1].text
    assert len(text) < 2_000 and "more characters cut" in text


def test_on_error_must_be_known() -> None:
    with pytest.raises(ValueError, match="on_error"):
        judge_gate(object(), "judge", prompt="x", on_error="maybe")  # type: ignore[arg-type]
