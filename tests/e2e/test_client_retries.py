"""A client's own retry, marked or not, costs the upstreams what a retry may cost, no more.

The agent runtimes (Claude Code, Codex) retry a failed request by sending the same body again,
with no ``Idempotency-Key`` and no retry count above 0 (Claude Code says 0 on every retry).
The gateway knows such a repeat for a retry when the same tenant sent the same body to the same
endpoint and it failed less than its deadline ago: the retry is charged to the retry budget and replays no target (the
client is the one replaying), and it is counted in ``failover_gateway_client_retries_total``.
A repeat of a body that was answered, identical bodies side by side, and a request with an
``Idempotency-Key`` of its own are new requests. When every candidate is held (open breakers,
cool-downs) the answer comes at once, with no upstream request and a ``Retry-After`` no later
than the next probe, and never more than 30 s.

Real loopback HTTP, the fault kit's upstreams, the served gateway, virtual loop time. The
test's own httpx clients have no timeout: on the loop clock, a busy machine's slow socket would
otherwise look like a 5 s wait (the gateway's deadline bounds every request anyway).
"""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import pytest

from failover.gateway._envelope import RecentRequests
from failover.inbound._headers import MAX_RETRY_AFTER
from failover.policy import BreakerBoard, BreakerConfig
from failover.testing import Reply, Script

from ._recovery import gateway, make_router, metric, upstreams

pytestmark = [pytest.mark.looptime(noop_cycles=200), pytest.mark.e2e]

BODY = {"model": "r", "messages": [{"role": "user", "content": "the same words, byte for byte"}]}


def now() -> float:
    return asyncio.get_running_loop().time()


async def _retries(http: httpx.AsyncClient, port: int) -> float:
    page = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    return metric(page, "failover_gateway_client_retries_total", route="r")


async def _leave(http: httpx.AsyncClient, callers: int) -> None:
    """``callers`` send BODY and leave once their requests are upstream (a 499 each)."""
    left = [asyncio.create_task(http.post("/chat/completions", json=BODY)) for _ in range(callers)]
    await asyncio.sleep(0.1)  # all are upstream (0.2 s answers): their callers leave
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)
    await asyncio.sleep(0.5)  # the gateway has seen them go


async def test_an_unmarked_repeat_of_a_failed_body_is_a_retry_that_replays_nothing() -> None:
    async with upstreams(Script.always(Reply.overloaded()), attempts_a=2) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            first = await http.post("/chat/completions", json=BODY)
            assert first.status_code == 503
            assert up.request_calls("a") == 2  # the gateway's own replay
            assert await _retries(http, gw.port) == 0
            t0 = now()
            again = await http.post("/chat/completions", json=BODY)  # what Claude Code and Codex send
            assert again.status_code == 503
            assert up.request_calls("a") == 3  # one attempt: the client is replaying, not the gateway
            assert now() - t0 < 0.5  # and no backoff slept for a replay that was never made
            assert await _retries(http, gw.port) == 1
            rec = again.headers["x-failover-attempts"]
            assert rec == "1", again.headers
        await router.aclose()


async def test_one_failure_makes_one_repeat_a_retry_not_every_identical_body() -> None:
    # Many callers may send the same body (an evaluation, a health prompt, a load test): one
    # failure is one caller's, and its retry is one request. Were every identical body after it
    # a retry, none would deposit in the retry budget and most would be refused with the
    # upstream healthy.
    async with upstreams(Script.of(Reply.overloaded(), default=Reply.ok(latency=0.2)), attempts_a=1) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            first = await http.post("/chat/completions", json=BODY)
            assert first.status_code == 503 and first.headers["x-failover-attempts"] == "1"
            t0 = now()
            answers = await asyncio.gather(*(http.post("/chat/completions", json=BODY) for _ in range(30)))
            assert [r.status_code for r in answers] == [200] * 30
            assert 0.19 < now() - t0 < 0.5  # one upstream round, side by side
            assert await _retries(http, gw.port) == 1
        assert up.request_calls("a") == 31
        await router.aclose()


@pytest.mark.parametrize(("callers", "answered"), [(3, 3), (40, 14)])
async def test_callers_that_left_are_matched_by_as_many_retries_and_the_rest_are_answered(
    callers: int, answered: int
) -> None:
    # A load test's end (or a client's timeout) leaves requests in flight: each is a 499 whose
    # repeat is a retry. The requests after those retries are new, and all are answered. A load
    # test can leave more than the retry budget has retries for (10 a window, and a tenth of the
    # requests): the retries past it are refused, and those refusals use up their failures.
    # Were the failures given back, every identical body after them would be a retry in turn,
    # refused in turn, and no request would deposit: all refused, the upstream healthy.
    async with upstreams(Script.always(Reply.ok(latency=0.2)), attempts_a=1) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            await _leave(http, callers)
            assert up.request_calls("a") == callers
            retries = await asyncio.gather(*(http.post("/chat/completions", json=BODY) for _ in range(callers)))
            codes = [r.status_code for r in retries]
            assert codes.count(200) == answered and codes.count(503) == callers - answered, codes
            assert await _retries(http, gw.port) == callers
            t0 = now()
            later: list[httpx.Response] = []
            for _ in range(5):
                later += await asyncio.gather(*(http.post("/chat/completions", json=BODY) for _ in range(20)))
            assert [r.status_code for r in later] == [200] * 100
            assert 0.99 < now() - t0 < 1.5  # five upstream rounds of 0.2 s, nothing held or retried
            assert await _retries(http, gw.port) == callers
        assert up.request_calls("a") == callers + answered + 100
        await router.aclose()


async def test_a_repeat_after_an_answer_or_side_by_side_is_a_new_request() -> None:
    async with upstreams(Script.always(Reply.ok())) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            # an evaluation asking the same prompt many times at once, then again
            answers = await asyncio.gather(*(http.post("/chat/completions", json=BODY) for _ in range(12)))
            answers.append(await http.post("/chat/completions", json=BODY))
            assert [r.status_code for r in answers] == [200] * 13
            assert await _retries(http, gw.port) == 0
        assert up.request_calls("a") == 13
        await router.aclose()


CALLERS = ["x-failover-task-id", "x-failover-session", "x-claude-code-session-id", "session-id", "session_id"]


@pytest.mark.parametrize("header", CALLERS)
async def test_the_same_body_from_another_task_or_session_is_a_new_request(header: str) -> None:
    # An agent working many tasks opens each with the same turn: after one task's failure, the
    # other tasks' identical bodies are their own first requests, not its retries.
    async with upstreams(Script.always(Reply.overloaded()), attempts_a=2) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            first = await http.post("/chat/completions", json=BODY, headers={header: "one"})
            assert first.status_code == 503 and first.headers["x-failover-attempts"] == "2"
            other = await http.post("/chat/completions", json=BODY, headers={header: "two"})
            assert other.status_code == 503 and other.headers["x-failover-attempts"] == "2"  # replayed: new
            assert await _retries(http, gw.port) == 0
            again = await http.post("/chat/completions", json=BODY, headers={header: "one"})
            assert again.headers["x-failover-attempts"] == "1"  # the same task's repeat is its retry
            assert await _retries(http, gw.port) == 1
        assert up.request_calls("a") == 5
        await router.aclose()


async def test_an_idempotency_key_of_its_own_says_which_requests_are_the_same() -> None:
    async with upstreams(Script.always(Reply.overloaded()), attempts_a=2) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            assert (await http.post("/chat/completions", json=BODY)).status_code == 503
            # a fresh Idempotency-Key says: a new request, replayed as usual
            r = await http.post("/chat/completions", json=BODY, headers={"idempotency-key": "new"})
            assert r.status_code == 503 and r.headers["x-failover-attempts"] == "2"
            assert await _retries(http, gw.port) == 0
            # another body: new too
            other = {**BODY, "messages": [{"role": "user", "content": "other words"}]}
            r = await http.post("/chat/completions", json=other)
            assert r.headers["x-failover-attempts"] == "2"
            assert await _retries(http, gw.port) == 0
            # a retry count of 0 proves nothing: Claude Code says 0 on every retry of its own loop
            r = await http.post("/chat/completions", json=BODY, headers={"x-stainless-retry-count": "0"})
            assert r.status_code == 503 and r.headers["x-failover-attempts"] == "1"
            assert await _retries(http, gw.port) == 1
        await router.aclose()


async def test_a_stream_cut_after_its_first_byte_makes_its_repeat_a_retry() -> None:
    words = " ".join(f"w{i:03d}" for i in range(200))
    cut = Reply.drop_after(150, text=words)  # 150 words: well past the commit point
    async with upstreams(Script.of(cut, default=Reply.ok(words)), attempts_a=2) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            body = {**BODY, "stream": True}
            first = await http.post("/chat/completions", json=body)
            assert first.status_code == 200 and "partial_output" in first.text  # cut past the commit point
            again = await http.post("/chat/completions", json=body)
            assert again.status_code == 200 and "partial_output" not in again.text
            assert await _retries(http, gw.port) == 1
        await router.aclose()


async def test_every_candidate_held_is_answered_at_once_with_the_next_probe() -> None:
    breaker = BreakerConfig(min_calls=2, window_size=2)
    async with upstreams(Script.always(Reply.overloaded()), attempts_a=2, dialect="anthropic") as up:
        router = make_router(up.route("solo"), breakers=BreakerBoard(breaker))
        async with gateway(router) as gw:
            client = anthropic.AsyncAnthropic(base_url=gw.base_url.removesuffix("/v1"), api_key="k")
            with pytest.raises(anthropic.APIStatusError) as first:
                await client.messages.create(model="r", max_tokens=8, messages=[{"role": "user", "content": "x"}])
            assert up.request_calls("a") == 2  # the breaker opened on these two
            # a moment to come back is known (the breaker's probe): "overloaded_error", with it
            assert first.value.type == "overloaded_error" and "retry-after" in first.value.response.headers
            t0 = now()
            with pytest.raises(anthropic.APIStatusError) as held:
                await client.messages.create(model="r", max_tokens=8, messages=[{"role": "user", "content": "x"}])
            assert now() - t0 < 0.1 and up.request_calls("a") == 2  # at once, and no upstream request
            headers = held.value.response.headers
            assert held.value.status_code == 529 and held.value.type == "overloaded_error"
            assert headers["x-should-retry"] == "false" and headers["x-failover-retryable"] == "true"
            wait = int(headers["retry-after-ms"]) / 1000
            assert 0 < wait <= 2.0  # the breaker's first open period: the next probe
            await asyncio.sleep(wait)  # coming back then: the probe is sent
            with pytest.raises(anthropic.APIStatusError):
                await client.messages.create(model="r", max_tokens=8, messages=[{"role": "user", "content": "x"}])
            assert up.request_calls("a") == 3
            await client.close()
        await router.aclose()


async def test_a_providers_long_retry_after_is_told_capped() -> None:
    async with upstreams(Script.always(Reply.rate_limit(retry_after=3600)), attempts_a=1) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            r = await http.post("/chat/completions", json=BODY)
            assert r.status_code == 503 and r.headers["x-failover-retryable"] == "true"
            assert r.headers["retry-after"] == str(MAX_RETRY_AFTER)
            assert r.headers["retry-after-ms"] == str(MAX_RETRY_AFTER * 1000)
            # coming back then: the cool-down still holds, so it is answered at once, upstream untouched
            r = await http.post("/chat/completions", json=BODY)
            assert r.status_code == 503 and r.headers["x-failover-attempts"] == "0"
            assert int(r.headers["retry-after"]) <= MAX_RETRY_AFTER
        assert up.request_calls("a") == 1
        await router.aclose()


def test_recent_requests_forget_a_failure_after_its_deadline_and_keep_tenants_apart() -> None:
    clock = [0.0]
    recent = RecentRequests(clock=lambda: clock[0], max_entries=3)
    body = b'{"model": "r"}'
    d = recent.digest("acme", "/v1/messages", body)
    assert d != recent.digest("other", "/v1/messages", body)  # another tenant's identical body
    assert d != recent.digest("acme", "/v1/chat/completions", body)  # another endpoint
    recent.started("req-1", d, 30.0)
    assert not recent.failed_before(d)  # running, not failed: a body sent side by side is new
    recent.ended("req-1", 529)
    clock[0] = 29.9
    assert recent.failed_before(d)  # the repeat is its retry ...
    assert not recent.failed_before(d)  # ... and one failure is matched by one retry, not by more
    recent.started("req-1b", d, 30.0)
    recent.ended("req-1b", 503)  # the retry failed too: the next repeat is its retry
    clock[0] = 59.8
    assert recent.failed_before(d)
    recent.started("req-1c", d, 30.0, retry=True)
    recent.ended("req-1c", 503, tried=False)  # held: no upstream attempt, the failure is given back
    assert recent.failed_before(d)
    recent.started("req-1d", d, 30.0)
    recent.ended("req-1d", 503)
    clock[0] = 90.1
    assert not recent.failed_before(d)  # its deadline is over
    recent.started("req-2", d, 30.0)
    recent.ended("req-2", 200)
    assert not recent.failed_before(d)  # an answer is not a failure
    for i in range(3):  # two failures after a forgotten one: two retries, not three
        recent.started(f"two-{i}", d, 30.0)
        recent.ended(f"two-{i}", 503)
        clock[0] += 31.0 if i == 0 else 0.0
    assert [recent.failed_before(d) for _ in range(3)] == [True, True, False]
    recent.started("req-3", d, 30.0)
    recent.ended("req-3", 200, cut=True)  # a stream that ended in an error event
    assert recent.failed_before(d)
    for i in range(5):  # bounded: the oldest leave first
        recent.started(f"x{i}", bytes([i]), 30.0)
        recent.ended(f"x{i}", 503)
    assert len(recent) <= 3 and not recent.failed_before(d)


def test_a_retry_the_budget_refused_uses_up_its_failure_and_a_held_one_gives_it_back() -> None:
    clock = [0.0]
    recent = RecentRequests(clock=lambda: clock[0])
    d = recent.digest(None, "/v1/chat/completions", b'{"model": "r"}')
    recent.started("failed", d, 30.0)
    recent.ended("failed", 503)
    assert recent.failed_before(d)
    recent.started("held", d, 30.0, retry=True)
    recent.ended("held", 503, tried=False)  # a hold: the client comes back when told, still retrying
    assert recent.failed_before(d)
    recent.started("refused", d, 30.0, retry=True)
    recent.ended("refused", 503, tried=False, spent=True)  # the retry budget said no: used up
    assert not recent.failed_before(d)


async def test_a_body_answered_without_an_upstream_attempt_is_new_when_it_comes_back() -> None:
    # a hold's answer cost nothing upstream: the client that comes back when told pays nothing
    async with upstreams(Script.always(Reply.rate_limit(retry_after=30)), attempts_a=1) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url, timeout=None) as http:
            first = await http.post("/chat/completions", json=BODY)  # attempted: a 429, a 30 s cool-down
            assert first.headers["x-failover-attempts"] == "1"
            other = {**BODY, "messages": [{"role": "user", "content": "another question"}]}
            for _ in range(2):  # held both times: no attempt, so the second is not a retry
                held = await http.post("/chat/completions", json=other)
                assert held.status_code == 503 and held.headers["x-failover-attempts"] == "0"
            assert await _retries(http, gw.port) == 0
            again = await http.post("/chat/completions", json=BODY)  # the attempted one's repeat: a retry
            assert again.headers["x-failover-attempts"] == "0"
            assert await _retries(http, gw.port) == 1
        assert up.request_calls("a") == 1
        await router.aclose()
