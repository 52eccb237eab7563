"""GuardedStore on virtual time: timeouts, fail-fast while down, one probe, back-off, recovery."""

from __future__ import annotations

import asyncio
import logging

import pytest

from failover.state import GuardedStore, StateUnavailable

pytestmark = pytest.mark.looptime


class Backend:
    """A stand-in backend: answers, fails, or hangs, and counts the calls that reached it."""

    name = "fake"
    errors: tuple[type[BaseException], ...] = ()

    def __init__(self) -> None:
        self.mode = "ok"
        self.calls = 0

    async def op(self) -> str:
        self.calls += 1
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode == "down":
            raise ConnectionRefusedError("refused")
        return "ok"

    async def aclose(self) -> None:
        return None


async def test_a_hanging_backend_costs_one_timeout_then_fails_fast(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="failover.state")
    b = Backend()
    g = GuardedStore(b, timeout=0.05, retry_after=1.0, max_retry_after=4.0)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    assert await g.call(b.op) == "ok"
    b.mode = "hang"
    t0 = loop.time()
    with pytest.raises(StateUnavailable):
        await g.call(b.op)
    assert loop.time() - t0 == pytest.approx(0.05)
    for _ in range(100):  # while down, nothing waits and nothing reaches the backend
        with pytest.raises(StateUnavailable):
            await g.call(b.op)
    assert b.calls == 2 and g.fallbacks == 101 and not g.health().up
    await asyncio.sleep(1.0)
    results = await asyncio.gather(*(g.call(b.op) for _ in range(20)), return_exceptions=True)
    assert b.calls == 3  # one probe among twenty callers
    assert all(isinstance(r, StateUnavailable) for r in results)
    await asyncio.sleep(1.5)  # the back-off doubled to 2 s: still waiting
    with pytest.raises(StateUnavailable):
        await g.call(b.op)
    assert b.calls == 3
    b.mode = "ok"
    await asyncio.sleep(0.6)
    assert await g.call(b.op) == "ok"
    assert g.health().up and g.transitions == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "failover.state"]
    assert len(lines) == 2 and "TimeoutError" in lines[0] and "reachable again" in lines[1]


async def test_a_refused_connection_is_down_at_once() -> None:
    b = Backend()
    b.mode = "down"
    g = GuardedStore(b, timeout=0.05)  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(StateUnavailable) as info:
        await g.call(b.op)
    assert loop.time() == t0 and "ConnectionRefusedError" in str(info.value)
    assert g.health().up is False and g.health().fallbacks == 1


async def test_programming_errors_are_not_hidden_as_an_outage() -> None:
    b = Backend()
    g = GuardedStore(b)  # type: ignore[arg-type]

    async def broken() -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await g.call(broken)
    assert g.up


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="local_share"):
        GuardedStore(Backend(), local_share=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        GuardedStore(Backend(), timeout=0)  # type: ignore[arg-type]
