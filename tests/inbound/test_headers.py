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


NUMBER_HEADERS = ["x-failover-deadline-ms", "x-failover-max-attempts", "x-failover-hold-tokens", "x-failover-hold-ms"]


def _envelope(headers: dict[str, str]) -> Envelope:
    return envelope_with_headers(Envelope(), headers, max_deadline_ms=600_000, max_attempts_limit=10)


@pytest.mark.parametrize("header", NUMBER_HEADERS)
@pytest.mark.parametrize("raw", ["1_000", "+5", "-0", "1e3", "5.0", "٥", "²", "0x10", "5 5", "", "inf"])
def test_a_number_header_is_ascii_digits_only(header: str, raw: str) -> None:
    with pytest.raises(WireError) as caught:
        _envelope({header: raw})
    assert caught.value.param == header and header in str(caught.value)


@pytest.mark.parametrize("header", NUMBER_HEADERS)
def test_a_number_header_of_digits_is_read(header: str) -> None:
    env = _envelope({header: " 5 "})
    assert env != Envelope()


@pytest.mark.parametrize("raw", ["1_0", "1e-2_0", "inf", "nan", "0x1", "1.2.3", "+0.5", ".", "٠.٥", "1e", "-1"])
def test_max_cost_is_a_plain_decimal_number(raw: str) -> None:
    with pytest.raises(WireError) as caught:
        _envelope({"x-failover-max-cost": raw})
    assert caught.value.param == "x-failover-max-cost"


@pytest.mark.parametrize(
    ("raw", "cost"), [("0.05", 0.05), ("2", 2.0), (".5", 0.5), ("3.", 3.0), ("1e-05", 1e-05), ("2.5E+1", 25.0)]
)
def test_max_cost_reads_decimals(raw: str, cost: float) -> None:
    assert _envelope({"x-failover-max-cost": raw}).max_cost == cost


def test_a_non_ascii_header_value_is_echoed_as_sent() -> None:
    sent = "überall-ß"
    as_read = sent.encode("utf-8").decode("latin-1")  # what an ASGI server hands over
    with pytest.raises(WireError) as caught:
        _envelope({"x-failover-side-effects": as_read})
    assert repr(sent) in str(caught.value)
    with pytest.raises(WireError) as caught:  # the in-process client passes text as it is
        _envelope({"x-failover-allow-fallback": sent})
    assert repr(sent) in str(caught.value)
    latin = "caf\xe9"  # one latin-1 byte, not UTF-8: shown as read
    with pytest.raises(WireError) as caught:
        _envelope({"x-failover-deadline-ms": latin})
    assert repr(latin) in str(caught.value)
