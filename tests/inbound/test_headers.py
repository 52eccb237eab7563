"""The retry headers every server of failover answers a failure with (gateway and drop-in client)."""

from __future__ import annotations

import pytest

from failover import Envelope, FailureKind, Phase, Target, Unavailable
from failover.inbound._headers import envelope_with_headers, record_headers, retry_headers
from failover.inbound._wire import WireError
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


@pytest.mark.parametrize(("raw", "policy"), [("cap", "cap"), ("REFUSE", "refuse"), (" refuse ", "refuse")])
def test_max_tokens_policy_header_sets_the_envelope(raw: str, policy: str) -> None:
    env = envelope_with_headers(
        Envelope(), {"x-failover-max-tokens-policy": raw}, max_deadline_ms=1, max_attempts_limit=1
    )
    assert env.max_tokens_policy == policy


def test_max_tokens_policy_header_left_out_keeps_the_routes_and_a_bad_one_is_a_400() -> None:
    assert envelope_with_headers(Envelope(), {}, max_deadline_ms=1, max_attempts_limit=1).max_tokens_policy is None
    with pytest.raises(WireError) as ei:
        envelope_with_headers(
            Envelope(), {"x-failover-max-tokens-policy": "clamp"}, max_deadline_ms=1, max_attempts_limit=1
        )
    assert ei.value.status == 400 and ei.value.param == "x-failover-max-tokens-policy"
    assert "cap" in ei.value.message and "refuse" in ei.value.message


def test_record_headers_say_the_max_tokens_of_a_capped_answer() -> None:
    target = Target(name="small", dialect="openai", model="m", base_url="http://small.fake/v1")
    rec = Recorder("req_1", "r", 0.0)
    rec.attempted(target, Phase.PRIMARY, 0.0, 1.0, connect=1, total=1, hedge=False, capped_to=4_096)
    h = record_headers("req_1", rec.freeze(1.0, used=rec.attempts[-1], outcome="ok"))
    assert h["x-failover-max-tokens"] == "4096"
    plain = Recorder("req_2", "r", 0.0)
    plain.attempted(target, Phase.PRIMARY, 0.0, 1.0, connect=1, total=1, hedge=False)
    assert "x-failover-max-tokens" not in record_headers(
        "req_2", plain.freeze(1.0, used=plain.attempts[-1], outcome="ok")
    )
