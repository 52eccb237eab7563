from __future__ import annotations

from failover.model import (
    Capability,
    Contract,
    Envelope,
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Price,
    Request,
    ResponseFormat,
    Route,
    Target,
)
from failover.policy import HealthBoard, plan

C = Capability


def t(name: str, *caps: Capability, **kw: object) -> Target:
    return Target(
        name=name,
        dialect=kw.pop("dialect", "openai"),  # type: ignore[arg-type]
        model=str(kw.pop("model", name)),
        base_url=f"http://{name}.fake/v1",
        capabilities=frozenset(caps or (C.CHAT,)),
        **kw,  # type: ignore[arg-type]
    )


A = t("a", C.CHAT, C.VISION, C.STRUCTURED_OUTPUT, region="us", equivalence_key="m1")
A2 = t("a2", C.CHAT, C.VISION, C.STRUCTURED_OUTPUT, region="eu", equivalence_key="m1")
B = t("b", C.CHAT, C.STRUCTURED_OUTPUT, region="us")
CC = t("c", C.CHAT, C.VISION, region="eu", context_window=8_000)
ROUTE = Route(name="r", primary=(A, A2), fallbacks=(B, CC))
IMG = Request(messages=(Message.user("what is this?", ImagePart(url="data:image/png;base64,AAAA")),))


def names(p: object) -> list[tuple[str, str]]:
    return [(c.target.name, c.phase.value) for c in p.candidates]  # type: ignore[attr-defined]


def run(route: Route, req: Request, env: Envelope | None = None, tokens: int = 100, health: HealthBoard | None = None):  # type: ignore[no-untyped-def]
    return plan(route, req, env or Envelope(), input_tokens=lambda _t: tokens, health=health or HealthBoard(), now=0.0)


def test_order_and_phases() -> None:
    p = run(ROUTE, Request.simple("hi"))
    assert names(p) == [("a", "primary"), ("a2", "failover"), ("b", "fallback"), ("c", "fallback")]
    assert p.excluded == ()


def test_images_require_vision_and_exclude_with_a_reason() -> None:
    p = run(ROUTE, IMG)
    assert [c.target.name for c in p.candidates] == ["a", "a2", "c"]
    assert [(e.target, e.reason) for e in p.excluded] == [("b", "missing capability: vision")]


def test_structured_output_and_envelope_requirements() -> None:
    req = Request(messages=(Message.user("x"),), response_format=ResponseFormat.json_schema({"type": "object"}))
    p = run(ROUTE, req, Envelope(required=frozenset({C.VISION})))
    assert [c.target.name for c in p.candidates] == ["a", "a2"]
    reasons = {e.target: e.reason for e in p.excluded}
    assert reasons == {"b": "missing capability: vision", "c": "missing capability: structured_output"}


def test_context_window_counts_input_plus_max_tokens() -> None:
    req = Request(messages=(Message.user("x"),), max_tokens=1_000)
    p = run(ROUTE, req, tokens=7_500)
    assert "c" not in [c.target.name for c in p.candidates]
    (ex,) = p.excluded
    assert ex.target == "c" and "exceeds context window 8000" in ex.reason


def test_regions_retention_and_safety_are_hard_constraints() -> None:
    cheap = t("cheap", C.CHAT, region="ap", price=Price(input_per_mtok=0.01))
    zdr = t("zdr", C.CHAT, region="eu", retention=frozenset({"zdr"}), safety_profiles=frozenset({"std"}))
    route = Route(
        name="r",
        contract=Contract(regions=frozenset({"eu"}), retention=frozenset({"zdr"}), safety_profile="std"),
        primary=(cheap,),
        fallbacks=(zdr,),
        ranking="cost",
    )
    p = run(route, Request.simple("x"))
    assert names(p) == [("zdr", "fallback")]
    assert p.excluded[0].target == "cheap" and "region ap not in allowed regions eu" in p.excluded[0].reason


def test_envelope_can_forbid_failover_and_fallback() -> None:
    p = run(ROUTE, Request.simple("x"), Envelope(allow_failover=False, allow_fallback=False))
    assert names(p) == [("a", "primary")]
    assert {e.target for e in p.excluded} == {"a2", "b", "c"}


def test_an_excluded_primary_makes_its_equivalent_a_failover() -> None:
    route = Route(name="r", primary=(t("p", C.CHAT, equivalence_key="k"), A2), fallbacks=())
    p = run(route, IMG)
    assert names(p) == [("a2", "failover")]


def test_cooldown_after_429_skips_the_key_until_retry_after() -> None:
    h = HealthBoard()
    h.observe(A, Failure(kind=FailureKind.RATE_LIMITED, message="429", retry_after=30.0), 0.1, now=0.0)
    p = plan(ROUTE, Request.simple("x"), Envelope(), input_tokens=lambda _t: 10, health=h, now=5.0)
    assert [c.target.name for c in p.candidates] == ["a2", "b", "c"]
    assert "cooling down after rate_limited for another 25.0s" in p.excluded[0].reason
    p2 = plan(ROUTE, Request.simple("x"), Envelope(), input_tokens=lambda _t: 10, health=h, now=31.0)
    assert p2.candidates[0].target.name == "a"


def test_server_errors_do_not_cool_down_but_lower_health_ranking() -> None:
    h = HealthBoard()
    for _ in range(5):
        h.observe(A, Failure(kind=FailureKind.PROVIDER_SERVER_ERROR, message="500"), 0.1, now=0.0)
    route = Route(name="r", primary=(A, A2), ranking="health")
    p = plan(route, Request.simple("x"), Envelope(), input_tokens=lambda _t: 10, health=h, now=1.0)
    # ranking by health: the first choice is the primary attempt, the sick one is kept last
    assert names(p) == [("a2", "primary"), ("a", "failover")]


def test_invalid_request_says_nothing_about_health() -> None:
    h = HealthBoard()
    h.observe(A, Failure(kind=FailureKind.INVALID_REQUEST, message="400"), 0.1, now=0.0)
    assert h.of(A).success == 1.0
    assert h.cooling(A, 0.0) is None


def test_max_cost_excludes_expensive_candidates() -> None:
    pricey = t("pricey", C.CHAT, price=Price(input_per_mtok=1000.0))
    route = Route(name="r", primary=(pricey,), fallbacks=(B,))
    p = run(route, Request.simple("x"), Envelope(max_cost=0.01), tokens=1000)
    assert names(p) == [("b", "fallback")]
    assert "exceeds max_cost" in p.excluded[0].reason


def test_max_tokens_above_a_targets_max_is_capped_and_the_full_target_ranks_first_in_its_tier_only() -> None:
    small = t("small", C.CHAT, equivalence_key="m", max_output_tokens=4_096, price=Price(output_per_mtok=1.0))
    big = t("big", C.CHAT, equivalence_key="m", max_output_tokens=64_000, price=Price(output_per_mtok=2.0))
    fb_small = t("fb_small", C.CHAT, max_output_tokens=8_192)
    fb_big = t("fb_big", C.CHAT, max_output_tokens=64_000)
    route = Route(name="r", primary=(small, big), fallbacks=(fb_small, fb_big), ranking="cost")
    req = Request(messages=(Message.user("x"),), max_tokens=32_000)
    p = run(route, req)
    # cost alone would put small first (4,096 tokens at $1 < 32,000 at $2); the full one leads its
    # tier, and the fallbacks stay behind the primary tier however much they could give
    # (big's first attempt is the primary one: the configured primary was not left out, only passed)
    assert names(p) == [("big", "primary"), ("small", "failover"), ("fb_big", "fallback"), ("fb_small", "fallback")]
    assert p.excluded == ()
    refused = run(route, req, Envelope(max_tokens_policy="refuse"))
    assert names(refused) == [("big", "failover"), ("fb_big", "fallback")]
    assert {e.target: e.reason for e in refused.excluded} == {
        "small": "max_tokens 32000 exceeds max output 4096",
        "fb_small": "max_tokens 32000 exceeds max output 8192",
    }
