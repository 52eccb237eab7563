"""Streams over random fault schedules on virtual time (hypothesis): the commit point and the
time kept for the next tier, through the real loop, the real policy objects and the fault kit.

A streams a 40-word answer and breaks on a random schedule (cut, stall, an undecodable event, a
late first event, silence, a slow drop, a 503, or no fault) at a random point and pace; B, an
approved fallback, answers. The hold, the deadline and A's attempts are drawn too; every
target timeout is the default. Invariants, per request:

1. the caller sees exactly one answer's text, once: a whole answer (A's or B's) or, only when
   A's output had passed its commit point, a prefix of A's answer ending in PartialOutput;
2. a failure before the commit point never reaches the caller: with B able to answer in what
   is left, a request ends without a whole answer only after some attempt's output was
   committed, and a fault inside the hold always ends in a whole answer;
3. no uncommitted attempt of A runs past the deadline less the least a next tier is kept
   (min_useful + UNKNOWN_LATENCY) while B is eligible, and the whole request ends by the deadline.
"""

from __future__ import annotations

import asyncio

import looptime
from hypothesis import example, given, settings
from hypothesis import strategies as st

from failover import Capability, Envelope, Request, Route, Router, Unavailable
from failover.model import Completed, PartialOutput, TextDelta
from failover.router._engine import UNKNOWN_LATENCY
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
N = 40
WORDS = " ".join(f"a{i}" for i in range(N))
B_TEXT = "the whole answer from b"
KEEP = 0.05 + UNKNOWN_LATENCY  # the least a next tier is kept: its min_useful and the floor


def fault(kind: str, at: int, pace: float) -> Reply:
    told = {"text": WORDS, "chunk_interval": pace}
    return {
        "cut": Reply.drop_after(at, **told),  # type: ignore[arg-type]
        "stall": Reply.stall_after(at, **told),  # type: ignore[arg-type]
        "undecodable": Reply.malformed_after(at, **told),  # type: ignore[arg-type]
        "late first": Reply.stall_before_first(at * 1.0, **told),  # type: ignore[arg-type]
        "silent": Reply.hang(),
        "slow drop": Reply.reset(latency=at * 0.5),
        "503": Reply.overloaded(latency=0.01),
        "ok": Reply.ok(WORDS, chunk_interval=pace),
    }[kind]


def run(**kw: object) -> None:
    loop = looptime.new_event_loop(start=0.0, noop_cycles=0)
    try:
        loop.run_until_complete(_one(**kw))  # type: ignore[arg-type]
    finally:
        loop.close()


async def _one(kind: str, at: int, pace: float, hold_tokens: int, hold_seconds: float, budget: float) -> None:
    a = FakeProvider("a", "openai", Script.always(fault(kind, at, pace)))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok(B_TEXT, chunk_interval=0.01)))
    route = Route(
        name="r",
        primary=(a.target(capabilities=CAPS, tokenizer="estimate"),),
        fallbacks=(b.target(capabilities=CAPS, tokenizer="estimate"),),
        hold_tokens=hold_tokens,
        hold_seconds=hold_seconds,
    )
    router = Router([route], transport=FakeNetwork(a, b))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    events: list[object] = []
    try:
        async with router.stream("r", Request.simple("tell me"), Envelope(budget=budget)) as s:
            async for ev in s:
                events.append(ev)
    except Unavailable as exc:
        rec = exc.record
        end: object = exc
    else:
        end = events[-1]
        rec = end.response.record if isinstance(end, Completed) else end.record  # type: ignore[attr-defined]
    elapsed = loop.time() - t0
    await router.aclose()
    assert rec is not None
    assert elapsed <= budget + 1e-6
    text = "".join(e.text for e in events if isinstance(e, TextDelta))

    # 1. one answer's text, once
    if isinstance(end, Completed):
        assert text in (WORDS, B_TEXT) and text == end.response.text
    elif isinstance(end, PartialOutput):
        assert WORDS.startswith(text) and text != WORDS and len(b.calls) == 0
        cut = rec.attempts[-1]
        assert cut.target == "a" and cut.committed is not None  # output had passed its commit point
    else:
        assert text == ""

    # 2. a failure before the commit point never reaches the caller when B can still answer: an
    # end other than a whole answer comes only after an attempt's output was committed (a cut
    # after the hold, or a committed stream too slow for the deadline)
    if budget >= 2 * KEEP + 0.5 and not isinstance(end, Completed):
        assert any(x.committed is not None for x in rec.attempts), (kind, at, pace, hold_tokens, budget, rec.attempts)
    # ... and where the fault came inside the hold, the answer is whole
    inside = kind in ("cut", "stall", "undecodable") and at < hold_tokens and (at - 1) * pace < hold_seconds
    if inside and budget >= 2 * KEEP + 0.5:
        assert isinstance(end, Completed), (kind, at, pace, hold_tokens, hold_seconds, budget, rec.attempts)

    # 3. an uncommitted attempt of A leaves B its time while B is eligible
    deadline = budget
    for x in rec.attempts:
        if x.target == "a" and x.committed is None and not x.ok and budget - KEEP > 0.05:
            assert x.end <= deadline - KEEP + 1e-6, (x, budget)


@settings(max_examples=250, deadline=None)
@example(kind="silent", at=1, pace=0.01, hold_tokens=100, hold_seconds=2.0, budget=30.0)
@example(kind="cut", at=30, pace=0.01, hold_tokens=100, hold_seconds=2.0, budget=30.0)
@example(kind="stall", at=20, pace=0.01, hold_tokens=100, hold_seconds=2.0, budget=30.0)
@example(kind="late first", at=20, pace=0.01, hold_tokens=100, hold_seconds=2.0, budget=30.0)
@example(kind="slow drop", at=30, pace=0.01, hold_tokens=100, hold_seconds=2.0, budget=30.0)
@given(
    kind=st.sampled_from(["cut", "stall", "undecodable", "late first", "silent", "slow drop", "503", "ok"]),
    at=st.integers(1, N - 1),
    pace=st.sampled_from([0.005, 0.05, 0.2]),
    hold_tokens=st.sampled_from([0, 5, 20, 100]),
    hold_seconds=st.sampled_from([0.0, 0.5, 2.0]),
    budget=st.sampled_from([3.0, 10.0, 30.0]),
)
def test_random_stream_faults_keep_the_commit_point_and_the_next_tiers_time(
    kind: str, at: int, pace: float, hold_tokens: int, hold_seconds: float, budget: float
) -> None:
    run(kind=kind, at=at, pace=pace, hold_tokens=hold_tokens, hold_seconds=hold_seconds, budget=budget)
