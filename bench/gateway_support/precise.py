"""Timers to the microsecond for the bench's load generator and fake upstream.

uvloop's timers (libuv's) count whole milliseconds from the loop's time, which is read once
per loop turn and truncated to the millisecond. A request scheduled every 10 ms (100 requests
a second) therefore meets the same fraction of a millisecond every time, and every delay in
one run is off by the same amount, anywhere from 0 to 1 ms: a 20 ms upstream answered after
19.1 ms in one run and 19.9 ms in the next, and a gateway in front of it moved the phase, so
"added latency" carried up to a millisecond that was the timers' (seen in packet captures:
the same upstream took 19.75-20.01 ms for direct requests and 19.96-20.12 ms for the
gateway's, and the generator's own send lag was 0.02 ms in one run, 0.38 ms in the next).

:class:`PreciseTimers` fires callbacks at a ``time.perf_counter`` instant through one Linux
``timerfd`` (CLOCK_MONOTONIC, the clock ``perf_counter`` reads on Linux) armed for the earliest
deadline, with the process's timer slack set to 1 µs. Elsewhere it falls back to the loop's
own ``call_at`` (and says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import itertools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timerfd_create  # noqa: B018 (present?)
    except (OSError, AttributeError):
        return None
    return libc


class PreciseTimers:
    """``call_at(when, fn, *args)``: run ``fn(*args)`` on the loop at ``time.perf_counter() ==
    when``; ``call_later(delay, ...)`` the same from now; ``await sleep_until(when)``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._armed: float | None = None
        self._libc = _libc()
        self.fd = -1
        if self._libc is not None:
            self._libc.prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)  # 1 µs instead of 50 µs
            self.fd = self._libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if self.fd < 0:
            print("# precise timers: no timerfd here; the loop's own timers are used", file=sys.stderr)
            self._libc = None
        else:
            loop.add_reader(self.fd, self._fire)

    @property
    def precise(self) -> bool:
        return self._libc is not None

    def call_later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        self.call_at(time.perf_counter() + delay, fn, *args)

    def call_at(self, when: float, fn: Callable[..., None], *args: Any) -> None:
        if self._libc is None:
            self.loop.call_later(max(0.0, when - time.perf_counter()), fn, *args)
            return
        heapq.heappush(self._heap, (when, next(self._seq), fn, args))
        if self._armed is None or when < self._armed:
            self._arm(when)

    async def sleep_until(self, when: float) -> None:
        fut = self.loop.create_future()
        self.call_at(when, _wake, fut)
        await fut

    def _arm(self, when: float) -> None:
        self._armed = when
        spec = _Itimerspec()
        sec = int(when)
        spec.it_value.tv_sec, spec.it_value.tv_nsec = sec, max(1, int((when - sec) * 1e9))
        if self._libc.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime")

    def _fire(self) -> None:
        with contextlib.suppress(BlockingIOError):  # (another wake-up read it)
            os.read(self.fd, 8)
        self._armed = None
        heap = self._heap
        now = time.perf_counter()
        while heap and heap[0][0] <= now:
            _, _, fn, args = heapq.heappop(heap)
            fn(*args)
        if heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
