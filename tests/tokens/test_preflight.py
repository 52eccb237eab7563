"""Preflight: the window check, the remote count near the window, and the compaction hook."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import pytest

from failover.model import Dialect, Message, Request, Target
from failover.testing import FakeNetwork, FakeProvider
from failover.tokens import (
    CompactionHook,
    EstimateCounter,
    PreflightResult,
    TokenCounter,
    counter_for,
    measure,
    near_window,
    preflight,
    reserved_output,
)
from failover.tokens._calibrate import _clear_caches
from failover.transport._types import Transport

from ._transports import Canned


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    _clear_caches()
    yield
    _clear_caches()


class Fixed:
    def __init__(self, n: int) -> None:
        self.n = n
        self.name = f"fixed{n}"

    def count(self, request: Request) -> int:
        return self.n


def tgt(dialect: Dialect = Dialect.OPENAI, window: int = 1_000, max_out: int = 100, name: str = "t") -> Target:
    return Target(
        name=name,
        dialect=dialect,
        model="m",
        base_url="https://x.example/v1",
        context_window=window,
        max_output_tokens=max_out,
    )


# ------------------------------------------------------------------ preflight


def test_fits_when_input_plus_max_tokens_is_within_the_window() -> None:
    r = preflight(tgt(), Request.simple("hi", max_tokens=200), Fixed(800))
    assert r == PreflightResult(
        tokens=800, max_tokens=200, window=1000, fits=True, exact=False, counter="fixed800", reason=None
    )
    assert r.over == 0


def test_does_not_fit_with_a_reason_and_how_far_over() -> None:
    r = preflight(tgt(), Request.simple("hi", max_tokens=200), Fixed(801))
    assert not r.fits
    assert r.over == 1
    assert r.reason == "input ~801 (fixed801) + max_tokens 200 tokens exceeds context window 1000 by 1"


def test_a_count_already_made_is_not_made_again() -> None:
    class Counting(Fixed):
        calls = 0

        def count(self, request: Request) -> int:
            Counting.calls += 1
            return self.n

    r = preflight(tgt(), Request.simple("hi"), Counting(5), counted=1_200)
    assert (r.tokens, r.fits, r.counter, Counting.calls) == (1_200, False, "fixed5", 0)
    assert preflight(tgt(), Request.simple("hi"), Counting(5), counted=1_200, exact=10).tokens == 10


def test_an_exact_count_decides_over_the_counter() -> None:
    r = preflight(tgt(Dialect.ANTHROPIC), Request.simple("hi", max_tokens=100), Fixed(5000), exact=950)
    assert (r.tokens, r.exact, r.counter, r.fits, r.over) == (950, True, "anthropic count_tokens", False, 50)
    assert r.reason is not None and r.reason.startswith("input 950 (anthropic count_tokens)")


def test_anthropic_reserves_max_output_tokens_when_the_request_sets_none() -> None:
    # The Anthropic dialect must send max_tokens: it sends the target's max_output_tokens.
    assert reserved_output(tgt(Dialect.ANTHROPIC, max_out=300), Request.simple("hi")) == 300
    assert reserved_output(tgt(Dialect.OPENAI, max_out=300), Request.simple("hi")) == 0
    assert reserved_output(tgt(Dialect.GEMINI, max_out=300), Request.simple("hi")) == 0
    assert reserved_output(tgt(Dialect.BEDROCK, max_out=300), Request.simple("hi")) == 300  # maxTokens is sent
    assert reserved_output(tgt(Dialect.ANTHROPIC, max_out=300), Request.simple("hi", max_tokens=7)) == 7
    assert not preflight(tgt(Dialect.ANTHROPIC, max_out=300), Request.simple("hi"), Fixed(701)).fits


# ------------------------------------------------------------------ near_window


@pytest.mark.parametrize(
    ("estimated", "max_tokens", "expected"),
    [
        (800, 99, False),  # 899 < 900: the count decides
        (800, 100, True),  # 900: within 10% of the window
        (900, None, True),
        (1_800, 100, True),  # over, but 900 + 100 if the estimate is twice too high
        (1_802, 100, False),  # over even then: no count can save it
    ],
)
def test_near_window(estimated: int, max_tokens: int | None, expected: bool) -> None:
    assert near_window(estimated, max_tokens, 1_000) is expected


def test_near_window_margin_and_overcount() -> None:
    assert near_window(700, 0, 1_000, margin=0.3)
    assert not near_window(700, 0, 1_000, margin=0.2)
    assert near_window(2_900, 0, 1_000, overcount=3.0)


# ------------------------------------------------------------------ measure


def long_request(chars: int, max_tokens: int = 1_000) -> Request:
    return Request.simple("word " * (chars // 5), max_tokens=max_tokens)


async def test_measure_far_from_the_window_does_not_ask_the_provider() -> None:
    p = FakeProvider("claude", "anthropic")
    t = p.target(context_window=200_000)
    r = await measure(t, long_request(4_000), transport=FakeNetwork(p))
    assert r.fits and not r.exact
    assert r.counter == "estimate"
    assert p.calls == []


async def test_measure_near_the_window_asks_the_provider_and_its_count_decides() -> None:
    p = FakeProvider("claude", "anthropic")  # counts characters / 4
    request = long_request(40_000)
    estimated = counter_for(p.target()).count(request)
    t = p.target(context_window=estimated)  # the estimate alone says: does not fit
    assert not preflight(t, request, counter_for(t)).fits
    r = await measure(t, request, transport=FakeNetwork(p))
    assert r.exact and r.fits
    assert r.tokens == 10_000
    assert [c.path for c in p.calls] == ["/v1/messages/count_tokens"]


async def test_measure_keeps_the_local_count_when_the_provider_fails() -> None:
    t = tgt(Dialect.ANTHROPIC, window=10_000)
    request = long_request(40_000)
    net = Canned(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
    r = await measure(t, request, transport=net, timeout=0.5)
    assert len(net.requests) == 1
    assert not r.exact
    assert r.tokens == counter_for(t).count(request)
    assert net.timeouts == [(0.5, 0.5)]


async def test_measure_without_a_transport_or_a_counting_dialect_counts_locally() -> None:
    request = long_request(40_000)
    net = Canned(200, {"input_tokens": 1})
    near = tgt(Dialect.ANTHROPIC, window=10_000)
    assert not (await measure(near, request)).exact
    assert not (await measure(tgt(Dialect.OPENAI, window=10_000), request, transport=net)).exact
    assert net.requests == []


async def test_measure_with_a_counter_given() -> None:
    r = await measure(tgt(), Request.simple("hi"), counter=Fixed(10))
    assert (r.tokens, r.counter) == (10, "fixed10")


# ------------------------------------------------------------------ the compaction hook, as the router uses it


async def fit_or_compact(
    targets: list[Target], request: Request, hook: CompactionHook | None, transport: Transport
) -> tuple[Request, list[Target]] | str:
    """The router's preflight, as docs/tokens.md describes it: the targets that fit (and the
    request to send them), or why the request is a context overflow."""
    for round_ in range(2):
        results = await asyncio.gather(*(measure(t, request, transport=transport, timeout=0.5) for t in targets))
        fits = [t for t, r in zip(targets, results, strict=True) if r.fits]
        if fits:
            return request, fits
        if hook is None or round_ == 1:
            break
        best = min(zip(targets, results, strict=True), key=lambda tr: tr[1].over)
        compacted = await hook(request, best[0], best[1].over)
        if compacted is None:
            break
        request = compacted
    return "context_overflow: " + "; ".join(f"{t.name}: {r.reason}" for t, r in zip(targets, results, strict=True))


class Summarise:
    """A compaction hook that keeps the last message (and records how it was called)."""

    def __init__(self, give_up: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.give_up = give_up

    async def __call__(self, request: Request, target: Target, tokens_over: int, /) -> Request | None:
        self.calls.append((target.name, tokens_over))
        if self.give_up:
            return None
        return replace(request, messages=request.messages[-1:])


def conversation() -> Request:
    old = tuple(Message.user("old context " * 300) for _ in range(3))
    return Request(messages=(*old, Message.user("the question")), max_tokens=100)


async def test_the_hook_runs_once_for_the_target_nearest_to_fitting_and_the_request_is_counted_again() -> None:
    small, smaller = tgt(window=2_000, name="small"), tgt(window=1_000, name="smaller")
    hook = Summarise()
    outcome = await fit_or_compact([smaller, small], conversation(), hook, Canned(500, {}))
    assert not isinstance(outcome, str)
    request, fitting = outcome
    assert len(request.messages) == 1
    assert [t.name for t in fitting] == ["smaller", "small"]
    (call,) = hook.calls
    assert call[0] == "small"
    counted = counter_for(small).count(conversation())
    assert call[1] == counted + 100 - 2_000


async def test_no_hook_or_a_hook_that_gives_up_is_a_context_overflow_before_sending() -> None:
    net = Canned(500, {})
    t = tgt(Dialect.ANTHROPIC, window=500, name="a")
    outcome = await fit_or_compact([t], conversation(), None, net)
    assert isinstance(outcome, str) and outcome.startswith("context_overflow: a: input ~")
    hook = Summarise(give_up=True)
    assert isinstance(await fit_or_compact([t], conversation(), hook, net), str)
    assert len(hook.calls) == 1


async def test_a_hook_that_does_not_shorten_enough_is_called_only_once() -> None:
    class Useless:
        calls = 0

        async def __call__(self, request: Request, target: Target, tokens_over: int, /) -> Request | None:
            Useless.calls += 1
            return request

    assert isinstance(await fit_or_compact([tgt(window=300)], conversation(), Useless(), Canned(500, {})), str)
    assert Useless.calls == 1


def test_a_plain_async_function_is_a_compaction_hook() -> None:
    async def drop_all_but_last(req: Request, target: Target, over: int) -> Request | None:
        return replace(req, messages=req.messages[-1:])

    hook: CompactionHook = drop_all_but_last  # type-checked by mypy: positional parameters
    assert callable(hook)
    _: TokenCounter = EstimateCounter()


async def test_an_unknown_window_fits_and_no_provider_count_is_asked() -> None:
    p = FakeProvider("claude", "anthropic")
    t = p.target(context_window=None)
    request = long_request(40_000)
    r = preflight(t, request, counter_for(t))
    assert r.fits and r.window is None and r.over == 0 and r.reason is None
    r = await measure(t, request, transport=FakeNetwork(p))
    assert r.fits and not r.exact and p.calls == []
    # a window the provider stated decides like a declared one
    stated = await measure(t, request, transport=FakeNetwork(p), window=5_000)
    assert not stated.fits and stated.window == 5_000 and stated.over > 0
