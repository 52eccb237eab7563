"""Structured logs: one JSON object per line, switchable with ``gateway.logging.format: json``.

The gateway logs one access line per chat request on ``failover.gateway.access``; its fields
travel on the log record as ``record.failover`` (a dict), so a text formatter shows the
message and :class:`JsonFormatter` shows the fields. API keys and provider secrets are never
among them.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

ACCESS_LOGGER = "failover.gateway.access"


class JsonFormatter(logging.Formatter):
    """``{"ts": ..., "level": ..., "logger": ..., "message": ..., <record.failover fields>}``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "failover", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str, separators=(",", ":"))


def configure_logging(fmt: str, level: str = "info") -> None:
    """Give the ``failover`` logger one stderr handler, in ``text`` or ``json`` format (idempotent)."""
    logger = logging.getLogger("failover")
    for h in list(logger.handlers):
        if getattr(h, "_failover_gateway", False):
            logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler._failover_gateway = True  # type: ignore[attr-defined]
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


__all__ = ["ACCESS_LOGGER", "JsonFormatter", "configure_logging"]
