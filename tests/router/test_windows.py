"""Context windows through the router: undeclared is unknown, the provider's own numbers decide.

After a context overflow the request needs what the provider counted (plus max_tokens when it
counted the input alone); a candidate is skipped only when its known window (declared, or
stated by its provider in an earlier overflow) is smaller; an unknown window is tried.
"""

from __future__ import annotations

import pytest

from failover import Envelope, FailureKind, Phase, Request, Route, Router, Unavailable
from failover.model import Failure
from failover.policy import NoBreakers, Unlimited, WindowBoard
from failover.testing import FakeProvider, FakeServer, Reply, Script

from ._kit import router, target

pytestmark = pytest.mark.looptime

OA, AN, GE = "openai", "anthropic", "gemini"
REQ = Request.simple("word " * 6_000, max_tokens=100)  # ~11,000 tokens by the estimate


def overflow_8192() -> Reply:
    """OpenAI's "maximum context length is 8192 tokens. However, your messages resulted in 9631 tokens"."""
    return Reply.context_overflow(prompt_tokens=9_631, limit=8_192)


async def test_a_fallback_that_declares_no_window_is_tried_after_an_overflow_and_answers() -> None:
    a = FakeProvider("a", OA, Script.always(overflow_8192()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    r = router([target(a, window=None)], [target(b, window=None)], a, b)
    resp = await r.complete("r", REQ, Envelope(budget=10.0))
    assert resp.text == "from b"
    assert (len(a.calls), len(b.calls)) == (1, 1)
    attempts = resp.record.attempts  # type: ignore[union-attr]
    assert [(x.target, x.outcome) for x in attempts] == [("a", "context_overflow"), ("b", "ok")]
    assert attempts[1].phase is Phase.FALLBACK
    f = attempts[0].failure
    assert f is not None and (f.window_limit, f.window_used, f.window_includes_output) == (8_192, 9_631, False)


async def test_a_declared_window_too_small_for_the_reported_count_is_not_tried() -> None:
    # Anthropic: "prompt is too long: 9000 tokens > 4096 maximum"; the fallback declares 4,097:
    # larger than the window that overflowed, but it cannot hold the 9,000 tokens reported
    a = FakeProvider("a", AN, Script.always(Reply.context_overflow(prompt_tokens=9_000, limit=4_096)))
    b = FakeProvider("b", OA, Script.always(Reply.ok("from b")))
    r = router([target(a, window=None)], [target(b, window=4_097)], a, b)
    small = Request.simple("hello there", max_tokens=100)  # fits 4,097 by the local estimate
    with pytest.raises(Unavailable) as info:
        await r.complete("r", small, Envelope(budget=10.0))
    err = info.value
    assert err.reason is FailureKind.CONTEXT_OVERFLOW and not err.retryable
    assert (len(a.calls), len(b.calls)) == (1, 0)
    assert "9000 tokens > 4096 maximum" in err.message
    assert "context window 4097 (declared) cannot hold the 9100 tokens" in err.message
    (excl,) = [e for e in err.record.excluded if e.target == "b"]
    assert "a reported 9000 input tokens (its limit 4096), + max_tokens 100" in excl.reason


async def test_a_fallback_with_a_larger_declared_window_is_tried() -> None:
    a = FakeProvider("a", OA, Script.always(overflow_8192()))
    b = FakeProvider("b", GE, Script.always(Reply.ok("from b")))
    r = router([target(a, window=None)], [target(b, window=32_000)], a, b)
    resp = await r.complete("r", REQ, Envelope(budget=10.0))
    assert resp.text == "from b" and (len(a.calls), len(b.calls)) == (1, 1)


async def test_a_declared_window_that_is_wrong_does_not_keep_a_fitting_fallback_away() -> None:
    # the primary declares 128,000 but its provider says 8,192: the need is the 9,631 it counted
    # (+ max_tokens), not "larger than 128,000", so a 32,000-token fallback is tried
    a = FakeProvider("a", OA, Script.always(overflow_8192()))
    b = FakeProvider("b", GE, Script.always(Reply.ok("from b")))
    r = router([target(a, window=128_000)], [target(b, window=32_000)], a, b)
    resp = await r.complete("r", REQ, Envelope(budget=10.0))
    assert resp.text == "from b" and (len(a.calls), len(b.calls)) == (1, 1)


async def test_with_no_numbers_a_window_no_larger_than_the_one_that_overflowed_is_skipped() -> None:
    a = FakeProvider("a", OA, Script.always(Reply.context_overflow(message="Input is too long.")))
    same = FakeProvider("same", AN, Script.always(Reply.ok("same")))
    unknown = FakeProvider("unknown", GE, Script.always(Reply.ok("unknown")))
    r = router(
        [target(a, window=16_000)], [target(same, window=16_000), target(unknown, window=None)], a, same, unknown
    )
    resp = await r.complete("r", REQ, Envelope(budget=10.0))
    assert resp.text == "unknown"
    assert (len(a.calls), len(same.calls), len(unknown.calls)) == (1, 0, 1)
    (excl,) = [e for e in resp.record.excluded if e.target == "same"]  # type: ignore[union-attr]
    assert (
        excl.reason
        == "context window 16000 (declared) cannot hold the 16001 tokens needed after a's window of 16000 overflowed"
    )


async def test_a_learned_window_keeps_the_next_request_off_the_primary_in_preflight() -> None:
    a = FakeProvider("a", OA, Script.always(overflow_8192()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    r = router([target(a, window=None)], [target(b, window=None)], a, b)
    await r.complete("r", REQ, Envelope(budget=10.0))
    assert (len(a.calls), len(b.calls)) == (1, 1)
    assert r.windows.known(r.routes["r"].primary[0]) == 8_192

    resp = await r.complete("r", REQ, Envelope(budget=10.0))  # ~11,000 tokens: cannot fit 8,192
    assert resp.text == "from b"
    assert (len(a.calls), len(b.calls)) == (1, 2)  # no second request to the primary
    (excl,) = resp.record.excluded  # type: ignore[union-attr]
    assert excl.target == "a"
    assert excl.reason.startswith("input ~")
    assert excl.reason.endswith("context window 8192 (stated by its provider in an overflow error)")

    # a request that fits the learned window still goes to the primary
    a.script = Script.always(Reply.ok("from a"))
    resp = await r.complete("r", Request.simple("short", max_tokens=100), Envelope(budget=10.0))
    assert resp.text == "from a" and len(a.calls) == 2


async def test_a_learned_window_too_small_for_every_candidate_is_a_context_overflow_up_front() -> None:
    a = FakeProvider("a", OA, Script.always(overflow_8192()))
    r = router([target(a, window=None)], [], a)
    with pytest.raises(Unavailable):
        await r.complete("r", REQ, Envelope(budget=10.0))
    with pytest.raises(Unavailable) as info:
        await r.complete("r", REQ, Envelope(budget=10.0))
    assert len(a.calls) == 1  # the second was turned away before anything was sent
    assert info.value.reason is FailureKind.CONTEXT_OVERFLOW
    assert "context window 8192 (stated by its provider in an overflow error)" in info.value.message


async def test_the_board_is_bounded_and_keeps_what_the_provider_said() -> None:
    board = WindowBoard(max_entries=2)
    a, b, c = (FakeProvider(n, OA, Script.always(Reply.ok())) for n in "abc")
    ta, tb, tc = (target(p, window=None) for p in (a, b, c))
    said = Failure(kind=FailureKind.CONTEXT_OVERFLOW, message="x", window_limit=8_192)
    assert board.learn(ta, Failure(kind=FailureKind.CONTEXT_OVERFLOW, message="x")) is None  # nothing stated
    assert board.learn(ta, Failure(kind=FailureKind.INVALID_REQUEST, message="x", window_limit=5)) is None
    for t in (ta, tb, tc):
        board.learn(t, said)
    assert (board.known(ta), board.known(tb), board.known(tc)) == (None, 8_192, 8_192)
    assert board.known(target(a, window=1_000)) == 1_000  # a declared window is the target's own word


async def test_over_real_http_the_fallback_with_no_window_answers_and_the_window_is_learned() -> None:
    a = FakeProvider("a", AN, Script.always(Reply.context_overflow(prompt_tokens=210_000, limit=200_000)))
    b = FakeProvider("b", OA, Script.always(Reply.ok("from b")))
    async with FakeServer(a, b) as srv:
        route = Route(
            name="r",
            primary=(srv.target_for(a, tokenizer="estimate"),),
            fallbacks=(srv.target_for(b, tokenizer="estimate"),),
        )
        assert route.primary[0].context_window is None
        async with Router([route], retry_budget=Unlimited(), breakers=NoBreakers()) as r:
            resp = await r.complete("r", Request.simple("hi", max_tokens=50), Envelope(budget=10.0))
            assert resp.text == "from b" and (len(a.calls), len(b.calls)) == (1, 1)
            assert r.windows.known(route.primary[0]) == 200_000


async def test_the_record_json_carries_the_providers_numbers() -> None:
    a = FakeProvider("a", OA, Script.always(overflow_8192()))
    b = FakeProvider("b", AN, Script.always(Reply.ok("from b")))
    r = router([target(a, window=None)], [target(b, window=None)], a, b)
    resp = await r.complete("r", REQ, Envelope(budget=10.0))
    first = resp.record.to_dict()["attempts"][0]["failure"]  # type: ignore[union-attr]
    assert (first["window_limit"], first["window_used"], first["window_includes_output"]) == (8_192, 9_631, False)
