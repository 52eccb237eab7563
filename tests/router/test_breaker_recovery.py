"""Breakers come back with the provider: after an outage the primary is used again within
seconds, half-open probes keep happening while the fallback serves, and no caller is told to
come back after the breaker's next probe.

The measured scenario (bench/breaker_recovery.py): route = primary ``a`` + one approved
fallback ``b``; ``a`` is down for 60 s (503s, or every call hangs), then healthy. The router as
a user gets it: default breakers, retry budget and backoff. The bound: a request that starts
``RECOVERED_WITHIN`` (5 s, the default ``max_open_duration``) after the recovery or later is
answered by ``a``. All on virtual loop time.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable

import httpx
import pytest

from failover import Capability, Envelope, Price, Request, Route, Router, Target, Timeouts, Unavailable
from failover.gateway import EnvelopeDefaults, GatewaySettings, create_app
from failover.policy import Backoff, BreakerBoard, BreakerConfig, BreakerEvent, RetryBudget, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

pytestmark = pytest.mark.looptime

RECOVERY = 60.0
RECOVERED_WITHIN = 5.0  # the default max_open_duration
FAULTS: dict[str, Callable[[], Reply]] = {"503": Reply.overloaded, "hang": Reply.hang}


def target(p: FakeProvider, attempts: int, cap: float = 2.0) -> Target:
    return p.target(
        capabilities=frozenset({Capability.CHAT}),
        timeouts=Timeouts(connect=min(cap, 5.0), first_event=cap, idle=cap, total=cap, min_useful=0.05),
        max_attempts=attempts,
        price=Price(input_per_mtok=1.0, output_per_mtok=2.0),
        tokenizer="estimate",
    )


def outage(
    fault: str, *, board: BreakerBoard | None = None, cap: float = 2.0
) -> tuple[Router, FakeProvider, FakeProvider]:
    a = FakeProvider("a", "openai", Script.always(FAULTS[fault]()))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("b", latency=0.2)))
    route = Route(name="r", primary=(target(a, 2, cap),), fallbacks=(target(b, 1),))
    router = Router(
        [route],
        transport=FakeNetwork(a, b),
        retry_budget=RetryBudget(),
        breakers=board or BreakerBoard(),
        backoff=Backoff(),
        rng=random.Random(1),
    )
    return router, a, b


def max_probes_in_flight(a: FakeProvider, events: list[BreakerEvent]) -> int:
    """The most calls on ``a`` in flight at once among those that arrived while its target
    breaker was half-open (each span from the move to half-open to the next change)."""
    changes = [e for e in events if e.layer == "target"]
    spans = [
        (e.at, changes[i + 1].at if i + 1 < len(changes) else math.inf)
        for i, e in enumerate(changes)
        if e.new.value == "half_open"
    ]
    assert spans, "the breaker never went half-open"
    calls = [c for c in a.calls if c.kind is not None and any(s <= c.time < e for s, e in spans)]
    edges = sorted([(c.ended_at or math.inf, -1) for c in calls] + [(c.time, 1) for c in calls])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def traffic(router: Router, times: list[float]) -> list[tuple[float, float, str | None]]:
    """One request at each of ``times`` (loop seconds from now): (start, end, target that answered)."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    out: list[tuple[float, float, str | None]] = []

    async def one(at: float) -> None:
        await asyncio.sleep(at)
        start = loop.time() - t0
        try:
            resp = await router.complete("r", Request.simple("hi"), Envelope(budget=5.0))
        except Unavailable:
            out.append((start, loop.time() - t0, None))
            return
        assert resp.record is not None
        out.append((start, loop.time() - t0, resp.record.target_used))

    await asyncio.gather(*(one(t) for t in times))
    return sorted(out)


def recover_at(a: FakeProvider, at: float) -> None:
    asyncio.get_running_loop().call_later(at, a.load, Script.always(Reply.ok("a", latency=0.2)))


@pytest.mark.parametrize("fault", ["503", "hang"])
async def test_sequential_requests_are_back_on_the_primary_within_5s_of_its_recovery(fault: str) -> None:
    events: list[BreakerEvent] = []
    router, a, _ = outage(fault, board=BreakerBoard(hooks=[events.append]))
    recover_at(a, RECOVERY)
    results = await traffic(router, [4.0 * i for i in range(20)])
    assert all(used is not None for *_, used in results), results  # every request answered
    assert [used for start, _, used in results if start < RECOVERY] == ["b"] * 15  # the fallback served
    late = [(start, used) for start, _, used in results if start >= RECOVERY + RECOVERED_WITHIN]
    assert late and all(used == "a" for _, used in late), results
    assert any(e.new.value == "open" for e in events)  # it did open: the probes brought it back
    assert max_probes_in_flight(a, events) <= BreakerConfig().half_open_probes


@pytest.mark.parametrize("fault", ["503", "hang"])
async def test_fifty_callers_a_second_find_the_primary_within_5s_with_probes_under_the_limit(fault: str) -> None:
    events: list[BreakerEvent] = []
    router, a, _ = outage(fault, board=BreakerBoard(hooks=[events.append]))
    recover_at(a, RECOVERY)
    results = await traffic(router, [float(s) for s in range(81) for _ in range(50)])
    assert all(used is not None for *_, used in results)
    first = min(end for _, end, used in results if used == "a" and end >= RECOVERY)
    assert first - RECOVERY <= RECOVERED_WITHIN + 0.2  # + the 0.2 s of the answer itself
    # once its probes succeeded (each 0.2 s) every request goes to the primary
    late = [used for start, _, used in results if start >= RECOVERY + RECOVERED_WITHIN + 1.0]
    assert late and set(late) == {"a"}
    assert max_probes_in_flight(a, events) <= BreakerConfig().half_open_probes


async def test_200_concurrent_requests_across_recovery_send_exactly_the_probe_limit() -> None:
    events: list[BreakerEvent] = []
    router, a, _ = outage("503", board=BreakerBoard(hooks=[events.append]))
    await traffic(router, [0.0] * 20)  # opens the breaker
    assert [e.new.value for e in events if e.layer == "target"] == ["open"]
    await asyncio.sleep(BreakerConfig().open_duration)  # the open period ends as the provider recovers
    a.load(Script.always(Reply.ok("a", latency=0.5)))
    before = len(a.calls)
    results = await traffic(router, [0.0] * 200)
    assert len(a.calls) - before == 2  # half_open_probes, no more, under 200 at once
    assert [used for *_, used in results].count("a") == 2
    assert [used for *_, used in results].count("b") == 198  # no request failed for being turned away
    assert max_probes_in_flight(a, events) == 2
    results = await traffic(router, [0.0] * 200)  # the two probes closed it
    assert {used for *_, used in results} == {"a"}


async def test_a_probe_that_hangs_still_leaves_its_request_the_fallback() -> None:
    """A probe whose attempt cap (60 s) is longer than the deadline (10 s) is cut to keep the
    fallback's time: the request is answered by the fallback, not failed for being a probe."""
    router, a, _ = outage("503", cap=60.0)
    results = await traffic(router, [0.0] * 12)  # 503s open the breaker; b answers
    assert {used for *_, used in results} == {"b"}
    board = router.breakers
    assert isinstance(board, BreakerBoard)
    assert board.breaker(router.routes["r"].primary[0]).retry_at is not None  # open
    a.load(Script.always(Reply.hang()))  # now it hangs
    await asyncio.sleep(BreakerConfig().open_duration)
    calls = len(a.calls)
    resp = await router.complete("r", Request.simple("hi"), Envelope(budget=10.0))
    assert len(a.calls) == calls + 1  # it was the probe
    assert resp.text == "b" and resp.record is not None
    assert [x.target for x in resp.record.attempts] == ["a", "b"]
    assert resp.record.attempts[0].failure is not None


# -- Retry-After never later than the next probe ---------------------------------------------------


def solo(reply: Reply) -> tuple[Router, FakeProvider, BreakerBoard]:
    a = FakeProvider("a", "openai", Script.always(reply))
    board = BreakerBoard(BreakerConfig(window_size=4, min_calls=4))
    router = Router(
        [Route(name="r", primary=(a.target(max_attempts=1),))],
        transport=FakeNetwork(a),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        breakers=board,
    )
    return router, a, board


async def turned_away(router: Router) -> Unavailable:
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", Request.simple("x"), Envelope(budget=10))
    return ei.value


@pytest.mark.parametrize(
    "reply", [Reply.server_error(), Reply.overloaded(retry_after=120)], ids=["500", "503 retry-after 120"]
)
async def test_retry_after_is_never_later_than_the_next_probe(reply: Reply) -> None:
    """Across reopenings (2, 3, 4.5, 5 s) and at odd moments within each open period; a longer
    hint from the provider (120 s) is not told either: the breaker probes long before."""
    router, a, board = solo(reply)
    loop = asyncio.get_running_loop()
    told: list[int] = []
    for _ in range(4):
        opening = await turned_away(router)
    breaker = board.breaker(router.routes["r"].primary[0])
    assert breaker.retry_at is not None and opening.retry_after_ms is not None
    # the request whose failure opened it: told the probe, not the provider's hint
    assert loop.time() + opening.retry_after_ms / 1000 <= breaker.retry_at + 1e-9
    for _ in range(4):  # four open periods, each ended by a failed probe
        for offset in (0.3, 0.7, 0.7):
            await asyncio.sleep(offset)
            breaker = board.breaker(router.routes["r"].primary[0])
            probe_at = breaker.retry_at
            if probe_at is None:
                break
            exc = await turned_away(router)
            assert exc.retryable and exc.retry_after_ms is not None
            told.append(exc.retry_after_ms)
            assert loop.time() + exc.retry_after_ms / 1000 <= probe_at + 1e-9, (exc.retry_after_ms, probe_at)
        breaker = board.breaker(router.routes["r"].primary[0])
        assert breaker.retry_at is not None
        await asyncio.sleep(breaker.retry_at - loop.time())
        calls = len(a.calls)
        probed = await turned_away(router)  # the probe, failing: the breaker reopens
        assert len(a.calls) == calls + 1
        assert breaker.retry_at is not None and probed.retry_after_ms is not None
        assert loop.time() + probed.retry_after_ms / 1000 <= breaker.retry_at + 1e-9
    assert told and max(told) <= 5_000
    assert any(ms % 1000 == 0 and ms >= 1000 for ms in told)  # whole seconds: a header cannot round up past it


async def test_the_gateways_retry_after_is_the_next_probe_and_never_0() -> None:
    """From one second on, Retry-After is never later than the breaker's next probe; under a
    second it is 1, not 0 (a client reading whole seconds would retry a 0 at once, in a burst),
    and retry-after-ms still has the exact wait."""
    router, _, board = solo(Reply.server_error())
    app = create_app(router, GatewaySettings(envelope=EnvelopeDefaults(deadline_ms=5_000)))
    loop = asyncio.get_running_loop()
    chat = {"model": "r", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        for _ in range(4):
            await c.post("/v1/chat/completions", json=chat)
        seen = []
        for offset in (0.3, 0.4, 0.9, 0.35):  # 1.7, 1.3, 0.4 and 0.05 s before the probe
            await asyncio.sleep(offset)
            probe_at = board.breaker(router.routes["r"].primary[0]).retry_at
            assert probe_at is not None
            r = await c.post("/v1/chat/completions", json=chat)
            assert r.status_code == 503 and "circuit open" in r.json()["error"]["message"]
            wait = probe_at - loop.time()
            assert int(r.headers["retry-after"]) <= max(1, wait)
            assert int(r.headers["retry-after-ms"]) / 1000 <= wait + 1e-9
            seen.append(r.headers["retry-after"])
    assert seen == ["1", "1", "1", "1"]
