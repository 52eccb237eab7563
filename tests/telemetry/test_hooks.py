"""Telemetry events through hooks, and their OpenTelemetry spans, on virtual loop time."""

from __future__ import annotations

import asyncio
import logging

import pytest

from failover import Envelope, Request, Router
from failover.telemetry import (
    AttemptEnded,
    AttemptStarted,
    Backoff,
    Event,
    Hook,
    Hooks,
    RequestEnded,
    RequestStarted,
)
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import router, target

pytestmark = pytest.mark.looptime


def failing_over(*hooks: Hook) -> tuple[Router, list[str]]:
    """Primary a: 500 twice (a replay), then cross-model fallback b: ok."""
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(Reply.ok("from b", latency=0.2)))
    ta, tb = target(a, attempts=2), target(b)
    r = router([ta], [tb], a, b)
    r.hooks = Hooks(hooks)
    secrets = [t.api_key.reveal() for t in (ta, tb) if t.api_key is not None]
    return r, secrets


async def test_events_of_a_failover_arrive_in_order() -> None:
    events: list[Event] = []
    r, secrets = failing_over(events.append)
    resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0, request_id="req-1"))
    assert resp.text == "from b"
    assert [type(e) for e in events] == [
        RequestStarted,
        AttemptStarted,
        AttemptEnded,
        Backoff,
        AttemptStarted,
        AttemptEnded,
        AttemptStarted,
        AttemptEnded,
        RequestEnded,
    ]
    assert {e.request_id for e in events} == {"req-1"}
    ended = [e for e in events if isinstance(e, AttemptEnded)]
    assert [(e.target, e.phase, e.index, e.failure, e.status) for e in ended] == [
        ("a", "primary", 0, "provider_server_error", 500),
        ("a", "primary", 1, "provider_server_error", 500),
        ("b", "fallback", 2, None, 200),
    ]
    assert (ended[-1].provider, ended[-1].outcome, ended[-1].stop_reason) == ("anthropic", "ok", "end_turn")
    assert ended[-1].duration == pytest.approx(0.2) and ended[-1].output_tokens is not None
    started = [e for e in events if isinstance(e, AttemptStarted)]
    assert [s.index for s in started] == [e.index for e in ended]
    assert all(s.at <= e.at for s, e in zip(started, ended, strict=True))
    (wait,) = [e for e in events if isinstance(e, Backoff)]
    assert (wait.target, wait.reason) == ("a", "backoff") and wait.seconds > 0
    end = events[-1]
    assert isinstance(end, RequestEnded) and resp.record is not None
    assert (end.outcome, end.workflow, end.recovered, end.target_used, end.attempts) == ("ok", "fallback", True, "b", 3)
    assert end.total_cost == pytest.approx(resp.record.total_cost)
    assert end.at - events[0].at == pytest.approx(resp.record.elapsed_ms / 1000)
    assert secrets and not any(s in repr(e) for e in events for s in secrets)


async def test_a_raising_hook_is_logged_and_the_request_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("hook bug")

    r, _ = failing_over(broken, seen.append)
    with caplog.at_level(logging.ERROR, logger="failover.telemetry"):
        resp = await r.complete("r", Request.simple("hi"), Envelope(budget=5.0))
    assert resp.text == "from b"
    assert len(seen) == 9  # the hook after the broken one still sees everything
    assert "hook bug" in caplog.text and "RequestStarted" in caplog.text


async def test_a_cancelled_request_ends_its_attempt_and_itself() -> None:
    events: list[Event] = []
    a = FakeProvider("a", "openai", Script.always(Reply.hang()))
    r = router([target(a, cap=5.0)], [], a)
    r.hooks = Hooks([events.append])
    task = asyncio.ensure_future(r.complete("r", Request.simple("hi"), Envelope(budget=10.0)))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [type(e) for e in events] == [RequestStarted, AttemptStarted, AttemptEnded, RequestEnded]
    assert isinstance(events[2], AttemptEnded) and events[2].outcome == "cancelled"
    assert isinstance(events[3], RequestEnded) and events[3].outcome == "cancelled"


def test_no_hooks_is_falsy() -> None:
    assert not Hooks() and Hooks([print])
