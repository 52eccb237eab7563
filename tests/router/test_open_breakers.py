"""A request turned away only by open breakers (or cool-downs, or limiter waits) may come back.

An open circuit is temporary: the request ends as a retryable Unavailable whose kind is the
failure that opened the breaker and whose ``retry_after_ms`` is when the first skipped
breaker lets a probe through. Only contract, window and envelope exclusions are final.
All on virtual loop time.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from failover import Envelope, FailureKind, Limits, Request, Route, Router, Unavailable
from failover.policy import Backoff, BreakerBoard, BreakerConfig, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import C, target

pytestmark = pytest.mark.looptime

CFG = BreakerConfig(window_size=10, min_calls=4, failure_rate=0.5, open_duration=30.0, half_open_probes=2)


def make(*providers: FakeProvider, board: BreakerBoard, **extra: object) -> Router:
    route = Route(name="r", primary=tuple(target(p, key="m") for p in providers))
    return Router(
        [route],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=board,
        **extra,  # type: ignore[arg-type]
    )


async def fail(r: Router, n: int) -> None:
    for _ in range(n):
        with pytest.raises(Unavailable):
            await r.complete("r", Request.simple("x"), Envelope(budget=10))


async def turned_away(r: Router) -> Unavailable:
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("x"), Envelope(budget=10))
    return ei.value


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply.server_error(), FailureKind.PROVIDER_SERVER_ERROR),
        (Reply.unauthorized(), FailureKind.AUTHENTICATION_OR_PERMISSION),
        (Reply.reset(), FailureKind.TRANSPORT_TRANSIENT),
    ],
)
async def test_an_open_breaker_ends_the_request_retryable_with_the_kind_that_opened_it(
    reply: Reply, kind: FailureKind
) -> None:
    a = FakeProvider("a", "openai", Script.always(reply))
    r = make(a, board=BreakerBoard(CFG))
    await fail(r, 4)
    await asyncio.sleep(10.0)
    exc = await turned_away(r)
    assert len(a.calls) == 4
    assert exc.reason is kind, exc
    assert exc.retryable is True
    assert exc.retry_after_ms == 20_000  # the open period's 30 s, 10 s of it gone
    assert "circuit open" in exc.message
    await asyncio.sleep(20.0)
    a.load(Script.always("ok"))
    assert (await r.complete("r", Request.simple("x"), Envelope(budget=10))).text  # the probe it promised


def routes(board: BreakerBoard, *providers: FakeProvider, limits: dict[str, Limits] | None = None) -> Router:
    """One route per provider (``p.name``) and one over all of them (``all``), on one board."""
    ts = {p.name: replace(target(p, key="m"), limits=(limits or {}).get(p.name, Limits())) for p in providers}
    rs = [Route(name=name, primary=(t,)) for name, t in ts.items()]
    rs.append(Route(name="all", primary=tuple(ts.values())))
    return Router(
        rs,
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=board,
    )


async def trip(r: Router, route: str) -> None:
    for _ in range(4):
        with pytest.raises(Unavailable):
            await r.complete(route, Request.simple("x"), Envelope(budget=10))


async def test_retry_after_is_the_earliest_breaker_to_let_a_probe_through() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "openai", Script.always(Reply.server_error()))
    r = routes(BreakerBoard(CFG), a, b)
    await trip(r, "a")  # a opens at 0 s until 30 s
    await asyncio.sleep(5.0)
    await trip(r, "b")  # b opens at 5 s until 35 s
    await asyncio.sleep(7.0)
    with pytest.raises(Unavailable) as ei:
        await r.complete("all", Request.simple("x"), Envelope(budget=10))
    exc = ei.value
    assert exc.reason is FailureKind.PROVIDER_SERVER_ERROR and exc.retryable
    assert exc.retry_after_ms == 18_000  # a's, not b's 23 s
    assert exc.record is not None and {e.target for e in exc.record.excluded} == {"a", "b"}


async def test_a_full_half_open_breaker_asks_the_caller_back_in_a_second() -> None:
    """At the end of the open period 100 requests race for 2 probe slots; the other 98 are told to come back."""
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    r = make(a, board=BreakerBoard(CFG))
    await fail(r, 4)
    await asyncio.sleep(30.0)
    a.load(Script.always(Reply.ok("probe ok", latency=0.5)))
    results = await asyncio.gather(
        *(r.complete("r", Request.simple(f"q{i}"), Envelope(budget=10)) for i in range(100)), return_exceptions=True
    )
    refused = [x for x in results if isinstance(x, Unavailable)]
    assert len(refused) == 98, [x for x in results if not isinstance(x, Unavailable)][:3]
    for exc in refused:
        assert exc.reason is FailureKind.PROVIDER_SERVER_ERROR and exc.retryable, exc
        assert exc.retry_after_ms == 1000
        assert "half-open: 2 probes already in flight" in exc.message


async def test_breakers_cool_downs_and_limiter_waits_mixed_give_the_smallest_wait() -> None:
    brk = FakeProvider("brk", "openai", Script.always(Reply.server_error()))
    cool = FakeProvider("cool", "openai", Script.always(Reply.rate_limit(retry_after=8.0)))
    slow = FakeProvider("slow", "openai", Script.always("ok"))
    r = routes(BreakerBoard(CFG), brk, cool, slow, limits={"slow": Limits(rpm=1)})
    await trip(r, "brk")  # brk open until 30 s
    with pytest.raises(Unavailable):
        await r.complete("cool", Request.simple("x"), Envelope(budget=5))  # a 429: cool-down of 8 s
    await r.complete("slow", Request.simple("x"), Envelope(budget=5))  # slow's one request this minute
    with pytest.raises(Unavailable) as ei:
        await r.complete("all", Request.simple("x"), Envelope(budget=5))
    exc = ei.value  # the cool-down ends first (8 s), then the breaker (30 s), then the limiter (~60 s)
    assert exc.retryable and exc.reason is FailureKind.RATE_LIMITED, exc
    assert exc.retry_after_ms == 8_000
    await asyncio.sleep(9.0)
    cool.load(Script.always(Reply.server_error()))
    await trip(r, "cool")  # now cool's breaker is open too, until 39 s; brk's ends at 30 s
    with pytest.raises(Unavailable) as ei:
        await r.complete("all", Request.simple("x"), Envelope(budget=5))
    exc = ei.value
    assert exc.retryable and exc.reason is FailureKind.PROVIDER_SERVER_ERROR, exc
    assert exc.retry_after_ms == 21_000
    assert "client-side rate limit" in exc.message and "circuit open" in exc.message


async def test_only_contract_exclusions_stay_final_but_one_open_breaker_makes_it_retryable() -> None:
    text_only = FakeProvider("text", "openai", Script.always(Reply.server_error()))
    vision = FakeProvider("vision", "openai", Script.always("ok"))
    board = BreakerBoard(CFG)
    route = Route(
        name="r",
        primary=(target(text_only, key="m", caps={C.CHAT}), target(vision, key="m", caps={C.CHAT})),
    )
    r = Router([route], transport=FakeNetwork(text_only, vision), retry_budget=Unlimited(), breakers=board)
    needs = Envelope(budget=10, required=frozenset({C.VISION}))
    with pytest.raises(Unavailable) as ei:
        await r.complete("r", Request.simple("x"), needs)
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE and not ei.value.retryable
    assert ei.value.retry_after_ms is None
    # a route where the vision target exists but its breaker is open: temporary
    route2 = Route(name="r", primary=(target(text_only, key="m", caps={C.CHAT}), target(vision, key="m")))
    vision.load(Script.always(Reply.server_error()))
    r2 = Router([route2], transport=FakeNetwork(text_only, vision), retry_budget=Unlimited(), breakers=board)
    for _ in range(4):
        with pytest.raises(Unavailable):
            await r2.complete("r", Request.simple("x"), needs)
    with pytest.raises(Unavailable) as ei:
        await r2.complete("r", Request.simple("x"), needs)
    assert ei.value.reason is FailureKind.PROVIDER_SERVER_ERROR and ei.value.retryable, ei.value
    assert ei.value.retry_after_ms == 30_000
