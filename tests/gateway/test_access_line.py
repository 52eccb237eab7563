"""The access line's direct path writes exactly what ``logging`` would, and steps aside for
any set-up it does not know.

``failover serve`` gives the ``failover`` logger one batching handler with one of failover's
formatters; the access line is then formatted by the gateway and handed to that handler,
skipping the LogRecord, the logger tree and the filters. Any other set-up goes through
``logging``. The two paths are compared byte for byte, the clock fixed.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from failover.gateway._logs import (
    ACCESS_LOGGER,
    TEXT_FORMAT,
    AccessLine,
    BatchingStreamHandler,
    JsonFormatter,
    SecretFilter,
    _TextFormatter,
)

from ._kit import Kit, chat_body

FMT = "%s route=%s tenant=%s status=%d request_id=%s target=%s attempts=%s ms=%.1f%s"
ARGS = ("chat", "r", "acme", 200, "req_1", "a", 1, 12.3, "")
FIELDS = {"event": "request", "request_id": "req_1", "status": 200, "cost_usd": float("nan"), "route": "r"}
ENTRY = (ARGS, FIELDS)


def _given(entry: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The line's parts, as the entry holds them."""
    args, fields = entry
    return args, fields


@pytest.fixture
def failover_logger() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """The ``failover`` logger as ``failover serve`` sets it up, its stream a StringIO."""
    logger = logging.getLogger("failover")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    out = io.StringIO()
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out
    for handler in logger.handlers:
        if isinstance(handler, BatchingStreamHandler):
            handler.close()
    logger.handlers, logger.level, logger.propagate = saved[0], saved[1], saved[2]
    access = logging.getLogger(ACCESS_LOGGER)
    access.filters = []


def _handler(out: io.StringIO, formatter: logging.Formatter) -> BatchingStreamHandler:
    handler = BatchingStreamHandler(out)
    handler.addFilter(SecretFilter())
    handler.setFormatter(formatter)
    return handler


def _alone(logger: logging.Logger, out: io.StringIO, formatter: logging.Formatter) -> BatchingStreamHandler:
    """A handler as ``failover serve`` makes it, the logger's only one (the test run's own
    capture handlers set aside)."""
    handler = _handler(out, formatter)
    logger.handlers = [handler]
    return handler


class _PassAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return True


@pytest.mark.parametrize("formatter", [_TextFormatter(TEXT_FORMAT), JsonFormatter()], ids=["text", "json"])
def test_the_direct_line_is_the_line_logging_writes(
    failover_logger: tuple[logging.Logger, io.StringIO], formatter: logging.Formatter, monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, out = failover_logger
    handler = _handler(out, formatter)
    logger.handlers = [handler]  # alone: the test run's own capture handlers set aside
    monkeypatch.setattr(time, "time", lambda: 1_764_806_400.0427)  # a fixed clock for both paths
    access = logging.getLogger(ACCESS_LOGGER)
    line = AccessLine(access, FMT)
    assert line.sink() is handler  # the direct path
    line.write(_given, ENTRY)
    access.addFilter(_PassAll())  # a filter on the access logger: through logging
    assert line.sink() is None
    line.write(_given, ENTRY)
    assert handler.drain()
    direct, through_logging = out.getvalue().splitlines()
    assert direct == through_logging
    assert "route=r" in direct and ("042" in direct)


def test_any_other_set_up_goes_through_logging(failover_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = failover_logger
    access = logging.getLogger(ACCESS_LOGGER)
    line = AccessLine(access, FMT)
    handler = _handler(out, _TextFormatter(TEXT_FORMAT))
    logger.handlers = [handler]  # alone: the test run's own capture handlers set aside
    assert line.sink() is handler
    # an operator's own format
    handler.setFormatter(_TextFormatter("%(levelname)s %(message)s"))
    assert line.sink() is None
    handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    assert line.sink() is None
    handler.setFormatter(_TextFormatter(TEXT_FORMAT))
    # a second handler up the tree: both must get the line
    extra = logging.StreamHandler(io.StringIO())
    logging.getLogger("failover.gateway").addHandler(extra)
    try:
        assert line.sink() is None
    finally:
        logging.getLogger("failover.gateway").removeHandler(extra)
    # a filter of the operator's on the handler
    handler.addFilter(_PassAll())
    assert line.sink() is None
    handler.filters = [f for f in handler.filters if type(f) is SecretFilter]
    # a handler level above INFO: no line, whichever path
    handler.setLevel(logging.WARNING)
    assert line.sink() is None
    line.write(_given, ENTRY)
    assert handler.drain() and out.getvalue() == ""
    handler.setLevel(logging.NOTSET)
    # a disabled access logger (a dictConfig that disabled existing loggers)
    access.disabled = True
    try:
        assert line.sink() is None
    finally:
        access.disabled = False
    assert line.sink() is handler


async def test_the_gateway_writes_its_access_lines_through_the_direct_path(
    failover_logger: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = failover_logger
    handler = _handler(out, JsonFormatter())
    logger.handlers = [handler]  # alone: the test run's own capture handlers set aside
    seen: list[logging.LogRecord] = []
    real = logging.Logger.handle

    def spy(self: logging.Logger, record: logging.LogRecord) -> None:
        seen.append(record)
        real(self, record)

    kit = Kit()
    logging.Logger.handle = spy  # type: ignore[method-assign]
    try:
        async with kit.client() as c:
            r = await c.post("/v1/chat/completions", json=chat_body("solo"), headers={"x-failover-request-id": "r-7"})
    finally:
        logging.Logger.handle = real  # type: ignore[method-assign]
    assert r.status_code == 200
    assert handler.drain()
    assert '"request_id":"r-7"' in out.getvalue() and '"status":200' in out.getvalue()
    assert not [rec for rec in seen if rec.name == ACCESS_LOGGER]  # no LogRecord was made for it


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


async def test_an_access_line_is_made_with_its_batch_and_keeps_the_time_it_was_written(
    failover_logger: tuple[logging.Logger, io.StringIO], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, out = failover_logger
    handler = _alone(logger, out, _TextFormatter(TEXT_FORMAT))
    made: list[object] = []

    def parts(entry: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        made.append(entry)
        return _given(entry)

    line = AccessLine(logging.getLogger(ACCESS_LOGGER), FMT)
    written, flushed = 1_764_806_400.25, 1_764_806_407.75
    monkeypatch.setattr(time, "time", lambda: written)
    line.write(parts, ENTRY)
    assert made == [] and out.getvalue() == ""  # kept, not made, at the end of the request
    monkeypatch.setattr(time, "time", lambda: flushed)
    assert handler.drain()
    assert made == [ENTRY]
    (text,) = out.getvalue().splitlines()
    assert text.startswith(f"{_stamp(written)},250 INFO {ACCESS_LOGGER}: chat route=r")
    assert _stamp(flushed) not in text


async def test_lines_around_an_access_line_keep_their_order(
    failover_logger: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = failover_logger
    handler = _alone(logger, out, JsonFormatter())
    line = AccessLine(logging.getLogger(ACCESS_LOGGER), FMT)
    gateway_log = logging.getLogger("failover.gateway")
    gateway_log.info("before")
    line.write(_given, ENTRY)
    gateway_log.info("between")
    line.write(_given, ((*ARGS[:4], "req_2", *ARGS[5:]), {**FIELDS, "request_id": "req_2"}))
    gateway_log.warning("after")  # a warning is handed over at once, with everything before it
    assert handler.drain()
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [g.get("request_id") or g["message"] for g in got] == ["before", "req_1", "between", "req_2", "after"]
    assert got[1]["cost_usd"] == "nan" and got[1]["level"] == "info"  # the JSON line as the formatter writes it


async def test_a_formatter_changed_before_the_batch_is_written_still_makes_the_line(
    failover_logger: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = failover_logger
    handler = _alone(logger, out, _TextFormatter(TEXT_FORMAT))
    line = AccessLine(logging.getLogger(ACCESS_LOGGER), FMT)
    line.write(_given, ENTRY)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))  # an operator's, meanwhile
    assert handler.drain()
    message = "chat route=r tenant=acme status=200 request_id=req_1 target=a attempts=1 ms=12.3"
    assert out.getvalue() == f"INFO {ACCESS_LOGGER} {message}\n"


async def test_a_line_that_cannot_be_made_is_reported_and_its_batch_written(
    failover_logger: tuple[logging.Logger, io.StringIO], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, out = failover_logger
    handler = _alone(logger, out, _TextFormatter(TEXT_FORMAT))
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)

    def broken(entry: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        raise ValueError("no parts")

    line = AccessLine(logging.getLogger(ACCESS_LOGGER), FMT)
    line.write(_given, ENTRY)
    line.write(broken, ENTRY)
    line.write(_given, ENTRY)
    assert handler.drain()
    assert len(out.getvalue().splitlines()) == 2 and "request_id=req_1" in out.getvalue()
    assert [r.name for r in reported] == [ACCESS_LOGGER]
