"""One log line per attempt and per request, through stdlib logging or structlog.

    router = Router(routes, hooks=[LoggingHook()])                   # logger "failover.requests"
    router = Router(routes, hooks=[LoggingHook("app.llm", level=logging.DEBUG)])

A line is ``failover.attempt key=value ...`` / ``failover.request key=value ...``; the same
fields ride along as ``extra={"failover": {...}}`` for JSON formatters. A request that did not
end ``ok`` or ``degraded``, and a breaker that opens, log at WARNING at least. With structlog
(``structlog=True``, or installed AND configured by the application) the fields are keyword
arguments of a structlog logger instead. The lines carry what the events carry: names,
numbers and labels, never a key, a prompt or a completion.
"""

from __future__ import annotations

import logging
from typing import Any

from ._events import AttemptEnded, Backoff, BreakerChanged, Event, RequestEnded


class LoggingHook:
    """A :class:`~failover.telemetry.Hook` that logs attempts, waits, breaker changes and requests.

    ``level`` is for request lines, ``attempt_level`` (default: ``level``) for attempts and waits.
    ``structlog``: None uses structlog when it is installed and configured, True requires it,
    False never uses it.
    """

    def __init__(
        self,
        logger: logging.Logger | str | None = None,
        *,
        level: int = logging.INFO,
        attempt_level: int | None = None,
        structlog: bool | None = None,
    ) -> None:
        name = logger.name if isinstance(logger, logging.Logger) else (logger or "failover.requests")
        self.level = level
        self.attempt_level = level if attempt_level is None else attempt_level
        self._std = logger if isinstance(logger, logging.Logger) else logging.getLogger(name)
        self._struct: Any = _structlog_logger(name, structlog)

    @property
    def uses_structlog(self) -> bool:
        return self._struct is not None

    def __repr__(self) -> str:
        kind = "structlog" if self._struct is not None else "logging"
        return f"LoggingHook({self._std.name!r}, {kind}, level={logging.getLevelName(self.level)})"

    def __call__(self, event: Event, /) -> None:
        if isinstance(event, AttemptEnded):
            self._emit(self.attempt_level, "failover.attempt", _attempt_fields(event))
        elif isinstance(event, Backoff):
            fields = {"request_id": event.request_id, "target": event.target, "reason": event.reason}
            self._emit(self.attempt_level, "failover.wait", {**fields, "seconds": round(event.seconds, 3)})
        elif isinstance(event, RequestEnded):
            level = self.level if event.outcome in ("ok", "degraded") else max(self.level, logging.WARNING)
            self._emit(level, "failover.request", _request_fields(event))
        elif isinstance(event, BreakerChanged):
            level = max(self.level, logging.WARNING) if event.new == "open" else self.level
            fields = {"scope": event.scope, "layer": event.layer, "old": event.old, "new": event.new}
            self._emit(level, "failover.breaker", {**fields, "reason": event.reason})

    def _emit(self, level: int, what: str, fields: dict[str, Any]) -> None:
        if self._struct is not None:
            self._struct.log(level, what, **fields)
            return
        if self._std.isEnabledFor(level):
            line = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
            self._std.log(level, "%s %s", what, line, extra={"failover": fields})


def _attempt_fields(event: AttemptEnded) -> dict[str, Any]:
    return {
        "request_id": event.request_id,
        "route": event.route,
        "target": event.target,
        "model": event.model,
        "phase": event.phase,
        "index": event.index,
        "outcome": event.outcome,
        "status": event.status,
        "duration_s": round(event.duration, 3),
        "input_tokens": event.input_tokens,
        "output_tokens": event.output_tokens,
        "cached_input_tokens": event.cached_input_tokens,
        "cost": round(event.cost, 6),
        "stop_reason": event.stop_reason,
        "provider_request_id": event.provider_request_id,
    }


def _request_fields(event: RequestEnded) -> dict[str, Any]:
    return {
        "request_id": event.request_id,
        "route": event.route,
        "outcome": event.outcome,
        "workflow": event.workflow,
        "recovered": event.recovered,
        "degraded": event.degraded,
        "target_used": event.target_used,
        "attempts": event.attempts,
        "elapsed_ms": round(event.elapsed_ms, 1),
        "cost": round(event.total_cost, 6),
        "tenant": event.tenant,
    }


def _structlog_logger(name: str, wanted: bool | None) -> Any:
    if wanted is False:
        return None
    try:
        import structlog
    except ImportError:
        if wanted:
            raise ImportError("LoggingHook(structlog=True) needs structlog: pip install structlog") from None
        return None
    # Installed but never configured (a transitive dependency, say): its default prints to
    # stdout, which would surprise an application that logs through stdlib logging.
    if wanted is None and not structlog.is_configured():
        return None
    return structlog.get_logger(name)
