"""Bucket arithmetic: how much of one rate dimension is free now, and when more will be.

A limiter keeps one bucket per configured dimension of ``Target.limits`` (requests, input
tokens and output tokens per minute) in a :class:`BucketSet`, which adds a 429 block over all
of them and the arithmetic on a request's amounts: what it takes, how long it must wait, and
what comes back once the provider has reported its usage.

Two bucket algorithms are available. ``"window"`` (the default, :class:`WindowBucket`) gives
tokens back exactly one window (60 s) after they were taken, so no rolling minute ever
carries more than the capacity: that satisfies providers that count in fixed windows,
sliding windows and token buckets alike. ``"bucket"`` (:class:`TokenBucket`) refills
continuously; it matches a provider that documents a token bucket (Anthropic does), sends
more smoothly after a burst, but can send up to twice its capacity in the first minute after
an idle period, which a window-counting provider answers with 429s.

Nothing here reads a clock: every method takes ``now`` (loop seconds), so the same code runs
on real time, on virtual time in tests, and on projected times when the queue plans ahead.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, Self, cast

Dimension = Literal["rpm", "input_tpm", "output_tpm", "concurrency", "retry_after"]
Algorithm = Literal["window", "bucket"]

WINDOW = 60.0  # provider quotas are per minute

_EPS = 1e-9  # relative tolerance on bucket levels, so float dust never turns into a wait
_DIMS: tuple[Literal["rpm", "input_tpm", "output_tpm"], ...] = ("rpm", "input_tpm", "output_tpm")


def _tol(capacity: float) -> float:
    return _EPS * max(1.0, capacity)


class Bucket(Protocol):
    """What a limiter needs from one rate dimension. ``now`` never moves backwards in the
    writes; ``level`` and ``time_until`` are reads (asked for any moment, they store nothing)."""

    @property
    def capacity(self) -> float: ...

    def level(self, now: float) -> float:
        """What could be taken now (negative while in debt), ignoring a block."""
        ...

    def blocked_until(self) -> float: ...

    def time_until(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` can be taken if nothing else is; ``inf`` if never."""
        ...

    def reserve(self, amount: float, now: float) -> bool:
        """Take ``amount`` if it is available now; False (and nothing taken) otherwise."""
        ...

    def charge(self, amount: float, now: float) -> None:
        """Take ``amount`` unconditionally (reconciliation of an under-estimate: debt)."""
        ...

    def refund(self, amount: float, now: float, *, taken_at: float | None = None) -> None:
        """Give back ``amount`` of what was taken at ``taken_at``."""
        ...

    def sync(self, remaining: float, reset_in: float | None, now: float) -> bool:
        """Follow the provider: at most ``remaining`` left; True if that lowered the level."""
        ...

    def drain_until(self, until: float, now: float) -> None:
        """Give nothing before ``until`` (a 429 with Retry-After)."""
        ...

    def clone(self) -> Self: ...


class TokenBucket:
    """A token bucket that refills continuously at ``refill_per_second`` up to ``capacity``.

    It starts full. The level may go negative (debt): a request that used more than it
    reserved delays the ones after it.

    >>> b = TokenBucket(10, 1.0)
    >>> b.reserve(10, now=0.0), b.time_until(3, now=0.0)
    (True, 3.0)
    """

    __slots__ = ("_blocked", "_capacity", "_level", "_rate", "_updated")

    def __init__(self, capacity: float, refill_per_second: float) -> None:
        if not capacity > 0 or not refill_per_second > 0:
            raise ValueError("TokenBucket needs capacity > 0 and refill_per_second > 0")
        self._capacity = float(capacity)
        self._rate = float(refill_per_second)
        self._level = self._capacity
        self._updated = -math.inf
        self._blocked = -math.inf

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def refill_per_second(self) -> float:
        return self._rate

    def _advance(self, now: float) -> None:
        start = max(self._updated, self._blocked)
        if now > start:
            self._level = min(self._capacity, self._level + (now - start) * self._rate)
        self._updated = max(self._updated, now)

    def _level_at(self, now: float) -> float:
        """The level at ``now``, refilled since the last write (a read: nothing is stored)."""
        start = max(self._updated, self._blocked)
        if now > start:
            return min(self._capacity, self._level + (now - start) * self._rate)
        return self._level

    def level(self, now: float) -> float:
        return self._level_at(now)

    def blocked_until(self) -> float:
        return self._blocked

    def time_until(self, amount: float, now: float) -> float:
        if amount > self._capacity + _tol(self._capacity):
            return math.inf
        level = self._level_at(now)
        start = max(now, self._blocked)  # nothing accrues while blocked
        if level >= amount - _tol(self._capacity):
            return start - now
        return start - now + (amount - level) / self._rate

    def reserve(self, amount: float, now: float) -> bool:
        if self.time_until(amount, now) > 0:
            return False
        self._advance(now)
        self._level -= amount
        return True

    def charge(self, amount: float, now: float) -> None:
        self._advance(now)
        self._level -= amount

    def refund(self, amount: float, now: float, *, taken_at: float | None = None) -> None:
        del taken_at  # a token bucket does not remember when tokens were taken
        self._advance(now)
        self._level = min(self._capacity, self._level + amount)

    def sync(self, remaining: float, reset_in: float | None, now: float) -> bool:
        if reset_in is not None and reset_in <= 0:
            return False  # already reset: the count is stale
        self._advance(now)
        target = remaining
        if reset_in is not None:
            # "full again in reset_in seconds": we must not refill to capacity any sooner
            target = min(target, self._capacity - self._rate * reset_in)
        if target < self._level - _tol(self._capacity):
            self._level = target
            return True
        return False

    def drain_until(self, until: float, now: float) -> None:
        self._advance(now)
        self._level = min(self._level, 0.0)
        self._blocked = max(self._blocked, until)

    def clone(self) -> Self:
        other = object.__new__(type(self))
        other._capacity, other._rate, other._level = self._capacity, self._rate, self._level
        other._updated, other._blocked = self._updated, self._blocked
        return other


class WindowBucket:
    """Tokens taken at ``t`` come back at ``t + window``: no rolling window exceeds ``capacity``.

    A sliding-window log, with the entries of one instant merged. A request that used more
    than it reserved is charged at the moment that is learned (debt, given back one window
    later); a refund shrinks the entry of the moment the tokens were taken. When the
    provider's headers say less remains than we think, a phantom entry holds the difference
    until the provider's reset.

    >>> b = WindowBucket(10)
    >>> b.reserve(10, now=0.0), b.time_until(3, now=5.0)
    (True, 55.0)
    """

    __slots__ = ("_blocked", "_capacity", "_entries", "_used", "_window")

    def __init__(self, capacity: float, window: float = WINDOW) -> None:
        if not capacity > 0 or not window > 0:
            raise ValueError("WindowBucket needs capacity > 0 and window > 0")
        self._capacity = float(capacity)
        self._window = float(window)
        self._entries: deque[list[float]] = deque()  # [expires_at, amount], by expiry
        self._used = 0.0
        self._blocked = -math.inf

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def window(self) -> float:
        return self._window

    def _prune(self, now: float) -> None:
        entries = self._entries
        while entries and entries[0][0] <= now:
            self._used -= entries.popleft()[1]
        if not entries:
            self._used = 0.0  # no float dust left behind

    def _insert(self, expires: float, amount: float) -> None:
        if amount <= 0:
            return
        entries = self._entries
        i = len(entries)
        while i > 0 and entries[i - 1][0] > expires:
            i -= 1
        if i > 0 and entries[i - 1][0] == expires:
            entries[i - 1][1] += amount
        else:
            entries.insert(i, [expires, amount])
        self._used += amount

    def _used_at(self, now: float) -> tuple[float, int]:
        """What is in use at ``now``, and the index of the first entry still in use (a read: the
        entries that expired stay until the next write prunes them)."""
        entries = self._entries
        used, first = self._used, 0
        while first < len(entries) and entries[first][0] <= now:
            used -= entries[first][1]
            first += 1
        return (0.0 if first == len(entries) else used), first

    def level(self, now: float) -> float:
        return self._capacity - self._used_at(now)[0]

    def blocked_until(self) -> float:
        return self._blocked

    def time_until(self, amount: float, now: float) -> float:
        if amount > self._capacity + _tol(self._capacity):
            return math.inf
        used, first = self._used_at(now)
        start = max(now, self._blocked)
        allowed = self._capacity - amount + _tol(self._capacity)  # what may stay in use
        if used <= allowed:
            return start - now
        when = now
        for expires, taken in itertools.islice(self._entries, first, None):
            used -= taken
            when = expires
            if used <= allowed:
                break
        return max(start, when) - now

    def reserve(self, amount: float, now: float) -> bool:
        if self.time_until(amount, now) > 0:
            return False
        self._prune(now)
        self._insert(now + self._window, amount)
        return True

    def charge(self, amount: float, now: float) -> None:
        self._prune(now)
        self._insert(now + self._window, amount)

    def refund(self, amount: float, now: float, *, taken_at: float | None = None) -> None:
        self._prune(now)
        if amount <= 0:
            return
        entries = self._entries
        if taken_at is not None:
            expires = taken_at + self._window
            for entry in reversed(entries):
                if entry[0] == expires:
                    back = min(amount, entry[1])
                    entry[1] -= back
                    self._used -= back
                    return
                if entry[0] < expires:
                    break
            return  # those tokens have already come back
        for entry in reversed(entries):  # no time given: the newest tokens
            back = min(amount, entry[1])
            entry[1] -= back
            self._used -= back
            amount -= back
            if amount <= 0:
                return

    def sync(self, remaining: float, reset_in: float | None, now: float) -> bool:
        if reset_in is not None and reset_in <= 0:
            return False  # already reset: the count is stale
        self._prune(now)
        excess = (self._capacity - self._used) - remaining
        if excess <= _tol(self._capacity):
            return False
        self._insert(now + (reset_in if reset_in is not None else self._window), excess)
        return True

    def drain_until(self, until: float, now: float) -> None:
        self._prune(now)
        self._blocked = max(self._blocked, until)

    def clone(self) -> Self:
        other = object.__new__(type(self))
        other._capacity, other._window, other._used, other._blocked = (
            self._capacity,
            self._window,
            self._used,
            self._blocked,
        )
        other._entries = deque([e[0], e[1]] for e in self._entries)
        return other


def new_bucket(algorithm: Algorithm, capacity: float, window: float) -> Bucket:
    """A full bucket of ``capacity`` per ``window`` seconds, of the given algorithm."""
    return WindowBucket(capacity, window) if algorithm == "window" else TokenBucket(capacity, capacity / window)


class BucketSet:
    """The buckets of one quota, keyed by dimension, and a 429 block over all of them.

    A request's amounts come in two parts (:meth:`parts`): what it sends (one request, its
    input tokens), settled as sent, and what it may get back (``max_tokens``), replaced by the
    actual output once known. ``combined_tpm`` makes the input-TPM bucket count output tokens
    too (OpenAI's TPM counts prompt plus completion).
    """

    __slots__ = ("blocked_until", "buckets", "combined_tpm")

    def __init__(self, buckets: dict[str, Bucket], *, combined_tpm: bool) -> None:
        self.buckets = buckets
        self.combined_tpm = combined_tpm
        self.blocked_until = -math.inf  # a 429 block, for limiters without buckets too

    def parts(self, input_tokens: int, max_output: int) -> tuple[dict[str, float], dict[str, float]]:
        """A request's amounts per bucket: what it sends (settled as sent) and what it may get."""
        in_part: dict[str, float] = {}
        out_part: dict[str, float] = {}
        if "rpm" in self.buckets:
            in_part["rpm"] = 1.0
        if "input_tpm" in self.buckets:
            in_part["input_tpm"] = float(input_tokens)
            if self.combined_tpm:
                out_part["input_tpm"] = float(max_output)
        if "output_tpm" in self.buckets:
            out_part["output_tpm"] = float(max_output)
        return in_part, out_part

    def amounts(self, in_part: Mapping[str, float], out_part: Mapping[str, float]) -> dict[str, float]:
        """Both parts together, per bucket."""
        return {d: in_part.get(d, 0.0) + out_part.get(d, 0.0) for d in self.buckets}

    def wait(self, amounts: Mapping[str, float], now: float) -> tuple[float, Dimension]:
        """Seconds until ``amounts`` can be taken if nothing else is, and what binds."""
        worst, dim = max(0.0, self.blocked_until - now), "retry_after"
        for d, amount in amounts.items():
            w = self.buckets[d].time_until(amount, now)
            if w > worst:
                worst, dim = w, d
        return worst, cast(Dimension, dim)

    def fit(
        self, buckets: Mapping[str, Bucket], amounts: Mapping[str, float], start: float, binding: Dimension
    ) -> tuple[float, Dimension]:
        """The earliest time from ``start`` at which every bucket allows ``amounts``.

        ``buckets`` are a projection's copies (:meth:`clones`), on which the requests ahead
        have already been charged. ``binding`` is what held the queue up until ``start``; it stays
        the answer unless this request must wait longer for one of its own dimensions.
        """
        if self.blocked_until > start:
            start, binding = self.blocked_until, "retry_after"
        for _ in range(8):  # availability only grows with time: one step, a few for float dust
            worst = 0.0
            for d, amount in amounts.items():
                w = buckets[d].time_until(amount, start)
                if w > worst:
                    worst, binding = w, cast(Dimension, d)
            if worst <= 0 or math.isinf(worst):
                return start + worst, binding
            start += worst
        return start, binding

    def clones(self) -> dict[str, Bucket]:
        return {d: b.clone() for d, b in self.buckets.items()}

    def charge(self, amounts: Mapping[str, float], now: float) -> None:
        for d, amount in amounts.items():
            self.buckets[d].charge(amount, now)

    def block(self, until: float, now: float) -> None:
        """Give nothing before ``until`` (a 429)."""
        self.blocked_until = max(self.blocked_until, until)
        for bucket in self.buckets.values():
            bucket.drain_until(until, now)

    def settle(
        self,
        in_part: Mapping[str, float],
        out_part: Mapping[str, float],
        usage_input: int,
        usage_output: int,
        *,
        granted_at: float,
        now: float,
    ) -> bool:
        """Reconcile a grant with the usage the provider reported; True if that took more.

        Unused input tokens come back at once; the output reservation is replaced by the
        actual output, counted from now (providers count output as it is generated). A
        usage above the reservation becomes debt.
        """
        worse = False
        for d, bucket in self.buckets.items():
            if d == "rpm":
                continue
            actual_in = float(usage_input) if d == "input_tpm" else 0.0
            actual_out = float(usage_output) if (d == "output_tpm" or self.combined_tpm) else 0.0
            extra_in = actual_in - in_part.get(d, 0.0)
            if extra_in < 0:
                bucket.refund(-extra_in, now, taken_at=granted_at)
            elif extra_in > 0:
                bucket.charge(extra_in, now)
                worse = True
            out = out_part.get(d, 0.0)
            if out or actual_out:
                # The output reservation is replaced by the actual output, counted from now.
                bucket.refund(out, now, taken_at=granted_at)
                bucket.charge(actual_out, now)
                worse = worse or actual_out > out
        return worse

    def release(
        self, in_part: Mapping[str, float], out_part: Mapping[str, float], *, sent: bool, granted_at: float, now: float
    ) -> None:
        """No usage came back: give it all back (but the request itself, when it was sent)."""
        for d, bucket in self.buckets.items():
            amount = in_part.get(d, 0.0) + out_part.get(d, 0.0)
            if d == "rpm" and sent:
                continue
            bucket.refund(amount, now, taken_at=granted_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketSnapshot:
    dimension: str
    capacity: float
    level: float  # available now; negative while in debt
    blocked_for: float  # seconds until a 429 block ends (0: not blocked)
    provider_limit: int | None = None  # the last limit the provider's headers reported


@dataclass(frozen=True, slots=True, kw_only=True)
class LimiterSnapshot:
    name: str
    at: float
    buckets: tuple[BucketSnapshot, ...]
    concurrency: int | None
    in_flight: int
    waiting: Mapping[str, int]  # queued requests per tenant ("" for requests naming none)
    granted: int  # totals since the limiter was created
    rejected: int
    # Whose buckets these are: "local" (no shared store: this process's, the only ones),
    # "shared" (the fleet's, read from the store; capacity is the fleet's, in_flight the slots
    # leased fleet-wide; waiting and the totals stay this process's), "fallback" (a shared
    # limiter's local buckets at local_share: what it enforces while the store is away).
    view: Literal["local", "shared", "fallback"] = "local"

    @property
    def queued(self) -> int:
        return sum(self.waiting.values())
