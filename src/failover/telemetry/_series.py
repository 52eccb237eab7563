"""Counters and histograms kept as plain Python numbers and rendered when the registry is
collected (a scrape, ``get_sample_value``), with the samples prometheus_client's own
``Counter`` and ``Histogram`` give: the same names, labels, values, ``_created`` series and
order, so the exposition reads byte for byte the same.

Why: prometheus_client checks and locks at every step of an update (``Counter.inc`` is four
Python calls, ``Histogram.observe`` five and a loop over the buckets), and the gateway makes a
dozen updates at the end of every request. Here an update is one call and one lock. What is
left out is what failover does not use: exemplars, multiprocess mode, gauges and summaries.

prometheus_client is imported when a family is created or collected, not with this module.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar, cast

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector


def _created_enabled() -> bool:
    """Whether prometheus_client shows ``_created`` series (``PROMETHEUS_DISABLE_CREATED_SERIES``,
    ``disable_created_metrics()``): read at each collection, as its own metrics do."""
    from prometheus_client import metrics

    return bool(getattr(metrics, "_use_created", True))


class CounterSeries:
    """One labelled counter: ``inc`` as prometheus_client's child has it."""

    __slots__ = ("_lock", "created", "value")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        with self._lock:
            self.value += amount


class HistogramSeries:
    """One labelled histogram: ``observe`` as prometheus_client's child has it (an amount
    lands in the first bucket whose bound is at or above it; a NaN in none, but in the sum)."""

    __slots__ = ("_bounds", "_lock", "counts", "created", "sum")

    def __init__(self, lock: threading.Lock, bounds: list[float]) -> None:
        self._lock = lock
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        index = bisect_left(self._bounds, amount)
        with self._lock:
            self.sum += amount
            if amount <= self._bounds[index]:  # False for a NaN (bisect put it at 0)
                self.counts[index] += 1


SeriesT = TypeVar("SeriesT", CounterSeries, HistogramSeries)


class _Family(Generic[SeriesT]):
    """A labelled metric family: its series by label values, in the order they first appeared;
    ``labels(...)`` gives the series for those values, made once (``_new_series``).

    Its fields have the names prometheus_client's metric objects give theirs (``_name``,
    ``_type``, ``_labelnames``, a histogram's ``_upper_bounds``), so what inspects the metrics
    registered on a registry reads these the same."""

    _type = ""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], SeriesT] = {}
        registry.register(cast("Collector", self))  # a collector by its methods (no import here)

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def _family(self) -> Metric:
        raise NotImplementedError

    def _new_series(self) -> SeriesT:
        raise NotImplementedError

    def labels(self, *values: str) -> SeriesT:
        series = self._series.get(values)
        if series is None:
            key = self._check(values)
            with self._lock:
                series = self._series.get(key) or self._series.setdefault(key, self._new_series())
        return series

    def _check(self, values: tuple[str, ...]) -> tuple[str, ...]:
        if len(values) != len(self._labelnames):
            raise ValueError("Incorrect label count")
        return tuple(str(v) for v in values)


class CounterFamily(_Family[CounterSeries]):
    """A counter family: ``labels(...)`` gives the series to ``inc``; each is kept once made."""

    _type = "counter"

    def _new_series(self) -> CounterSeries:
        return CounterSeries(self._lock)

    def _family(self) -> CounterMetricFamily:
        from prometheus_client.core import CounterMetricFamily

        return CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        created = _created_enabled()
        with self._lock:
            for values, series in self._series.items():
                family.add_metric(values, series.value, series.created if created else None)
        return [family]


class HistogramFamily(_Family[HistogramSeries]):
    """A histogram family with fixed bucket bounds (``+Inf`` added as prometheus_client does)."""

    _type = "histogram"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
        buckets: Sequence[float],
    ) -> None:
        from prometheus_client.utils import INF, floatToGoString

        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if bounds and bounds[-1] != INF:
            bounds.append(INF)
        if len(bounds) < 2:
            raise ValueError("Must have at least two buckets")
        if bounds[0] < 0:  # prometheus_client would then leave out _sum; none of failover's has one
            raise ValueError("A bucket bound below 0 is not supported here")
        self._upper_bounds = bounds
        self._le: list[str] = [floatToGoString(b) for b in bounds]  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames, registry)

    def _new_series(self) -> HistogramSeries:
        return HistogramSeries(self._lock, self._upper_bounds)

    def _family(self) -> HistogramMetricFamily:
        from prometheus_client.core import HistogramMetricFamily

        return HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        created = _created_enabled()
        with self._lock:
            for values, series in self._series.items():
                cumulative, buckets = 0.0, []
                for le, count in zip(self._le, series.counts, strict=True):
                    cumulative += count
                    buckets.append((le, cumulative))
                family.add_metric(values, buckets, series.sum)
                if created:
                    labels = dict(zip(self._labelnames, values, strict=True))
                    family.add_sample(f"{self._name}_created", labels, series.created)
        return [family]


__all__ = ["CounterFamily", "CounterSeries", "HistogramFamily", "HistogramSeries"]
