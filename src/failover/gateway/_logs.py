"""Structured logs: one JSON object per line, switchable with ``gateway.logging.format: json``.

The gateway logs one access line per chat request on ``failover.gateway.access``; its fields
travel on the log record as ``record.failover`` (a dict), so a text formatter shows the
message and :class:`JsonFormatter` shows the fields. API keys and provider secrets are never
among them; :class:`SecretFilter`, on every handler ``failover serve`` writes through, takes
credential headers and key-shaped text out of any other line (uvicorn's, and the HTTP
libraries' DEBUG lines, which show request headers).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
import time
from typing import Any

from ..model import scrub_secrets

ACCESS_LOGGER = "failover.gateway.access"


class SecretFilter(logging.Filter):
    """Rewrites a record's message without credential header values or key-shaped strings.

    On a handler, so it sees every record the handler writes, whichever logger it came from
    (a filter on a logger misses its children's records). The access log's fields hold no
    secret by construction and are left alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == ACCESS_LOGGER:
            return True
        try:
            text = record.getMessage()
        except Exception:  # a bad format: logging reports it when it formats the record
            return True
        clean = scrub_secrets(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True


def guard_handlers(*loggers: logging.Logger) -> None:
    """Put one :class:`SecretFilter` on each handler of ``loggers`` (the root logger when none
    is given); idempotent."""
    for logger in loggers or (logging.getLogger(),):
        for handler in logger.handlers:
            if not any(isinstance(f, SecretFilter) for f in handler.filters):
                handler.addFilter(SecretFilter())


# json.dumps with these options builds a new encoder for every line; this one is reused (it
# keeps no state between calls).
_JSON = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"), allow_nan=False)


class JsonFormatter(logging.Formatter):
    """``{"ts": ..., "level": ..., "logger": ..., "message": ..., <record.failover fields>}``.

    The date and time are formatted once per second rather than once per line."""

    _second = -1
    _stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            self._second = second
        out: dict[str, Any] = {
            "ts": f"{self._stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "failover", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        try:
            return _JSON.encode(out)
        except ValueError:  # a NaN or infinity among the fields: written as a string, the line stays JSON
            return json.dumps(_finite(out), ensure_ascii=False, default=str, separators=(",", ":"))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class _TextFormatter(logging.Formatter):
    """The standard text format, with the date and time formatted once per second rather
    than once per line (the access log writes a line per request), and the format applied in
    one step rather than through its style's three calls (a ``%``-style format without
    defaults, fixed at creation)."""

    _second = -1
    _stamp = ""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._uses_time = self._style.usesTime()

    def usesTime(self) -> bool:
        return self._uses_time

    def formatMessage(self, record: logging.LogRecord) -> str:
        try:
            return self._fmt % record.__dict__  # type: ignore[operator]  # what PercentStyle.format does
        except KeyError as exc:
            raise ValueError(f"Formatting field not found in record: {exc}") from exc

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", self.converter(record.created))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"


class BatchingStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler that writes INFO lines in batches instead of one write per line.

    The access log writes one line per request; a write (and flush) each costs a system call,
    a measurable share of a request at a thousand requests a second. Lines are kept for at
    most ``interval`` seconds (flushed by the running event loop, or by the next line once
    that much time has passed), or until ``max_bytes`` are waiting. Warnings and errors flush
    at once, and so does anything logged outside an event loop; ``logging.shutdown()`` (at
    exit) flushes what is left."""

    def __init__(self, stream: Any = None, *, interval: float = 0.05, max_bytes: int = 64 * 1024) -> None:
        super().__init__(stream)
        self.interval = interval
        self.max_bytes = max_bytes
        self._buf: list[str] = []
        self._size = 0
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        now = time.monotonic()
        if not self._buf:
            self._since = now
        self._buf.append(line)
        self._size += len(line)
        if record.levelno >= logging.WARNING or self._size >= self.max_bytes or now - self._since >= self.interval:
            self.flush()
            return
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer = loop.call_later(self.interval, self.flush)

    def flush(self) -> None:
        self.acquire()
        try:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._buf:
                data = "".join(self._buf)
                self._buf.clear()
                self._size = 0
                self.stream.write(data)
            if self.stream and hasattr(self.stream, "flush"):
                self.stream.flush()
        except Exception:
            self._buf.clear()
            self._size = 0
        finally:
            self.release()


def configure_logging(fmt: str, level: str = "info") -> None:
    """Give the ``failover`` logger one stderr handler, in ``text`` or ``json`` format (idempotent)."""
    logger = logging.getLogger("failover")
    for h in list(logger.handlers):
        if getattr(h, "_failover_gateway", False):
            logger.removeHandler(h)
    handler = BatchingStreamHandler(sys.stderr)
    handler._failover_gateway = True  # type: ignore[attr-defined]
    handler.addFilter(SecretFilter())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    # No format here shows the thread or process name; LogRecord looks them up for every
    # line unless told not to.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


__all__ = [
    "ACCESS_LOGGER",
    "BatchingStreamHandler",
    "JsonFormatter",
    "SecretFilter",
    "configure_logging",
    "guard_handlers",
]
