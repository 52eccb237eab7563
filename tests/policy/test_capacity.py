"""Capacity planning: a peak load against each target's configured limits."""

from __future__ import annotations

import math

import pytest

from failover.model import Dialect, Limits, Target
from failover.policy.limits._capacity import plan_capacity, render


def target(name: str, dialect: Dialect = Dialect.ANTHROPIC, **limits: int) -> Target:
    return Target(name=name, dialect=dialect, model=name, base_url=f"https://{name}", limits=Limits(**limits))


CLAUDE = target("claude", rpm=4_000, input_tpm=400_000, output_tpm=80_000)


def test_the_worked_example() -> None:
    # 20 QPS x 6,000 input / 800 output tokens needs 7.2M input TPM and 960K output TPM;
    # a 400K input-TPM tier covers 5.5% of that (5.0% of it usable at the 0.9 safety factor).
    report = plan_capacity(20, 6_000, 800, [CLAUDE])
    assert (report.rpm, report.input_tpm, report.output_tpm) == (1_200, 7_200_000, 960_000)
    plan = report.targets[0]
    inp = plan.dimension("input_tpm")
    assert inp.need == 7_200_000 and inp.limit == 400_000 and inp.usable == pytest.approx(360_000)
    assert inp.raw_coverage == pytest.approx(400_000 / 7_200_000)  # 5.5...%
    assert inp.raw_coverage is not None and 0.055 < inp.raw_coverage < 0.056
    assert inp.coverage == pytest.approx(0.05)
    assert plan.dimension("output_tpm").coverage == pytest.approx(72_000 / 960_000)
    assert plan.dimension("rpm").coverage == pytest.approx(3.0)
    assert plan.binding == "input_tpm" and not plan.covered
    assert plan.max_qps == pytest.approx(1.0)  # 360K / (60 x 6,000)
    assert plan.coverage == pytest.approx(0.05)
    assert plan_capacity(20, 6_000, 800, [CLAUDE], safety=1.0).targets[0].coverage == pytest.approx(0.0556, abs=1e-4)


def test_render_is_a_readable_table() -> None:
    text = render(plan_capacity(20, 6_000, 800, [CLAUDE]))
    assert text.splitlines() == [
        "Peak 20 QPS x 6,000 input / 800 output tokens per request (safety factor 0.9)",
        "needs 1,200 RPM, 7.2M input TPM, 960K output TPM",
        "",
        "target  dimension    need   limit  usable  covers     raw  max QPS",
        "------  ----------  -----  ------  ------  ------  ------  -------",
        "claude  rpm         1,200   4,000   3,600  300.0%  333.3%       60",
        "        input_tpm    7.2M    400K    360K    5.0%    5.5%        1  binding, SHORT",
        "        output_tpm   960K  80,000  72,000    7.5%    8.3%      1.5  SHORT",
        "",
        "covers = limit x 0.9 / need (what the client-side limiter uses); raw = limit / need",
        "claude: sustains 1 QPS, 5.0% of the peak; binding: input_tpm",
    ]


def test_openai_tpm_counts_input_and_output_and_targets_add_up() -> None:
    gpt = target("gpt", Dialect.OPENAI, rpm=10_000, input_tpm=30_000_000)
    free = target("vllm", Dialect.OPENAI)
    report = plan_capacity(20, 6_000, 800, [CLAUDE, gpt], latency=None)
    plan = report.targets[1]
    assert plan.combined_tpm and plan.dimension("input_tpm").need == 20 * 60 * 6_800
    assert plan.covered and plan.binding == "input_tpm"
    assert report.total_max_qps == pytest.approx(1.0 + 27_000_000 / (60 * 6_800))
    text = render(report)
    assert "tokens (in+out)" in text and "gpt: covers the peak (up to 66.17 QPS)" in text
    assert "spread over all 2 targets: 67.17 QPS, 335.8% of the peak" in text
    unlimited = plan_capacity(20, 6_000, 800, [CLAUDE, free])
    assert math.isinf(unlimited.targets[1].max_qps) and unlimited.targets[1].binding is None
    assert "no limit configured for vllm" in render(unlimited)


def test_concurrency_needs_a_latency() -> None:
    deepseek = target("deepseek", Dialect.OPENAI, concurrency=500)
    assert plan_capacity(20, 6_000, 800, [deepseek]).targets[0].dimensions == ()
    plan = plan_capacity(100, 6_000, 800, [deepseek], latency=8.0).targets[0]
    conc = plan.dimension("concurrency")
    assert (conc.need, conc.usable, conc.coverage) == (800, 500, 0.625)
    assert plan.max_qps == pytest.approx(62.5) and plan.binding == "concurrency"


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="qps"):
        plan_capacity(0, 1, 1, [CLAUDE])
    with pytest.raises(ValueError, match="safety"):
        plan_capacity(1, 1, 1, [CLAUDE], safety=1.5)
