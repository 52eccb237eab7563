"""Router preflight with the token pieces: remote counts near the window, the hook, usage."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from failover import Envelope, FailureKind, Message, Request, Route, Router, Target, Unavailable
from failover.policy import NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script
from failover.tokens import calibration_of, counter_for
from failover.tokens._calibrate import _clear_caches

pytestmark = pytest.mark.looptime


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    _clear_caches()
    yield
    _clear_caches()


def make(targets: list[Target], *providers: FakeProvider, **kw: object) -> Router:
    return Router(
        [Route(name="r", primary=tuple(targets))],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        breakers=NoBreakers(),
        **kw,
    )  # type: ignore[arg-type]


def long(chars: int = 40_000) -> Request:
    return Request.simple("word " * (chars // 5), max_tokens=1_000)


async def test_near_the_window_the_providers_count_decides_and_the_request_is_sent() -> None:
    p = FakeProvider("claude", "anthropic")
    est = counter_for(p.target()).count(long())
    t = p.target(context_window=est, max_output_tokens=2_000)  # locally: does not fit
    resp = await make([t], p).complete("r", long(), Envelope(budget=10))
    assert resp.text
    assert [c.path for c in p.calls] == ["/v1/messages/count_tokens", "/v1/messages"]


async def test_without_a_hook_it_is_a_context_overflow_and_nothing_is_sent() -> None:
    p = FakeProvider("oai", "openai")
    t = p.target(context_window=1_000, tokenizer="estimate")
    with pytest.raises(Unavailable) as info:
        await make([t], p).complete("r", long(), Envelope(budget=10))
    assert info.value.reason is FailureKind.CONTEXT_OVERFLOW
    assert p.calls == []


async def test_the_hook_runs_once_and_the_shorter_request_is_sent() -> None:
    p = FakeProvider("oai", "openai")
    small = p.target(name="small", context_window=2_000, tokenizer="estimate")
    smaller = p.target(name="smaller", context_window=1_500, tokenizer="estimate")
    seen: list[tuple[str, int]] = []

    async def keep_last(request: Request, target: Target, over: int) -> Request | None:
        seen.append((target.name, over))
        return replace(request, messages=request.messages[-1:], max_tokens=100)

    request = Request(messages=(Message.user("old " * 3_000), Message.user("now?")), max_tokens=100)
    resp = await make([smaller, small], p, compaction=keep_last).complete("r", request, Envelope(budget=10))
    assert resp.text
    assert [name for name, _ in seen] == ["small"]
    (call,) = p.calls
    assert call.json is not None and len(call.json["messages"]) == 1


async def test_usage_above_the_count_widens_the_targets_counter() -> None:
    p = FakeProvider("claude", "anthropic", Script.always(Reply.ok("hi", usage=(5_000, 3))))
    t = p.target()
    router = make([t], p)
    await router.complete("r", Request.simple("x" * 3_000), Envelope(budget=10))
    assert calibration_of(t).online > 1.0
    assert counter_for(t).name.startswith("estimate*")
