"""max_tokens above a target's max output: capped to it (the default) or the target refused.

Claude Code asks for max_tokens 32,000 (64,000 for its default model) and cannot choose
another; a route whose targets allow less must still serve it, and say so.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from failover import Capability, Envelope, FailureKind, Message, Price, Request, Route, Router, Target, Unavailable
from failover.model import Completed, MaxTokensPolicy, Phase
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ._kit import target

pytestmark = pytest.mark.looptime

ASK = Request(messages=(Message.user("write the whole module"),), max_tokens=32_000)


def sized(p: FakeProvider, max_out: int, *, window: int | None = 128_000, key: str | None = "m") -> Target:
    return replace(target(p, window=window, key=key), max_output_tokens=max_out)


def make(
    primary: tuple[Target, ...],
    *providers: FakeProvider,
    fallbacks: tuple[Target, ...] = (),
    policy: MaxTokensPolicy = "cap",
    ranking: str = "order",
) -> Router:
    route = Route(
        name="r",
        primary=primary,
        fallbacks=fallbacks,
        max_tokens_policy=policy,
        ranking=ranking,  # type: ignore[arg-type]
    )
    return Router(
        [route],
        transport=FakeNetwork(*providers),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.0, cap=0.0),
        rng=random.Random(0),
        breakers=NoBreakers(),
    )


def sent(p: FakeProvider) -> list[int | None]:
    """The max_tokens each call to ``p`` carried."""
    return [c.json.get("max_tokens") if c.json is not None else None for c in p.calls]


async def test_a_target_with_a_smaller_max_output_is_sent_its_max_and_the_attempt_says_so() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("done")))
    resp = await make((sized(small, 4_096),), small).complete("r", ASK, Envelope(budget=10))
    assert resp.text == "done"
    assert sent(small) == [4_096]
    rec = resp.record
    assert rec is not None and rec.target_used == "small" and rec.outcome == "ok"
    (a,) = rec.attempts
    assert a.max_tokens_capped_to == 4_096
    assert rec.to_dict()["attempts"][0]["max_tokens_capped_to"] == 4_096


async def test_an_anthropic_target_gets_the_capped_max_tokens_too() -> None:
    claude = FakeProvider("claude", "anthropic", Script.always(Reply.ok("done")))
    resp = await make((sized(claude, 8_192),), claude).complete("r", ASK, Envelope(budget=10))
    assert sent(claude) == [8_192]
    assert resp.record is not None and resp.record.attempts[0].max_tokens_capped_to == 8_192


async def test_a_request_within_the_max_is_sent_as_asked_and_not_marked() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("done")))
    resp = await make((sized(small, 4_096),), small).complete("r", replace(ASK, max_tokens=4_096), Envelope())
    assert sent(small) == [4_096]
    assert resp.record is not None and resp.record.attempts[0].max_tokens_capped_to is None


async def test_the_target_that_gives_the_full_amount_is_preferred_within_its_tier() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("from small")))
    big = FakeProvider("big", "openai", Script.always(Reply.ok("from big")))
    # the route lists the small one first: order alone would call it
    resp = await make((sized(small, 4_096), sized(big, 64_000)), small, big).complete("r", ASK, Envelope(budget=10))
    assert resp.text == "from big"
    assert small.calls == [] and sent(big) == [32_000]
    rec = resp.record
    assert rec is not None and not rec.recovered
    assert [(a.target, a.phase, a.max_tokens_capped_to) for a in rec.attempts] == [("big", Phase.PRIMARY, None)]


async def test_the_preference_keeps_the_ranking_among_targets_that_give_the_full_amount() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("from small")))
    big1 = FakeProvider("big1", "openai", Script.always(Reply.ok("from big1")))
    big2 = FakeProvider("big2", "openai", Script.always(Reply.ok("from big2")))
    route = (sized(small, 4_096), sized(big1, 64_000), sized(big2, 64_000))
    resp = await make(route, small, big1, big2).complete("r", ASK, Envelope(budget=10))
    assert resp.text == "from big1"  # the first of the full ones in the route's order


async def test_the_preference_never_crosses_tiers() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("from the primary")))
    big = FakeProvider("big", "anthropic", Script.always(Reply.ok("from the fallback")))
    router = make((sized(small, 4_096),), small, big, fallbacks=(sized(big, 64_000, key=None),))
    resp = await router.complete("r", ASK, Envelope(budget=10))
    assert resp.text == "from the primary"  # capped, but the primary tier comes first
    assert sent(small) == [4_096] and big.calls == []


async def test_when_only_the_small_target_is_healthy_it_answers_capped() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("from small")))
    big = FakeProvider("big", "openai", Script.always(Reply.overloaded()))
    resp = await make((sized(big, 64_000), sized(small, 4_096)), small, big).complete("r", ASK, Envelope(budget=10))
    assert resp.text == "from small"
    assert sent(big) == [32_000] and sent(small) == [4_096]
    rec = resp.record
    assert rec is not None and rec.recovered and rec.target_used == "small"
    assert [(a.target, a.outcome, a.max_tokens_capped_to) for a in rec.attempts] == [
        ("big", "provider_overloaded", None),
        ("small", "ok", 4_096),
    ]


async def test_refuse_keeps_the_contract_failure() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("never")))
    with pytest.raises(Unavailable) as ei:
        await make((sized(small, 4_096),), small, policy="refuse").complete("r", ASK, Envelope(budget=10))
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE
    assert "max_tokens 32000 exceeds max output 4096" in ei.value.message
    assert small.calls == []


async def test_refuse_still_serves_from_a_target_that_gives_the_full_amount() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("from small")))
    big = FakeProvider("big", "openai", Script.always(Reply.overloaded()))
    router = make((sized(big, 64_000), sized(small, 4_096)), small, big, policy="refuse")
    with pytest.raises(Unavailable) as ei:
        await router.complete("r", ASK, Envelope(budget=10))
    assert ei.value.reason is FailureKind.PROVIDER_OVERLOADED
    assert small.calls == []
    assert ("small", "max_tokens 32000 exceeds max output 4096") in [
        (e.target, e.reason) for e in ei.value.record.excluded
    ]


async def test_the_envelope_overrides_the_routes_policy_both_ways() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("done")))
    capping = make((sized(small, 4_096),), small)
    with pytest.raises(Unavailable) as ei:
        await capping.complete("r", ASK, Envelope(budget=10, max_tokens_policy="refuse"))
    assert ei.value.reason is FailureKind.CONTRACT_FAILURE and small.calls == []
    refusing = make((sized(small, 4_096),), small, policy="refuse")
    resp = await refusing.complete("r", ASK, Envelope(budget=10, max_tokens_policy="cap"))
    assert resp.text == "done" and sent(small) == [4_096]


async def test_a_capped_answer_that_stops_for_length_is_truncated_and_not_raised_past_the_max() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.truncate("half an answer")))
    with pytest.raises(Unavailable) as ei:
        await make((sized(small, 4_096),), small).complete("r", ASK, Envelope(budget=10))
    assert ei.value.reason is FailureKind.TRUNCATED
    assert sent(small) == [4_096]  # a repair cannot raise it past the target's max: none is sent
    (a,) = ei.value.record.attempts
    assert a.outcome == "truncated" and a.max_tokens_capped_to == 4_096


async def test_a_repair_after_truncation_raises_max_tokens_only_up_to_the_targets_max() -> None:
    small = FakeProvider("small", "openai", [Reply.truncate("half"), Reply.ok("whole")])
    resp = await make((sized(small, 4_096),), small).complete("r", replace(ASK, max_tokens=3_000), Envelope())
    assert resp.text == "whole"
    assert sent(small) == [3_000, 4_096]  # doubled, but no further than the target's max
    assert resp.record is not None
    assert [a.max_tokens_capped_to for a in resp.record.attempts] == [None, None]  # never below the ask


async def test_the_window_must_hold_the_capped_amount_not_the_asked_one() -> None:
    small = FakeProvider("small", "openai", Script.always(Reply.ok("fits")))
    # 32,000 would not fit an 8,000 window; the 4,096 it is sent does
    resp = await make((sized(small, 4_096, window=8_000),), small).complete("r", ASK, Envelope(budget=10))
    assert resp.text == "fits" and sent(small) == [4_096]
    # an unknown window turns nothing away
    unknown = FakeProvider("unknown", "openai", Script.always(Reply.ok("fits")))
    resp = await make((sized(unknown, 4_096, window=None),), unknown).complete("r", ASK, Envelope(budget=10))
    assert resp.text == "fits" and sent(unknown) == [4_096]
    # a window that cannot hold even the capped amount still leaves the target out
    tiny = FakeProvider("tiny", "openai", Script.always(Reply.ok("never")))
    with pytest.raises(Unavailable) as ei:
        await make((sized(tiny, 4_096, window=4_000),), tiny).complete("r", ASK, Envelope(budget=10))
    assert ei.value.reason is FailureKind.CONTEXT_OVERFLOW and tiny.calls == []
    assert "max_tokens 4096" in ei.value.message


async def test_a_stream_is_sent_the_capped_max_tokens_and_says_so() -> None:
    small = FakeProvider("small", "anthropic", Script.always(Reply.ok("streamed answer")))
    streaming = sized(small, 4_096)
    router = make((replace(streaming, capabilities=streaming.capabilities | {Capability.STREAMING}),), small)
    async with router.stream("r", ASK, Envelope(budget=10)) as rs:
        events = [e async for e in rs]
        assert rs.max_tokens_capped_to == 4_096
    assert sent(small) == [4_096]
    done = events[-1]
    assert isinstance(done, Completed) and done.response.record is not None
    assert done.response.record.attempts[0].max_tokens_capped_to == 4_096


async def test_max_cost_is_estimated_on_the_capped_amount() -> None:
    # 32,000 output tokens at $10/Mtok would be $0.32, over the bound; the 4,096 sent cost $0.04
    small = FakeProvider("small", "openai", Script.always(Reply.ok("within budget")))
    priced = replace(sized(small, 4_096), price=Price(input_per_mtok=0.0, output_per_mtok=10.0))
    resp = await make((priced,), small).complete("r", ASK, Envelope(budget=10, max_cost=0.1))
    assert resp.text == "within budget" and sent(small) == [4_096]
    with pytest.raises(Unavailable) as ei:  # refused, it is over the bound at the full amount
        await make((replace(priced, max_output_tokens=64_000),), small).complete("r", ASK, Envelope(max_cost=0.1))
    assert "exceeds max_cost" in ei.value.message
