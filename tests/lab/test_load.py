"""The lab's load mode: deterministic per-second series from the real router's policy objects."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from failover.lab._custom import BadInput
from failover.lab._load import (
    MAX_REQUESTS,
    LoadOptions,
    LoadResult,
    parse_load,
    parse_schedule,
    run_load,
)
from failover.lab._web import lab_app, load_body

DOWN = {"a": [{"from": 20, "to": 40, "reply": "connect_error"}]}


def _run(**kw: Any) -> LoadResult:
    return run_load(parse_load({"clients": 10, "rate": 1.0, "duration": 90, **kw}))


def test_same_seed_same_series_other_seed_other_series() -> None:
    one, two = _run(seed=7, schedule=DOWN), _run(seed=7, schedule=DOWN)
    assert one.series == two.series and one.breaker_events == two.breaker_events
    timing = ("wall_seconds", "cpu_seconds")
    assert {k: v for k, v in one.summary.items() if k not in timing} == {
        k: v for k, v in two.summary.items() if k not in timing
    }
    other = _run(seed=8, schedule=DOWN)
    assert other.series["offered"] != one.series["offered"]


def test_a_provider_down_opens_its_breaker_and_its_traffic_drops() -> None:
    r = _run(schedule=DOWN)
    s = r.series
    a_states = s["breaker"]["a"]
    assert all(st == "closed" for st in a_states[:20])
    opened = a_states.index("open")
    assert 20 <= opened < 30  # within seconds of the outage: 10 failures in the window
    assert r.summary["breaker_opened"]["a"] >= 1
    assert next(e["to"] for e in r.breaker_events if e["target"] == "a") == "open"
    # while down, A gets only its probes (one per open period of 2 to 5 s) and B carries the
    # load; all served within deadline
    a_rate, b_rate = s["sent"]["a"], s["sent"]["b"]
    assert sum(a_rate[opened + 1 : 40]) <= 8
    assert sum(b_rate[opened + 1 : 40]) >= 0.8 * sum(s["offered"][opened + 1 : 40])
    assert sum(a_rate[:20]) == sum(s["offered"][:20])  # healthy: every request reaches A, once
    assert r.summary["success_share"] == 1.0
    # within 5 s of its recovery (at 40 s) A is probed, closes, and takes all the traffic back
    assert a_rate[45:] == s["offered"][45:] and a_states[-1] == "closed"


def test_series_add_up_to_the_summary() -> None:
    r = _run(schedule=DOWN)
    s, summary = r.series, r.summary
    n = 90
    for key in ("offered", "ok", "ok_share", "retries_granted", "retries_refused", "retry_headroom"):
        assert len(s[key]) == n
    assert s["t"] == list(range(n))
    assert sum(s["offered"]) == summary["requests"]
    assert sum(s["ok"]) == summary["served_in_deadline"]
    assert sum(s["retries_granted"]) <= summary["retries_granted"]  # a retry may fall after the last second
    for name in "abc":
        assert len(s["sent"][name]) == n and len(s["breaker"][name]) == n and len(s["key_breaker"][name]) == n
        assert sum(s["sent"][name]) <= summary["provider_requests"][name]
    assert all(share is None or 0 <= share <= 1 for share in s["ok_share"])
    # the headroom is A's upstream's: its first attempts deposit above the floor (10), its
    # replays while it is down draw it back towards it
    assert max(s["retry_headroom"]) > 10 and min(s["retry_headroom"]) < max(s["retry_headroom"])


def test_no_faults_no_retries_no_fallbacks() -> None:
    r = _run(schedule={})
    assert r.summary["provider_requests"] == {"a": r.summary["requests"], "b": 0, "c": 0}
    assert r.summary["retries_granted"] == 0 and r.breaker_events == []


def test_rate_limits_are_followed_and_counted_by_the_limiter_and_budget() -> None:
    r = _run(schedule={"a": [{"from": 10, "to": 40, "reply": "rate_limit(retry_after=5, latency=0.05)"}]})
    s = r.series
    # the limiter honours Retry-After: A sees far fewer requests than were sent while it 429s
    assert sum(s["sent"]["a"][11:40]) < 0.5 * sum(s["offered"][11:40])
    assert r.summary["success_share"] == 1.0  # B serves the rest within the deadline


def test_429s_open_the_key_model_breaker_which_the_series_show_beside_the_target_breaker() -> None:
    """A 429 is the key's and model's, not the provider's: it opens A's key + model breaker only.
    While that is open A gets nothing, and its target breaker still reads closed, so the strip of
    the target breaker alone said "closed" for a provider that received no request."""
    r = _run(schedule={"a": [{"from": 10, "to": 90, "reply": "rate_limit(retry_after=1, latency=0.05)"}]})
    s = r.series
    key, target = s["key_breaker"]["a"], s["breaker"]["a"]
    assert all(st == "closed" for st in key[:10]) and "open" in key
    opened = key.index("open")
    assert 10 < opened < 40
    assert all(st == "closed" for st in target)  # the target breaker never moved
    shut = [i for i in range(opened + 1, len(key)) if key[i] == "open"]
    probes = sum(1 for e in r.breaker_events if e["target"] == "a" and e["to"] == "half_open")
    # A gets only its probes: at most half_open_probes (2) each time the breaker goes half-open
    assert len(shut) >= 20 and sum(s["sent"]["a"][i] for i in shut) <= 2 * probes
    assert r.summary["key_breaker_opened"]["a"] >= 1 and r.summary["breaker_opened"]["a"] == 0
    first = next(e for e in r.breaker_events if e["target"] == "a")
    assert (first["layer"], first["from"], first["to"]) == ("key_model", "closed", "open")
    assert {e["layer"] for e in r.breaker_events} == {"key_model"}
    for name in "bc":
        assert set(s["key_breaker"][name]) == {"closed"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"clients": 0}, "clients"),
        ({"clients": 1000}, "clients"),
        ({"clients": 1.5}, "clients"),
        ({"duration": 10_000}, "duration"),
        ({"rate": "fast"}, "rate"),
        ({"budget": 0}, "budget"),
        ({"seed": -1}, "seed"),
        ({"clients": 200, "rate": 2, "duration": 600}, "clients"),  # over MAX_REQUESTS
        ({"colour": 1}, "colour"),
        ({"schedule": "a: [{from: 1"}, "schedule"),
        ({"schedule": {"d": []}}, "schedule.d"),
        ({"schedule": {"a": {"from": 1}}}, "schedule.a"),
        ({"schedule": {"a": [{"from": 5, "to": 1, "reply": "hang"}]}}, "schedule.a[0].to"),
        ({"schedule": {"a": [{"from": 1, "to": 5}]}}, "schedule.a[0].reply"),
        ({"schedule": {"a": [{"from": 1, "to": 5, "reply": "hng"}]}}, "schedule.a[0].reply"),
        ({"schedule": {"a": [{"from": 1, "to": 5, "reply": "hang", "p": 1}]}}, "schedule.a[0].p"),
        ({"schedule": {"a": [{"from": "x", "to": 5, "reply": "hang"}]}}, "schedule.a[0].from"),
    ],
)
def test_bad_load_settings_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_load(body)
    assert info.value.field == field and str(info.value).startswith(f"{field}: ")


def test_the_request_cap_says_how_to_fix_it() -> None:
    with pytest.raises(BadInput, match=f"keep it under {MAX_REQUESTS:,}"):
        parse_load({"clients": 200, "rate": 2, "duration": 600})


def test_schedule_parses_replies_in_order() -> None:
    faults = [{"from": 50, "to": 60, "reply": "hang"}, {"from": 0, "to": 10, "reply": "server_error"}]
    got = parse_schedule({"b": faults})
    assert [(f.start, f.end, f.reply.kind.value) for f in got["b"]] == [(0, 10, "server_error"), (50, 60, "hang")]
    assert LoadOptions().schedule == {}


async def test_api_load_returns_run_load_for_the_same_inputs() -> None:
    body = {"clients": 5, "rate": 1.0, "duration": 40, "seed": 3, "schedule": DOWN}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=lab_app()), base_url="http://lab") as c:
        r = await c.post("/api/load", json=body)
        bad = await c.post("/api/load", json={"clients": 10_000})
        broken = await c.post("/api/load", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 200
    want = load_body(await asyncio.to_thread(run_load, parse_load(body)))  # it runs its own loop
    got = r.json()
    for timing in ("wall_seconds", "cpu_seconds"):
        got["summary"].pop(timing)
        want["summary"].pop(timing)
    assert got == want
    assert got["schedule"] == {"a": [{"from": 20.0, "to": 40.0, "reply": "connect_error"}]}
    assert bad.status_code == 400 and bad.json()["field"] == "clients"
    assert broken.status_code == 400 and broken.json()["field"] == "body"


async def test_a_deeply_nested_body_is_a_400_not_a_crash() -> None:
    deep = b'{"schedule": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=lab_app()), base_url="http://lab") as c:
        r = await c.post("/api/load", content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "body"


def test_three_deployments_share_the_load_keep_each_client_where_its_prompt_is_cached() -> None:
    """A's model on three deployments under p2c: they share A's traffic, the fallbacks get
    none, no request waits in a limiter's queue, and each client's prompt goes back to the
    deployment that cached it (affinity), so nearly every input token after a client's first
    request is a cache hit."""
    r = _run(deployments=3, balance="p2c", schedule={})
    s, summary = r.series, r.summary
    assert list(s["sent"]) == ["a", "a2", "a3", "b", "c"] and list(s["breaker"]) == list(s["sent"])
    served = summary["provider_requests"]
    assert served["b"] == served["c"] == 0 and sum(served.values()) == summary["requests"]
    assert min(served[n] for n in ("a", "a2", "a3")) > 0.15 * summary["requests"], served
    assert summary["limiter_waits"] == sum(s["limiter_waits"]) == 0
    assert len(s["cache_hit"]) == 90 and s["cache_hit"][0] is not None
    assert summary["cache_hit"] > 0.85 and s["cache_hit"][-1] > 0.95, s["cache_hit"][-5:]
    assert sum(s["cached_tokens"]) <= sum(s["input_tokens"])


def test_one_deployment_at_its_limit_queues_and_the_series_count_the_waits() -> None:
    """One deployment whose quota is under the offered rate: its limiter holds requests (or
    they move to the fallbacks); the waits are counted by arrival second."""
    r = _run(rpm=300, schedule={})  # 10 requests a second against 5 a second allowed
    assert r.summary["limiter_waits"] == sum(r.series["limiter_waits"]) > 0
    assert list(r.series["sent"]) == ["a", "b", "c"]


def test_balance_and_deployments_are_checked() -> None:
    for body, field in (({"deployments": 4}, "deployments"), ({"balance": "random"}, "balance")):
        with pytest.raises(BadInput) as info:
            parse_load(body)
        assert info.value.field == field
    with pytest.raises(BadInput) as info:
        parse_load({"schedule": {"a2": []}})  # A has one deployment unless asked
    assert info.value.field == "schedule.a2"
    assert parse_load({"deployments": 2, "schedule": {"a2": []}}).schedule == {"a2": ()}
