"""Telemetry through hooks: the Router reports what it does as small frozen events.

    router = Router(routes, hooks=[my_hook, OpenTelemetryHook()])

A hook is any ``callable(event) -> None`` (:class:`Hook`). Events carry no headers, keys,
prompts or completions (see ``_events``). :class:`OpenTelemetryHook` needs the ``otel`` extra.
"""

from ._events import AttemptEnded, AttemptStarted, Backoff, Event, RequestEnded, RequestStarted
from ._hooks import Hook, Hooks
from ._otel import OpenTelemetryHook

__all__ = [
    "AttemptEnded",
    "AttemptStarted",
    "Backoff",
    "Event",
    "Hook",
    "Hooks",
    "OpenTelemetryHook",
    "RequestEnded",
    "RequestStarted",
]
