"""The demo: the seed scenarios, on virtual time, matching what the router records."""

from __future__ import annotations

import json
import time

import pytest

from failover.cli import main
from failover.lab import SeedOptions, all_combinations, render, run_virtual


def test_healthy_goes_straight_to_a() -> None:
    r = run_virtual(SeedOptions(scenario="healthy", capability="chat"))
    assert r.error is None and r.record.target_used == "a"
    assert r.record.workflow.value == "direct"
    assert r.calls == {"a": 1, "b": 0, "c": 0}
    assert r.record.elapsed_ms == pytest.approx(300.0)


def test_rate_limited_a_waits_its_retry_after_then_falls_back() -> None:
    r = run_virtual(SeedOptions(scenario="rate_limited", capability="vision"))
    # B cannot see images: excluded with a reason, never called; C serves instead
    assert [(e.target, e.reason) for e in r.record.excluded] == [("b", "missing capability: vision")]
    assert r.calls == {"a": 2, "b": 0, "c": 1}
    assert [w.reason for w in r.record.waits] == ["retry_after"]
    assert r.record.target_used == "c" and r.record.recovered


def test_timeout_shrinking_the_budget_leaves_no_time_for_fallbacks_without_a_reserve() -> None:
    r = run_virtual(SeedOptions(scenario="timeout", capability="chat", budget=2.0, fallback_reserve=0.0))
    assert r.error is not None and "deadline_exhausted" in r.error
    assert r.calls["b"] == 0 and r.calls["c"] == 0
    assert r.record.elapsed_ms == pytest.approx(2000.0)


def test_more_retries_on_a_spend_the_time_b_would_have_had_without_a_reserve() -> None:
    few = run_virtual(SeedOptions(scenario="timeout", capability="chat", a_extra_retries=1, fallback_reserve=0.0))
    many = run_virtual(SeedOptions(scenario="timeout", capability="chat", a_extra_retries=3, fallback_reserve=0.0))
    assert few.record.target_used == "b"
    assert many.record.target_used is None and many.calls["b"] == 0
    assert many.calls["a"] == 3  # the third try ran into the deadline


@pytest.mark.parametrize("retries", [1, 3, 10])
@pytest.mark.parametrize("budget", [2.0, 3.0])
def test_the_automatic_reserve_moves_on_after_a_timeout_however_many_retries_a_has(retries: int, budget: float) -> None:
    r = run_virtual(SeedOptions(scenario="timeout", capability="chat", a_extra_retries=retries, budget=budget))
    assert r.error is None and r.record.target_used == "b"
    assert r.calls == {"a": 1, "b": 1, "c": 0}
    # A's cap (or less: A keeps B's reserve of 1.05 s, first attempt included), then B's 0.4 s
    assert r.record.elapsed_ms == pytest.approx(1000 * min(1.0, budget - 1.05) + 400.0)
    assert ("a", "no replay after timeout:total: b is tried at once") in [
        (e.target, e.reason) for e in r.record.excluded
    ]


def test_all_failing_is_a_typed_failure_with_no_text() -> None:
    r = run_virtual(SeedOptions(scenario="all_failing", capability="structured_output"))
    assert r.text is None and r.error is not None and r.error.startswith("provider_overloaded")
    assert r.calls == {"a": 2, "b": 1, "c": 1}


def test_every_combination_runs_on_virtual_time_instantly() -> None:
    t = time.perf_counter()
    results = [run_virtual(o) for o in all_combinations()]
    assert len(results) == 12
    assert time.perf_counter() - t < 30  # wide margin: seconds of loop time, not of wall time
    for r in results:
        text = render(r)
        assert f"== {r.options.scenario} | requires {r.options.capability}" in text
        for a in r.record.attempts:
            assert a.target in text


def test_cli_demo_prints_and_emits_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--scenario", "timeout", "--capability", "vision"]) == 0
    out = capsys.readouterr().out
    assert "excluded  b (fallback): missing capability: vision" in out
    assert "timeout:total" in out
    # both settings of the reserve: automatic (C at once after A's timeout), then none (A replays first)
    auto, none = out.split("== timeout")[1:]
    assert "reserve auto" in auto and "provider calls a=1, b=0, c=1" in auto
    assert "reserve 0.00s" in none and "provider calls a=2, b=0, c=1" in none
    assert main(["demo", "--scenario", "timeout", "--fallback-reserve", "0.5", "--capability", "chat"]) == 0
    assert capsys.readouterr().out.count("== timeout") == 1
    assert main(["demo", "--scenario", "healthy", "--capability", "chat", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["target_used"] == "a" and data[0]["attempts"][0]["outcome"] == "ok"


def test_bad_options_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--budget", "-1"]) == 2
    assert "budget" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--fallback-reserve", "soon"])
    assert "neither 'auto' nor a number of seconds" in capsys.readouterr().err
