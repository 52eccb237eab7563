"""A timeout whose deadline moves later at the cost of a float: a stream's idle deadline.

A streamed attempt moves its deadline after every event (now + the idle timeout). With
``asyncio.Timeout.reschedule`` that is a timer cancelled and another scheduled per event,
about 3 µs each on this project's hot path. :class:`LazyTimeout` keeps one timer: moving the
deadline later only records it, and the timer, when it comes due before the recorded
deadline, re-arms for it. Moving it earlier re-arms at once. It expires at the last deadline
given, exactly as a rescheduled ``asyncio.Timeout`` would, and raises the same
``TimeoutError``: the expiry itself is ``asyncio.Timeout``'s (its cancel, its ``uncancel`` on
the way out, its error), only the scheduling is done here.
"""

from __future__ import annotations

import asyncio
import math
from types import TracebackType


class LazyTimeout:
    """``async with LazyTimeout(when, loop) as timer:`` ... ``timer.move(later)``."""

    __slots__ = ("_armed", "_due", "_handle", "_loop", "_timeout")

    def __init__(self, when: float, loop: asyncio.AbstractEventLoop) -> None:
        self._timeout = asyncio.timeout_at(None)  # expired by us, through reschedule: see _fire
        self._loop = loop
        self._due = when  # the deadline: the last one given
        self._armed = math.inf  # when the one timer is due (inf: none)
        self._handle: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> LazyTimeout:
        await self._timeout.__aenter__()
        self._arm(self._due)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        await self._timeout.__aexit__(kind, exc, tb)  # raises TimeoutError when it expired

    def move(self, when: float) -> None:
        """The deadline is now ``when`` (later: recorded; earlier: the timer re-armed)."""
        self._due = when
        if when < self._armed:
            self._arm(when)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        # Re-armed only when the deadline moved since this timer was set: the loop fires a
        # timer when it fires it (uvloop to the millisecond), and a timer set for the deadline
        # is what asyncio's own would have been.
        armed, due = self._armed, self._due
        self._handle = None
        self._armed = math.inf
        if due > armed:
            self._arm(due)
        else:  # due: asyncio's timeout expires (on the loop's next turn), cancelling the task
            self._timeout.reschedule(self._loop.time())


__all__ = ["LazyTimeout"]
