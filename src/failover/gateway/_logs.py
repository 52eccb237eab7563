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
import threading
import time
import traceback
from collections.abc import Callable
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


def internal_error(exc: BaseException, scrub: Callable[[str], str]) -> str:
    """An unexpected exception as an operator needs it: its traceback, with every secret
    ``scrub`` knows and every key-shaped string taken out (the client sees none of it)."""
    return scrub_secrets(scrub("".join(traceback.format_exception(exc)).rstrip()))


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
        fields = getattr(record, "failover", None)
        exc = self.formatException(record.exc_info) if record.exc_info else None
        return self.line(
            record.created,
            record.msecs,
            record.levelname,
            record.name,
            record.getMessage(),
            fields if isinstance(fields, dict) else None,
            exc,
        )

    def line(
        self,
        created: float,
        msecs: float,
        levelname: str,
        name: str,
        message: str,
        fields: dict[str, Any] | None = None,
        exc: str | None = None,
    ) -> str:
        """One line from its parts (what :meth:`format` reads off a record)."""
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
            self._second = second
        out: dict[str, Any] = {
            "ts": f"{self._stamp}.{int(msecs):03d}Z",
            "level": levelname.lower(),
            "logger": name,
            "message": message,
        }
        if fields:
            out.update(fields)
        if exc:
            out["exc"] = exc
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


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
        return self._time(record.created, record.msecs)

    def _time(self, created: float, msecs: float) -> str:
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", self.converter(created))
            self._second = second
        return f"{self._stamp},{int(msecs):03d}"

    def line(self, created: float, msecs: float, levelname: str, name: str, message: str) -> str:
        """A line of :data:`TEXT_FORMAT` from its parts: what :meth:`format` makes of a record
        without exception or stack (only for a formatter of that format)."""
        return f"{self._time(created, msecs)} {levelname} {name}: {message}"


class _Writer:
    """Writes batches of log text to a stream from its own thread.

    A log stream is usually a pipe (a container runtime, systemd, a log shipper). When its
    reader falls behind, the pipe fills and a write blocks: written from the event loop, that
    stalls every request in the process until the reader catches up. Written here, only this
    thread waits. At most ``max_pending`` bytes wait for it; past that, batches are dropped and
    counted, and as soon as the stream takes a write again a line says how many were lost
    (``notice``), also when nothing else is logged: a stuck reader costs log lines, never
    requests, and never silently."""

    def __init__(self, stream: Callable[[], Any], max_pending: int, notice: Callable[[int], str]) -> None:
        self.stream = stream  # the handler's current stream (StreamHandler.setStream may change it)
        self.max_pending = max_pending
        self.notice = notice
        self.dropped = 0  # lines dropped since the last notice
        self._cond = threading.Condition()
        self._queue: list[str] = []
        self._pending = 0  # bytes queued or being written
        self._writing = False  # a write (perhaps only the notice) is under way
        self._closed = False
        self._thread: threading.Thread | None = None

    def put(self, data: str, lines: int) -> None:
        with self._cond:
            if self._pending + len(data) > self.max_pending:
                self.dropped += lines
                return
            # Closed, and used again: logging.config.dictConfig (uvicorn's) closes every handler
            # it finds, and the failover logger keeps using its own after that.
            self._closed = False
            self._queue.append(data)
            self._pending += len(data)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="failover-log-writer", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self.dropped and not self._closed:
                    self._cond.wait()
                if not self._queue and not self.dropped:
                    self._thread = None  # (under the lock: a put() from now on starts another)
                    return
                data, size = "".join(self._queue), self._pending
                self._queue.clear()
                dropped, self.dropped = self.dropped, 0
                self._writing = True
            try:
                stream = self.stream()
                stream.write(self.notice(dropped) + data if dropped else data)
                if hasattr(stream, "flush"):
                    stream.flush()
            except Exception:  # a closed or broken stream: the lines are lost, the gateway goes on
                pass
            with self._cond:
                self._pending -= size
                self._writing = False
                self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until everything handed over is written, and any loss said (or ``timeout`` s);
        True when it is."""
        with self._cond:
            return self._cond.wait_for(lambda: not (self._pending or self.dropped or self._writing), timeout)

    def close(self, timeout: float) -> None:
        """Write what is queued (waiting at most ``timeout`` s), then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)


class BatchingStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler that writes INFO lines in batches, from a thread of its own.

    The access log writes one line per request; a write (and flush) each costs a system call,
    a measurable share of a request at a thousand requests a second. Lines are kept for at
    most ``interval`` seconds (flushed by the running event loop, or by the next line once
    that much time has passed), or until ``max_bytes`` are waiting; warnings and errors are
    handed over at once. The batches are written by a writer thread (:class:`_Writer`), so a
    stream nobody reads fast enough never stalls the event loop; at most ``max_pending`` bytes
    wait for it, beyond which lines are dropped and a warning line says how many. Anything
    logged outside an event loop is written at once, in order, on the caller's thread;
    ``logging.shutdown()`` (at exit) writes what is left."""

    def __init__(
        self,
        stream: Any = None,
        *,
        interval: float = 0.05,
        max_bytes: int = 64 * 1024,
        max_pending: int = 8 * 1024 * 1024,
    ) -> None:
        super().__init__(stream)
        self.interval = interval
        self.max_bytes = max_bytes
        self._buf: list[str | _Later] = []
        self._later = False  # an access line waits in _buf to be made
        self._size = 0
        self._since = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._writer = _Writer(lambda: self.stream, max_pending, self._dropped_notice)

    @property
    def dropped(self) -> int:
        """Lines dropped since the last notice (a stream that was not read fast enough)."""
        return self._writer.dropped

    def _dropped_notice(self, lines: int) -> str:
        record = logging.makeLogRecord(
            {
                "name": "failover.gateway",
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "%d log lines dropped: the log stream was not read fast enough",
                "args": (lines,),
                "created": time.time(),
            }
        )
        record.msecs = (record.created % 1) * 1000
        try:
            return self.format(record) + self.terminator
        except Exception:
            return f"WARNING {lines} log lines dropped: the log stream was not read fast enough{self.terminator}"

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        self._add(line, record.levelno)

    def add_later(self, line: _Later) -> None:
        """An INFO line to be made when its batch is written (see :class:`AccessLine`),
        buffered as :meth:`emit` buffers one, in order with the lines around it."""
        self.acquire()
        try:
            self._later = True
            self._add(line, logging.INFO)
        finally:
            self.release()

    def _add(self, line: str | _Later, levelno: int) -> None:
        now = time.monotonic()
        if not self._buf:
            self._since = now
        self._buf.append(line)
        self._size += len(line) if type(line) is str else _LATER_BYTES
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write_here()
            return
        if levelno >= logging.WARNING or self._size >= self.max_bytes or now - self._since >= self.interval:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.interval, self.flush)

    def _take(self) -> tuple[str, int]:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        buf = self._buf
        if self._later:  # access lines made now, in one go, each as it would have been at once
            self._later = False
            buf = [line if isinstance(line, str) else self._render(line) for line in buf]
        data, lines = "".join(buf), len(buf)  # type: ignore[arg-type]  # (every line is text now)
        self._buf.clear()
        self._size = 0
        return data, lines

    def _render(self, line: _Later) -> str:
        try:
            return line.render(self) + self.terminator
        except Exception:  # a line that cannot be made is reported, the batch goes on
            self.handleError(logging.makeLogRecord({"name": ACCESS_LOGGER, "msg": line.access.fmt}))
            return ""

    def flush(self) -> None:
        """Hand what is waiting to the writer thread (it never blocks on the stream)."""
        self.acquire()
        try:
            data, lines = self._take()
            if data:
                self._writer.put(data, lines)
        finally:
            self.release()

    def _write_here(self) -> None:
        """Outside an event loop: after what the writer holds, on this thread, at once."""
        self.acquire()
        try:
            data, _ = self._take()
            self._writer.drain(timeout=5.0)
            self.stream.write(data)
            if hasattr(self.stream, "flush"):
                self.stream.flush()
        except Exception:
            pass
        finally:
            self.release()

    def drain(self, timeout: float = 5.0) -> bool:
        """Hand over what is waiting and wait until the writer has written it (tests, shutdown)."""
        self.flush()
        return self._writer.drain(timeout)

    def close(self) -> None:
        self.flush()
        self._writer.close(timeout=5.0)
        super().close()


# What an access line not yet made counts toward a batch's max_bytes (a made one: its length).
_LATER_BYTES = 256

Parts = Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]


class AccessLine:
    """Writes the access log's lines, one per request, straight to failover's own handler.

    Through ``logging``, a line is a LogRecord (some forty attributes, the caller's file name
    split apart), a walk up the logger tree, two filters and a formatter. When the access
    logger's lines can only reach one :class:`BatchingStreamHandler` with one of failover's
    formatters (as ``failover serve`` configures it), the handler is given what the line is
    made of, and makes it, exactly as that formatter would, when it writes its batch: the
    request's time is taken when it ends, the line's text only with the others of its batch.
    Made one after the other, a batch's lines cost a fraction of what each costs made at the
    end of its own request, between two requests' unrelated work (measured in
    docs/benchmarks.md). Any other set-up (a ``--log-config`` of the operator's, a filter on
    the access logger, another handler up the tree, a level above INFO) goes through
    ``logging`` at once, as usual. The set-up is looked at again for every line, so a change
    to it takes effect at once.
    """

    def __init__(self, logger: logging.Logger, fmt: str) -> None:
        self.logger = logger
        self.fmt = fmt  # the message's %-format; its args come with each line

    def sink(self) -> BatchingStreamHandler | None:
        """The one handler every line reaches, when it may be written to directly."""
        logger: logging.Logger | None = self.logger
        if self.logger.filters or self.logger.disabled:
            return None
        found: BatchingStreamHandler | None = None
        while logger is not None:
            for handler in logger.handlers:
                if found is not None or type(handler) is not BatchingStreamHandler:
                    return None
                if handler.level > logging.INFO or any(type(f) is not SecretFilter for f in handler.filters):
                    return None  # (SecretFilter passes access lines as they are)
                formatter = handler.formatter
                if not (
                    type(formatter) is JsonFormatter
                    or (type(formatter) is _TextFormatter and formatter._fmt == TEXT_FORMAT)
                ):
                    return None
                found = handler
            logger = logger.parent if logger.propagate else None
        return found

    def write(self, parts: Parts, entry: Any) -> None:
        """One line: ``parts(entry)`` gives ``(args, fields)``, ``fmt % args`` its message and
        ``fields`` the JSON format's fields (the caller has checked that the access logger is
        enabled for INFO). ``entry`` must not change after this call."""
        handler = self.sink()
        if handler is None:
            self.logger.handle(self.record(*parts(entry)))
            return
        handler.add_later(_Later(self, time.time(), parts, entry))  # the time as LogRecord reads it

    def record(self, args: tuple[Any, ...], fields: dict[str, Any]) -> logging.LogRecord:
        return self.logger.makeRecord(
            self.logger.name, logging.INFO, __file__, 0, self.fmt, args, None, "write", {"failover": fields}
        )


class _Later:
    """An access line waiting in its handler's batch, made when the batch is written."""

    __slots__ = ("access", "created", "entry", "parts")

    def __init__(self, access: AccessLine, created: float, parts: Parts, entry: Any) -> None:
        self.access = access
        self.created = created
        self.parts = parts
        self.entry = entry

    def render(self, handler: logging.Handler) -> str:
        args, fields = self.parts(self.entry)
        access, created = self.access, self.created
        msecs = (created - int(created)) * 1000
        formatter = handler.formatter
        if type(formatter) is JsonFormatter:
            return formatter.line(created, msecs, "INFO", access.logger.name, access.fmt % args, fields)
        if type(formatter) is _TextFormatter and formatter._fmt == TEXT_FORMAT:
            return formatter.line(created, msecs, "INFO", access.logger.name, access.fmt % args)
        record = access.record(args, fields)  # the handler's formatter changed since the line was written
        record.created, record.msecs = created, msecs
        return handler.format(record)


def drain_logs(timeout: float = 2.0) -> None:
    """Write what the ``failover`` logger's batching handlers hold, waiting at most ``timeout``
    s: at shutdown, since ``failover serve`` ends by the signal it was sent (uvicorn raises it
    again once it has shut down), and no ``logging.shutdown()`` runs after that."""
    for handler in logging.getLogger("failover").handlers:
        if isinstance(handler, BatchingStreamHandler):
            handler.drain(timeout)


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
        handler.setFormatter(_TextFormatter(TEXT_FORMAT))
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
    "AccessLine",
    "BatchingStreamHandler",
    "JsonFormatter",
    "SecretFilter",
    "configure_logging",
    "drain_logs",
    "guard_handlers",
]
