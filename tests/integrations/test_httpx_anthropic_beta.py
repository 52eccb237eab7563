"""The anthropic SDK over ``failover.httpx_client``: its ``anthropic-beta`` header reaches an
Anthropic upstream as the gateway passes it (joined with the target's own betas, each once).

The real anthropic SDK, unchanged, over failover's drop-in client, and a Router whose targets
are fake providers served over loopback HTTP (``FakeServer``), which record every request.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import anthropic
import pytest

import failover
from failover import Route, Router, Secret, Timeouts
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeProvider, FakeServer, Reply
from tests._sdk import ALL

TARGET_BETA = "output-128k-2025-02-19"
UNKNOWN_BETA = "a-beta-failover-has-never-heard-of-2099-01-01"
HELLO: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def served() -> AsyncIterator[tuple[Router, FakeProvider, FakeProvider]]:
    claude = FakeProvider("claude", "anthropic", [Reply.ok("hi")] * 8)
    gpt = FakeProvider("gpt", "openai", [Reply.ok("from gpt")] * 8)
    async with FakeServer(claude, gpt) as srv:
        timeouts = Timeouts(connect=2, first_event=5, idle=5, total=10, min_useful=0.05)
        common = {"capabilities": ALL, "timeouts": timeouts, "max_attempts": 1, "tokenizer": "estimate"}
        c = srv.target_for(claude, api_key=Secret("sk-fake-claude"), headers={"anthropic-beta": TARGET_BETA}, **common)
        g = srv.target_for(gpt, api_key=Secret("sk-fake-gpt"), **common)
        router = Router(
            [Route(name="claude", primary=(c,)), Route(name="mixed", primary=(c,), fallbacks=(g,))],
            retry_budget=Unlimited(),
            backoff=Backoff(base=0.01, cap=0.05),
            rng=random.Random(1),
            breakers=NoBreakers(),
        )
        try:
            yield router, claude, gpt
        finally:
            await router.aclose()


def _client(router: Router) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="unused", http_client=failover.httpx_client(router), max_retries=0)


async def test_extra_headers_beta_reaches_the_anthropic_upstream_after_the_targets_own(
    served: tuple[Router, FakeProvider, FakeProvider],
) -> None:
    router, claude, _ = served
    async with _client(router) as client:
        msg = await client.messages.create(
            model="claude",
            max_tokens=64,
            messages=HELLO,
            extra_headers={"anthropic-beta": f"context-management-2025-06-27,{UNKNOWN_BETA},{TARGET_BETA}"},
        )
        assert msg.content[0].type == "text"
        async with client.messages.stream(
            model="claude", max_tokens=64, messages=HELLO, extra_headers={"anthropic-beta": UNKNOWN_BETA}
        ) as stream:
            await stream.get_final_message()
    plain, streamed = claude.calls
    # the target's beta first, then the client's, each once; an unknown value verbatim
    assert plain.headers["anthropic-beta"] == f"{TARGET_BETA},context-management-2025-06-27,{UNKNOWN_BETA}"
    assert streamed.headers["anthropic-beta"] == f"{TARGET_BETA},{UNKNOWN_BETA}"


async def test_beta_messages_betas_reach_the_anthropic_upstream(
    served: tuple[Router, FakeProvider, FakeProvider],
) -> None:
    router, claude, _ = served
    async with _client(router) as client:
        msg = await client.beta.messages.create(
            model="claude", max_tokens=64, messages=HELLO, betas=["interleaved-thinking-2025-05-14", UNKNOWN_BETA]
        )
    assert msg.content[0].type == "text"
    (call,) = claude.calls
    assert call.headers["anthropic-beta"] == f"{TARGET_BETA},interleaved-thinking-2025-05-14,{UNKNOWN_BETA}"


async def test_a_fallback_of_another_dialect_goes_without_the_beta(
    served: tuple[Router, FakeProvider, FakeProvider],
) -> None:
    router, claude, gpt = served
    claude.load("overloaded")
    async with _client(router) as client:
        raw = await client.messages.with_raw_response.create(
            model="mixed", max_tokens=64, messages=HELLO, extra_headers={"anthropic-beta": UNKNOWN_BETA}
        )
    assert raw.headers["x-failover-target"] == "gpt"
    (call,) = gpt.calls
    assert "anthropic-beta" not in call.headers
    assert claude.calls[-1].headers["anthropic-beta"] == f"{TARGET_BETA},{UNKNOWN_BETA}"
