"""The retry headers every server of failover answers a failure with (gateway and drop-in client)."""

from __future__ import annotations

import pytest

from failover import FailureKind, Unavailable
from failover.inbound._headers import retry_headers
from failover.router._record import Recorder


def failure(kind: FailureKind, *, retryable: bool, retry_after_ms: int | None) -> Unavailable:
    record = Recorder("req_1", "r", 0.0).freeze(1.0, used=None, outcome=kind.value)
    return Unavailable(kind, "x", retryable=retryable, request_id="req_1", record=record, retry_after_ms=retry_after_ms)


@pytest.mark.parametrize(
    ("kind", "retryable", "hint", "retry_after"),
    [
        (FailureKind.RATE_LIMITED, True, 2500, "3"),  # the provider's hint, rounded up
        (FailureKind.PROVIDER_OVERLOADED, True, None, None),  # no hint: none invented
        (FailureKind.DEADLINE_EXHAUSTED, True, 800, None),  # never on a spent deadline
        (FailureKind.QUOTA_EXHAUSTED, False, 5000, None),  # coming back cannot help
    ],
)
def test_retry_headers(kind: FailureKind, retryable: bool, hint: int | None, retry_after: str | None) -> None:
    h = retry_headers(failure(kind, retryable=retryable, retry_after_ms=hint))
    assert h["x-should-retry"] == "false"  # one layer owns retries, whatever the failure
    assert h["x-failover-retryable"] == ("true" if retryable else "false")
    assert h.get("retry-after") == retry_after
    assert h.get("retry-after-ms") == (str(hint) if retry_after else None)
