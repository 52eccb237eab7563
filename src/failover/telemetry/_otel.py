"""OpenTelemetry traces from the events: one span per request, a child span per attempt.

The attempt spans follow the GenAI semantic conventions (client inference spans): the name
``chat {model}``, kind CLIENT, ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.finish_reasons``, ``gen_ai.usage.*``,
``gen_ai.response.id``, and ``error.type`` (the FailureKind) on a failed attempt.
opentelemetry-api is imported when the hook is created, not when failover is imported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._events import AttemptEnded, AttemptStarted, Backoff, Event, RequestEnded, RequestStarted

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

# gen_ai.provider.name well-known values; an OpenAI-compatible server is reported as "openai"
# because the dialect is all the router knows of it.
_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}


@dataclass(slots=True)
class _Request:
    span: Span
    wall_ns: int  # wall time (ns) at loop time 0, fixed when the request started
    attempts: dict[tuple[str, str], Span] = field(default_factory=dict)

    def ns(self, at: float) -> int:
        return self.wall_ns + int(at * 1e9)


class OpenTelemetryHook:
    """A :class:`~failover.telemetry.Hook` that turns events into spans.

    >>> router = Router(routes, hooks=[OpenTelemetryHook()])  # the global TracerProvider

    Span times come from the events' loop times, anchored to the wall clock when the
    request starts, so they are right under a virtual clock too. A request's spans are kept
    by ``request_id`` until it ends: give concurrent requests distinct ids (the default).
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        from opentelemetry import trace  # the `otel` extra; imported only when used

        self._trace = trace
        self._tracer = trace.get_tracer("failover", tracer_provider=tracer_provider)
        self._requests: dict[str, _Request] = {}

    def __call__(self, event: Event, /) -> None:
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

    def _request_started(self, e: RequestStarted) -> None:
        wall_ns = time.time_ns() - int(e.at * 1e9)
        span = self._tracer.start_span(
            "failover.request",
            kind=self._trace.SpanKind.INTERNAL,
            attributes={"failover.request_id": e.request_id, "failover.route": e.route},
            start_time=wall_ns + int(e.at * 1e9),
        )
        self._requests[e.request_id] = _Request(span, wall_ns)

    def _attempt_started(self, e: AttemptStarted) -> None:
        req = self._requests.get(e.request_id)
        if req is None:
            return
        span = self._tracer.start_span(
            f"chat {e.model}",
            context=self._trace.set_span_in_context(req.span),
            kind=self._trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": e.model,
                "failover.target": e.target,
                "failover.phase": e.phase,
                "failover.attempt.index": e.index,
            },
            start_time=req.ns(e.at),
        )
        req.attempts[(e.target, e.phase)] = span

    def _attempt_ended(self, e: AttemptEnded) -> None:
        req = self._requests.get(e.request_id)
        span = None if req is None else req.attempts.pop((e.target, e.phase), None)
        if req is None or span is None:
            return
        attrs: dict[str, Any] = {
            "gen_ai.provider.name": _PROVIDERS.get(e.provider, e.provider),
            "failover.attempt.index": e.index,
            "failover.outcome": e.outcome,
            "failover.cost": e.cost,
        }
        if e.stop_reason is not None:
            attrs["gen_ai.response.finish_reasons"] = (e.stop_reason,)
        if e.input_tokens is not None:
            attrs["gen_ai.usage.input_tokens"] = e.input_tokens
        if e.output_tokens is not None:
            attrs["gen_ai.usage.output_tokens"] = e.output_tokens
        if e.provider_request_id is not None:
            attrs["gen_ai.response.id"] = e.provider_request_id
        if e.status is not None:
            attrs["http.response.status_code"] = e.status
        if e.failure is not None:
            attrs["error.type"] = e.failure
        span.set_attributes(attrs)
        if e.failure is not None:
            span.set_status(self._trace.StatusCode.ERROR, e.outcome)
        span.end(end_time=req.ns(e.at))

    def _request_ended(self, e: RequestEnded) -> None:
        req = self._requests.pop(e.request_id, None)
        if req is None:
            return
        end = req.ns(e.at)
        for span in req.attempts.values():  # an attempt that raised instead of ending
            span.set_attribute("failover.outcome", "interrupted")
            span.end(end_time=end)
        span = req.span
        span.set_attributes(
            {
                "failover.outcome": e.outcome,
                "failover.workflow": e.workflow,
                "failover.recovered": e.recovered,
                "failover.degraded": e.degraded,
                "failover.attempts": e.attempts,
                "failover.cost": e.total_cost,
            }
        )
        if e.target_used is not None:
            span.set_attribute("failover.target_used", e.target_used)
        if e.outcome not in ("ok", "degraded"):
            span.set_attribute("error.type", e.outcome)
            span.set_status(self._trace.StatusCode.ERROR, e.outcome)
        span.end(end_time=end)
