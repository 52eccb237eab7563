"""Retry budgets and keys, and the last attempt kept for the next candidate, through the router
on virtual time over the fault kit.

Two keys of one model share one upstream pool (same endpoint and model). A 429 on one key is
that key's fault, not the upstream's: the failover to the other key is its first attempt and
deposits, so a key answering 429 cannot starve an idle second key. Replays to the same key
still withdraw.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from failover import Envelope, Price, Request, Route, Router, Target, Timeouts, Unavailable
from failover.model import Secret
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.tokens._choose import counter_for
from failover.transport import HttpRequest, HttpResponse

pytestmark = pytest.mark.looptime

UPSTREAM = "up.fake"


class KeyedNetwork(FakeNetwork):
    """One upstream host whose keys are answered by fake providers of their own: a request with
    key ``sk-<name>`` reaches provider ``<name>``, so calls are counted per key."""

    def _to(self, request: HttpRequest) -> HttpRequest:
        name = request.headers.get("authorization", "").removeprefix("Bearer sk-")
        return dataclasses.replace(request, url=request.url.replace(f"//{UPSTREAM}/", f"//{name}.fake/"))

    async def send(self, request: HttpRequest, **kw: Any) -> HttpResponse:
        return await super().send(self._to(request), **kw)

    def stream(self, request: HttpRequest, **kw: Any) -> AbstractAsyncContextManager[Any]:
        return super().stream(self._to(request), **kw)


def key(p: FakeProvider) -> Target:
    """A target on the shared upstream with ``p``'s own key."""
    return p.target(
        name=p.name,
        base_url=f"http://{UPSTREAM}/v1",
        api_key=Secret(f"sk-{p.name}"),
        credential=f"KEY_{p.name.upper()}",
        tokenizer="estimate",
    )


async def answers(router: Router, n: int) -> list[object]:
    async def one(i: int) -> object:
        try:
            return await router.complete("r", Request.simple(f"hi {i}"), Envelope(budget=30))
        except Unavailable as exc:
            return exc

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def test_a_key_answering_429_does_not_starve_an_idle_second_key() -> None:
    k1 = FakeProvider("k1", "openai", Script.always(Reply.rate_limit(latency=0.2)))  # no hint
    k2 = FakeProvider("k2", "openai", Script.always(Reply.ok("fine", latency=0.2)))
    router = Router(
        [Route(name="r", primary=(key(k1), key(k2)), balance="order")],  # every request tries k1 first
        transport=KeyedNetwork(k1, k2),
    )
    assert router.retry_budget.pool_of(key(k1)) == router.retry_budget.pool_of(key(k2))  # one pool

    out = await answers(router, 50)

    failed = [o for o in out if isinstance(o, Unavailable)]
    assert not failed, failed[:1]  # before: 35 of 50 failed rate_limited, the pool spent by k1's 429s
    assert len(k1.calls) == 50 and len(k2.calls) == 50  # each request: one 429 on k1, then k2
    for resp in out:
        rec = resp.record  # type: ignore[attr-defined]
        assert rec.target_used == "k2" and rec.recovered and not rec.retry_budget_exhausted
        assert [(a.target, a.outcome) for a in rec.attempts] == [("k1", "rate_limited"), ("k2", "ok")]


async def test_an_upstream_fault_still_draws_the_failover_to_another_key_from_the_pool() -> None:
    """A 503 is the upstream's: the failover to its other key is an extra attempt on it, and the
    pool's budget (floor 10 + 10% of 50 first attempts) caps them."""
    k1 = FakeProvider("k1", "openai", Script.always(Reply.server_error(latency=0.2)))
    k2 = FakeProvider("k2", "openai", Script.always(Reply.ok("fine", latency=0.2)))
    router = Router(
        [Route(name="r", primary=(key(k1), key(k2)), balance="order")],  # every request tries k1 first
        transport=KeyedNetwork(k1, k2),
    )

    out = await answers(router, 50)

    served = [o for o in out if not isinstance(o, Unavailable)]
    assert len(served) == 15 and len(k2.calls) == 15
    refused = [o for o in out if isinstance(o, Unavailable)]
    assert all(o.record is not None and o.record.retry_budget_exhausted for o in refused)


# -- the last attempt is kept for the next candidate only while that candidate can go --------


def over(a: FakeProvider, b: FakeProvider, **route: Any) -> Router:
    ta = a.target(tokenizer="estimate")
    tb = b.target(tokenizer="estimate", price=Price(input_per_mtok=100_000.0, output_per_mtok=100_000.0))
    return Router(
        [Route(name="r", primary=(ta,), fallbacks=(tb,), **route)],
        transport=FakeNetwork(a, b),
        canary_rng=random.Random(1),  # its first draw is 0.134...: outside a 1% share
    )


async def test_the_last_attempt_is_not_kept_for_a_fallback_its_canary_draw_refuses() -> None:
    a = FakeProvider("a", "openai", Script.of(Reply.server_error(), "ok"))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("from b")))
    router = over(a, b, canary=(("b", 0.01),))

    resp = await router.complete("r", Request.simple("hi"), Envelope(budget=30, max_attempts=2))

    # before: "no replay: the last of max_attempts 2 is kept for b", then b refused: one attempt, failed
    assert len(a.calls) == 2 and len(b.calls) == 0
    rec = resp.record
    assert rec is not None and rec.target_used == "a" and rec.recovered
    assert [at.outcome for at in rec.attempts] == ["provider_server_error", "ok"]
    assert rec.excluded == ()  # b was never reached: the request did not need it


async def test_the_last_attempt_is_not_kept_for_a_fallback_that_max_cost_refuses() -> None:
    """b alone fits max_cost, but not on top of what a's cut-off attempt may have been billed."""
    a = FakeProvider("a", "openai", Script.of(Reply.hang(), "ok"))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("from b")))
    cheap, dear = Price(input_per_mtok=1_000.0), Price(input_per_mtok=10_000.0)
    ta = a.target(tokenizer="estimate", price=cheap, timeouts=Timeouts(connect=2.0, total=2.0, min_useful=0.05))
    tb = b.target(tokenizer="estimate", price=dear)
    req = Request.simple("hi")
    n = counter_for(ta).count(req)
    route = Route(name="r", primary=(ta,), fallbacks=(tb,), replay_timeouts=True)
    router = Router([route], transport=FakeNetwork(a, b))
    max_cost = dear.cost(n, 0) + cheap.cost(n, 0) / 2  # b's estimate + half of a's billed input

    resp = await router.complete("r", req, Envelope(budget=30, max_attempts=2, max_cost=max_cost))

    assert len(a.calls) == 2 and len(b.calls) == 0
    rec = resp.record
    assert rec is not None and rec.target_used == "a" and rec.recovered
    assert [at.outcome for at in rec.attempts] == ["timeout:total", "ok"]
    assert not any("kept for" in e.reason for e in rec.excluded), rec.excluded


async def test_the_last_attempt_is_still_kept_for_a_fallback_that_can_go() -> None:
    a = FakeProvider("a", "openai", Script.of(Reply.server_error(), "ok"))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("from b")))
    router = over(a, b, canary=(("b", 0.5),))  # 0.134 < 0.5: b is in its share

    resp = await router.complete("r", Request.simple("hi"), Envelope(budget=30, max_attempts=2))

    assert len(a.calls) == 1 and len(b.calls) == 1
    rec = resp.record
    assert rec is not None and rec.target_used == "b"
    assert [(e.target, e.reason) for e in rec.excluded] == [
        ("a", "no replay: the last of max_attempts 2 is kept for b")
    ]
