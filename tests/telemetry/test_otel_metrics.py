"""The OpenTelemetry hook's metrics, read back through the SDK's InMemoryMetricReader: the GenAI
metric conventions' names, units, attributes and buckets, and the same numbers a PrometheusHook
on the same router counts, under the names the OpenTelemetry -> Prometheus rules derive."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    Metric,
    NumberDataPoint,
    Sum,
)
from prometheus_client import CollectorRegistry
from prometheus_client.utils import floatToGoString

from failover import Envelope, Request
from failover.model import Completed
from failover.telemetry import Hooks, OpenTelemetryHook, PrometheusHook
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import ALL, C, router, target

pytestmark = pytest.mark.looptime

GENAI_SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
STREAMS = ALL | {C.STREAMING}
GENAI_TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


def prometheus_name(m: Metric) -> str:
    """The OpenTelemetry -> Prometheus rule for a metric name, written out here on its own."""
    name = re.sub(r"[^A-Za-z0-9_:]", "_", m.name)
    if m.unit == "s":
        name += "_seconds"
    elif m.unit and not (m.unit.startswith("{") and m.unit.endswith("}")):
        name += "_" + m.unit
    if isinstance(m.data, Sum) and m.data.is_monotonic:
        name += "_total"
    return name


def labels(attributes: Any) -> dict[str, str]:
    return {k.replace(".", "_"): str(v) for k, v in dict(attributes or {}).items()}


async def traffic() -> tuple[dict[str, Metric], CollectorRegistry, Any]:
    """One streamed request that fails over (a 500, its replay, then a fallback that streams its
    first chunk 0.3 s after it was asked), and one plain request answered at once."""
    reader = InMemoryMetricReader()
    registry = CollectorRegistry()
    a = FakeProvider("a", "openai", Script.of(Reply.server_error(), Reply.server_error(), Reply.ok(usage=(7, 3, 5))))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", latency=0.3, chunk_interval=0.05)))
    ta, tb = target(a, attempts=2, caps=STREAMS), target(b, caps=STREAMS)
    r = router([ta], [tb], a, b)
    r.hooks = Hooks(
        [
            OpenTelemetryHook(meter_provider=MeterProvider(metric_readers=[reader]), traces=False),
            PrometheusHook(registry),
        ]
    )
    async with r.stream("r", Request.simple("tell me"), Envelope(budget=10.0, tenant="acme")) as s:
        events = [e async for e in s]
    end = events[-1]
    assert isinstance(end, Completed) and end.response.record is not None
    streamed = end.response.record
    plain = await r.complete("r", Request.simple("hi"), Envelope(budget=10.0))
    assert plain.record is not None and plain.record.target_used == "a"
    data = reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    return metrics, registry, (streamed, plain.record, ta, tb)


async def test_genai_metrics_have_the_conventions_names_units_attributes_and_buckets() -> None:
    metrics, _, (streamed, _plain, ta, tb) = await traffic()

    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    points = {
        (p.attributes or {}).get("failover.target", "") + "/" + str((p.attributes or {}).get("error.type")): p
        for p in duration.data.data_points
    }
    assert set(points) == {"a/provider_server_error", "b/None", "a/None"}
    failed = points["a/provider_server_error"]
    assert isinstance(failed, HistogramDataPoint) and failed.count == 2
    assert dict(failed.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": ta.model,
        "error.type": "provider_server_error",
        "failover.target": "a",
    }
    assert list(failed.explicit_bounds) == [*GENAI_SECONDS, 163.84, 327.68]
    ok_b = points["b/None"]
    assert isinstance(ok_b, HistogramDataPoint) and dict(ok_b.attributes or {})["gen_ai.provider.name"] == "anthropic"
    assert ok_b.sum == pytest.approx(streamed.attempts[-1].duration)

    ttfc = metrics["gen_ai.client.operation.time_to_first_chunk"]
    assert ttfc.unit == "s"
    (first,) = ttfc.data.data_points  # only the streamed attempt that got a chunk; the plain call has none
    assert isinstance(first, HistogramDataPoint) and list(first.explicit_bounds) == GENAI_SECONDS
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": tb.model,
        "failover.target": "b",
    }
    assert first.count == 1 and first.sum == pytest.approx(0.3, abs=0.01)

    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    by_type = {
        (dict(p.attributes or {})["failover.target"], dict(p.attributes or {})["gen_ai.token.type"]): p
        for p in usage.data.data_points
    }
    assert set(by_type) == {("a", "input"), ("a", "output"), ("b", "input"), ("b", "output")}
    assert by_type["a", "input"].sum == 7 and by_type["a", "output"].sum == 3
    assert list(by_type["a", "input"].explicit_bounds) == GENAI_TOKENS
    # the prompt cache, per route and target: the plain answer read 5 of its 7 input tokens from it
    for name, a_tokens in (("failover.input_tokens", 7), ("failover.cached_input_tokens", 5)):
        assert metrics[name].unit == "{token}"
        by_target = {dict(p.attributes or {})["target"]: p for p in metrics[name].data.data_points}
        assert {k: dict(p.attributes or {}) for k, p in by_target.items()} == {
            t: {"route": "r", "target": t} for t in ("a", "b")
        }
        assert isinstance(by_target["a"], NumberDataPoint) and by_target["a"].value == a_tokens
    assert by_target["b"].value == 0  # b's answer cached nothing

    request = metrics["failover.request.duration"]
    by = {dict(p.attributes or {})["answered_by"]: p for p in request.data.data_points}
    assert set(by) == {"fallback", "primary"}
    assert dict(by["fallback"].attributes or {}) == {
        "route": "r",
        "workflow": "fallback",
        "answered_by": "fallback",
        "outcome": "ok",
    }
    assert by["fallback"].sum == pytest.approx(streamed.elapsed_ms / 1000)
    (to_first,) = metrics["failover.request.time_to_first_chunk"].data.data_points
    # from the request's start: both failed attempts and the wait between them are in it
    assert to_first.sum == pytest.approx(streamed.attempts[-1].start + 0.3, abs=0.01) and to_first.sum > 0.3
    (recovered,) = metrics["failover.recoveries"].data.data_points
    assert isinstance(recovered, NumberDataPoint) and recovered.value == 1
    assert dict(recovered.attributes or {}) == {"route": "r", "workflow": "fallback", "reason": "provider_server_error"}


async def test_both_exports_agree_under_the_derived_prometheus_names() -> None:
    """Every OpenTelemetry data point has its Prometheus twin with the same numbers, so one
    dashboard reads the gateway's /metrics and an OTel pipeline exported to Prometheus alike."""
    metrics, registry, _ = await traffic()
    assert len(metrics) >= 8
    for m in metrics.values():
        name = prometheus_name(m)
        for p in m.data.data_points:
            want = labels(p.attributes)
            if m.name == "gen_ai.client.operation.duration":
                want.setdefault("error_type", "")  # absent in OTel, an empty label in Prometheus
            if isinstance(p, HistogramDataPoint):
                assert registry.get_sample_value(f"{name}_count", want) == p.count, (name, want)
                assert registry.get_sample_value(f"{name}_sum", want) == pytest.approx(p.sum), (name, want)
                for bound, cumulative in zip(p.explicit_bounds, _cumulative(p.bucket_counts), strict=False):
                    got = registry.get_sample_value(f"{name}_bucket", {**want, "le": _le(bound)})
                    assert got == cumulative, (name, want, bound)
            else:
                assert isinstance(p, NumberDataPoint)
                assert registry.get_sample_value(name, want) == pytest.approx(p.value), (name, want)


def _cumulative(counts: Any) -> list[int]:
    out, total = [], 0
    for c in counts:
        total += c
        out.append(total)
    return out


def _le(bound: float) -> str:
    return floatToGoString(bound)  # how the exposition writes ``le``: 1.048576e+06


async def test_metrics_can_be_off_and_traces_still_work() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    a = FakeProvider("a", "openai", Script.always(Reply.ok()))
    r = router([target(a)], [], a)
    r.hooks = Hooks([OpenTelemetryHook(tracer, MeterProvider(metric_readers=[reader]), metrics=False)])
    await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    data = reader.get_metrics_data()
    assert data is None or not [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
    assert len(exporter.get_finished_spans()) == 2
