"""OpenTelemetry from the events: traces (a span per request, a child span per attempt) and metrics.

The attempt spans follow the GenAI semantic conventions (client inference spans): the name
``chat {model}``, kind CLIENT, ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.*``,
``gen_ai.response.id``, and ``error.type`` (the FailureKind) on a failed attempt. The metrics
are the instruments of ``_instruments`` (the GenAI metric conventions where they exist,
``failover.*`` for the rest), the same the Prometheus exporters have, recorded through the
OpenTelemetry API's meter. opentelemetry-api is imported when the hook is created, not when
failover is imported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _instruments as i
from ._events import AttemptEnded, AttemptStarted, Backoff, Event, RequestEnded, RequestStarted
from ._instruments import feed, provider_name

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.trace import Span, TracerProvider


@dataclass(slots=True)
class _Request:
    span: Span
    wall_ns: int  # wall time (ns) at loop time 0, fixed when the request started
    attempts: dict[tuple[str, str], Span] = field(default_factory=dict)

    def ns(self, at: float) -> int:
        return self.wall_ns + int(at * 1e9)


class OpenTelemetryHook:
    """A :class:`~failover.telemetry.Hook` that turns events into spans and metrics.

    >>> router = Router(routes, hooks=[OpenTelemetryHook()])  # the global providers
    >>> router = Router(routes, hooks=[OpenTelemetryHook(meter_provider=mp, traces=False)])

    Span times come from the events' loop times, anchored to the wall clock when the
    request starts, so they are right under a virtual clock too. A request's spans are kept
    by ``request_id`` until it ends: give concurrent requests distinct ids (the default).
    ``traces`` / ``metrics`` turn either off; without an SDK configured both go to the API's
    no-op providers.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        traces: bool = True,
        metrics: bool = True,
    ) -> None:
        from opentelemetry import trace  # the `otel` extra; imported only when used

        self._trace = trace
        self._tracer = trace.get_tracer("failover", tracer_provider=tracer_provider) if traces else None
        self._requests: dict[str, _Request] = {}
        self._metrics = _Metrics(meter_provider) if metrics else None

    def __call__(self, event: Event, /) -> None:
        if self._metrics is not None:
            feed(self._metrics, event)
        if self._tracer is None:
            return
        if isinstance(event, RequestStarted):
            self._request_started(event)
        elif isinstance(event, AttemptStarted):
            self._attempt_started(event)
        elif isinstance(event, AttemptEnded):
            self._attempt_ended(event)
        elif isinstance(event, Backoff):
            req = self._requests.get(event.request_id)
            if req is not None:
                attrs: dict[str, Any] = {
                    "failover.target": event.target,
                    "failover.seconds": event.seconds,
                    "failover.reason": event.reason,
                }
                req.span.add_event("failover.backoff", attrs, timestamp=req.ns(event.at))
        elif isinstance(event, RequestEnded):
            self._request_ended(event)

    def _request_started(self, event: RequestStarted) -> None:
        wall_ns = time.time_ns() - int(event.at * 1e9)
        assert self._tracer is not None
        span = self._tracer.start_span(
            "failover.request",
            kind=self._trace.SpanKind.INTERNAL,
            attributes={"failover.request_id": event.request_id, "failover.route": event.route},
            start_time=wall_ns + int(event.at * 1e9),
        )
        self._requests[event.request_id] = _Request(span, wall_ns)

    def _attempt_started(self, event: AttemptStarted) -> None:
        req = self._requests.get(event.request_id)
        if req is None:
            return
        assert self._tracer is not None
        span = self._tracer.start_span(
            f"chat {event.model}",
            context=self._trace.set_span_in_context(req.span),
            kind=self._trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": event.model,
                "failover.target": event.target,
                "failover.phase": event.phase,
                "failover.attempt.index": event.index,
            },
            start_time=req.ns(event.at),
        )
        req.attempts[(event.target, event.phase)] = span

    def _attempt_ended(self, event: AttemptEnded) -> None:
        req = self._requests.get(event.request_id)
        span = None if req is None else req.attempts.pop((event.target, event.phase), None)
        if req is None or span is None:
            return
        attrs: dict[str, Any] = {
            "gen_ai.provider.name": provider_name(event.provider),
            "failover.attempt.index": event.index,
            "failover.outcome": event.outcome,
            "failover.cost": event.cost,
        }
        if event.stop_reason is not None:
            attrs["gen_ai.response.finish_reasons"] = (event.stop_reason,)
        if event.input_tokens is not None:
            attrs["gen_ai.usage.input_tokens"] = event.input_tokens
        if event.output_tokens is not None:
            attrs["gen_ai.usage.output_tokens"] = event.output_tokens
        if event.cached_input_tokens:  # part of gen_ai.usage.input_tokens
            attrs["gen_ai.usage.cache_read.input_tokens"] = event.cached_input_tokens
        if event.provider_request_id is not None:
            attrs["gen_ai.response.id"] = event.provider_request_id
        if event.status is not None:
            attrs["http.response.status_code"] = event.status
        if event.failure is not None:
            attrs["error.type"] = event.failure
        span.set_attributes(attrs)
        if event.failure is not None:
            span.set_status(self._trace.StatusCode.ERROR, event.outcome)
        span.end(end_time=req.ns(event.at))

    def _request_ended(self, event: RequestEnded) -> None:
        req = self._requests.pop(event.request_id, None)
        if req is None:
            return
        end = req.ns(event.at)
        for span in req.attempts.values():  # an attempt that raised instead of ending
            span.set_attribute("failover.outcome", "interrupted")
            span.end(end_time=end)
        span = req.span
        span.set_attributes(
            {
                "failover.outcome": event.outcome,
                "failover.workflow": event.workflow,
                "failover.recovered": event.recovered,
                "failover.degraded": event.degraded,
                "failover.attempts": event.attempts,
                "failover.cost": event.total_cost,
            }
        )
        if event.target_used is not None:
            span.set_attribute("failover.target_used", event.target_used)
        if event.outcome not in ("ok", "degraded"):
            span.set_attribute("error.type", event.outcome)
            span.set_status(self._trace.StatusCode.ERROR, event.outcome)
        span.end(end_time=end)


class _Metrics:
    """The instruments of ``_instruments`` on an OpenTelemetry meter, as a ``Measures``.

    Attribute dicts are built once per kind of attempt and request and kept (values are
    bounded, see ``_instruments``)."""

    def __init__(self, meter_provider: MeterProvider | None) -> None:
        from opentelemetry import metrics

        meter = metrics.get_meter("failover", meter_provider=meter_provider)

        def histogram(instrument: i.Instrument) -> Histogram:
            return meter.create_histogram(
                instrument.name,
                unit=instrument.unit,
                description=instrument.description,
                explicit_bucket_boundaries_advisory=instrument.buckets,
            )

        def counter(instrument: i.Instrument) -> Counter:
            return meter.create_counter(instrument.name, unit=instrument.unit, description=instrument.description)

        self.operation_duration = histogram(i.OPERATION_DURATION)
        self.time_to_first_chunk = histogram(i.TIME_TO_FIRST_CHUNK)
        self.token_usage = histogram(i.TOKEN_USAGE)
        self.request_duration = histogram(i.REQUEST_DURATION)
        self.request_time_to_first_chunk = histogram(i.REQUEST_TIME_TO_FIRST_CHUNK)
        self.limiter_waits = histogram(i.LIMITER_WAIT)
        self.attempts = counter(i.ATTEMPTS)
        self.recoveries = counter(i.RECOVERIES)
        self.deadline_exhausted = counter(i.DEADLINE_EXHAUSTED)
        self.no_candidate = counter(i.NO_ELIGIBLE_CANDIDATE)
        self.cost = counter(i.COST)
        self.failed_attempt_cost = counter(i.FAILED_ATTEMPT_COST)
        self.input_tokens = counter(i.INPUT_TOKENS)
        self.cached_input_tokens = counter(i.CACHED_INPUT_TOKENS)
        self._attrs: dict[tuple[object, ...], tuple[dict[str, Any], ...]] = {}

    def attempt(
        self,
        route: str,
        target: str,
        model: str,
        provider: str | None,
        outcome: str,
        failure: str | None,
        seconds: float,
        first_chunk: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
        cached_input_tokens: int | None,
        cost: float,
    ) -> None:
        key = ("attempt", target, model, provider, outcome)
        attrs = self._attrs.get(key)
        if attrs is None:
            genai = {
                i.GEN_AI_OPERATION_NAME: i.OPERATION,
                i.GEN_AI_PROVIDER_NAME: provider_name(provider or ""),
                i.GEN_AI_REQUEST_MODEL: model,
            }
            error = i.error_type(outcome, failure)
            attrs = self._attrs[key] = (
                {**genai, **({i.ERROR_TYPE: error} if error else {}), i.FAILOVER_TARGET: target},
                {**genai, i.FAILOVER_TARGET: target},
                {**genai, i.GEN_AI_TOKEN_TYPE: "input", i.FAILOVER_TARGET: target},
                {**genai, i.GEN_AI_TOKEN_TYPE: "output", i.FAILOVER_TARGET: target},
                {"target": target, "outcome": outcome},
            )
        duration, plain, tokens_in, tokens_out, counted = attrs
        self.attempts.add(1, counted)
        self.operation_duration.record(max(0.0, seconds), duration)
        if first_chunk is not None:
            self.time_to_first_chunk.record(max(0.0, first_chunk), plain)
        if input_tokens is not None:
            self.token_usage.record(input_tokens, tokens_in)
        if output_tokens is not None:
            self.token_usage.record(output_tokens, tokens_out)
        if input_tokens is not None:
            where = {"route": route, "target": target}
            self.input_tokens.add(max(0, input_tokens), where)
            self.cached_input_tokens.add(max(0, cached_input_tokens or 0), where)
        if cost > 0 and outcome != "ok":
            self.failed_attempt_cost.add(cost, {"route": route, "target": target})

    def limiter_wait(self, target: str, seconds: float) -> None:
        self.limiter_waits.record(max(0.0, seconds), {"target": target})

    def request(
        self,
        route: str,
        workflow: str,
        answered_by: str,
        outcome: str,
        seconds: float,
        first_chunk: float | None,
        recovery: str | None,
        attempts: int,
        cost: float,
        tenant: str | None,
    ) -> None:
        key = ("request", route, workflow, answered_by, outcome)
        attrs = self._attrs.get(key)
        if attrs is None:
            attrs = self._attrs[key] = (
                {"route": route, "workflow": workflow, "answered_by": answered_by, "outcome": outcome},
                {"route": route},
            )
        labels, by_route = attrs
        self.request_duration.record(max(0.0, seconds), labels)
        if first_chunk is not None:
            self.request_time_to_first_chunk.record(max(0.0, first_chunk), by_route)
        if recovery is not None:
            self.recoveries.add(1, {"route": route, "workflow": workflow, "reason": recovery})
        if outcome == "deadline_exhausted":
            self.deadline_exhausted.add(1, by_route)
        elif outcome == "contract_failure" and attempts == 0:
            self.no_candidate.add(1, by_route)
        if cost > 0:
            self.cost.add(cost, {"route": route, "tenant": tenant or "-"})
