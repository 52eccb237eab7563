"""Client-side rate limits in the router: wait locally instead of provoking 429s."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from failover import Envelope, Limits, Request, Route, Router, Unavailable
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime


def make(p: FakeProvider, limits: Limits) -> Router:
    t = target(p, cap=5.0)
    t = type(t)(**{**{f: getattr(t, f) for f in t.__dataclass_fields__}, "limits": limits})
    return Router(
        [Route(name="r", primary=(t,))],
        transport=FakeNetwork(p),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
    )


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


async def test_a_burst_stays_under_rpm_and_completes_what_its_deadline_allows() -> None:
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.2)))
    router = make(p, Limits(rpm=600))
    results = await asyncio.gather(
        *(router.complete("r", Request.simple(f"q{i}", max_tokens=50), Envelope(budget=90)) for i in range(1500)),
        return_exceptions=True,
    )
    ok = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, Unavailable)]
    assert len(ok) + len(failed) == 1500
    assert max_in_window([c.time for c in p.calls], 60.0) <= 540  # 600 x 0.9 safety
    assert len(p.calls) == len(ok) == 1080  # two windows fit in a 90 s budget; the rest could not
    assert all("client-side rate limit" in f.record.excluded[0].reason for f in failed)
    # the rejected ones were told as soon as the limiter knew, never after their budget ran out
    assert max(f.record.elapsed_ms for f in failed) <= 60_000.0
    waited = [r.record for r in ok if r.record is not None and r.record.waits]
    assert waited and all(w.waits[0].reason == "rate_limit" for w in waited)


async def test_a_heavy_tenant_gets_no_more_than_its_share_when_capacity_is_short() -> None:
    p = FakeProvider("a", "openai", Script.always(Reply.ok("ok", latency=0.1)))
    router = make(p, Limits(rpm=60))  # 54 per minute usable

    async def ask(tenant: str, i: int) -> str:
        try:
            await router.complete(
                "r", Request.simple(f"{tenant}{i}", max_tokens=10), Envelope(budget=100, tenant=tenant)
            )
        except Unavailable:
            return "rejected"
        return tenant

    # t=0: the first 54 (all heavy) go at once; at t=60 the next 54 are shared fairly between
    # the tenants still waiting: light gets all 10 it asked for, heavy the other 44. A plain
    # FIFO would have given the heavy tenant all 54 and the light one nothing.
    jobs = [ask("heavy", i) for i in range(200)] + [ask("light", i) for i in range(10)]
    served = Counter(await asyncio.gather(*jobs))
    assert served["light"] == 10
    assert served["heavy"] == 54 + 44


async def test_a_replay_the_limiter_has_no_room_for_goes_to_the_fallback_without_sleeping() -> None:
    """A's 429 asks for 0.5 s, but A's own rpm bucket has no room for a minute: the backoff is
    not slept, B answers at once, and the record says why A was not tried again."""
    a = FakeProvider("a", "openai", Script.always(Reply.rate_limit(retry_after=0.5, latency=0.05)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", latency=0.1)))
    ta = target(a, cap=5.0, attempts=3)
    ta = type(ta)(**{**{f: getattr(ta, f) for f in ta.__dataclass_fields__}, "limits": Limits(rpm=1)})
    router = Router(
        [Route(name="r", primary=(ta,), fallbacks=(target(b, cap=5.0),))],
        transport=FakeNetwork(a, b),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.1, cap=0.1),
        rng=random.Random(0),
        breakers=NoBreakers(),
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    resp = await router.complete("r", Request.simple("hi", max_tokens=50), Envelope(budget=10))
    assert resp.text == "from b"
    assert loop.time() - t0 == pytest.approx(0.15)  # A's 429, then B: no 0.5 s wait in between
    assert resp.record is not None and resp.record.waits == ()
    assert len(a.calls) == 1
    (why,) = [e.reason for e in resp.record.excluded if e.target == "a"]
    assert why.startswith("no replay: client-side rate limit: no room for")


async def test_a_queue_longer_than_max_added_latency_goes_to_the_idle_fallback_at_once() -> None:
    """A's rpm is spent: its queue would hold the next request ~60 s, within the deadline but
    far past max_added_latency 2 s. The fallback, idle, answers at once; without the limit the
    request waits its turn on A (the deadline allows it)."""
    a = FakeProvider("a", "openai", Script.always(Reply.ok("from a", latency=0.1)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", latency=0.1)))
    ta = target(a, cap=5.0)
    ta = type(ta)(**{**{f: getattr(ta, f) for f in ta.__dataclass_fields__}, "limits": Limits(rpm=3)})
    router = Router(
        [Route(name="r", primary=(ta,), fallbacks=(target(b, cap=5.0),))],
        transport=FakeNetwork(a, b),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
    )
    loop = asyncio.get_running_loop()
    for i in range(2):  # what the minute's bucket holds (3 rpm, less the limiter's margin)
        assert (
            await router.complete("r", Request.simple(f"{i}", max_tokens=10), Envelope(budget=120))
        ).text == "from a"
    t0 = loop.time()
    env = Envelope(budget=120, max_added_latency=2)
    resp = await router.complete("r", Request.simple("3", max_tokens=10), env)
    assert resp.text == "from b"
    assert loop.time() - t0 == pytest.approx(0.1)
    assert resp.record is not None and resp.record.added_latency_ms == pytest.approx(0.0, abs=1.0)
    assert len(a.calls) == 2
    (why,) = [e for e in resp.record.excluded if e.target == "a"]
    assert why.temporary and "past max_added_latency 2.000s" in why.reason
    t0 = loop.time()
    resp = await router.complete("r", Request.simple("4", max_tokens=10), Envelope(budget=120))
    assert resp.text == "from a" and loop.time() - t0 > 30  # no limit on added latency: it queues for A
