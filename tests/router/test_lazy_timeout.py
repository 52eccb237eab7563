"""The stream's idle deadline (router/_lazy_timeout.py): moved after every event at the cost of
a float, it still expires exactly where a rescheduled ``asyncio.Timeout`` would, on loop time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from failover.router._lazy_timeout import LazyTimeout

pytestmark = pytest.mark.looptime


async def test_it_expires_at_the_last_deadline_moved_later() -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def events() -> None:
        async with LazyTimeout(t0 + 1.0, loop) as timer:
            for _ in range(5):  # an event every 0.5 s: each moves the deadline 1 s on
                await asyncio.sleep(0.5)
                timer.move(loop.time() + 1.0)
            await asyncio.sleep(60)  # then silence

    with pytest.raises(TimeoutError):
        await events()
    assert loop.time() - t0 == pytest.approx(3.5)


async def test_a_deadline_moved_earlier_is_kept_at_once() -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def silence() -> None:
        async with LazyTimeout(t0 + 30.0, loop) as timer:
            timer.move(t0 + 2.0)
            await asyncio.sleep(60)

    with pytest.raises(TimeoutError):
        await silence()
    assert loop.time() - t0 == pytest.approx(2.0)


async def test_moving_it_later_schedules_no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    scheduled: list[float] = []
    call_at = loop.call_at

    def spy(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        scheduled.append(when)
        return call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", spy)
    t0 = loop.time()
    async with LazyTimeout(t0 + 10.0, loop) as timer:
        for i in range(100):
            timer.move(t0 + 10.0 + i)
        await asyncio.sleep(1)
    assert scheduled == [t0 + 10.0, t0 + 1]  # its one timer, and the sleep's


async def test_a_block_that_ends_in_time_leaves_nothing_behind() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    t0 = loop.time()
    async with LazyTimeout(t0 + 1.0, loop) as timer:
        timer.move(t0 + 2.0)
        await asyncio.sleep(0.5)
    await asyncio.sleep(5)  # past both deadlines: its timer was cancelled on the way out
    assert errors == [] and loop.time() - t0 == pytest.approx(5.5)


async def test_a_cancellation_from_outside_is_not_a_timeout() -> None:
    loop = asyncio.get_running_loop()

    async def body() -> None:
        async with LazyTimeout(loop.time() + 10.0, loop) as timer:
            timer.move(loop.time() + 20.0)
            await asyncio.sleep(60)

    task = asyncio.create_task(body())
    await asyncio.sleep(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
