from __future__ import annotations

import pytest

from failover.policy import RetryBudget


def test_floor_allows_retries_on_a_quiet_service() -> None:
    b = RetryBudget(ratio=0.1, floor=3, window=10.0)
    assert [b.try_withdraw(0.0) for _ in range(4)] == [True, True, True, False]


def test_retries_scale_with_requests_in_the_window() -> None:
    b = RetryBudget(ratio=0.1, floor=0, window=10.0)
    for _ in range(100):
        b.record_request(1.0)
    granted = sum(b.try_withdraw(1.0) for _ in range(50))
    assert granted == 10


def test_window_slides() -> None:
    b = RetryBudget(ratio=0.5, floor=0, window=10.0)
    for _ in range(10):
        b.record_request(0.0)
    assert sum(b.try_withdraw(1.0) for _ in range(10)) == 5
    # the requests and retries of t=0..1 leave the window at t=11
    assert b.available(10.5) == 0
    assert b.available(11.5) == 0  # no requests left in the window: no deposits either
    for _ in range(4):
        b.record_request(11.5)
    assert b.available(11.5) == 2


def test_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="window"):
        RetryBudget(window=0)
