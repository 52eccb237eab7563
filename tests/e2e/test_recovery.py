"""The six recovery failures that were measured against fault-injecting upstreams, as regressions.

Each runs over real loopback HTTP (the fault kit's FakeServer, failover's own HTTP client) on
virtual loop time, with the router's DEFAULT policies (retry budget, breakers, backoff), and
checks what the caller sees, how many requests reached each upstream, how long it took on the
loop clock and what the RouteRecord says. The gateway cases use the official SDKs at their
default ``max_retries``.
"""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import openai
import pytest

from failover import Envelope, FailureKind, Phase, Request, Unavailable, Workflow
from failover.policy import RetryBudget
from failover.testing import Reply, Script

from ._recovery import BUDGET, call, gateway, make_router, metric, record_of, upstreams

pytestmark = [pytest.mark.looptime(noop_cycles=200), pytest.mark.e2e]


def now() -> float:
    return asyncio.get_running_loop().time()


# 1. A healthy fallback is starved during a 503 outage of the primary ---------------------------


async def test_sequential_callers_during_a_503_outage_are_all_served_by_the_fallback() -> None:
    async with upstreams(Script.always(Reply.overloaded())) as up:
        router = make_router(up.route("a->b"))
        outcomes = []
        for _ in range(40):
            outcomes.append(await call(router, Envelope(budget=BUDGET)))
            await asyncio.sleep(0.3)
        assert not [o for o in outcomes if isinstance(o, Unavailable)]
        assert up.calls("b") == 40
        # the breaker sees a provider that serves nothing: it opens within a few outcomes and
        # A gets nothing more but one probe per open period (2, 3, 4.5 s ...) over ~13 s of calls
        assert up.calls("a") <= 16
        held = [e for o in outcomes for e in record_of(o).excluded if e.target == "a" and e.temporary]
        assert held and all("circuit open" in e.reason for e in held)
        await router.aclose()


@pytest.mark.parametrize("callers", [500])
async def test_500_concurrent_callers_during_a_503_outage_are_all_served(callers: int) -> None:
    async with upstreams(Script.always(Reply.overloaded())) as up:
        router = make_router(up.route("a->b"))
        t0 = now()
        outcomes = await asyncio.gather(*(call(router, Envelope(budget=BUDGET)) for _ in range(callers)))
        assert not [o for o in outcomes if isinstance(o, Unavailable)]
        assert up.calls("b") == callers
        assert up.calls("a") <= 1.1 * callers + 10  # at most the retry budget's ratio, plus its floor
        assert now() - t0 <= BUDGET + 0.05
        for o in outcomes:
            rec = record_of(o)
            assert rec.target_used == "b" and rec.workflow is Workflow.FALLBACK and rec.recovered
        await router.aclose()


async def test_callers_at_20_per_second_are_served_from_the_first_second_of_an_outage() -> None:
    async with upstreams(Script.always(Reply.overloaded())) as up:
        router = make_router(up.route("a->b"))

        async def later(i: int) -> object:
            await asyncio.sleep(i / 20)
            return await call(router, Envelope(budget=BUDGET))

        outcomes = await asyncio.gather(*(later(i) for i in range(400)))
        assert sum(not isinstance(o, Unavailable) for o in outcomes) == 400
        assert up.calls("a") <= 400 * 1.1 + 10
        await router.aclose()


# 2. A hanging primary's replays use the whole deadline; the fallback is never tried ------------


async def test_a_hanging_primary_fails_over_at_its_first_timeout() -> None:
    async with upstreams(Script.always(Reply.hang())) as up:
        router = make_router(up.route("a->b->c"))
        for i in range(10):
            t0 = now()
            rec = record_of(await call(router, Envelope(budget=BUDGET)))
            assert rec.target_used == "b", rec
            assert now() - t0 == pytest.approx(2.0 + 0.2, abs=0.02)  # A's 2 s cap, then B's 0.2 s
            assert [(a.target, a.outcome) for a in rec.attempts] == [("a", "timeout:total"), ("b", "ok")]
            assert up.calls("a") == i + 1 and up.calls("c") == 0
        await router.aclose()


# 3. Waits are slept before the checks that then refuse the attempt ------------------------------


async def test_a_wait_the_envelope_would_refuse_is_not_slept_and_its_retry_after_is_kept() -> None:
    async with upstreams(Script.always(Reply.rate_limit(retry_after=3, latency=0.05))) as up:
        router = make_router(up.route("solo"))
        t0 = now()
        out = await call(router, Envelope(budget=10, max_attempts=1))
        assert isinstance(out, Unavailable) and out.reason is FailureKind.RATE_LIMITED
        assert now() - t0 == pytest.approx(0.05, abs=0.01)  # the 429's latency, not 3 s more
        assert out.retry_after_ms == pytest.approx(3000, abs=60)
        assert out.record.waits == () and "max_attempts 1 spent" in out.message
        await router.aclose()


async def test_30_concurrent_callers_are_refused_at_once_not_after_sleeping_out_the_retry_after() -> None:
    """30 callers get a 429 with retry-after 3 at once. Five may retry (the budget's floor and a
    tenth of 30); the rest are refused at once. The ten 429s open A's key breaker (for 2 s), so
    the five waiting ones wake when it opens and are refused too: nobody sleeps 3 s for a no."""
    async with upstreams(Script.always(Reply.rate_limit(retry_after=3, latency=0.05))) as up:
        router = make_router(up.route("solo"), retry_budget=RetryBudget(ratio=0.1, floor=2))
        t0 = now()
        outcomes = await asyncio.gather(*(call(router, Envelope(budget=10)) for _ in range(30)))
        assert now() - t0 == pytest.approx(0.05, abs=0.01)
        assert up.calls("a") == 30
        for o in outcomes:
            assert isinstance(o, Unavailable) and o.reason is FailureKind.RATE_LIMITED and o.retryable
            assert o.record.elapsed_ms == pytest.approx(50, abs=10)
            assert all(w.end - w.start < 0.01 for w in o.record.waits)  # a wait, if begun, was cut at once
            # come back when a retry can succeed: the key's cool-down after the provider's 3 s,
            # which outlasts its breaker's open period (2 s): never earlier, never after a probe
            assert o.retry_after_ms == pytest.approx(3_000, abs=100)
        assert sum(bool(o.record.waits) for o in outcomes if isinstance(o, Unavailable)) == 5
        await router.aclose()


# 4. The gateway invites nested retries ----------------------------------------------------------


async def test_through_the_gateway_a_deadline_is_a_deadline_with_the_sdks_default_retries() -> None:
    async with upstreams(Script.always(Reply.hang())) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw:
            client = gw.openai()
            t0 = now()
            with pytest.raises(openai.APIStatusError) as ei:
                await client.chat.completions.create(model="r", messages=[{"role": "user", "content": "hi"}])
            assert ei.value.status_code == 504
            assert ei.value.response.headers["x-should-retry"] == "false"
            assert "retry-after" not in ei.value.response.headers
            # once: the SDK did not retry it (a retry would be a whole second deadline). The margin
            # is for the client's own reading over real sockets on virtual time, where a busy
            # machine can let the clock step to the next timer while bytes are in flight; the
            # gateway's record is exact (checked in test_recovery_matrix).
            assert now() - t0 <= BUDGET + 0.5
            assert up.calls("a") == 3  # A's own three tries, no more (replays of a timeout: A is alone)
            await client.close()
        await router.aclose()


async def test_500_sdk_callers_against_a_503_outage_send_at_most_the_budget_upstream() -> None:
    async with upstreams(Script.always(Reply.overloaded())) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw:
            client = gw.openai()

            async def one() -> tuple[int, str | None]:
                try:
                    await client.chat.completions.create(model="r", messages=[{"role": "user", "content": "x"}])
                except openai.APIStatusError as exc:
                    return exc.status_code, exc.response.headers.get("x-should-retry")
                return 200, None

            answers = await asyncio.gather(*(one() for _ in range(500)))
            assert set(answers) == {(503, "false")}
            assert up.calls("a") <= 1.1 * 500 + 10  # was 1,660 (3.3x) with the SDK's retries nested
            await client.close()
        await router.aclose()


async def test_the_anthropic_sdk_stream_does_not_sleep_on_an_overloaded_route() -> None:
    async with upstreams(Script.always(Reply.overloaded()), dialect="anthropic") as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw:
            client = anthropic.AsyncAnthropic(base_url=gw.base_url.removesuffix("/v1"), api_key="unused")
            t0 = now()

            async def read() -> None:
                async with client.messages.stream(
                    model="r", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
                ) as s:
                    async for _ in s:
                        pass

            with pytest.raises(anthropic.APIStatusError) as ei:
                await read()
            assert ei.value.response.headers["x-should-retry"] == "false"
            assert now() - t0 <= BUDGET  # no SDK sleep on top (was 240 s)
            assert up.calls("a") <= 3
            await client.close()
        await router.aclose()


async def test_the_gateway_never_says_retry_where_the_provider_said_not_to() -> None:
    a = Script.always(Reply.server_error())
    async with upstreams(a) as up:
        router = make_router(up.route("solo"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url) as http:
            r = await http.post(
                "/chat/completions", json={"model": "r", "messages": [{"role": "user", "content": "x"}]}
            )
            assert r.status_code == 503 and r.headers["x-should-retry"] == "false"
            assert r.headers["x-failover-retryable"] == "true" and "retry-after" not in r.headers  # no hint: none given
        await router.aclose()


async def test_a_clients_retry_is_charged_to_the_retry_budget() -> None:
    async with upstreams(Script.always(Reply.overloaded())) as up:
        router = make_router(up.route("a->b"), retry_budget=RetryBudget(ratio=0.0, floor=0))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url) as http:
            body = {"model": "r", "messages": [{"role": "user", "content": "x"}]}
            first = await http.post("/chat/completions", json=body, headers={"idempotency-key": "k1"})
            assert first.status_code == 200 and first.headers["x-failover-target"] == "b"
            # the same request again: a retry, so every attempt draws on a budget that is empty
            again = await http.post("/chat/completions", json=body, headers={"idempotency-key": "k1"})
            sdk_retry = await http.post("/chat/completions", json=body, headers={"x-stainless-retry-count": "1"})
            for r in (again, sdk_retry):
                assert r.status_code == 503 and r.headers["x-failover-attempts"] == "0", r.text
                assert "retry budget" in r.json()["error"]["message"]
            fresh = await http.post("/chat/completions", json=body, headers={"idempotency-key": "k2"})
            assert fresh.status_code == 200
            page = (await http.get(f"http://127.0.0.1:{gw.port}/metrics")).text
            assert metric(page, "failover_gateway_client_retries_total", route="r") == 2
        assert (up.calls("a"), up.calls("b")) == (2, 2)
        await router.aclose()


# 5. The record hides downgrades -----------------------------------------------------------------


async def test_a_primary_held_by_its_cool_down_is_a_recovery_and_the_metrics_count_every_one() -> None:
    async with upstreams(Script.always(Reply.rate_limit(retry_after=30, latency=0.01))) as up:
        router = make_router(up.route("a->b"))
        async with gateway(router) as gw, httpx.AsyncClient(base_url=gw.base_url) as http:
            body = {"model": "r", "messages": [{"role": "user", "content": "x"}]}
            for i in range(8):
                r = await http.post("/chat/completions", json=body)
                assert r.status_code == 200 and r.headers["x-failover-target"] == "b"
                assert r.headers["x-failover-workflow"] == "fallback" and r.headers["x-failover-recovered"] == "true"
                assert r.headers["x-failover-attempts"] == ("2" if i == 0 else "1")
            page = (await http.get(f"http://127.0.0.1:{gw.port}/metrics")).text
            assert metric(page, "failover_recoveries_total", workflow="fallback") == 8
        assert up.calls("a") == 1  # then its key cools down for 30 s
        rec = record_of(await call(router, Envelope(budget=BUDGET)))
        assert (rec.workflow, rec.recovered, rec.target_used) == (Workflow.FALLBACK, True, "b")
        assert rec.recovery_reason is not None and rec.recovery_reason.startswith("a held (cooling down after")
        assert [(e.target, e.temporary) for e in rec.excluded] == [("a", True)]
        await router.aclose()


async def test_an_open_breaker_on_the_primary_is_a_recovery_through_the_equivalent() -> None:
    async with upstreams(Script.always(Reply.server_error())) as up:
        router = make_router(up.route("a+equivalent"))
        records = [record_of(await call(router, Envelope(budget=BUDGET))) for _ in range(12)]
        late = records[-1]
        assert late.attempts[0].target == "a2" and late.attempts[0].phase is Phase.FAILOVER
        assert (late.workflow, late.recovered) == (Workflow.RETRY_FAILOVER, True)
        assert "circuit open" in (late.recovery_reason or "")
        assert all(r.recovered and r.target_used == "a2" for r in records)
        await router.aclose()


# 6. Plain calls become streams --------------------------------------------------------------------


async def test_a_plain_call_without_max_tokens_stays_plain() -> None:
    async with upstreams(Script.always(Reply.ok("plain"))) as up:
        router = make_router(up.route("solo"))
        resp = await router.complete("r", Request.simple("hi"), Envelope(budget=BUDGET))
        assert resp.text == "plain"
        (c,) = up.providers["a"].calls
        assert not c.stream and c.json is not None and "stream" not in c.json
        assert resp.record is not None and not resp.record.attempts[0].streamed
        # a caller who asks for a long generation is streamed internally, and the record says so
        long = await router.complete("r", Request.simple("hi", max_tokens=4000), Envelope(budget=BUDGET))
        assert up.providers["a"].calls[-1].stream and long.record is not None and long.record.attempts[0].streamed
        await router.aclose()


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
async def test_a_json_answer_to_a_stream_request_is_the_answer(dialect: str) -> None:
    async with upstreams(Script.always(Reply.ok("whole answer", plain=True)), dialect=dialect) as up:
        router = make_router(up.route("a->b"))
        events = []
        async with router.stream("r", Request.simple("hi"), Envelope(budget=BUDGET)) as s:
            async for ev in s:
                events.append(type(ev).__name__)
        assert events[0] == "TextDelta" and events[-1] == "Completed"
        resp = s.result.response  # type: ignore[union-attr]
        assert resp.text == "whole answer" and resp.record is not None
        (att,) = resp.record.attempts
        assert (att.target, att.outcome, att.streamed) == ("a", "ok", False)
        assert up.providers["a"].calls[0].stream  # it was asked for a stream, and answered plainly
        assert up.calls("b") == 0
        await router.aclose()
