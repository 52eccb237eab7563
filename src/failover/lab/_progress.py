"""A plain-text progress bar for long runs (``failover replay``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TextIO

from ._replay_report import RequestResult


class Progress:
    """A plain-text progress bar on a stream: redrawn in place on a terminal, otherwise a line
    at every tenth of the work (and at the end)."""

    def __init__(
        self,
        total: int,
        *,
        stream: TextIO,
        label: str = "replay",
        tty: bool | None = None,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.label = label
        self.tty = stream.isatty() if tty is None else tty
        self.interval = interval
        self.clock = clock
        self.done = 0
        self.short = 0  # results that were not a full success
        self._last_draw = -math.inf
        self._step = max(1, math.ceil(total / 10))
        self._closed = False

    def line(self) -> str:
        width = 24
        filled = width * self.done // self.total if self.total else width
        pct = 100 * self.done // self.total if self.total else 100
        bar = "#" * filled + "-" * (width - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total} {pct:3d}% | not successful {self.short}"

    def advance(self, result: RequestResult | None = None) -> None:
        self.done += 1
        if result is not None and (result.excluded or result.outcome != "ok" or result.task is False):
            self.short += 1
        last = self.done >= self.total
        if self.tty:
            now = self.clock()
            if last or now - self._last_draw >= self.interval:
                self._last_draw = now
                self.stream.write("\r" + self.line())
                self.stream.flush()
        elif last or self.done % self._step == 0:
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
