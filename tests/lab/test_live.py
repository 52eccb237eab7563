"""The lab's live view: the record buffer (bounded, ordered, filtered), what a public record may
hold, and the translation of a real record's fault pattern into a custom scenario."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import looptime
import pytest

from failover import Router
from failover.lab import SeedOptions, run_virtual
from failover.lab._custom import BadInput, parse_custom_text
from failover.lab._live import (
    MAX_ITEMS,
    MAX_VIEWERS,
    VIEWER_QUEUE,
    LiveFilter,
    LiveRecords,
    TooManyViewers,
    public_record,
)
from failover.lab._pattern import NothingToReplay, scenario_from_record
from failover.lab._web import parse_options
from failover.model import (
    Attempt,
    Capability,
    Envelope,
    Exclusion,
    ExclusionCode,
    Failure,
    FailureKind,
    Phase,
    Request,
    Response,
    Route,
    RouteRecord,
    Timeouts,
    Unavailable,
    Usage,
    Wait,
    Workflow,
)
from failover.policy import Backoff
from failover.testing import FakeNetwork, FakeProvider, ReplyKind

SECRET = "sk-live-PROVIDER-SECRET-0123456789"
PROMPT = "PROMPT-CANARY the patient's name is Ada"
ANSWER = "ANSWER-CANARY here is the diagnosis"


def _record(
    n: int = 0,
    *,
    route: str = "chat",
    outcome: str = "ok",
    workflow: Workflow = Workflow.DIRECT,
    attempts: int = 1,
) -> RouteRecord:
    """A record whose failure carries every kind of text the live view must not show."""
    failed = Failure(
        kind=FailureKind.RATE_LIMITED,
        message=f"openai 429: rate limited for key {SECRET}; prompt was {PROMPT}",
        status=429,
        provider_code="rate_limit_exceeded",
        retry_after=0.25,
        provider_request_id="prov-req-1",
        response=Response(text=ANSWER),
        detail=f'{{"error": "{PROMPT}", "key": "{SECRET}"}}',
    )
    tries = [
        Attempt(
            index=i,
            target="main",
            model="gpt-test",
            phase=Phase.PRIMARY,
            start=0.3 * i,
            end=0.3 * i + 0.2,
            connect_timeout=5.0,
            total_timeout=30.0,
            outcome="rate_limited" if i < attempts - 1 else outcome,
            failure=failed if i < attempts - 1 or outcome != "ok" else None,
            status=429 if i < attempts - 1 else 200,
            usage=Usage(input_tokens=12, output_tokens=7),
            cost=0.0001,
            connected=0.3 * i + 0.01,
        )
        for i in range(attempts)
    ]
    return RouteRecord(
        request_id=f"req_{n}",
        route=route,
        workflow=workflow,
        outcome=outcome,
        attempts=tuple(tries),
        waits=(Wait(target="main", start=0.2, end=0.3, reason="retry_after"),),
        excluded=(
            Exclusion(
                target="spare",
                phase=Phase.FALLBACK,
                code=ExclusionCode.CAPABILITY,
                reason="missing capability: vision",
            ),
        ),
        recovered=attempts > 1,
        recovery_reason="rate_limited on main; recovered by replay to main" if attempts > 1 else None,
        target_used="main" if outcome == "ok" else None,
        elapsed_ms=300.0 * attempts,
        added_latency_ms=0.0,
        total_cost=0.0001 * attempts,
        degraded_reason=f"rate_limited: {PROMPT}" if outcome == "degraded" else None,
        degraded=outcome == "degraded",
    )


def _add(live: LiveRecords, rec: RouteRecord, status: int = 200) -> None:
    live.add(rec, status=status, tenant="acme", stream=False)


# -- what a public record holds ------------------------------------------------------------------


def test_a_public_record_is_metadata_only() -> None:
    rec = _record(attempts=2, outcome="degraded")
    pub = public_record(
        rec, seq=1, status=200, tenant="acme", stream=True, finished_at=1.5, candidates=("main", "spare")
    )
    text = json.dumps(pub)
    for secret in (SECRET, PROMPT, ANSWER, "prompt was"):  # the provider's message and body are gone
        assert secret not in text
    assert set(pub) == {
        "seq", "request_id", "route", "finished_at", "status", "stream", "tenant", "candidates", "workflow",
        "outcome", "recovered", "recovery_reason", "target_used", "elapsed_ms", "added_latency_ms",
        "total_cost", "degraded", "degraded_reason", "validation", "input_tokens_estimated",
        "retry_budget_exhausted", "uncertain_operation", "attempts", "waits", "excluded", "truncated",
    }  # fmt: skip
    a = pub["attempts"][0]
    assert a["failure"] == {
        "kind": "rate_limited",
        "phase": None,
        "status": 429,
        "provider_code": "rate_limit_exceeded",
        "retry_after": 0.25,
        "should_retry": None,
    }
    assert a["usage"]["input_tokens"] == 12 and a["target"] == "main" and a["connected"] == 0.01
    assert pub["degraded_reason"] == "rate_limited"  # the kind, not the provider's words
    assert pub["excluded"] == [
        {
            "target": "spare",
            "phase": "fallback",
            "code": "capability",
            "reason": "missing capability: vision",
            "temporary": False,
            "replay": False,
        }
    ]
    assert pub["candidates"] == ["main", "spare"] and pub["tenant"] == "acme" and pub["stream"] is True


def test_kept_strings_pass_the_scrubber() -> None:
    rec = _record()
    leaky = dataclasses.replace(rec, recovery_reason=f"key {SECRET}")
    pub = public_record(leaky, seq=1, status=200, tenant=None, stream=False, finished_at=0.0,
                        scrub=lambda s: s.replace(SECRET, "***"))  # fmt: skip
    assert pub["recovery_reason"] == "key ***"


def test_a_record_with_very_many_attempts_is_cut() -> None:
    pub = public_record(_record(attempts=MAX_ITEMS + 20), seq=1, status=200, tenant=None, stream=False, finished_at=0)
    assert len(pub["attempts"]) == MAX_ITEMS and pub["truncated"] is True


# -- the buffer ------------------------------------------------------------------------------------


def test_the_buffer_keeps_the_last_n_oldest_first() -> None:
    live = LiveRecords(keep=5)
    for i in range(8):
        _add(live, _record(i))
    got = live.snapshot()
    assert [r["request_id"] for r in got] == [f"req_{i}" for i in range(3, 8)]
    assert [r["seq"] for r in got] == [4, 5, 6, 7, 8]
    assert len(live) == 5
    assert live.get("req_7") is not None and live.get("req_2") is None  # left the buffer


def test_keep_is_bounded() -> None:
    with pytest.raises(ValueError, match="keep"):
        LiveRecords(keep=0)
    with pytest.raises(ValueError, match="keep"):
        LiveRecords(keep=10**6)


def test_filters_by_route_outcome_and_workflow() -> None:
    live = LiveRecords(keep=50)
    _add(live, _record(0, route="chat"))
    _add(live, _record(1, route="chat", attempts=2, workflow=Workflow.RETRY_FAILOVER))
    _add(live, _record(2, route="support", outcome="rate_limited", workflow=Workflow.FALLBACK), status=503)
    _add(live, _record(3, route="support", outcome="degraded", workflow=Workflow.FALLBACK))

    def ids(**params: str) -> list[str]:
        return [r["request_id"] for r in live.snapshot(LiveFilter.parse(params))]

    assert ids() == ["req_0", "req_1", "req_2", "req_3"]
    assert ids(route="chat") == ["req_0", "req_1"]
    assert ids(route="nope") == []
    assert ids(outcome="ok") == ["req_0", "req_1"]
    assert ids(outcome="failed") == ["req_2", "req_3"]  # anything but ok
    assert ids(outcome="rate_limited") == ["req_2"]
    assert ids(workflow="fallback") == ["req_2", "req_3"]
    assert ids(route="support", outcome="degraded", workflow="fallback") == ["req_3"]
    assert ids(route="", outcome="", workflow="") == ids()  # an empty choice is "any"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"outcome": "sunny"}, "outcome"),
        ({"workflow": "retry"}, "workflow"),
        ({"route": "r" * 1000}, "route"),
        ({"tenant": "acme"}, "tenant"),
    ],
)
def test_a_bad_filter_names_its_field(params: dict[str, str], field: str) -> None:
    with pytest.raises(BadInput) as info:
        LiveFilter.parse(params)
    assert info.value.field == field


async def test_a_viewer_gets_each_matching_record_in_order() -> None:
    live = LiveRecords(keep=10)
    viewer = live.subscribe(LiveFilter(route="chat"))
    _add(live, _record(0, route="chat"))
    _add(live, _record(1, route="other"))
    _add(live, _record(2, route="chat"))
    raw = await live.watch(viewer)
    assert raw is not None
    events = [b for b in raw.decode().split("\n\n") if b]
    assert [json.loads(e.split("data: ", 1)[1])["request_id"] for e in events] == ["req_0", "req_2"]
    assert all(e.startswith("event: record\n") for e in events)


async def test_a_slow_viewer_holds_a_bounded_queue_and_then_gets_one_snapshot() -> None:
    live = LiveRecords(keep=20)
    viewer = live.subscribe(LiveFilter())
    for i in range(VIEWER_QUEUE + 50):  # the viewer reads nothing meanwhile
        _add(live, _record(i))
        assert len(viewer.queue) <= VIEWER_QUEUE
    assert viewer.behind
    raw = await live.watch(viewer)
    assert raw is not None
    batch = raw.decode()
    assert batch.startswith("event: snapshot\n") and batch.count("\n\n") == 1
    snap = json.loads(batch.split("data: ", 1)[1])
    assert snap["keep"] == 20
    assert [r["seq"] for r in snap["records"]] == list(range(VIEWER_QUEUE + 31, VIEWER_QUEUE + 51))  # the last 20
    assert not viewer.queue and not viewer.behind
    _add(live, _record(999))  # then one event per record again
    raw = await live.watch(viewer)
    assert raw is not None and raw.startswith(b"event: record\n")


async def test_an_idle_viewer_gets_keep_alives_and_close_ends_it() -> None:
    live = LiveRecords(keep=5)
    viewer = live.subscribe(LiveFilter())
    assert await live.watch(viewer, heartbeat=0.01) == b": keep-alive\n\n"
    waiting = asyncio.ensure_future(live.watch(viewer, heartbeat=30))
    await asyncio.sleep(0)
    live.close()
    assert await asyncio.wait_for(waiting, 1) is None
    assert live.viewers == 0


def test_viewers_are_limited() -> None:
    live = LiveRecords(keep=5)
    viewers = [live.subscribe(LiveFilter()) for _ in range(MAX_VIEWERS)]
    with pytest.raises(TooManyViewers):
        live.subscribe(LiveFilter())
    live.unsubscribe(viewers[0])
    live.subscribe(LiveFilter())


# -- a real record's fault pattern as a custom scenario -------------------------------------------

DIALECTS = {"main": "openai", "backup": "anthropic", "spare": "gemini"}


def _real(
    scripts: Mapping[str, Any],
    *,
    fallbacks: tuple[str, ...] = ("backup", "spare"),
    main_attempts: int = 2,
    budget: float = 5.0,
    stream: bool = False,
    caps: dict[str, frozenset[Capability]] | None = None,
    request: Request | None = None,
) -> RouteRecord:
    """A request through a real Router on fake providers with real-looking names, on virtual time."""

    async def go() -> RouteRecord:
        providers = {n: FakeProvider(n, d, scripts.get(n)) for n, d in DIALECTS.items()}
        streams = {n: frozenset({Capability.CHAT, Capability.STREAMING}) for n in DIALECTS} if stream else {}
        targets = {
            n: p.target(
                max_attempts=main_attempts if n == "main" else 1,
                tokenizer="estimate",
                timeouts=Timeouts(connect=2, first_event=1.5, idle=1.5, total=3, min_useful=0.05),
                **({"capabilities": caps[n]} if caps and n in caps else {}),
                **({"capabilities": streams[n]} if n in streams else {}),
            )
            for n, p in providers.items()
        }
        route = Route(name="chat", primary=(targets["main"],), fallbacks=tuple(targets[f] for f in fallbacks))
        router = Router([route], transport=FakeNetwork(*providers.values()), backoff=Backoff(base=0.05, cap=0.2))
        req = request or Request.simple("hi", max_tokens=64)
        try:
            if stream:
                async with router.stream("chat", req, Envelope(budget=budget)) as s:
                    async for _ in s:
                        pass
                    rec = s.record
            else:
                rec = (await router.complete("chat", req, Envelope(budget=budget))).record
        except Unavailable as exc:
            rec = exc.record
        await router.aclose()
        assert rec is not None
        return rec

    loop = looptime.new_event_loop(start=0.0)
    try:
        return loop.run_until_complete(go())
    finally:
        loop.close()


def _public(rec: RouteRecord, candidates: tuple[str, ...] = ("main", "backup", "spare")) -> dict[str, Any]:
    return public_record(rec, seq=1, status=200, tenant=None, stream=False, finished_at=0.0, candidates=candidates)


def _replayed(pub: dict[str, Any]) -> tuple[RouteRecord, dict[str, str]]:
    """Translate, check the text is a valid custom scenario, and run it in the simulator."""
    re = scenario_from_record(pub)
    parse_custom_text(re.text)  # what the page's editor will send back
    opts: SeedOptions = parse_options({**re.settings, "custom": re.text})
    return run_virtual(opts).record, re.mapping


def _shape(rec: RouteRecord, names: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Each attempt's target (renamed) and its result: ok or the failure kind."""
    return [
        ((names or {}).get(a.target, a.target), "ok" if a.failure is None else a.failure.kind.value)
        for a in rec.attempts
    ]


PATTERNS: dict[str, dict[str, Any]] = {
    "429 then ok on a replay": {"scripts": {"main": ["rate_limit(retry_after=0.3, latency=0.05)", "ok(latency=0.1)"]}},
    "server errors, then a failing and a good fallback": {
        "scripts": {
            "main": "server_error(latency=0.05)",
            "backup": "overloaded(latency=0.1)",
            "spare": "ok(latency=0.2)",
        },
    },
    "a hang cut at its cap, then the fallback": {"scripts": {"main": "hang", "backup": "ok(latency=0.2)"}},
    "everything fails": {"scripts": dict.fromkeys(DIALECTS, "server_error")},
    "a two-target route that fails": {"scripts": {"main": "server_error", "backup": "quota"}, "fallbacks": ("backup",)},
    "a stream that stalls before its first event": {
        "scripts": {"main": "stall_before_first", "backup": "ok(latency=0.2, chunk_interval=0.05)"},
        "stream": True,
    },
    "connection failures": {"scripts": {"main": ["connect_error", "reset"], "backup": "ok"}},
}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_a_replay_reproduces_the_real_fault_pattern(name: str) -> None:
    kw = PATTERNS[name]
    real = _real(**kw)
    sim, mapping = _replayed(_public(real, ("main", *kw.get("fallbacks", ("backup", "spare")))))
    lab = {real_name: lab for lab, real_name in mapping.items()}
    assert _shape(sim) == _shape(real, lab), name
    assert sim.outcome == real.outcome and sim.workflow == real.workflow
    assert (sim.target_used is None) == (real.target_used is None)
    # and the waits: a Retry-After is followed as it was
    assert [(lab[w.target], w.reason) for w in real.waits] == [(w.target, w.reason) for w in sim.waits]


def test_the_scenario_text_says_what_each_target_answered() -> None:
    real = _real({"main": ["rate_limit(retry_after=0.3, latency=0.05)", "ok(latency=0.1)"]})
    re = scenario_from_record(_public(real))
    assert re.mapping == {"a": "main", "b": "backup", "c": "spare"}
    custom = parse_custom_text(re.text)
    a = custom.scenario["a"]
    assert a.reply_for(0).kind is ReplyKind.RATE_LIMIT and a.reply_for(0).retry_after == 0.3
    assert a.reply_for(0).latency == pytest.approx(0.05, abs=2e-3)
    assert a.reply_for(1).kind is ReplyKind.OK and a.reply_for(5) == a.reply_for(1)  # then like the last
    # backup and spare were not needed: they answer like the lab's healthy providers
    assert custom.scenario.names == ("a",) and not custom.absent
    assert "not called" in re.text
    assert re.settings == {
        "scenario": "custom",
        "capability": "chat",
        # the deadline as far as the record shows it: the last attempt's start plus its cap (3 s,
        # shorter than the 5 s deadline, which the record does not hold)
        "budget": pytest.approx(real.attempts[-1].start + 3.0, abs=0.01),  # up to the next 10 ms
        "attempt_cap": 3.0,
        "a_extra_retries": 1,
        "fallback_reserve": None,
    }


def test_a_candidate_left_out_is_absent_from_the_replay() -> None:
    """``spare`` cannot read images: the real request never called it, so the replay's route
    must not have a healthy C that would answer where the real request failed."""
    from failover.model import ImagePart, Message

    vision = Request(messages=(Message.user("what is this?", ImagePart(url="https://example.com/x.png")),))
    caps = {n: frozenset({Capability.CHAT, Capability.VISION}) for n in ("main", "backup")}
    caps["spare"] = frozenset({Capability.CHAT})
    real = _real({"main": "server_error", "backup": "server_error"}, caps=caps, request=vision)
    assert real.target_used is None and [e.target for e in real.excluded][:1] == ["spare"]
    re = scenario_from_record(_public(real))
    assert parse_custom_text(re.text).absent == {"c"} and re.mapping == {"a": "main", "b": "backup"}
    assert any("spare was left out (missing capability" in n for n in re.notes)
    sim, _ = _replayed(_public(real))
    assert sim.target_used is None and _shape(sim) == [("a", "provider_server_error")] * 2 + [
        ("b", "provider_server_error")
    ]


@pytest.mark.parametrize(
    ("failure", "reply"),
    [
        ({"kind": "quota_exhausted"}, "quota"),
        ({"kind": "provider_overloaded", "retry_after": 2.0}, "overloaded(retry_after=2,"),
        ({"kind": "authentication_or_permission"}, "unauthorized"),
        ({"kind": "model_not_found"}, "not_found"),
        ({"kind": "context_overflow"}, "context_overflow"),
        ({"kind": "invalid_request"}, "invalid"),
        ({"kind": "content_filtered"}, "content_filter"),
        ({"kind": "truncated"}, "truncate"),
        ({"kind": "tool_call_malformed"}, "malformed_tool_args"),
        ({"kind": "schema_invalid"}, "schema_invalid"),
        ({"kind": "partial_output"}, "drop_after(1"),
        ({"kind": "timeout", "phase": "idle"}, "stall_after(1)"),
        ({"kind": "timeout", "phase": "first_event"}, "stall_before_first"),
        ({"kind": "timeout", "phase": "total"}, "hang"),
    ],
)
def test_each_failure_kind_becomes_the_fault_kits_reply(failure: dict[str, Any], reply: str) -> None:
    attempt = {
        "index": 0, "target": "main", "phase": "primary", "start": 0.0, "end": 0.5, "connected": 0.01,
        "first_event": None, "total_timeout": 3.0, "outcome": failure["kind"], "streamed": False, "hedge": False,
        "failure": {"phase": None, "retry_after": None, **failure},
    }  # fmt: skip
    rec = {
        "request_id": "req_1", "route": "chat", "outcome": failure["kind"], "workflow": "stop",
        "elapsed_ms": 500.0, "attempts": [attempt], "excluded": [], "candidates": ["main"],
    }  # fmt: skip
    re = scenario_from_record(rec)
    assert f"      - {reply}" in re.text
    parse_custom_text(re.text)
    assert re.settings["capability"] == ("structured_output" if failure["kind"] == "schema_invalid" else "chat")


def test_a_request_that_called_nobody_has_nothing_to_replay() -> None:
    rec = {
        "request_id": "req_9", "route": "chat", "outcome": "provider_overloaded", "workflow": "stop",
        "elapsed_ms": 0.1, "attempts": [], "candidates": ["main"],
        "excluded": [{"target": "main", "phase": "primary", "reason": "breaker open", "temporary": True}],
    }  # fmt: skip
    with pytest.raises(NothingToReplay, match="called no provider \\(main: breaker open\\)"):
        scenario_from_record(rec)


def test_more_targets_than_the_lab_has_are_noted() -> None:
    attempts = [
        {"index": i, "target": t, "phase": "fallback" if i else "primary", "start": i * 0.1, "end": i * 0.1 + 0.05,
         "connected": None, "first_event": None, "total_timeout": 3.0, "outcome": "provider_server_error",
         "failure": {"kind": "provider_server_error", "phase": None, "retry_after": None}}
        for i, t in enumerate(["t1", "t2", "t3", "t4"])
    ]  # fmt: skip
    rec = {"request_id": "r", "route": "x", "outcome": "provider_server_error", "workflow": "fallback",
           "elapsed_ms": 400.0, "attempts": attempts, "excluded": []}  # fmt: skip
    rec["candidates"] = [a["target"] for a in attempts]
    re = scenario_from_record(rec)
    assert re.mapping == {"a": "t1", "b": "t2", "c": "t3"}
    assert any("t4, called later, left out" in n for n in re.notes)


def test_names_cannot_break_out_of_the_scenarios_comments() -> None:
    attempt = {"index": 0, "target": "main\nproviders: {a: hang}", "phase": "primary", "start": 0.0,
               "end": 0.01, "connected": None, "first_event": None, "total_timeout": 1.0, "outcome": "ok",
               "failure": None}  # fmt: skip
    rec = {"request_id": "r1", "route": "chat\nstream: yes", "outcome": "ok", "workflow": "direct",
           "elapsed_ms": 10.0, "attempts": [attempt], "excluded": [], "candidates": []}  # fmt: skip
    text = scenario_from_record(rec).text
    custom = parse_custom_text(text)  # still the scenario written, nothing the names said
    assert custom.scenario["a"].reply_for(0).kind is ReplyKind.OK and custom.stream is False
    assert all(line.startswith(("#", "providers:", " ")) for line in text.splitlines())
