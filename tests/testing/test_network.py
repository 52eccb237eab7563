"""FakeNetwork: the in-process Transport, on virtual loop time."""

from __future__ import annotations

import asyncio
import json

import pytest

from failover.model import Dialect, Secret
from failover.testing import FakeNetwork, FakeProvider, Outcome, Reply, ReplyKind
from failover.transport._types import HttpRequest, TransportError

from ._helpers import body, headers, request, send, url


@pytest.mark.looptime
async def test_total_timeout_on_a_hang_fires_at_exactly_the_cap() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("a", "openai", ["hang"])
    net = FakeNetwork(p)
    await asyncio.sleep(10)  # start at a non-zero loop time
    t0 = loop.time()
    with pytest.raises(TransportError) as info:
        await net.send(request(p), connect_timeout=1.0, total_timeout=2.5)
    assert info.value.phase == "total"
    assert loop.time() - t0 == pytest.approx(2.5, abs=1e-9)
    (call,) = p.calls
    assert call.kind is ReplyKind.HANG
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.time == pytest.approx(t0, abs=1e-9)
    assert call.disconnected_at == pytest.approx(t0 + 2.5, abs=1e-9)
    assert call.status is None and call.answered_at is None


@pytest.mark.looptime
async def test_delay_then_answer_on_loop_time() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("a", "anthropic", [Reply.delay(3, text="late", latency=0.5)], latency=0.25)
    t0 = loop.time()
    resp = await send(p, total=10)
    assert json.loads(resp.body)["content"][0]["text"] == "late"
    assert loop.time() - t0 == pytest.approx(3.75, abs=1e-9)
    (call,) = p.calls
    assert call.outcome is Outcome.COMPLETED
    assert call.answered_at is not None and call.answered_at - call.time == pytest.approx(3.75, abs=1e-9)
    assert call.duration == pytest.approx(3.75, abs=1e-9)


@pytest.mark.looptime
async def test_delay_longer_than_the_cap_times_out() -> None:
    p = FakeProvider("a", "gemini", ["delay(5)", "ok"])
    with pytest.raises(TransportError) as info:
        await send(p, total=4)
    assert info.value.phase == "total"
    assert p.calls[0].outcome is Outcome.CLIENT_DISCONNECTED
    assert p.calls[0].disconnected_at == pytest.approx(p.calls[0].time + 4, abs=1e-9)
    assert (await send(p)).status == 200  # the next call gets the next reply


@pytest.mark.looptime
async def test_cancelling_the_caller_records_a_disconnect() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("a", "openai", ["hang"])
    task = asyncio.create_task(send(p, total=100))
    await asyncio.sleep(7)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (call,) = p.calls
    assert call.outcome is Outcome.CLIENT_DISCONNECTED
    assert call.disconnected_at is not None
    assert call.disconnected_at == pytest.approx(loop.time(), abs=1e-9)
    assert call.disconnected_at - call.time == pytest.approx(7, abs=1e-9)


async def test_calls_are_recorded_with_loop_time_and_redacted_secrets() -> None:
    loop = asyncio.get_running_loop()
    a = FakeProvider("a", "openai")
    g = FakeProvider("g", "gemini")
    net = FakeNetwork(a, g)
    before = loop.time()
    await send(a, net=net)
    gem = HttpRequest(
        method="POST",
        url=url(g) + "?key=AIza-secret&alt=json",
        headers={**headers(Dialect.GEMINI), "X-Goog-Api-Key": "AIza-secret", "x-trace": "t1"},
        json=body(Dialect.GEMINI),
    )
    await net.send(gem, connect_timeout=1, total_timeout=5)
    after = loop.time()
    call = a.calls[0]
    assert before <= call.time <= after
    assert (call.provider, call.index, call.method, call.path) == ("a", 0, "POST", "/v1/chat/completions")
    assert call.headers["authorization"] == "***"
    assert "sk-secret-123" not in repr(call) and "sk-secret-123" not in str(call.headers)
    assert call.json == body(Dialect.OPENAI)
    assert (call.model, call.kind, call.status, call.outcome) == ("gpt-4o-mini", ReplyKind.OK, 200, Outcome.COMPLETED)
    gc = g.calls[0]
    assert gc.headers["x-goog-api-key"] == "***"
    assert gc.headers["x-trace"] == "t1"
    assert gc.query == "key=***&alt=json"
    assert gc.model == "gemini-2.5-flash"
    assert [c.provider for c in net.calls] == ["a", "g"]


async def test_reset_is_a_read_error_and_connect_error_a_connect_error() -> None:
    p = FakeProvider("a", "openai", ["reset", "connect_error", "ok"])
    with pytest.raises(TransportError) as info:
        await send(p)
    assert info.value.phase == "read"
    with pytest.raises(TransportError) as info:
        await send(p)
    assert info.value.phase == "connect"
    assert (await send(p)).status == 200
    assert [c.outcome for c in p.calls] == [Outcome.RESET, Outcome.CONNECT_FAILED, Outcome.COMPLETED]


@pytest.mark.looptime
async def test_slow_connect_error_becomes_a_connect_timeout() -> None:
    loop = asyncio.get_running_loop()
    p = FakeProvider("a", "openai", [Reply.connect_error(latency=30)])
    net = FakeNetwork(p)
    t0 = loop.time()
    with pytest.raises(TransportError, match="connect timeout after 2s") as info:
        await net.send(request(p), connect_timeout=2, total_timeout=60)
    assert info.value.phase == "connect"
    assert loop.time() - t0 == pytest.approx(2, abs=1e-9)


async def test_unknown_host_is_a_connect_error() -> None:
    net = FakeNetwork(FakeProvider("a"))
    req = HttpRequest(method="POST", url="http://b.fake/v1/chat/completions", headers={}, json={})
    with pytest.raises(TransportError, match=r"no provider at host 'b.fake' \(known: a.fake\)") as info:
        await net.send(req, connect_timeout=1, total_timeout=1)
    assert info.value.phase == "connect"


async def test_routing_ignores_the_path_prefix() -> None:
    p = FakeProvider("az", "openai")
    net = FakeNetwork(p)
    req = HttpRequest(
        method="POST",
        url="http://az.fake/openai/deployments/gpt4/chat/completions?api-version=2024-10-21",
        headers={"api-key": "azure-secret"},
        json={"messages": [{"role": "user", "content": "hi"}]},
    )
    resp = await net.send(req, connect_timeout=1, total_timeout=1)
    assert resp.status == 200
    assert p.calls[0].headers["api-key"] == "***"
    assert p.calls[0].query == "api-version=2024-10-21"


async def test_unknown_path_gets_the_dialect_404_without_using_the_script() -> None:
    p = FakeProvider("a", "openai", ["server_error"])
    net = FakeNetwork(p)
    req = HttpRequest(method="POST", url="http://a.fake/v1/completions", headers=headers(Dialect.OPENAI), json={})
    resp = await net.send(req, connect_timeout=1, total_timeout=1)
    assert resp.status == 404
    assert json.loads(resp.body)["error"]["message"] == "Invalid URL (POST /v1/completions)"
    assert p.calls[0].kind is None and p.calls[0].scripted is False
    assert p.position == 0
    assert (await send(p, net=net)).status == 500


async def test_api_key_and_required_fields_are_checked_like_the_real_api() -> None:
    p = FakeProvider("c", "anthropic", ["ok"], api_key="sk-right")
    net = FakeNetwork(p)
    wrong = await net.send(request(p), connect_timeout=1, total_timeout=1)
    assert wrong.status == 401
    assert json.loads(wrong.body)["error"]["message"] == "invalid x-api-key"
    no_version = HttpRequest(method="POST", url=url(p), headers={"x-api-key": "sk-right"}, json=body(Dialect.ANTHROPIC))
    bad = await net.send(no_version, connect_timeout=1, total_timeout=1)
    assert (bad.status, json.loads(bad.body)["error"]["message"]) == (400, "anthropic-version: header is required")
    no_max = {k: v for k, v in body(Dialect.ANTHROPIC).items() if k != "max_tokens"}
    req = HttpRequest(method="POST", url=url(p), headers=headers(Dialect.ANTHROPIC, "sk-right"), json=no_max)
    missing = await net.send(req, connect_timeout=1, total_timeout=1)
    assert json.loads(missing.body)["error"]["message"] == "max_tokens: Field required"
    assert [c.scripted for c in p.calls] == [False, False, False]
    good = HttpRequest(method="POST", url=url(p), headers=headers(Dialect.ANTHROPIC, "sk-right"), json=body(p.dialect))
    assert (await net.send(good, connect_timeout=1, total_timeout=1)).status == 200
    assert p.calls[-1].scripted is True and p.position == 1


async def test_count_tokens_endpoints_answer_the_estimate() -> None:
    p = FakeProvider("c", "anthropic", ["server_error"])
    req = HttpRequest(
        method="POST",
        url=f"{p.base_url}/messages/count_tokens",
        headers=headers(Dialect.ANTHROPIC),
        json={"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "x" * 40}]},
    )
    resp = await FakeNetwork(p).send(req, connect_timeout=1, total_timeout=1)
    assert (resp.status, json.loads(resp.body)) == (200, {"input_tokens": 10})
    assert p.position == 0


async def test_zero_time_left_fails_without_reaching_the_provider() -> None:
    p = FakeProvider("a")
    with pytest.raises(TransportError) as info:
        await send(p, total=0)
    assert info.value.phase == "total"
    assert p.calls == []


def test_target_points_at_the_fake() -> None:
    p = FakeProvider("g1", "gemini", model="gemini-2.0-flash")
    t = p.target(max_attempts=3)
    assert (t.name, t.dialect, t.model, t.base_url, t.max_attempts) == (
        "g1",
        Dialect.GEMINI,
        "gemini-2.0-flash",
        "http://g1.fake/v1beta",
        3,
    )
    assert t.api_key == Secret("sk-fake-g1")
    assert FakeProvider("o").base_url == "http://o.fake/v1"
    assert FakeProvider("c", "anthropic").target().model == "claude-haiku-4-5"


def test_reprs_help() -> None:
    p = FakeProvider("a", "openai", ["rate_limit(retry_after=2)"])
    assert repr(p) == "FakeProvider('a', 'openai', calls=0, next=Reply.rate_limit(retry_after=2), model='gpt-4o-mini')"
    assert repr(FakeNetwork(p)) == "FakeNetwork('a', calls=0)"


async def test_load_and_clear_restart_the_script() -> None:
    p = FakeProvider("a", "openai", ["server_error"])
    net = FakeNetwork(p)
    assert (await send(p, net=net)).status == 500
    p.load(["quota"])
    assert (await send(p, net=net)).status == 429
    assert p.kinds == ["server_error", "quota"]
    net.clear()
    assert p.calls == [] and net.calls == [] and p.position == 0


async def test_many_calls_are_cheap() -> None:
    p = FakeProvider("a", "openai")
    net = FakeNetwork(p)
    req = request(p)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(2000):
        resp = await net.send(req, connect_timeout=1, total_timeout=5)
    assert resp.status == 200
    assert len(p.calls) == 2000
    assert loop.time() - start < 5  # generous: ~0.1 s on a laptop


@pytest.mark.parametrize("dialect", [Dialect.OPENAI, Dialect.ANTHROPIC])
async def test_a_provider_without_prefill_refuses_a_conversation_ending_with_the_assistant(dialect: Dialect) -> None:
    p = FakeProvider("p", dialect, prefill=False)
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is"}]
    refused = await send(p, messages=turns)
    answered = await send(p)  # ends with the user's turn
    assert refused.status == 400 and "does not support assistant message prefill" in refused.body.decode()
    assert answered.status == 200
    assert [c.scripted for c in p.calls] == [False, True] and p.position == 1
    assert (await send(FakeProvider("q", dialect), messages=turns)).status == 200  # the default accepts it
