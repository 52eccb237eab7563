"""Canary fallbacks and per-candidate success at the transport, contract and task levels."""

from __future__ import annotations

import random
from typing import Any

import pytest

from failover import ConfigError, Route, Target
from failover.config import config_from_dict
from failover.model import (
    Attempt,
    Exclusion,
    ExclusionCode,
    Failure,
    FailureKind,
    Phase,
    RouteRecord,
    Validation,
    Workflow,
)
from failover.policy._canary import (
    CANARY_REASON,
    CanaryGate,
    StatsBoard,
    answered,
    canary_problems,
    contract_level,
)


def _t(name: str) -> Target:
    return Target(name=name, dialect="openai", model=f"m-{name}", base_url=f"http://{name}.fake/v1")


A, B, C = _t("a"), _t("b"), _t("c")
ROUTE = Route(name="triage", primary=(A,), fallbacks=(B, C), canary=(("b", 0.1),))


# -- the gate ---------------------------------------------------------------------------------


def test_canary_share_is_respected_with_a_fixed_seed() -> None:
    rng = random.Random(20240501)
    n = 10_000
    admitted = sum(CanaryGate(ROUTE, rng).admits("b") for _ in range(n))
    assert abs(admitted / n - 0.1) <= 0.015
    # deterministic: the same seed gives the same decisions, request by request
    rng1, rng2 = random.Random(7), random.Random(7)
    runs = [[CanaryGate(ROUTE, rng).admits("b") for _ in range(500)] for rng in (rng1, rng2)]
    assert runs[0] == runs[1] and any(runs[0]) and not all(runs[0])


@pytest.mark.parametrize("share", [0.02, 0.25, 0.5, 0.9])
def test_other_shares_too(share: float) -> None:
    route = Route(name="r", primary=(A,), fallbacks=(B,), canary=(("b", share),))
    rng = random.Random(99)
    n = 10_000
    admitted = sum(CanaryGate(route, rng).admits("b") for _ in range(n))
    assert abs(admitted / n - share) <= 0.015


def test_fallbacks_not_on_probation_are_always_admitted_without_drawing() -> None:
    rng = random.Random(1)
    state = rng.getstate()
    for _ in range(1000):
        gate = CanaryGate(ROUTE, rng)
        assert gate.admits("c") and gate.why_not("c") is None
        assert gate.admits("a")  # a primary is never on probation
    assert rng.getstate() == state  # no draw was spent on them
    plain = Route(name="r", primary=(A,), fallbacks=(B, C))
    assert all(CanaryGate(plain, rng).admits("b") for _ in range(100))
    assert rng.getstate() == state


def test_one_draw_per_request_per_candidate() -> None:
    route = Route(name="r", primary=(A,), fallbacks=(B, C), canary=(("b", 0.5), ("c", 0.5)))
    rng = random.Random(3)
    for _ in range(200):
        gate = CanaryGate(route, rng)
        before = rng.getstate()
        first = gate.admits("b")
        after_one = rng.getstate()
        assert after_one != before
        assert all(gate.admits("b") == first for _ in range(5))  # asked again: same answer, no draw
        assert rng.getstate() == after_one
        gate.admits("c")  # another candidate: its own draw
        assert rng.getstate() != after_one


def test_a_full_share_never_draws_and_the_reason_names_the_share() -> None:
    full = Route(name="r", primary=(A,), fallbacks=(B,), canary=(("b", 1.0),))
    rng = random.Random(5)
    state = rng.getstate()
    assert CanaryGate(full, rng).admits("b") and rng.getstate() == state
    rng = random.Random(0)
    reasons = {CanaryGate(ROUTE, rng).why_not("b") for _ in range(200)}
    assert None in reasons
    (text,) = reasons - {None}
    assert text is not None and text.startswith(CANARY_REASON) and "10%" in text


def test_canary_problems() -> None:
    assert canary_problems(ROUTE) == []
    bad = Route(name="r", primary=(A,), fallbacks=(B,), canary=(("a", 0.1), ("b", 0.0), ("b", float("nan"))))
    problems = canary_problems(bad)
    assert any("'a' is not a fallback" in p for p in problems)
    assert any("must be in (0, 1], got 0.0" in p for p in problems)
    assert any("listed twice" in p for p in problems)
    assert any("nan" in p for p in problems)


# -- configuration ----------------------------------------------------------------------------


def _config(canary: Any) -> dict[str, Any]:
    t = {"dialect": "openai", "base_url": "https://api.example.com/v1", "model": "m"}
    return {
        "targets": {"a": t, "b": {**t, "model": "m2"}, "c": {**t, "model": "m3"}},
        "routes": {"r": {"primary": ["a"], "fallbacks": ["b", "c"], "canary": canary}},
    }


def test_config_loads_canary_shares() -> None:
    cfg = config_from_dict(_config({"b": 0.1}), env={})
    assert cfg.routes["r"].canary == (("b", 0.1),)
    assert config_from_dict(_config({}), env={}).routes["r"].canary == ()


@pytest.mark.parametrize(
    ("canary", "field", "words"),
    [
        ({"a": 0.1}, "routes.r.canary.a", "'a' is a primary target"),
        ({"zz": 0.1}, "routes.r.canary.zz", "not a target of this route"),
        ({"b": 0.0}, "routes.r.canary.b", "outside (0, 1]"),
        ({"b": 1.5}, "routes.r.canary.b", "outside (0, 1]"),
        ({"b": -0.2}, "routes.r.canary.b", "outside (0, 1]"),
        ({"b": "lots"}, "routes.r.canary.b", "valid number"),
        (["b"], "routes.r.canary", "valid dictionary"),
    ],
)
def test_config_rejects_bad_canaries(canary: Any, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(_config(canary), env={})
    assert info.value.field == field
    assert words in info.value.problem


def test_config_fix_names_the_fallbacks() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(_config({"zz": 0.1}), env={})
    assert "routes.r.fallbacks" in info.value.fix and "b, c" in info.value.fix


# -- stats ------------------------------------------------------------------------------------


def _attempt(
    i: int,
    target: str,
    outcome: str = "ok",
    *,
    kind: FailureKind | None = None,
    status: int | None = 200,
    start: float = 0.0,
    end: float = 0.5,
    cost: float = 0.001,
    contract_ok: bool | None = None,
    task_ok: bool | None = None,
    phase: Phase = Phase.FALLBACK,
) -> Attempt:
    failure = Failure(kind=kind, message=outcome, status=status) if kind is not None else None
    return Attempt(
        index=i,
        target=target,
        model=f"m-{target}",
        phase=phase,
        start=start,
        end=end,
        connect_timeout=1.0,
        total_timeout=5.0,
        outcome=outcome,
        failure=failure,
        status=status,
        cost=cost,
        contract_ok=contract_ok,
        task_ok=task_ok,
    )


def _record(
    *attempts: Attempt,
    used: str | None,
    route: str = "triage",
    excluded: tuple[Exclusion, ...] = (),
    validation: Validation | None = None,
) -> RouteRecord:
    return RouteRecord(
        request_id="r",
        route=route,
        workflow=Workflow.FALLBACK,
        outcome="ok" if used else "provider_overloaded",
        attempts=attempts,
        waits=(),
        excluded=excluded,
        recovered=used is not None,
        recovery_reason=None,
        target_used=used,
        elapsed_ms=1000.0,
        added_latency_ms=0.0,
        total_cost=sum(a.cost for a in attempts),
        validation=validation or Validation(transport=used is not None),
    )


def test_levels_of_one_attempt() -> None:
    ok = _attempt(0, "b")
    bad_json = _attempt(0, "b", "schema_invalid", kind=FailureKind.SCHEMA_INVALID)
    overloaded = _attempt(0, "b", "provider_overloaded", kind=FailureKind.PROVIDER_OVERLOADED, status=529)
    timeout = _attempt(0, "b", "timeout:total", kind=FailureKind.TIMEOUT, status=200)  # a stream that stalled
    gate_failed = _attempt(0, "b", "contract_failure", kind=FailureKind.CONTRACT_FAILURE, contract_ok=True)
    assert [answered(a) for a in (ok, bad_json, overloaded, timeout, gate_failed)] == [True, True, False, False, True]
    assert [contract_level(a) for a in (ok, bad_json, overloaded, timeout, gate_failed)] == [
        True,
        False,
        None,
        None,
        True,
    ]


def test_stats_count_transport_contract_and_task_separately() -> None:
    board = StatsBoard(alpha=0.5)
    # 1: primary overloaded, fallback b answers schema-invalid, repair on b succeeds, gate passes
    board.observe(
        _record(
            _attempt(
                0, "a", "provider_overloaded", kind=FailureKind.PROVIDER_OVERLOADED, status=529, phase=Phase.PRIMARY
            ),
            _attempt(1, "b", "schema_invalid", kind=FailureKind.SCHEMA_INVALID, end=0.4, contract_ok=False),
            _attempt(2, "b", end=0.2, contract_ok=True, task_ok=True, phase=Phase.REPAIR),
            used="b",
        )
    )
    # 2: b answers, meets the contract, the gate fails it
    board.observe(
        _record(
            _attempt(0, "b", "contract_failure", kind=FailureKind.CONTRACT_FAILURE, contract_ok=True, task_ok=False),
            used=None,
        )
    )
    # 3: b times out (no response); c is skipped by its canary draw
    board.observe(
        _record(
            _attempt(0, "b", "timeout:total", kind=FailureKind.TIMEOUT, status=None, end=5.0, cost=0.0005),
            used=None,
            # counted by its code: the reason's wording is for a person
            excluded=(
                Exclusion(target="c", phase=Phase.FALLBACK, code=ExclusionCode.CANARY, reason="left out by its draw"),
                Exclusion(target="b", phase=Phase.FALLBACK, code=ExclusionCode.HELD, reason=f"{CANARY_REASON}?"),
            ),
        )
    )
    # 4: b answers ok, the router judged no gate (task None), the contract level is only on the record
    board.observe(_record(_attempt(0, "b", end=0.6), used="b", validation=Validation(transport=True, contract=True)))
    # 5: a lost hedge on b: cancelled, costs money, says nothing about b
    board.observe(
        _record(
            _attempt(0, "a", phase=Phase.PRIMARY),
            _attempt(1, "b", "cancelled", status=None, cost=0.0002),
            used="a",
        )
    )

    b = board.get("triage", "b")
    assert b is not None
    assert b.attempts == 5 and b.cancelled == 1
    assert b.transport_ok == 4  # schema_invalid, repaired ok, gate-failed, ok
    assert (b.contract_checked, b.contract_ok) == (4, 3)
    assert (b.task_checked, b.task_ok) == (2, 1)  # None-aware: only where a gate ran
    assert b.transport_rate == pytest.approx(4 / 5)
    assert b.contract_rate == pytest.approx(3 / 4)
    assert b.task_rate == pytest.approx(0.5)
    assert b.served == 2
    assert b.cost == pytest.approx(0.001 * 4 + 0.0005 + 0.0002)
    # EWMA (alpha 0.5) over answered attempts only: 0.4, 0.2, 0.5, 0.6
    ewma = 0.4
    for d in (0.2, 0.5, 0.6):
        ewma += 0.5 * (d - ewma)
    assert b.latency_ewma == pytest.approx(ewma)

    a = board.get("triage", "a")
    assert a is not None and (a.attempts, a.transport_ok, a.served) == (2, 1, 1)
    c = board.get("triage", "c")
    assert c is not None and c.canary_skipped == 1 and c.attempts == 0 and c.transport_rate is None
    assert board.get("triage", "zz") is None


def test_stats_are_per_route_class_and_snapshot_for_metrics() -> None:
    board = StatsBoard()
    board.observe(_record(_attempt(0, "b"), used="b", route="triage"))
    board.observe(_record(_attempt(0, "b", "schema_invalid", kind=FailureKind.SCHEMA_INVALID), used=None, route="chat"))
    snap = board.snapshot()
    assert [(s.route, s.target) for s in snap] == [("chat", "b"), ("triage", "b")]
    assert snap[0].contract_rate == 0.0 and snap[1].contract_rate == 1.0
    d = snap[1].as_dict()
    assert d["transport_rate"] == 1.0 and d["task_rate"] is None and d["attempts"] == 1
    with pytest.raises(AttributeError):
        snap[1].attempts = 3  # type: ignore[misc]  # a snapshot does not change under the board
    text = board.render()
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["route", "target", "attempts", "transport"]
    assert "1/1 100.0%" in lines[2] and "0/1 0.0%" in lines[1]
    board.clear()
    assert board.snapshot() == ()


def test_bad_alpha() -> None:
    with pytest.raises(ValueError, match="alpha"):
        StatsBoard(alpha=0)
