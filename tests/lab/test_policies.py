"""The simulator with a config file's policies: `failover lab --config`, and the gateway's own /lab."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from failover.cli import main
from failover.lab import LabPolicies, SeedOptions, render, run_virtual
from failover.lab._custom import parse_custom_text
from failover.lab._web import lab_app
from failover.policy import Backoff, RetryBudget, Unlimited

STINGY = LabPolicies(backoff=Backoff(base=0.05, cap=0.1), budget_ratio=0.0, budget_floor=0, source="stingy.yaml")
CONFIG = """\
targets:
  a: {dialect: openai, base_url: "https://api.example.com/v1", model: m, api_key_env: A_KEY}
routes:
  chat: {primary: [a]}
retry_budget: {ratio: 0.0, floor: 0}
backoff: {base: 0.05, cap: 0.1}
gateway:
  lab: true
"""


def test_a_budget_of_nothing_leaves_no_replay_on_a() -> None:
    opts = SeedOptions(scenario="all_failing", a_extra_retries=2)
    built_in = run_virtual(opts)
    stingy = run_virtual(SeedOptions(scenario="all_failing", a_extra_retries=2, policies=STINGY))
    assert built_in.calls["a"] == 3  # the lab's own budget lets A's two replays through
    assert stingy.calls["a"] == 1
    assert any("budget" in e.reason for e in stingy.record.excluded if e.target == "a")


def test_policies_come_from_a_config_and_a_run_never_shares_a_budget() -> None:
    p = LabPolicies.of(Backoff(base=0.3, cap=2.0), RetryBudget(ratio=0.2, floor=1, window=5.0), "f.yaml")
    assert p.describe() == {
        "source": "f.yaml",
        "backoff": {"base": 0.3, "cap": 2.0, "max_retry_after": 60.0},
        "retry_budget": {"ratio": 0.2, "floor": 1, "window": 5.0},
    }
    assert p.retry_budget() is not p.retry_budget()
    assert isinstance(LabPolicies.of(Backoff(), Unlimited(), "f.yaml").retry_budget(), Unlimited)


async def test_the_page_is_told_the_policies_and_runs_with_them() -> None:
    app = lab_app(policies=STINGY)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://lab") as c:
        meta = (await c.get("/api/meta")).json()
        assert meta["policies"]["source"] == "stingy.yaml" and meta["policies"]["retry_budget"]["ratio"] == 0.0
        body = (await c.post("/api/run", json={"scenario": "all_failing", "a_extra_retries": 2})).json()
    assert body["calls"]["a"] == 1


def test_lab_reads_the_whole_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, scenario = tmp_path / "failover.yaml", tmp_path / "s.yaml"
    cfg.write_text(CONFIG)  # its gateway: and the A_KEY it names need not be there: the lab sends nothing
    scenario.write_text('providers:\n  a: {default: "overloaded(latency=0.1)"}\n')
    assert main(["lab", "--config", str(cfg), "--scenario", str(scenario), "--once"]) == 0
    out = capsys.readouterr().out
    want = run_virtual(
        SeedOptions(
            scenario="custom",
            custom=parse_custom_text(scenario.read_text()),
            policies=LabPolicies(backoff=Backoff(base=0.05, cap=0.1), budget_ratio=0.0, budget_floor=0),
        )
    )
    assert out.strip() == render(want).strip()
    cfg.write_text(CONFIG.replace("floor: 0", "flor: 0"))
    assert main(["lab", "--config", str(cfg), "--scenario", str(scenario), "--once"]) == 2
    err = capsys.readouterr()
    assert "retry_budget.flor" in err.out + err.err and "did you mean 'floor'" in err.out + err.err
