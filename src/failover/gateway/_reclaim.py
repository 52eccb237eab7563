"""Giving memory back after a hostile or cut request, a moment after it ended.

- A stream whose client left ends in a cancellation, and a failed attempt in an exception,
  whose traceback holds the frames that held its buffers in a reference cycle. ``failover
  serve`` tunes the collector so that full collections are rare (see tune_gc), so those cycles
  stayed: measured, five slow readers that left kept +21 MiB, round after round. A full
  collection here is cheap (the long-lived objects are frozen out of its sight).
- A heavy body's hundreds of thousands of small objects leave holes that glibc keeps (+20 MiB
  after two 7 MiB bodies); ``malloc_trim`` gives them back.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable

RECLAIM_AFTER_S = 1.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, where the C library has it (not on musl, macOS or Windows)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _malloc_trim()


class Reclaimer:
    """One pending reclaim at a time: a full collection, then ``malloc_trim`` in a thread. A
    request that asks while a reclaim is already collecting gets one more round after it (what
    it left came too late for the one under way)."""

    __slots__ = ("_again", "_collecting", "_task")

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._collecting = False
        self._again = False

    def soon(self) -> None:
        """Reclaim :data:`RECLAIM_AFTER_S` from now, unless a reclaim is pending already."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._later())
        elif self._collecting:
            self._again = True

    async def _later(self) -> None:
        try:
            while True:
                await asyncio.sleep(RECLAIM_AFTER_S)  # the request that caused it has usually ended by then
                self._collecting, self._again = True, False
                gc.collect()
                if _MALLOC_TRIM is not None:
                    await asyncio.to_thread(_MALLOC_TRIM, 0)
                self._collecting = False
                if not self._again:
                    return
        finally:
            self._task, self._collecting = None, False


__all__ = ["RECLAIM_AFTER_S", "Reclaimer"]
