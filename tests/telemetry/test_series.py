"""The plain series (failover.telemetry._series) expose exactly what prometheus_client's own
Counter and Histogram would: the same updates on both give the same bytes."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import metrics as prometheus_metrics

from failover.telemetry import CounterFamily, HistogramFamily
from failover.telemetry._instruments import GENAI_TOKENS, LONG_SECONDS

LABELS = ("route", "target")
VALUES = [("a", "x"), ("b", "x"), ("a", 'y"quoted\\'), ("ü", "")]


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.time", lambda: 1_700_000_000.25)  # the _created series match


def _amounts(rng: random.Random) -> list[float]:
    bounds = [*LONG_SECONDS, *GENAI_TOKENS]
    return [
        *bounds,
        *(b * 1.0000001 for b in bounds),
        0.0,
        0,
        1,
        3,
        1e9,
        math.inf,
        math.nan,
        *(rng.uniform(0, 400) for _ in range(200)),
        *(rng.randrange(0, 70_000_000) for _ in range(200)),
    ]


@pytest.mark.parametrize("created", [True, False])
def test_the_same_updates_give_the_same_exposition(frozen_clock: None, created: bool) -> None:
    rng = random.Random(7)
    ours, theirs = CollectorRegistry(auto_describe=True), CollectorRegistry(auto_describe=True)
    counter = CounterFamily("failover_things", "Things, by route and target", LABELS, ours)
    reference_counter = Counter("failover_things", "Things, by route and target", LABELS, registry=theirs)
    seconds = HistogramFamily("failover_wait_seconds", "Waits", LABELS, ours, LONG_SECONDS)
    reference_seconds = Histogram("failover_wait_seconds", "Waits", LABELS, buckets=LONG_SECONDS, registry=theirs)
    tokens = HistogramFamily("failover_tokens", "Tokens", LABELS, ours, GENAI_TOKENS)
    reference_tokens = Histogram("failover_tokens", "Tokens", LABELS, buckets=GENAI_TOKENS, registry=theirs)
    CounterFamily("failover_unused", "Never counted", ("route",), ours)
    Counter("failover_unused", "Never counted", ("route",), registry=theirs)
    amounts = _amounts(rng)
    rng.shuffle(amounts)
    for amount in amounts:
        labels = rng.choice(VALUES)
        if not math.isnan(amount):
            counter.labels(*labels).inc(amount)
            reference_counter.labels(*labels).inc(amount)
        counter.labels(*labels).inc()
        reference_counter.labels(*labels).inc()
        for ours_, theirs_ in ((seconds, reference_seconds), (tokens, reference_tokens)):
            ours_.labels(*labels).observe(amount)
            theirs_.labels(*labels).observe(amount)
    if not created:
        prometheus_metrics.disable_created_metrics()
    try:
        assert generate_latest(ours) == generate_latest(theirs)
    finally:
        prometheus_metrics.enable_created_metrics()
    assert ours.get_sample_value("failover_things_total", {"route": "a", "target": "x"}) == theirs.get_sample_value(
        "failover_things_total", {"route": "a", "target": "x"}
    )


def test_a_counter_refuses_what_prometheus_client_refuses() -> None:
    registry = CollectorRegistry()
    counter = CounterFamily("failover_things", "Things", LABELS, registry)
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("a", "x").inc(-1)
    with pytest.raises(ValueError, match="label count"):
        counter.labels("a")
    with pytest.raises(ValueError, match="Duplicated"):
        CounterFamily("failover_things", "Things again", LABELS, registry)
    with pytest.raises(ValueError, match="sorted"):
        HistogramFamily("failover_wait_seconds", "Waits", LABELS, registry, (2.0, 1.0))


def test_label_values_are_strings_as_prometheus_client_makes_them() -> None:
    registry = CollectorRegistry()
    counter = CounterFamily("failover_statuses", "Statuses", ("status",), registry)
    counter.labels(200).inc()  # type: ignore[arg-type]
    counter.labels("200").inc()
    assert registry.get_sample_value("failover_statuses_total", {"status": "200"}) == 2.0
