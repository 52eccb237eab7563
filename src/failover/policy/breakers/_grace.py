"""The overload grace: an overloaded answer from a target that still serves is not a breaker failure.

An overloaded answer (529 / 503 overloaded) from a target that still SERVES says "over
capacity", not "down": it is left to the retry budget and the rate limiter. Counting it let the
fast 529s of a provider at 3x its capacity open the breaker within 0.2 s and shed ALL traffic,
although the provider could still serve its capacity (bench/goodput.py: 1.7% of capacity
instead of 93%). "Still serves" is measured, not assumed: :meth:`OverloadGrace.graced` decides
from one target's recent successes and overloaded answers and its attempts in flight.
"""

from __future__ import annotations

from collections import deque

from ...model import Failure, FailureKind


class OverloadGrace:
    """What the overload grace knows of one target: its recent successes and overloaded answers
    (1-second buckets over ``seconds``), how long it takes to refuse, and its attempts in flight."""

    __slots__ = ("_buckets", "_last", "ever", "first_seen", "flights", "overloaded", "refusal", "seconds", "served")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._buckets: deque[list[int]] = deque()  # [second, served, overloaded]
        self._last: list[int] | None = None
        self.served = 0
        self.overloaded = 0
        self.ever = False  # has it ever answered successfully?
        self.first_seen: float | None = None
        self.refusal = 0.0  # EWMA of how long an overloaded answer takes
        self.flights: dict[int, float] = {}  # id(permit) -> start: insertion order is start order

    def _bucket(self, now: float) -> list[int]:
        second = int(now)  # loop time is never negative
        b = self._last
        if b is not None and b[0] == second:
            return b
        horizon = second - self.seconds
        buckets = self._buckets
        while buckets and buckets[0][0] <= horizon:
            _, ok, over = buckets.popleft()
            self.served -= ok
            self.overloaded -= over
        b = self._last = [second, 0, 0]
        buckets.append(b)
        return b

    def overload(self, now: float, took: float) -> tuple[int, int]:
        """Note an overloaded answer that took ``took`` seconds; the window's (served, overloaded)."""
        self._bucket(now)[2] += 1  # a new second's bucket first expires what left the window
        self.overloaded += 1
        self.refusal += 0.2 * (max(0.0, took) - self.refusal)
        return self.served, self.overloaded

    def start(self, flight: int, now: float) -> None:
        """An attempt (``flight``: its permit's id) is sent at ``now``."""
        self.flights[flight] = now

    def end(self, flight: int) -> None:
        """The attempt ``flight`` ended without an outcome (cancelled, or never sent)."""
        self.flights.pop(flight, None)

    def graced(
        self, flight: int, failure: Failure | None, started: float, now: float, *, grace: float, min_success: float
    ) -> bool:
        """Whether this outcome is an overload of a target that still serves (the breaker ignores it).

        A target that served before: graced while successes are at least ``min_success`` of its
        successes and overloads in the last ``grace`` seconds. A target that has never served
        yet (a process that starts during an overload): graced only while, within ``grace`` of
        its first outcome, it holds an earlier attempt for much longer than it takes to refuse
        one (more than 3x its typical overloaded answer, plus 10 ms): it is working on requests
        that may yet succeed, as a provider at capacity is, while its fast 529s arrive before
        the slower successes do. A target that refuses every request as fast as it gets them
        serves nothing and is not graced, however many are in flight. ``flight`` (the attempt's
        permit id, from :meth:`start`) has landed. Shared by the in-process and the shared-store
        record paths.
        """
        flights = self.flights
        flights.pop(flight, None)
        if failure is None:  # the hot path: note the success in this second's bucket
            self.ever = True
            last = self._last
            if last is None or last[0] != int(now):
                last = self._bucket(now)
            last[1] += 1
            self.served += 1
            return False
        if failure.kind is not FailureKind.PROVIDER_OVERLOADED or grace <= 0:
            return False
        oldest = next(iter(flights.values()), None) if flights else None  # insertion order: oldest first
        served, overloaded = self.overload(now, now - started)
        if served:
            return served / (served + overloaded) >= min_success
        if self.ever:
            return False  # it served before, and nothing for ``grace`` seconds: down
        if self.first_seen is None:
            self.first_seen = now
        if oldest is None or now - self.first_seen > grace:
            return False
        return now - oldest > 3.0 * self.refusal + 0.01
