"""The balancer's load board: peak-EWMA latency, requests in flight, and the quota share the
provider's rate-limit headers say is left; and how the strategies read them."""

from __future__ import annotations

import math
import random

import pytest

from failover.model import RateLimitInfo, Target
from failover.policy import LoadBoard, balance
from failover.router._load import RequestLoad
from failover.testing import FakeProvider


def _t(name: str) -> Target:
    return FakeProvider(name, "openai").target(equivalence_key="m", tokenizer="estimate")


A, B = _t("a"), _t("b")


def test_a_slower_answer_is_taken_at_once_and_a_faster_one_blended_in() -> None:
    board = LoadBoard(decay=10.0)
    board.started(A, 0.0)
    board.ended(A, 0.0, 0.3, now=0.3)
    assert board.latency(A, 0.3) == pytest.approx(0.3)
    board.started(A, 1.0)
    board.ended(A, 1.0, 2.0, now=3.0)  # the peak: at once
    assert board.latency(A, 3.0) == pytest.approx(2.0)
    board.started(A, 3.0)
    board.ended(A, 3.0, 0.3, now=3.3)  # faster: weighted by the 0.3 s since the last answer
    w = math.exp(-0.3 / 10.0)
    assert board.latency(A, 3.3) == pytest.approx(2.0 * w + 0.3 * (1 - w))


def test_read_between_answers_the_cost_decays_so_a_deployment_left_alone_is_tried_again() -> None:
    board = LoadBoard(decay=10.0)
    board.started(A, 0.0)
    board.ended(A, 0.0, 2.0, now=2.0)
    assert board.latency(A, 12.0) == pytest.approx(2.0 * math.exp(-1.0))
    assert board.latency(B, 12.0) is None  # never measured


def test_a_deployment_that_stopped_answering_is_as_slow_as_its_oldest_request_in_flight() -> None:
    board = LoadBoard()
    board.started(A, 0.0)
    board.ended(A, 0.0, 0.3, now=0.3)
    board.started(A, 1.0)
    board.started(A, 2.0)
    assert board.outstanding(A) == 2
    assert board.latency(A, 9.0) == pytest.approx(8.0)
    board.ended(A, 1.0, None, now=9.5)  # a failure: in flight no more, no latency learned
    assert board.outstanding(A) == 1 and board.latency(A, 9.5) == pytest.approx(7.5)


def test_the_tightest_quota_share_the_headers_state_holds_until_its_reset() -> None:
    board = LoadBoard()
    info = RateLimitInfo(
        limit_requests=1000, remaining_requests=900, reset_requests=10.0,
        limit_tokens=100_000, remaining_tokens=5_000, reset_tokens=20.0,
    )  # fmt: skip
    board.observe(A, info, now=0.0)
    assert board.share_left(A, 5.0) == pytest.approx(0.05)
    assert board.share_left(A, 20.0) is None  # the window it described is over
    board.observe(A, None, now=0.0)
    board.observe(A, RateLimitInfo(), now=0.0)  # says nothing: nothing changes
    assert board.share_left(A, 5.0) == pytest.approx(0.05)


@pytest.mark.parametrize("strategy", ["quota", "p2c"])
def test_a_deployment_near_its_quota_gets_less_before_it_says_429(strategy: str) -> None:
    """a has 3% of its tokens left per the provider's headers, b 60%: quota puts b first, and
    p2c (equal latency) prefers b in every draw."""
    board = LoadBoard()
    for t in (A, B):
        board.started(t, 0.0)
        board.ended(t, 0.0, 0.4, now=0.4)
    board.observe(A, RateLimitInfo(limit_tokens=100_000, remaining_tokens=3_000, reset_tokens=60.0), now=0.4)
    board.observe(B, RateLimitInfo(limit_tokens=100_000, remaining_tokens=60_000, reset_tokens=60.0), now=0.4)
    view = RequestLoad(board, None, lambda t: 10, lambda t: 10)
    firsts = {balance([A, B], strategy, view, 1.0, random.Random(i))[0][0].name for i in range(20)}  # type: ignore[arg-type]
    assert firsts == {"b"}
