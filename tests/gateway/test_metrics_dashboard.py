"""The shipped Grafana dashboard and alert rules read only what the gateway really exports.

Real traffic (the official openai SDK at its default settings, over loopback HTTP, into the
gateway served by uvicorn, whose router calls fake providers over loopback HTTP) covers every
way a request ends: answered by the primary, by the primary after a replay, by an equivalent
target, by a cross-model fallback, streamed, out of its deadline, refused with no eligible
candidate, queued by the rate limiter. Then /metrics is parsed with prometheus_client's text
parser, and every metric and label the dashboard's and the rules' PromQL names must be in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from failover import Capability, Limits, Price, Route, Router, Timeouts
from failover.policy import Backoff, BreakerBoard, RetryBudget
from failover.testing import FakeProvider, FakeServer, Reply, Script
from failover.transport import Http1Transport

from ..e2e._recovery import gateway
from ..telemetry._dashboards import expressions, parse

pytestmark = [pytest.mark.looptime(noop_cycles=200), pytest.mark.e2e]

CAPS = frozenset({Capability.CHAT, Capability.STREAMING})
SHORT = Timeouts(connect=1.0, first_event=1.0, idle=1.0, total=1.0, min_useful=0.05)


@contextlib.asynccontextmanager
async def routes() -> AsyncIterator[Router]:
    """One route class per way of ending, on fake providers behind one loopback server."""
    providers = {
        "ok": FakeProvider("ok", "openai", Script.always(Reply.ok(latency=0.05, chunk_interval=0.01))),
        "flaky": FakeProvider("flaky", "openai", Script.of(Reply.overloaded(latency=0.02))),  # then ok
        "down": FakeProvider("down", "openai", Script.always(Reply.server_error(latency=0.02))),
        "down2": FakeProvider("down2", "openai", Script.always(Reply.ok(latency=0.05))),
        "broken": FakeProvider("broken", "openai", Script.always(Reply.overloaded(latency=0.02))),
        "other": FakeProvider("other", "anthropic", Script.always(Reply.ok(latency=0.05))),
        "hang": FakeProvider("hang", "openai", Script.always(Reply.hang())),
        "narrow": FakeProvider("narrow", "openai", Script.always(Reply.ok(latency=0.2))),
    }
    async with FakeServer(*providers.values()) as srv:

        def t(name: str, **kw: Any) -> Any:
            fields: dict[str, Any] = {
                "model": f"model-{name}",
                "timeouts": Timeouts(connect=1.0, first_event=2.0, idle=2.0, total=2.0, min_useful=0.05),
                "max_attempts": 2,
                "capabilities": CAPS,
                "price": Price(input_per_mtok=1.0, output_per_mtok=2.0),
                "tokenizer": "estimate",
            }
            return srv.target_for(providers[name], **(fields | kw))

        table = [
            Route(name="chat", primary=(t("ok"),)),
            Route(name="flaky", primary=(t("flaky"),)),
            Route(
                name="equivalent",
                primary=(
                    t("down", max_attempts=1, equivalence_key="E"),
                    t("down2", model="model-down", equivalence_key="E"),
                ),
            ),
            Route(name="fallback", primary=(t("broken", max_attempts=1),), fallbacks=(t("other"),)),
            Route(name="slow", primary=(t("hang", max_attempts=3, timeouts=SHORT),)),
            Route(name="narrow", primary=(t("narrow", limits=Limits(concurrency=1)),)),
        ]
        router = Router(
            table,
            transport=Http1Transport(),
            retry_budget=RetryBudget(),
            breakers=BreakerBoard(),
            backoff=Backoff(base=0.05, cap=0.2),
            rng=random.Random(1),
        )
        try:
            yield router
        finally:
            await router.aclose()


def samples(page: str) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets it has, as prometheus_client's own parser reads the page."""
    out: dict[str, list[dict[str, str]]] = defaultdict(list)
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            out[s.name].append(dict(s.labels))
    return out


def value(page: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


async def traffic() -> str:
    """Every way a request ends, through the gateway; then its /metrics page."""
    async with routes() as router, gateway(router) as gw:
        client = gw.openai()  # the SDK at its default settings (max_retries=2)
        messages: Any = [{"role": "user", "content": "hi"}]
        for route in ("chat", "flaky", "equivalent", "fallback"):
            answer = await client.chat.completions.with_raw_response.create(model=route, messages=messages)
            assert answer.http_response.status_code == 200, route
        stream = await client.chat.completions.create(model="chat", messages=messages, stream=True)
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        with pytest.raises(openai.APIStatusError) as late:
            await client.chat.completions.create(
                model="slow", messages=messages, extra_headers={"x-failover-deadline-ms": "2500"}
            )
        assert late.value.status_code == 504
        with pytest.raises(openai.APIStatusError) as refused:  # no target fits a cost ceiling this low
            await client.chat.completions.create(
                model="chat", messages=messages, extra_headers={"x-failover-max-cost": "1e-12"}
            )
        assert refused.value.status_code == 422
        assert refused.value.response.headers["x-failover-attempts"] == "0"
        # two at once on a target that takes one at a time: the second queues in the limiter
        both = await asyncio.gather(*(client.chat.completions.create(model="narrow", messages=messages) for _ in "ab"))
        assert len(both) == 2
        await client.close()
        async with httpx.AsyncClient() as http:
            return (await http.get(f"http://127.0.0.1:{gw.port}/metrics")).text


async def test_every_metric_and_label_the_dashboard_and_alerts_query_is_exported() -> None:
    page = await traffic()
    exported = samples(page)

    # the seed's distinction, per route class: who answered
    answered = {
        (s["route"], s["answered_by"], s["outcome"]) for s in exported["failover_request_duration_seconds_count"]
    }
    assert {
        ("chat", "primary", "ok"),
        ("flaky", "retry", "ok"),
        ("equivalent", "failover", "ok"),
        ("fallback", "fallback", "ok"),
        ("slow", "none", "deadline_exhausted"),
        ("chat", "none", "contract_failure"),
    } <= answered
    assert value(page, "failover_deadline_exhausted_total", route="slow") == 1
    assert value(page, "failover_no_eligible_candidate_total", route="chat") == 1
    assert value(page, "failover_recoveries_total", route="equivalent", reason="provider_server_error") == 1
    assert value(page, "failover_failed_attempt_cost_usd_total", route="slow", target="hang") > 0  # billed timeout
    assert value(page, "failover_request_time_to_first_chunk_seconds_count", route="chat") == 1
    assert value(page, "gen_ai_client_operation_time_to_first_chunk_seconds_count", failover_target="ok") == 1
    assert value(page, "failover_limiter_wait_seconds_count", target="narrow") == 1
    assert (
        value(
            page,
            "gen_ai_client_operation_duration_seconds_count",
            failover_target="flaky",
            error_type="provider_overloaded",
        )
        == 1
    )
    assert exported["failover_breaker_state"]

    checked = 0
    for where, expr in expressions():
        query = parse(expr)
        for name, matched in query.selectors:
            assert name in exported, f"{where}: {name} is not exported by the gateway"
            have = set().union(*(s.keys() for s in exported[name]))
            assert matched <= have, f"{where}: {name} has no label {matched - have}"
            checked += 1
        for labels, below in query.groupings:
            have = set().union(*(s.keys() for n in below for s in exported[n]))
            assert labels <= have, f"{where}: grouped by {labels - have}, which {below} do not have"
    assert checked >= 30
