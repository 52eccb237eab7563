"""The gateway's reclaim after heavy requests: one pending at a time, and one more round for a
request that ended while a collection was already under way (its leftovers came too late)."""

from __future__ import annotations

import asyncio

import pytest

import failover.gateway._reclaim as reclaim

pytestmark = pytest.mark.looptime


async def _settle(r: reclaim.Reclaimer) -> None:
    task = r._task
    assert task is not None
    await task


async def test_requests_before_the_collection_share_one_reclaim(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds: list[float] = []
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(reclaim.gc, "collect", lambda: rounds.append(loop.time()) or 0)
    monkeypatch.setattr(reclaim, "_MALLOC_TRIM", None)
    r = reclaim.Reclaimer()
    t0 = loop.time()
    r.soon()
    await asyncio.sleep(0.5)
    r.soon()  # pending, not yet collecting: the same round covers it
    await _settle(r)
    assert [round(t - t0, 3) for t in rounds] == [reclaim.RECLAIM_AFTER_S]


async def test_a_request_ending_during_the_collection_gets_another_round(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds: list[float] = []
    loop = asyncio.get_running_loop()
    r = reclaim.Reclaimer()

    def collect() -> int:
        rounds.append(loop.time())
        if len(rounds) == 1:
            r.soon()  # a heavy request ends while this collection runs
        return 0

    monkeypatch.setattr(reclaim.gc, "collect", collect)
    monkeypatch.setattr(reclaim, "_MALLOC_TRIM", lambda pad: 0)
    t0 = loop.time()
    r.soon()
    await _settle(r)
    assert len(rounds) == 2 and rounds[1] - t0 >= 2 * reclaim.RECLAIM_AFTER_S - 0.01, rounds
