"""LoggingHook: one line per attempt and per request, through stdlib logging or structlog, no secrets."""

from __future__ import annotations

import logging

import pytest
import structlog
from structlog.testing import capture_logs

from failover import Envelope, Request, Router, Unavailable
from failover.telemetry import Hooks, LoggingHook
from failover.testing import FakeProvider, Reply, Script

from ..router._kit import router, target

pytestmark = pytest.mark.looptime


def failing_over(hook: LoggingHook, b_reply: Reply) -> tuple[Router, list[str]]:
    """Primary a: 500 twice (a replay after a backoff), then the fallback b."""
    a = FakeProvider("a", "openai", Script.always(Reply.server_error()))
    b = FakeProvider("b", "anthropic", Script.always(b_reply))
    ta, tb = target(a, attempts=2), target(b)
    r = router([ta], [tb], a, b)
    r.hooks = Hooks([hook])
    return r, [t.api_key.reveal() for t in (ta, tb) if t.api_key is not None]


async def test_stdlib_lines_per_attempt_and_request(caplog: pytest.LogCaptureFixture) -> None:
    r, secrets = failing_over(LoggingHook(structlog=False), Reply.ok("the answer", usage=(10, 5)))
    caplog.set_level(logging.DEBUG)  # every failover logger, so a leak anywhere would show
    await r.complete("r", Request.simple("a prompt that must not be logged"), Envelope(budget=5, request_id="req-7"))

    mine = [rec for rec in caplog.records if rec.name == "failover.requests"]
    lines = [rec.getMessage() for rec in mine]
    assert [line.split(" ", 1)[0] for line in lines] == [
        "failover.attempt",
        "failover.wait",
        "failover.attempt",
        "failover.attempt",
        "failover.request",
    ]
    assert all(rec.levelno == logging.INFO for rec in mine)
    assert "target=a" in lines[0] and "outcome=provider_server_error" in lines[0] and "status=500" in lines[0]
    assert "reason=backoff" in lines[1]
    assert "target=b" in lines[3] and "outcome=ok" in lines[3] and "input_tokens=10" in lines[3]
    assert "request_id=req-7" in lines[4] and "workflow=fallback" in lines[4] and "recovered=True" in lines[4]
    fields = mine[4].__dict__["failover"]
    assert (fields["outcome"], fields["target_used"], fields["attempts"]) == ("ok", "b", 3)

    everything = caplog.text + "".join(repr(rec.__dict__) for rec in caplog.records)
    assert secrets and not any(s in everything for s in secrets)
    assert "a prompt that must not be logged" not in everything and "the answer" not in everything


async def test_a_failed_request_logs_a_warning_and_levels_are_configurable(caplog: pytest.LogCaptureFixture) -> None:
    hook = LoggingHook("app.llm", level=logging.INFO, attempt_level=logging.DEBUG, structlog=False)
    r, _ = failing_over(hook, Reply.server_error())
    caplog.set_level(logging.INFO, logger="app.llm")
    with pytest.raises(Unavailable):
        await r.complete("r", Request.simple("hi"), Envelope(budget=5))
    mine = [rec for rec in caplog.records if rec.name == "app.llm"]
    assert len(mine) == 1  # attempts at DEBUG are filtered out
    assert mine[0].levelno == logging.WARNING
    assert "outcome=provider_server_error" in mine[0].getMessage()


async def test_structlog_gets_the_fields_as_keywords() -> None:
    r, secrets = failing_over(LoggingHook(structlog=True), Reply.ok("the answer"))
    with capture_logs() as logs:
        await r.complete("r", Request.simple("secret prompt"), Envelope(budget=5))
    assert [e["event"] for e in logs] == [
        "failover.attempt",
        "failover.wait",
        "failover.attempt",
        "failover.attempt",
        "failover.request",
    ]
    assert (logs[-1]["outcome"], logs[-1]["target_used"], logs[-1]["log_level"]) == ("ok", "b", "info")
    assert not any(s in repr(logs) for s in secrets) and "secret prompt" not in repr(logs)


def test_structlog_is_used_only_when_configured() -> None:
    structlog.reset_defaults()
    assert not LoggingHook().uses_structlog  # installed but unconfigured: stdlib logging
    structlog.configure(processors=[structlog.processors.KeyValueRenderer()])
    try:
        assert LoggingHook().uses_structlog
        assert not LoggingHook(structlog=False).uses_structlog
    finally:
        structlog.reset_defaults()
