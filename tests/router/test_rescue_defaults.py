"""Rescue at DEFAULT settings: every target timeout, attempt limit, hold and policy as a user gets
them, a 30 s deadline, a primary with a fault and a healthy approved fallback. On virtual time.

Per case: the caller gets the whole answer exactly once (nothing of the faulty primary), how
many requests each provider saw, how long it took against the deadline, and what the record says.
The loopback-HTTP and gateway versions of these cells are in tests/e2e/test_rescue_matrix.py.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from failover import Capability, Envelope, Request, Route, Router
from failover.model import Completed, PartialOutput, TextDelta
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

pytestmark = pytest.mark.looptime

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
WORDS = " ".join(f"w{i}" for i in range(60))  # a short answer: 60 words, streamed a word per event
BUDGET = 30.0


def route_over(primary: FakeProvider, fallback: FakeProvider, **kw: object) -> Router:
    route = Route(
        name="r",
        primary=(primary.target(capabilities=CAPS, tokenizer="estimate"),),
        fallbacks=(fallback.target(capabilities=CAPS, tokenizer="estimate"),),
        **kw,  # type: ignore[arg-type]
    )
    return Router([route], transport=FakeNetwork(primary, fallback))


async def stream_once(router: Router) -> tuple[list[object], float]:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    events: list[object] = []
    async with router.stream("r", Request.simple("tell me"), Envelope(budget=BUDGET)) as s:
        async for ev in s:
            events.append(ev)
    return events, loop.time() - t0


FAULTS = {
    "silent": Reply.hang(),
    "silent 15 s then closed": Reply.reset(latency=15.0),
    "first token after 20 s": Reply.stall_before_first(20.0, text=WORDS, chunk_interval=0.005),
    "cut after 40 of 60": Reply.drop_after(40, text=WORDS, chunk_interval=0.005),
    "cut after 5 of 60": Reply.drop_after(5, text=WORDS, chunk_interval=0.005),
    "stall after 20": Reply.stall_after(20, text=WORDS, chunk_interval=0.005),
    "undecodable after 10": Reply.malformed_after(10, text=WORDS, chunk_interval=0.005),
}


@pytest.mark.parametrize("fault", FAULTS)
async def test_the_fallback_answers_whole_and_well_inside_the_deadline(fault: str) -> None:
    a = FakeProvider("a", "openai", Script.always(FAULTS[fault]))
    b = FakeProvider("b", "openai", Script.always(Reply.ok(WORDS, chunk_interval=0.005)))
    events, took = await stream_once(route_over(a, b))
    end = events[-1]
    assert isinstance(end, Completed), end
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == WORDS  # once, nothing spliced
    rec = end.response.record
    assert rec is not None and rec.target_used == "b" and rec.recovered
    assert len(b.calls) == 1
    # "well inside": the silent or stalled primary was given at most half of its time
    assert took <= BUDGET * 0.6, took
    if fault.startswith(("silent", "first token", "stall")):
        assert len(a.calls) == 1  # a silent target is not replayed while the fallback can answer


async def test_a_slow_primary_that_answers_inside_its_share_is_not_cut() -> None:
    a = FakeProvider("a", "openai", Script.always(Reply.stall_before_first(8.0, text=WORDS, chunk_interval=0.005)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("from b")))
    events, took = await stream_once(route_over(a, b))
    end = events[-1]
    assert isinstance(end, Completed) and end.response.record is not None
    assert end.response.record.target_used == "a" and len(b.calls) == 0
    assert took == pytest.approx(8.0 + 0.3, abs=0.1)


async def test_each_fix_turned_off_loses_the_rescue() -> None:
    """The same faults with the hold off and nothing kept back for the next tier: the old
    outcomes (a partial answer, a fallback starved of time) come back, so the tests above see
    what they claim to."""
    a = FakeProvider("a", "openai", Script.always(FAULTS["cut after 40 of 60"]))
    b = FakeProvider("b", "openai", Script.always(Reply.ok(WORDS)))
    events, _ = await stream_once(route_over(a, b, hold_tokens=0))
    assert isinstance(events[-1], PartialOutput) and len(b.calls) == 0

    a = FakeProvider("a", "openai", Script.always(Reply.hang()))
    b = FakeProvider("b", "openai", Script.always(Reply.ok(WORDS)))
    router = route_over(a, b, fallback_reserve=0.0)
    with pytest.raises(Exception) as exc:
        await stream_once(router)
    assert "deadline" in str(exc.value) and len(b.calls) == 0


async def test_a_committed_replay_streams_to_its_end_past_the_fallbacks_reserve() -> None:
    # A fast 503, then the replay streams 400 words over ~9.6 s of a 10 s deadline. Before its
    # commit point it would end at the deadline less the fallback's reserve (~8.9 s); once its
    # output reached the caller the fallback can no longer be used, so it keeps the whole
    # deadline and ends whole, not as a partial output.
    words = " ".join(f"w{i:03d}" for i in range(400))
    a = FakeProvider("a", "openai", Script.of(Reply.server_error(), Reply.ok(words, chunk_interval=0.0235)))
    b = FakeProvider("b", "openai", Script.always(Reply.ok("from b")))
    router = route_over(a, b)
    router.rng = random.Random(3)  # the replay's backoff is drawn: a seeded draw keeps the end in place
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    events: list[object] = []
    async with router.stream("r", Request.simple("tell me"), Envelope(budget=10.0)) as s:
        async for ev in s:
            events.append(ev)
    took = loop.time() - t0
    end = events[-1]
    assert isinstance(end, Completed), end
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == words
    assert 9.0 < took <= 10.0, took  # it ran past the reserve's cut, inside the deadline
    assert (len(a.calls), len(b.calls)) == (2, 0)
    rec = end.response.record
    assert rec is not None and rec.target_used == "a"
    assert rec.attempts[0].committed is None and rec.attempts[1].committed is not None  # the replay committed
