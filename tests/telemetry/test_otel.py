"""The OpenTelemetry hook: a request span with one GenAI client span per attempt."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from failover import Envelope, Request
from failover.telemetry import OpenTelemetryHook

from .test_hooks import failing_over

pytestmark = pytest.mark.looptime


async def test_one_request_span_and_a_genai_span_per_attempt() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    r, secrets = failing_over(OpenTelemetryHook(tracer_provider=provider))
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "from b"

    spans = exporter.get_finished_spans()
    (req,) = [s for s in spans if s.name == "failover.request"]
    attempts = sorted((s for s in spans if s is not req), key=lambda s: s.start_time or 0)
    assert len(spans) == 4 and len(attempts) == 3
    assert req.attributes is not None
    assert dict(req.attributes) | {"failover.request_id": "-"} == {
        "failover.request_id": "-",
        "failover.route": "r",
        "failover.outcome": "ok",
        "failover.workflow": "fallback",
        "failover.recovered": True,
        "failover.degraded": False,
        "failover.attempts": 3,
        "failover.cost": pytest.approx(resp.record.total_cost if resp.record else -1),
        "failover.target_used": "b",
    }
    assert [e.name for e in req.events] == ["failover.backoff"]
    for s in attempts:
        assert s.parent is not None and s.parent.span_id == req.context.span_id
        assert s.kind is SpanKind.CLIENT and s.attributes is not None
        assert s.attributes["gen_ai.operation.name"] == "chat"
        assert s.start_time is not None and s.end_time is not None and s.start_time <= s.end_time
    failed, _, ok = attempts
    assert failed.name.startswith("chat ") and failed.attributes is not None and ok.attributes is not None
    assert failed.attributes["gen_ai.provider.name"] == "openai"
    assert failed.attributes["error.type"] == "provider_server_error"
    assert failed.attributes["http.response.status_code"] == 500
    assert failed.status.status_code is StatusCode.ERROR
    assert ok.attributes["gen_ai.provider.name"] == "anthropic"
    assert ok.attributes["gen_ai.request.model"] == resp.record.attempts[-1].model if resp.record else False
    assert ok.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert isinstance(ok.attributes["gen_ai.usage.input_tokens"], int)
    assert isinstance(ok.attributes["gen_ai.usage.output_tokens"], int)
    assert "gen_ai.usage.cache_read.input_tokens" not in ok.attributes  # nothing was read from a cache
    assert "error.type" not in ok.attributes and ok.status.status_code is StatusCode.UNSET
    # the attempt span lasts as long as the attempt did on the loop clock (0.2s of latency)
    assert ok.end_time is not None and ok.start_time is not None
    assert (ok.end_time - ok.start_time) / 1e9 == pytest.approx(0.2, abs=1e-3)

    values = [str(v) for s in spans for v in (s.attributes or {}).values()]
    values += [str(v) for s in spans for e in s.events for v in (e.attributes or {}).values()]
    assert secrets and not any(secret in v for v in values for secret in secrets)
