"""A slow reader is not the provider's failure (virtual time).

A caller that stops reading holds the upstream stream back (``RouteStream``'s bounded buffer);
only the attempt's total cap runs meanwhile. When the cap cuts the stream while it is held back
(or after it was held back at least half of its time) the attempt's Failure is marked
``not_target="slow_reader"``, and neither breaker nor health board counts it. A provider that
stalls on its own, with a caller that keeps up, still counts.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from failover import Capability, Envelope, FailureKind, Request, Route, Router, Timeouts
from failover.model import PartialOutput, TimeoutPhase
from failover.policy import Backoff, BreakerBoard, BreakerConfig, Unlimited
from failover.router._stream import BUFFERED_EVENTS
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

pytestmark = pytest.mark.looptime

C = Capability
TOTAL = 10.0
WORDS = " ".join(f"w{i}" for i in range(BUFFERED_EVENTS * 8))  # far more events than the buffer holds
NO_HOLD = Envelope(budget=60, hold_tokens=0)


def _router(p: FakeProvider) -> Router:
    target = p.target(
        capabilities=frozenset({C.CHAT, C.STREAMING}),
        timeouts=Timeouts(connect=1.0, first_event=2.0, idle=2.0, total=TOTAL),
        max_attempts=1,
        tokenizer="estimate",
    )
    return Router(
        [Route(name="r", primary=(target,))],
        transport=FakeNetwork(p),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=BreakerBoard(BreakerConfig(min_calls=2, failure_rate=0.5)),
    )


async def _read_slowly(router: Router, pause: float) -> PartialOutput:
    """One stream: the first event, then nothing read for ``pause`` seconds, then the rest."""
    async with router.stream("r", Request.simple("go", max_tokens=4000), NO_HOLD) as s:
        events = [await s.__anext__()]
        await asyncio.sleep(pause)
        async for ev in s:
            events.append(ev)
    end = events[-1]
    assert isinstance(end, PartialOutput), end
    return end


def _target_breaker(router: Router) -> tuple[int, int, str]:
    (snap,) = [b for b in router.breakers.snapshots(asyncio.get_running_loop().time()) if b.layer == "target"]
    return snap.calls, snap.failures, snap.state.value


async def test_a_stream_cut_while_held_back_for_its_reader_is_not_the_targets_failure() -> None:
    p = FakeProvider("p", "openai", Script.always(Reply.ok(WORDS, chunk_interval=0.001)))
    router = _router(p)
    for _ in range(4):
        end = await _read_slowly(router, TOTAL + 5)
        f = end.failure
        assert f.kind is FailureKind.TIMEOUT and f.phase is TimeoutPhase.TOTAL
        assert f.not_target == "slow_reader" and "slow reading" in f.message
        assert end.record.attempts[0].failure is not None
        assert end.record.to_dict()["attempts"][0]["failure"]["not_target"] == "slow_reader"
    assert _target_breaker(router) == (0, 0, "closed")
    assert router.health.of(router.routes["r"].primary[0]).success == 1.0
    await router.aclose()


async def test_a_provider_that_stalls_for_a_reader_that_keeps_up_still_counts() -> None:
    # the control: the same cut with a reader that reads everything at once is the provider's
    p = FakeProvider("p", "openai", Script.always(Reply.stall_after(3, TOTAL * 3, text=WORDS, heartbeat_interval=0.5)))
    router = _router(p)
    for _ in range(2):
        async with router.stream("r", Request.simple("go", max_tokens=4000), NO_HOLD) as s:
            events = [ev async for ev in s]
        end = events[-1]
        assert isinstance(end, PartialOutput)
        assert end.failure.kind is FailureKind.TIMEOUT and end.failure.not_target is None
    assert _target_breaker(router)[2] == "open"  # opened by the two cuts (its window starts anew)
    await router.aclose()
