from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.model import Failure, FailureKind
from failover.policy import Backoff, Deadline


def test_deadline_remaining_and_cap() -> None:
    d = Deadline.after(now=100.0, budget=5.0)
    assert d.at == 105.0
    assert d.remaining(103.5) == pytest.approx(1.5)
    assert d.remaining(110.0) == 0.0
    assert d.cap(10.0, now=103.0) == pytest.approx(2.0)
    assert d.cap(0.5, now=103.0) == 0.5
    assert not d.expired(104.9) and d.expired(105.0)


def test_deadline_none_is_infinite() -> None:
    d = Deadline.after(now=0.0, budget=None)
    assert math.isinf(d.remaining(1e9))


@given(n=st.integers(min_value=0, max_value=40), seed=st.integers())
def test_full_jitter_stays_within_the_exponential_cap(n: int, seed: int) -> None:
    b = Backoff(base=0.5, cap=30.0)
    w = b.schedule(n, random.Random(seed))
    assert 0.0 <= w <= min(30.0, 0.5 * 2**n)


def test_full_jitter_spreads_over_the_whole_range() -> None:
    # Full jitter, not "equal jitter": waits fall across [0, ceiling), including its lower half.
    rng = random.Random(7)
    waits = [Backoff(base=1.0, cap=8.0).schedule(3, rng) for _ in range(2000)]
    assert min(waits) < 0.5 and max(waits) > 7.5
    assert 3.5 < sum(waits) / len(waits) < 4.5


def test_retry_after_replaces_the_schedule() -> None:
    f = Failure(kind=FailureKind.RATE_LIMITED, message="429", retry_after=2.5)
    d = Backoff().wait(f, 0, random.Random(1))
    assert (d.seconds, d.source, d.acceptable) == (2.5, "retry_after", True)
    assert d.fits(remaining=3.0, min_attempt=0.1)
    assert not d.fits(remaining=2.55, min_attempt=0.1)


def test_retry_after_beyond_the_maximum_is_not_waited_for() -> None:
    f = Failure(kind=FailureKind.RATE_LIMITED, message="429", retry_after=600.0)
    d = Backoff(max_retry_after=60.0).wait(f, 0, random.Random(1))
    assert not d.acceptable
    assert not d.fits(remaining=10_000.0, min_attempt=0.0)
