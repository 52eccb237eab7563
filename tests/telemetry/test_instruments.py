"""What the metrics call each thing, and how a record says who answered (``answered_by``)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from failover import Envelope, Message, Request, Response, ResponseFormat, Route, Router, RouteRecord, Unavailable
from failover.model import Completed
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.telemetry._instruments import INSTRUMENTS, Instrument, answered, provider_name
from failover.testing import FakeNetwork, FakeProvider, Reply, Script

from ..router._kit import ALL, C, target

pytestmark = pytest.mark.looptime

SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
JSON_REQ = Request(messages=(Message.user("triage this"),), response_format=ResponseFormat.json_schema(SCHEMA))


def test_prometheus_names_follow_from_the_opentelemetry_names() -> None:
    assert {i.name: i.exposed_name for i in INSTRUMENTS} == {
        "gen_ai.client.operation.duration": "gen_ai_client_operation_duration_seconds",
        "gen_ai.client.operation.time_to_first_chunk": "gen_ai_client_operation_time_to_first_chunk_seconds",
        "gen_ai.client.token.usage": "gen_ai_client_token_usage",
        "failover.request.duration": "failover_request_duration_seconds",
        "failover.request.time_to_first_chunk": "failover_request_time_to_first_chunk_seconds",
        "failover.limiter.wait": "failover_limiter_wait_seconds",
        "failover.attempts": "failover_attempts_total",
        "failover.recoveries": "failover_recoveries_total",
        "failover.deadline_exhausted": "failover_deadline_exhausted_total",
        "failover.no_eligible_candidate": "failover_no_eligible_candidate_total",
        "failover.cost.usd": "failover_cost_usd_total",
        "failover.failed_attempt.cost.usd": "failover_failed_attempt_cost_usd_total",
        "failover.input_tokens": "failover_input_tokens_total",
        "failover.cached_input_tokens": "failover_cached_input_tokens_total",
    }
    duration = INSTRUMENTS[0]
    assert duration.labels == (
        "gen_ai_operation_name",
        "gen_ai_provider_name",
        "gen_ai_request_model",
        "error_type",
        "failover_target",
    )
    with pytest.raises(ValueError, match="no Prometheus mapping"):
        _ = Instrument(name="x.cost", kind="counter", unit="USD", description="", attributes=()).prometheus_name


def make(primary: Sequence[FakeProvider], fallbacks: Sequence[FakeProvider] = (), **kw: object) -> Router:
    caps = ALL | {C.STREAMING}
    route = Route(
        name="r",
        primary=tuple(target(p, attempts=2 if i == 0 else 1, key="E", caps=caps) for i, p in enumerate(primary)),
        fallbacks=tuple(target(p, caps=caps) for p in fallbacks),
    )
    return Router(
        [route],
        transport=FakeNetwork(*primary, *fallbacks),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.05, cap=0.05),
        rng=random.Random(0),
        breakers=NoBreakers(),
        **kw,  # type: ignore[arg-type]
    )


async def record(router: Router, request: Request | None = None) -> RouteRecord:
    try:
        resp = await router.complete("r", request or Request.simple("hi"), Envelope(budget=10))
    except Unavailable as exc:
        return exc.record
    assert resp.record is not None
    return resp.record


def p(name: str, *replies: Reply, always: Reply | None = None, dialect: str = "openai") -> FakeProvider:
    return FakeProvider(name, dialect, Script.always(always) if always else Script.of(*replies))


async def test_answered_by_names_the_tier_that_answered() -> None:
    down = Reply.server_error()
    assert answered(await record(make([p("a")]))) == ("primary", None)
    assert answered(await record(make([p("a", Reply.overloaded())]))) == ("retry", None)
    assert answered(await record(make([p("a", always=down), p("a2")])))[0] == "failover"
    assert answered(await record(make([p("a", always=down)], [p("b", dialect="anthropic")])))[0] == "fallback"
    schema_bad_then_good = p("a", Reply.schema_invalid({"wrong": 1}), Reply.ok(json={"label": "x"}))
    rec = await record(make([schema_bad_then_good]), JSON_REQ)
    assert [x.phase.value for x in rec.attempts] == ["primary", "repair"]
    assert answered(rec)[0] == "repair"
    failed = await record(make([p("a", always=down)]))
    assert failed.target_used is None and answered(failed) == ("none", None)

    async def later(request: Request, exc: Unavailable) -> Response:
        return Response(text="busy")

    degraded = await record(make([p("a", always=down)], degrade={"r": later}))
    assert degraded.degraded and answered(degraded) == ("degraded", None)


async def test_a_held_primary_answered_by_its_equivalent_is_a_failover_and_recovers_as_held() -> None:
    """The primary cools down after a 429 with a long Retry-After: the next request goes to the
    equivalent at once, one attempt, and that is still a failover, held being the reason."""
    router = make([p("a", always=Reply.rate_limit(retry_after=60)), p("a2")])
    first = await record(router)
    assert (first.recovery_kind, answered(first)[0]) == ("rate_limited", "failover")
    second = await record(router)
    assert len(second.attempts) == 1 and second.recovered
    assert (second.recovery_kind, answered(second)[0]) == ("held", "failover")


async def test_the_first_chunk_of_a_streamed_answer_counts_from_the_request_start() -> None:
    router = make([p("a", Reply.server_error(), Reply.ok("late", latency=0.3))])
    async with router.stream("r", Request.simple("tell me"), Envelope(budget=10)) as s:
        events = [e async for e in s]
    end = events[-1]
    assert isinstance(end, Completed) and end.response.record is not None
    rec = end.response.record
    by, first_chunk = answered(rec)
    replay = rec.attempts[-1]
    assert by == "retry" and replay.streamed
    # the failed attempt, the backoff and the replay's own 0.3 s before its first chunk
    assert first_chunk == pytest.approx(replay.start + 0.3) and replay.start > 0
    plain = await record(make([p("a")]))
    assert answered(plain) == ("primary", None)  # not a streaming call: no first chunk to speak of
    # a server that answers a stream request with one JSON body: that body is its first chunk
    router = make([p("a", always=Reply.ok("whole", plain=True, latency=0.2))])
    async with router.stream("r", Request.simple("tell me"), Envelope(budget=10)) as s:
        events = [e async for e in s]
    end = events[-1]
    assert isinstance(end, Completed) and end.response.record is not None
    (whole,) = end.response.record.attempts
    assert not whole.streamed and answered(end.response.record) == ("primary", pytest.approx(0.2))


@pytest.mark.parametrize(
    ("dialect", "name"),
    [("openai", "openai"), ("openai-responses", "openai"), ("anthropic", "anthropic"), ("gemini", "gcp.gemini")],
)
def test_gen_ai_provider_name_by_dialect(dialect: str, name: str) -> None:
    assert provider_name(dialect) == name  # both OpenAI APIs are the one provider
