"""Calibration: fitted factors, per-target recalibration, and widening from observed usage."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from failover.model import Dialect, Request, Target
from failover.tokens import (
    CalibratedCounter,
    EstimateCounter,
    TiktokenCounter,
    calibrate,
    calibration_of,
    counter_for,
    observe_usage,
    recalibrate,
)
from failover.tokens._calibrate import MIN_OBSERVED_TOKENS, _clear_caches


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    _clear_caches()
    yield
    _clear_caches()


def claude(name: str = "claude", model: str = "claude-sonnet-4-5") -> Target:
    return Target(name=name, dialect=Dialect.ANTHROPIC, model=model, base_url="https://api.anthropic.com/v1")


class Fixed:
    """A counter that counts every request as ``n``."""

    def __init__(self, n: int, name: str = "fixed") -> None:
        self.n = n
        self.name = name

    def count(self, request: Request) -> int:
        return self.n


HELLO = Request.simple("Hello")

# ------------------------------------------------------------------ CalibratedCounter


def test_calibrated_counter_scales_and_rounds_up() -> None:
    c = CalibratedCounter(Fixed(100), 1.234)
    assert c.count(HELLO) == 124
    assert c.name == "fixed*1.234"
    assert CalibratedCounter(EstimateCounter(), 0.5).count(HELLO) == math.ceil(EstimateCounter().count(HELLO) / 2)


def test_calibrating_a_calibrated_counter_multiplies_the_factors() -> None:
    base = Fixed(100)
    c = CalibratedCounter(CalibratedCounter(base, 0.5), 3.0)
    assert c.base is base
    assert c.factor == 1.5
    assert c.count(HELLO) == 150


@pytest.mark.parametrize("factor", [0.0, -1.0, math.nan, math.inf])
def test_a_factor_must_be_positive_and_finite(factor: float) -> None:
    with pytest.raises(ValueError):
        CalibratedCounter(Fixed(1), factor)


# ------------------------------------------------------------------ calibrate


def test_calibrate_takes_a_high_quantile_of_actual_over_counted() -> None:
    ratios = [0.5 + i / 100 for i in range(40)]  # 0.50 .. 0.89
    samples = [(HELLO, round(100 * r)) for r in ratios]
    fitted = calibrate(Fixed(100), samples)
    assert fitted.factor == pytest.approx(0.87)  # nearest rank: the 38th of 40
    assert calibrate(Fixed(100), samples, quantile=1.0).factor == pytest.approx(0.89)
    assert calibrate(Fixed(100), samples, quantile=0.5).factor == pytest.approx(0.69)


def test_with_few_samples_the_quantile_is_the_largest_ratio() -> None:
    samples = [(HELLO, n) for n in (60, 130, 90)]
    assert calibrate(Fixed(100), samples).factor == pytest.approx(1.3)


def test_calibrate_skips_empty_samples_and_needs_one() -> None:
    assert calibrate(Fixed(100), [(HELLO, 0), (HELLO, 70)]).factor == pytest.approx(0.7)
    with pytest.raises(ValueError):
        calibrate(Fixed(0), [(HELLO, 10)])
    with pytest.raises(ValueError):
        calibrate(Fixed(100), [])
    with pytest.raises(ValueError):
        calibrate(Fixed(100), [(HELLO, 10)], quantile=0.0)


def test_calibrate_against_a_real_tokenizer_never_undercounts_its_samples() -> None:
    exact = TiktokenCounter("o200k_base")
    texts = ["The quick brown fox. " * n for n in range(5, 30)] + ["数据" * n for n in range(20, 60, 5)]
    samples = [(Request.simple(t), exact.count(Request.simple(t))) for t in texts]
    fitted = calibrate(EstimateCounter(), samples, quantile=1.0)
    assert fitted.factor < 1  # the estimate over-counts these
    assert all(fitted.count(r) >= actual for r, actual in samples)


# ------------------------------------------------------------------ recalibrate


def test_recalibrate_replaces_the_targets_counter_only() -> None:
    a, b = claude("a"), claude("b")
    default = counter_for(a)
    new = recalibrate(a, 0.7)
    assert counter_for(a) is new
    assert isinstance(new, CalibratedCounter)
    assert new.base is default
    assert new.name == "estimate*0.7"
    assert counter_for(b) is default
    assert new.count(HELLO) == math.ceil(default.count(HELLO) * 0.7)


def test_recalibrate_with_a_new_base_counter_for_a_new_tokenizer() -> None:
    t = claude()
    new = recalibrate(t, base=TiktokenCounter("o200k_base"))
    assert counter_for(t) is new
    assert new.name == "tiktoken:o200k_base"
    scaled = recalibrate(t, 1.2, base=TiktokenCounter("o200k_base"))
    assert scaled.name == "tiktoken:o200k_base*1.2"


def test_recalibrate_without_arguments_goes_back_to_the_default() -> None:
    t = claude()
    default = counter_for(t)
    recalibrate(t, 2.0)
    assert recalibrate(t) is default
    assert counter_for(t) is default


def test_a_calibration_does_not_follow_a_target_to_a_new_model() -> None:
    recalibrate(claude(model="claude-sonnet-4-5"), 0.6)
    assert counter_for(claude(model="claude-opus-4-1")).name == "estimate"


def test_recalibrate_rejects_a_bad_factor_and_keeps_the_old_counter() -> None:
    t = claude()
    kept = recalibrate(t, 0.8)
    with pytest.raises(ValueError):
        recalibrate(t, -1.0)
    assert counter_for(t) is kept


# ------------------------------------------------------------------ observe_usage


def test_usage_below_the_count_never_narrows_it() -> None:
    t = claude()
    default = counter_for(t)
    for _ in range(20):
        assert observe_usage(t, 1000, 550) == 1.0
    assert counter_for(t) is default
    cal = calibration_of(t)
    assert cal.online == 1.0
    assert cal.mean_ratio == pytest.approx(0.55)
    assert cal.observations == 20


def test_usage_above_the_count_widens_it_at_once() -> None:
    t = claude()
    assert observe_usage(t, 1000, 1200) == 1.2  # first observation: m = 1.2, d = 0
    widened = counter_for(t)
    assert isinstance(widened, CalibratedCounter)
    assert widened.factor == 1.2
    assert widened.name == "estimate*1.2"


def test_the_online_factor_is_the_mean_plus_two_deviations_rounded_up() -> None:
    t = claude()
    observe_usage(t, 1000, 1000)  # r = 1.0: m = 1.0, d = 0
    online = observe_usage(t, 1000, 1500)  # r = 1.5: d = 0.2 * 0.5 = 0.1, m = 1.1
    assert online == 1.3  # 1.1 + 2 * 0.1
    # The next estimate was made with the widened counter: the ratio is taken against the base.
    est = counter_for(t).count(Request.simple("x" * 3000))
    base = EstimateCounter().count(Request.simple("x" * 3000))
    assert est == math.ceil(base * 1.3)
    observe_usage(t, est, base)  # charged exactly the base count: r = 1.0
    cal = calibration_of(t)
    assert cal.mean_ratio == pytest.approx(1.1 + 0.2 * (1.0 - 1.1), abs=1e-3)


def test_the_widening_decays_back_to_the_calibration_never_below() -> None:
    t = claude()
    recalibrate(t, 0.6)
    observe_usage(t, 1000, 1400)
    assert counter_for(t).name == "estimate*0.84"  # 0.6 x 1.4
    for _ in range(60):
        est = counter_for(t).count(Request.simple("word " * 400))
        observe_usage(t, est, est // 2)  # the provider charges half of what was counted
    assert calibration_of(t).online == 1.0
    assert counter_for(t).name == "estimate*0.6"  # back to recalibrate's factor, not below it


def test_recalibrate_forgets_what_was_observed() -> None:
    t = claude()
    observe_usage(t, 1000, 2000)
    recalibrate(t, 0.9)
    assert calibration_of(t).observations == 0
    assert counter_for(t).name == "estimate*0.9"


def test_small_and_empty_observations_are_ignored() -> None:
    t = claude()
    assert observe_usage(t, MIN_OBSERVED_TOKENS - 1, 500) == 1.0
    assert observe_usage(t, 1000, 0) == 1.0
    assert calibration_of(t).observations == 0


def test_an_absurd_ratio_is_clipped() -> None:
    t = claude()
    assert observe_usage(t, 100, 100_000) == 4.0


def test_calibration_of_an_untouched_target() -> None:
    cal = calibration_of(claude())
    assert cal.counter == "estimate"
    assert (cal.factor, cal.online, cal.mean_ratio, cal.observations) == (1.0, 1.0, None, 0)
