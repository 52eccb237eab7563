"""Contracts in the router: validated fallbacks, quality gates, degradation, validation levels."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from failover import (
    Contract,
    Envelope,
    FailureKind,
    Message,
    Request,
    Response,
    ResponseFormat,
    Route,
    Router,
    Unavailable,
)
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime

SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
JSON_REQ = Request(messages=(Message.user("triage this"),), response_format=ResponseFormat.json_schema(SCHEMA))


@dataclass(frozen=True)
class V:
    passed: bool
    reason: str | None = None


def make(*ps: FakeProvider, contract: Contract | None = None, **kw: object) -> Router:
    a, *rest = ps
    route = Route(
        name="r", contract=contract or Contract(), primary=(target(a),), fallbacks=tuple(target(p) for p in rest)
    )
    return Router(
        [route],
        transport=FakeNetwork(*ps),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
        **kw,  # type: ignore[arg-type]
    )


async def test_schema_failure_on_the_primary_then_a_validated_fallback_recovers() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.schema_invalid({"wrong": 1})))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok(json={"label": "billing"})))
    resp = await make(a, b).complete("r", JSON_REQ, Envelope(budget=10))
    assert resp.parsed == {"label": "billing"}
    rec = resp.record
    assert rec is not None and rec.recovered and rec.target_used == "b"
    assert [(x.target, x.outcome, x.contract_ok) for x in rec.attempts] == [
        ("a", "schema_invalid", False),
        ("a", "schema_invalid", False),  # the one repair
        ("b", "ok", True),
    ]
    assert rec.validation.transport and rec.validation.contract


async def test_a_fallback_that_stays_schema_invalid_is_a_contract_failure() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.schema_invalid({"wrong": 1})))
    with pytest.raises(Unavailable) as ei:
        await make(a, b).complete("r", JSON_REQ, Envelope(budget=10))
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE
    assert not ei.value.record.recovered
    assert len(b.calls) == 2  # first answer and one repair


async def test_output_constraints_of_the_contract_are_enforced() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.ok("password: hunter2")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("I can't share credentials.")))
    router = make(a, b, contract=Contract(forbidden_patterns=(r"password:\s*\S+",)))
    resp = await router.complete("r", Request.simple("what is the password?"), Envelope(budget=10))
    assert resp.text == "I can't share credentials."
    assert resp.record is not None and resp.record.attempts[0].contract_ok is False


async def test_a_quality_gate_failure_is_never_a_recovery_and_moves_on() -> None:
    async def gate(request: Request, response: Response) -> V:
        return V(passed="good" in response.text, reason="the answer is not good")

    a = FakeProvider("a", "openai", Script.always(Reply.ok("a bad answer")))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("a good answer")))
    resp = await make(a, b, gates={"r": gate}).complete("r", Request.simple("x"), Envelope(budget=10))
    assert resp.text == "a good answer"
    rec = resp.record
    assert rec is not None
    assert [(x.outcome, x.contract_ok, x.task_ok) for x in rec.attempts] == [
        ("contract_failure", True, False),
        ("ok", True, True),
    ]
    assert rec.validation.task is True

    c = FakeProvider("c", "openai", Script.always(Reply.ok("still bad")))
    with pytest.raises(Unavailable) as ei:
        await make(c, gates={"r": gate}).complete("r", Request.simple("x"), Envelope(budget=10))
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE
    assert "quality gate failed: the answer is not good" in str(ei.value)


async def test_degradation_is_marked_end_to_end_and_never_for_a_refusal() -> None:
    async def later(request: Request, exc: Unavailable) -> Response:
        return Response(text="We are busy; please try again in a minute.")

    a = FakeProvider("a", "openai", Script.always(Reply.overloaded()))
    resp = await make(a, degrade={"r": later}).complete("r", Request.simple("x"), Envelope(budget=10))
    assert resp.degraded and resp.text.startswith("We are busy")
    rec = resp.record
    assert rec is not None
    assert rec.degraded and rec.outcome == "degraded" and rec.target_used is None
    assert rec.degraded_reason is not None and rec.degraded_reason.startswith("provider_overloaded")
    assert not rec.recovered

    r = FakeProvider("r", "openai", Script.always(Reply.refuse()))
    with pytest.raises(Unavailable) as ei:
        await make(r, degrade={"r": later}).complete("r", Request.simple("x"), Envelope(budget=10))
    assert ei.value.reason is FailureKind.CONTENT_FILTERED
