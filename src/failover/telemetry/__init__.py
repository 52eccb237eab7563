"""Telemetry through hooks: the Router reports what it does as small frozen events.

    router = Router(routes, hooks=[my_hook, OpenTelemetryHook()])

A hook is any ``callable(event) -> None`` (:class:`Hook`). Events carry no headers, keys,
prompts or completions (see ``_events``). :class:`OpenTelemetryHook` (spans and metrics) needs
the ``otel`` extra; :class:`PrometheusHook` uses prometheus_client (the ``gateway`` extra); both
report the same metrics, the OpenTelemetry GenAI conventions' where they exist (``_instruments``).
:class:`LoggingHook` writes one line per attempt and per request through stdlib logging, or
structlog when configured.
"""

from ._events import AttemptEnded, AttemptStarted, Backoff, BreakerChanged, Event, RequestEnded, RequestStarted
from ._hooks import Hook, Hooks
from ._instruments import answered, feed_record
from ._logging import LoggingHook
from ._otel import OpenTelemetryHook
from ._prometheus import PrometheusHook, RouterMetrics
from ._series import CounterFamily, CounterSeries, HistogramFamily, HistogramSeries

__all__ = [
    "CounterFamily",
    "CounterSeries",
    "HistogramFamily",
    "HistogramSeries",
    "RouterMetrics",
    "answered",
    "feed_record",
    "AttemptEnded",
    "AttemptStarted",
    "Backoff",
    "BreakerChanged",
    "Event",
    "Hook",
    "Hooks",
    "LoggingHook",
    "OpenTelemetryHook",
    "PrometheusHook",
    "RequestEnded",
    "RequestStarted",
]
