"""Router.embed over real HTTP on loopback, with faults from the kit: replays, equivalent
failover, no failover to another model or size, the deadline, batches, limits, the record."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import NamedTuple

import pytest

from failover import (
    EmbedInput,
    Envelope,
    FailureKind,
    InvalidRequest,
    Limits,
    Phase,
    Price,
    Route,
    Router,
    Target,
    Timeouts,
    Unavailable,
    Workflow,
)
from failover.auth import Authorizers
from failover.model import AuthKind, Vertex
from failover.policy import Backoff, Unlimited
from failover.telemetry import AttemptEnded, RequestEnded
from failover.testing import FakeProvider, FakeServer, Outcome, Reply, Script
from failover.testing._fake_embeddings import fake_vector
from failover.transport import HttpRequest

pytestmark = [pytest.mark.looptime, pytest.mark.e2e]

SMALL = "text-embedding-3-small"
TEXTS = ["the first text", "the second text", "a third one"]
LATENCY = 0.1


def _target(srv: FakeServer, p: FakeProvider, **kw: object) -> Target:
    kw.setdefault("timeouts", Timeouts(connect=1.0, total=2.0))
    kw.setdefault("max_attempts", 2)
    kw.setdefault("price", Price(input_per_mtok=0.02))
    return srv.target_for(p, **kw)  # type: ignore[arg-type]


def _router(*routes: Route, auth: Authorizers | None = None, **kw: object) -> Router:
    return Router(
        routes,
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.2, cap=0.2),
        rng=random.Random(7),
        auth=auth,
        **kw,  # type: ignore[arg-type]
    )


class Fakes(NamedTuple):
    srv: FakeServer
    us: FakeProvider
    eu: FakeProvider
    big: FakeProvider


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    """``us`` and ``eu``: one model in two regions; ``big``: another model, an approved fallback."""
    us = FakeProvider("us", "openai", model=SMALL, latency=LATENCY)
    eu = FakeProvider("eu", "openai", model=SMALL, latency=LATENCY)
    big = FakeProvider("big", "openai", model="text-embedding-3-large", latency=LATENCY)
    async with FakeServer(us, eu, big) as srv:
        yield Fakes(srv, us, eu, big)


def _route(srv: FakeServer, us: FakeProvider, eu: FakeProvider, big: FakeProvider, **eu_kw: object) -> Route:
    key = f"openai:{SMALL}"
    return Route(
        name="search",
        primary=(_target(srv, us, region="us"), _target(srv, eu, region="eu", equivalence_key=key, **eu_kw)),
        fallbacks=(_target(srv, big),),
    )


async def test_a_rate_limit_is_waited_out_then_the_same_target_answers(fakes: Fakes) -> None:
    srv, us, eu, big = fakes
    us.load(["rate_limit(retry_after=0.5)", "ok"])  # shorter than eu would need: waited out on us
    router = _router(_route(srv, us, eu, big))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    out = await router.embed("search", TEXTS, dimensions=64)
    assert [list(v) for v in out.vectors] == [fake_vector(t, 64) for t in TEXTS]
    assert out.dimensions == 64 and len(out) == 3
    rec = out.record
    assert rec is not None and rec.target_used == "us"
    assert [a.outcome for a in rec.attempts] == ["rate_limited", "ok"]
    assert [w.reason for w in rec.waits] == ["retry_after"]
    assert (len(us.calls), len(eu.calls), len(big.calls)) == (2, 0, 0)
    assert loop.time() - t0 == pytest.approx(0.5 + 2 * LATENCY, abs=0.01)
    assert rec.recovered and rec.workflow is Workflow.RETRY_FAILOVER
    # the provider's count, priced, on the record and the result
    assert out.usage.input_tokens == sum(max(1, -(-len(t) // 4)) for t in TEXTS)
    assert rec.total_cost == pytest.approx(out.usage.input_tokens * 0.02 / 1e6)
    assert us.calls[-1].json is not None and us.calls[-1].json["dimensions"] == 64
    await router.aclose()


async def test_a_rate_limit_longer_than_the_other_region_needs_fails_over_at_once(fakes: Fakes) -> None:
    srv, us, eu, big = fakes
    us.load(["rate_limit(retry_after=2)", "ok"])
    router = _router(_route(srv, us, eu, big))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    out = await router.embed("search", TEXTS, dimensions=64)
    assert [list(v) for v in out.vectors] == [fake_vector(t, 64) for t in TEXTS]
    rec = out.record
    assert rec is not None and rec.target_used == "eu" and not rec.waits
    assert [a.outcome for a in rec.attempts] == ["rate_limited", "ok"]
    assert (len(us.calls), len(eu.calls), len(big.calls)) == (1, 1, 0)
    assert loop.time() - t0 == pytest.approx(2 * LATENCY, abs=0.01)
    assert rec.recovered and rec.workflow is Workflow.RETRY_FAILOVER
    await router.aclose()


async def test_an_outage_fails_over_to_the_same_model_in_another_region_never_to_another_model(
    fakes: Fakes,
) -> None:
    srv, us, eu, big = fakes
    us.load(Script.always(Reply.overloaded()))
    router = _router(_route(srv, us, eu, big))
    out = await router.embed("search", TEXTS)
    rec = out.record
    assert rec is not None and rec.target_used == "eu"
    assert [(a.target, a.phase, a.outcome) for a in rec.attempts] == [
        ("us", Phase.PRIMARY, "provider_overloaded"),
        ("us", Phase.PRIMARY, "provider_overloaded"),
        ("eu", Phase.FAILOVER, "ok"),
    ]
    assert len(big.calls) == 0
    (left,) = rec.excluded
    assert left.target == "big" and left.reason.startswith("embedding_model_differs")
    assert [list(v) for v in out.vectors] == [fake_vector(t, 1536) for t in TEXTS]  # the model's own size
    await router.aclose()


async def test_no_failover_to_another_size_or_model_and_the_record_says_why(fakes: Fakes) -> None:
    srv, us, eu, big = fakes
    us.load(Script.always(Reply.overloaded()))
    router = _router(_route(srv, us, eu, big, dimensions=128))  # eu is pinned to another size
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(Unavailable) as info:
        await router.embed("search", TEXTS, envelope=Envelope(allow_fallback=True))
    exc = info.value
    assert exc.reason is FailureKind.PROVIDER_OVERLOADED and exc.retryable
    reasons = {e.target: e.reason for e in exc.record.excluded}
    assert reasons["eu"].startswith("dimensions_differ: eu gives vectors of 128 dimensions")
    assert reasons["big"].startswith("embedding_model_differs")
    assert (len(us.calls), len(eu.calls), len(big.calls)) == (2, 0, 0)
    assert {a.target for a in exc.record.attempts} == {"us"}
    # two attempts and one backoff (full jitter, at most 0.2 s), and nothing else
    (wait,) = exc.record.waits
    assert wait.reason == "backoff" and 0 <= wait.end - wait.start <= 0.2
    assert loop.time() - t0 == pytest.approx(2 * LATENCY + wait.end - wait.start, abs=0.01)
    # asked for that size outright, both regions give it: eu is an equivalent again
    out = await router.embed("search", TEXTS, dimensions=128)
    assert out.record is not None and out.record.target_used == "eu"
    await router.aclose()


async def test_a_hanging_provider_ends_at_the_deadline(fakes: Fakes) -> None:
    srv, us = fakes.srv, fakes.us
    us.load(Script.always(Reply.hang()))
    route = Route(name="solo", primary=(_target(srv, us, timeouts=Timeouts(connect=1.0, total=30.0)),))
    router = _router(route)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(Unavailable) as info:
        await router.embed("solo", TEXTS, envelope=Envelope(budget=3.0))
    assert info.value.reason is FailureKind.DEADLINE_EXHAUSTED
    assert loop.time() - t0 == pytest.approx(3.0, abs=0.01)
    for _ in range(100):  # the server's read of the closed connection
        if us.calls[0].outcome is not Outcome.PENDING:
            break
        await asyncio.sleep(0)
    assert [c.outcome for c in us.calls] == [Outcome.CLIENT_DISCONNECTED]
    assert info.value.record.attempts[0].outcome == "timeout:total"
    await router.aclose()


async def test_an_input_over_every_window_is_refused_before_any_call(fakes: Fakes) -> None:
    srv, us = fakes.srv, fakes.us
    route = Route(name="small", primary=(_target(srv, us, context_window=8, tokenizer="estimate"),))
    router = _router(route)
    with pytest.raises(Unavailable) as info:
        await router.embed("small", ["short", "a text that is clearly longer than eight tokens of any kind " * 3])
    assert info.value.reason is FailureKind.CONTEXT_OVERFLOW
    assert "exceeds context window 8" in info.value.record.excluded[0].reason
    assert us.calls == []
    await router.aclose()


async def test_the_limiter_counts_the_inputs_tokens(fakes: Fakes) -> None:
    srv, us = fakes.srv, fakes.us
    # an embedding generates nothing: it holds no output room, whatever max_output_tokens says
    limits = Limits(input_tpm=50, output_tpm=100)
    route = Route(name="tpm", primary=(_target(srv, us, limits=limits, tokenizer="estimate", max_output_tokens=4096),))
    router = _router(route)
    out = await router.embed("tpm", ["a few words"])  # fits
    assert out.record is not None and out.record.target_used == "us"
    with pytest.raises(Unavailable) as info:  # more input tokens than a whole minute allows
        await router.embed("tpm", ["many words in this text, " * 20])
    assert info.value.reason is FailureKind.RATE_LIMITED
    assert "client-side rate limit" in info.value.record.excluded[0].reason
    assert len(us.calls) == 1
    await router.aclose()


async def test_hooks_see_the_attempts_and_the_end(fakes: Fakes) -> None:
    srv, us, eu, big = fakes
    us.load(["server_error", "ok"])
    events: list[object] = []
    router = _router(_route(srv, us, eu, big), hooks=[events.append])
    await router.embed("search", TEXTS)
    ended = [e for e in events if isinstance(e, AttemptEnded)]
    assert [e.outcome for e in ended] == ["provider_server_error", "ok"]
    assert ended[1].input_tokens is not None and ended[1].output_tokens == 0
    (done,) = [e for e in events if isinstance(e, RequestEnded)]
    assert done.outcome == "ok" and done.recovered
    await router.aclose()


async def test_bad_input_is_refused_before_any_call(fakes: Fakes) -> None:
    srv, us, eu, big = fakes
    router = _router(_route(srv, us, eu, big))
    for inputs, kw, field in [
        ([], {}, "inputs"),
        (["ok", ""], {}, "inputs[1]"),
        (["ok"], {"dimensions": -3}, "dimensions"),
        (["ok"], {"input_type": "passage"}, "input_type"),
    ]:
        with pytest.raises(InvalidRequest) as info:
            await router.embed("search", inputs, **kw)  # type: ignore[arg-type]
        assert info.value.field == field
    assert srv.calls == []
    await router.aclose()


# -- batches, and the clouds' credential chains ----------------------------------------------------


class _Signer:
    """Stands in for a cloud credential chain: stamps each request, counts them."""

    def __init__(self) -> None:
        self.signed: list[str] = []

    async def authorize(self, target: Target, request: HttpRequest) -> HttpRequest:
        self.signed.append(request.url)
        return replace(request, headers={**request.headers, "authorization": "signed-by-test"})

    async def aclose(self) -> None:
        pass


async def test_titan_embeds_one_text_a_call_concurrently_each_call_signed() -> None:
    signer = _Signer()
    auth = Authorizers({AuthKind.AWS: lambda a: signer})
    titan = FakeProvider("titan", "bedrock", model="amazon.titan-embed-text-v2:0", latency=LATENCY)
    texts = [f"text number {i}" for i in range(10)]
    async with FakeServer(titan) as srv:
        route = Route(name="t", primary=(_target(srv, titan, region="us-east-1"),))
        router = _router(route, auth=auth)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        out = await router.embed("t", texts, dimensions=256)
        assert [list(v) for v in out.vectors] == [fake_vector(t, 256) for t in texts]
        assert len(titan.calls) == 10 and len(signer.signed) == 10
        assert all(c.headers.get("authorization") == "***" for c in titan.calls)  # the kit redacts it
        assert sorted(c.json["inputText"] for c in titan.calls if c.json) == sorted(texts)
        assert titan.calls[0].json is not None and titan.calls[0].json["normalize"] is True
        # eight at a time: two rounds of the provider's latency, in one attempt
        assert loop.time() - t0 == pytest.approx(2 * LATENCY, abs=0.01)
        rec = out.record
        assert rec is not None and len(rec.attempts) == 1 and rec.attempts[0].status == 200
        assert out.usage.input_tokens == sum(max(1, -(-len(t) // 4)) for t in texts)
        # one batch throttled: the attempt fails as a whole, and is replayed as a whole
        titan.clear()
        titan.load(Script.of("ok", "ok", "rate_limit(retry_after=1)", default="ok"))
        out = await router.embed("t", texts[:3])
        assert out.record is not None and [a.outcome for a in out.record.attempts] == ["rate_limited", "ok"]
        assert len(titan.calls) == 6
        await router.aclose()


async def test_cohere_on_bedrock_and_gemini_on_vertex() -> None:
    signer = _Signer()
    auth = Authorizers({AuthKind.AWS: lambda a: signer, AuthKind.GOOGLE: lambda a: signer})
    cohere = FakeProvider("cohere", "bedrock", model="cohere.embed-english-v3")
    vx = FakeProvider("vx", "gemini", model="gemini-embedding-001")
    async with FakeServer(cohere, vx) as srv:
        tc = _target(srv, cohere, region="us-east-1")
        tv = _target(srv, vx, base_url=srv.url_for(vx), vertex=Vertex(project="p1", location="us-central1"))
        router = _router(Route(name="c", primary=(tc,)), Route(name="v", primary=(tv,)), auth=auth)
        out = await router.embed("c", TEXTS, input_type=EmbedInput.QUERY)
        assert [list(v) for v in out.vectors] == [fake_vector(t, 1024) for t in TEXTS]
        (call,) = cohere.calls
        assert call.json is not None and call.json["input_type"] == "search_query"
        out = await router.embed("v", TEXTS, dimensions=32, input_type="document")
        assert [list(v) for v in out.vectors] == [fake_vector(t, 32) for t in TEXTS]
        assert len(vx.calls) == 3  # gemini-embedding on Vertex: one instance a request
        assert vx.calls[0].path.endswith(
            "/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-embedding-001:predict"
        )
        assert vx.calls[0].json == {
            "instances": [{"content": vx.calls[0].json["instances"][0]["content"], "task_type": "RETRIEVAL_DOCUMENT"}],
            "parameters": {"outputDimensionality": 32},
        }
        assert len(signer.signed) == 4
        await router.aclose()


async def test_a_route_whose_only_targets_cannot_embed_says_so() -> None:
    chat = FakeProvider("chat", "anthropic")
    async with FakeServer(chat) as srv:
        router = _router(Route(name="r", primary=(_target(srv, chat),)))
        with pytest.raises(Unavailable) as info:
            await router.embed("r", TEXTS)
        assert info.value.reason is FailureKind.CONTRACT_FAILURE
        assert "embeddings_unsupported" in info.value.record.excluded[0].reason
        assert chat.calls == []
        await router.aclose()


def test_vectors_of_another_size_than_asked_are_a_contract_failure() -> None:
    from failover.model import Embeddings, EmbedRequest, Failure
    from failover.router._embed import _checked

    t = Target(name="t", dialect="openai", model=SMALL, base_url="http://x", dimensions=4)  # type: ignore[arg-type]
    ok = Embeddings(vectors=([0.0] * 4, [1.0] * 4))
    assert _checked(ok, t, EmbedRequest(inputs=("a", "b")), 200) is ok
    wrong = _checked(ok, t, EmbedRequest(inputs=("a", "b"), dimensions=8), 200)
    assert isinstance(wrong, Failure) and wrong.kind is FailureKind.CONTRACT_FAILURE
    assert wrong.provider_code == "dimensions_differ" and "4 dimensions; 8 were asked for" in wrong.message
    ragged = _checked(
        Embeddings(vectors=([0.0] * 4, [1.0] * 3)), replace(t, dimensions=None), EmbedRequest(inputs=("a", "b")), 200
    )
    assert isinstance(ragged, Failure) and ragged.kind is FailureKind.PROVIDER_SERVER_ERROR


def test_sync_router_embeds() -> None:
    from failover import SyncRouter
    from failover.testing import FakeNetwork

    p = FakeProvider("p", "openai", model=SMALL)
    route = Route(name="r", primary=(p.target(),))
    with SyncRouter(lambda: Router([route], transport=FakeNetwork(p))) as router:
        out = router.embed("r", "one text", dimensions=8)
    assert [list(v) for v in out.vectors] == [fake_vector("one text", 8)]


async def test_batches_are_kept_to_what_one_answer_may_hold() -> None:
    from failover.testing import FakeNetwork

    p = FakeProvider("p", "openai", model="text-embedding-3-large")
    net = FakeNetwork(p)
    net.max_response_bytes = 1024 * 1024  # type: ignore[attr-defined]  # as a transport's limit says
    router = _router(Route(name="r", primary=(p.target(),)), transport=net)
    texts = [f"t{i}" for i in range(30)]
    out = await router.embed("r", texts)  # the model's own size: 3,072 floats a vector
    # 1 MiB of answer at 24 bytes a dimension: 12 vectors a call, not OpenAI's 2,048
    assert [len(c.json["input"]) for c in p.calls if c.json] == [12, 12, 6]
    assert [list(v) for v in out.vectors] == [fake_vector(t, 3072) for t in texts]
    p.clear()
    await router.embed("r", texts, dimensions=256)
    assert [len(c.json["input"]) for c in p.calls if c.json] == [30]
    await router.aclose()
