"""Prompt-cache hits per route and target on the gateway's /metrics: the input tokens every
attempt's provider reported and the part it read from its cache, from each provider's own
usage field (OpenAI, Anthropic, Gemini here), the failed attempts' usage counted too."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from failover.testing import Reply, Script

from ._kit import ADMIN_KEY, Kit, chat_body


def counters(page: str) -> dict[tuple[str, str, str], float]:
    """(sample name, route, target) -> value, for the two token counters, as prometheus_client parses the page."""
    out: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name in ("failover_input_tokens_total", "failover_cached_input_tokens_total"):
                out[(s.name, s.labels["route"], s.labels["target"])] = s.value
    return out


async def test_metrics_count_input_and_cached_input_tokens_per_route_and_target() -> None:
    kit = Kit(
        {
            "a": [Reply.ok(usage=(1000, 10, 800)), Reply.ok(usage=(1000, 10, 900))],  # openai
            "s": [Reply.ok(usage=(300, 5))],  # nothing cached
            "x": Script.always(Reply.truncate(usage=(400, 50, 300))),  # failed attempts, their usage counted
            "c": [Reply.ok(usage=(2000, 20, 1500))],  # gemini, the flaky route's fallback
        }
    )
    async with kit.client() as c:
        assert (await c.post("/v1/chat/completions", json=chat_body())).status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body(stream=True))
        assert r.status_code == 200 and "[DONE]" in r.text
        assert (await c.post("/v1/chat/completions", json=chat_body("solo"))).status_code == 200
        r = await c.post("/v1/chat/completions", json=chat_body("flaky"))
        assert r.status_code == 200 and r.headers["x-failover-target"] == "c"
        metrics = await c.get("/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert metrics.status_code == 200
    assert counters(metrics.text) == {
        ("failover_input_tokens_total", "chat", "a"): 2000,
        ("failover_cached_input_tokens_total", "chat", "a"): 1700,
        ("failover_input_tokens_total", "solo", "s"): 300,
        ("failover_cached_input_tokens_total", "solo", "s"): 0,  # the series is there: the ratio reads 0
        ("failover_input_tokens_total", "flaky", "x"): 2 * 400,  # two truncated attempts, then the fallback
        ("failover_cached_input_tokens_total", "flaky", "x"): 2 * 300,
        ("failover_input_tokens_total", "flaky", "c"): 2000,
        ("failover_cached_input_tokens_total", "flaky", "c"): 1500,
    }
