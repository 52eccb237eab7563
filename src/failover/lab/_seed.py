"""The seed diagram's scenarios: the real router, fake providers, virtual loop time.

Route ``seed``: primary A (may retry), then approved fallbacks B and C (one try each; B
cannot read images). Four scenarios (healthy, A rate limited, A timing out, all failing)
times three required capabilities (chat, structured output, vision). Everything runs on a
virtual loop clock (looptime), so minutes of waiting take microseconds and every number
printed is exactly what the router did.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import (
    Capability,
    Dialect,
    Envelope,
    ImagePart,
    Message,
    Price,
    Request,
    ResponseFormat,
    Route,
    RouteRecord,
    Target,
    Timeouts,
    Unavailable,
)
from ..policy import Backoff, RetryBudget, Unlimited
from ..router import Router
from ..testing import FakeNetwork, FakeProvider, Reply, Script
from ._custom import CustomScenario

C = Capability
CAPABILITIES = ("chat", "structured_output", "vision")
SCENARIOS = ("healthy", "rate_limited", "timeout", "all_failing")
CUSTOM = "custom"  # SeedOptions.custom says what the providers answer
MAX_BUDGET = 60.0  # seconds of virtual time the page may ask for; its slider stops well below
MAX_RETRIES = 10  # A's extra retries the page may ask for
ANSWER_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
# A 1x1 PNG: enough for a request that carries an image.
PIXEL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LabPolicies:
    """The retry policies the simulator's router runs with: the lab's own by default, or a
    config file's (``failover lab --config``, and the gateway's own /lab). ``source`` names
    where they came from."""

    backoff: Backoff = field(default_factory=lambda: Backoff(base=0.2, cap=1.0))
    budget_ratio: float | None = 0.1  # None: no retry budget
    budget_floor: int = 10
    budget_window: float = 10.0
    source: str | None = None  # a config file's name; None: the lab's built-in policies

    @classmethod
    def of(cls, backoff: Backoff, budget: RetryBudget | Unlimited, source: str) -> LabPolicies:
        if isinstance(budget, Unlimited):
            return cls(backoff=backoff, budget_ratio=None, source=source)
        return cls(
            backoff=backoff,
            budget_ratio=budget.ratio,
            budget_floor=budget.floor,
            budget_window=budget.window,
            source=source,
        )

    def retry_budget(self) -> RetryBudget | Unlimited:
        """A fresh budget with these parameters (a run never shares a budget's state)."""
        if self.budget_ratio is None:
            return Unlimited()
        return RetryBudget(ratio=self.budget_ratio, floor=self.budget_floor, window=self.budget_window)

    def describe(self) -> dict[str, Any]:
        b = self.backoff
        budget = None
        if self.budget_ratio is not None:
            budget = {"ratio": self.budget_ratio, "floor": self.budget_floor, "window": self.budget_window}
        return {
            "source": self.source,
            "backoff": {"base": b.base, "cap": b.cap, "max_retry_after": b.max_retry_after},
            "retry_budget": budget,
        }


BUILT_IN = LabPolicies()


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedOptions:
    """What the user can turn in the seed diagram."""

    scenario: str = "healthy"
    capability: str = "chat"
    budget: float = 3.0  # seconds, shared by every attempt and wait
    a_extra_retries: int = 1  # A's attempt limit is 1 + this
    attempt_cap: float = 1.0  # per-attempt cap on every target
    seed: int = 0  # backoff jitter
    custom: CustomScenario | None = None  # scenario "custom": the providers' scripts
    # Seconds of the budget A's replays must leave to the next candidate; None: automatic (the
    # candidate's least useful time plus its expected latency, and no replay after a timeout).
    fallback_reserve: float | None = None
    policies: LabPolicies = BUILT_IN  # backoff and retry budget (a config file's, with --config)

    def __post_init__(self) -> None:
        if self.scenario == CUSTOM:
            if self.custom is None:
                raise ValueError("scenario 'custom' needs a CustomScenario in custom")
        elif self.scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, got {self.scenario!r}")
        if self.capability not in CAPABILITIES:
            raise ValueError(f"capability must be one of {', '.join(CAPABILITIES)}, got {self.capability!r}")
        if self.budget <= 0 or self.attempt_cap <= 0 or self.a_extra_retries < 0:
            raise ValueError("budget and attempt_cap must be > 0 and a_extra_retries >= 0")
        if self.fallback_reserve is not None and not 0 <= self.fallback_reserve <= self.budget:
            raise ValueError("fallback_reserve must be None (automatic) or seconds from 0 to the budget")


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedResult:
    options: SeedOptions
    record: RouteRecord
    text: str | None
    error: str | None
    calls: Mapping[str, int] = field(default_factory=dict)


def _scripts(scenario: str, structured: bool, custom: CustomScenario | None = None) -> dict[str, Script]:
    def ok(name: str, latency: float) -> Reply:
        if structured:
            return Reply.ok(json={"answer": f"from {name}"}, latency=latency)
        return Reply.ok(f"Answer from {name}.", latency=latency)

    healthy = {"a": ok("a", 0.30), "b": ok("b", 0.40), "c": ok("c", 0.50)}
    if scenario == CUSTOM and custom is not None:
        return {n: custom.script(n, healthy[n]) for n in "abc"}
    if scenario == "healthy":
        return {n: Script.always(r) for n, r in healthy.items()}
    if scenario == "rate_limited":
        return {
            "a": Script.always(Reply.rate_limit(retry_after=0.8, latency=0.05)),
            "b": Script.always(healthy["b"]),
            "c": Script.always(healthy["c"]),
        }
    if scenario == "timeout":
        return {
            "a": Script.always(Reply.hang()),
            "b": Script.always(healthy["b"]),
            "c": Script.always(healthy["c"]),
        }
    return {n: Script.always(Reply.overloaded(latency=0.10)) for n in "abc"}


def _targets(opts: SeedOptions, providers: Mapping[str, FakeProvider]) -> dict[str, Target]:
    streaming = frozenset({C.STREAMING}) if _streams(opts) else frozenset()
    caps = {
        "a": frozenset({C.CHAT, C.STRUCTURED_OUTPUT, C.VISION}) | streaming,
        "b": frozenset({C.CHAT, C.STRUCTURED_OUTPUT}) | streaming,  # no vision
        "c": frozenset({C.CHAT, C.STRUCTURED_OUTPUT, C.VISION}) | streaming,
    }
    attempts = {"a": 1 + opts.a_extra_retries, "b": 1, "c": 1}
    return {
        n: providers[n].target(
            capabilities=caps[n],
            timeouts=Timeouts(connect=opts.attempt_cap, total=opts.attempt_cap, min_useful=0.05),
            max_attempts=attempts[n],
            price=Price(input_per_mtok=1.0, output_per_mtok=4.0),
            tokenizer="estimate",
        )
        for n in "abc"
    }


def _request(capability: str) -> Request:
    if capability == "vision":
        return Request(messages=(Message.user("What is in this picture?", ImagePart(url=PIXEL)),), max_tokens=256)
    if capability == "structured_output":
        return Request(
            messages=(Message.user("Classify: 'my invoice is wrong'"),),
            response_format=ResponseFormat.json_schema(ANSWER_SCHEMA, name="triage"),
            max_tokens=256,
        )
    return Request.simple("Say hello.", max_tokens=256)


async def run_seed(opts: SeedOptions) -> SeedResult:
    """Run one combination on the current loop (use :func:`run_virtual` for virtual time)."""
    custom = opts.custom if opts.scenario == CUSTOM else None
    scripts = _scripts(opts.scenario, opts.capability == "structured_output", custom)
    dialects = {"a": Dialect.OPENAI, "b": Dialect.ANTHROPIC, "c": Dialect.GEMINI}
    providers = {
        n: FakeProvider(
            n,
            dialects[n],
            scripts[n],
            latency=custom.latency(n) if custom else 0.0,
            connect_latency=custom.connect(n) if custom else 0.0,
        )
        for n in "abc"
    }
    targets = _targets(opts, providers)
    absent = custom.absent if custom is not None else frozenset()
    route = Route(
        name="seed",
        primary=(targets["a"],),
        fallbacks=tuple(targets[n] for n in "bc" if n not in absent),
        fallback_reserve=opts.fallback_reserve,
    )
    router = Router(
        [route],
        transport=FakeNetwork(*providers.values()),
        retry_budget=opts.policies.retry_budget(),
        backoff=opts.policies.backoff,
        rng=random.Random(opts.seed),
        stream_threshold=0.0 if _streams(opts) else None,  # custom "stream: true": every attempt streams
    )
    envelope = Envelope(budget=opts.budget, request_id=f"seed-{opts.scenario}-{opts.capability}")
    text: str | None = None
    error: str | None = None
    try:
        resp = await router.complete("seed", _request(opts.capability), envelope)
    except Unavailable as exc:
        record, error = exc.record, str(exc)
    else:
        assert resp.record is not None
        record, text = resp.record, (resp.text if resp.parsed is None else repr(resp.parsed))
    await router.aclose()
    calls = {n: len(p.calls) for n, p in providers.items()}
    return SeedResult(options=opts, record=record, text=text, error=error, calls=calls)


def _streams(opts: SeedOptions) -> bool:
    return opts.scenario == CUSTOM and opts.custom is not None and opts.custom.stream


def run_virtual(opts: SeedOptions) -> SeedResult:
    """Run one combination on a fresh virtual-time loop: instant, and exact."""
    from .._extras import missing

    try:
        import looptime  # the gateway extra: imported here, so `failover replay` runs on the core install
    except ModuleNotFoundError as exc:
        raise missing("the simulator (failover demo, the lab)", exc) from exc

    loop = looptime.new_event_loop(start=0.0)
    try:
        return loop.run_until_complete(run_seed(opts))
    finally:
        loop.close()


def all_combinations(**overrides: Any) -> Iterator[SeedOptions]:
    for scenario in SCENARIOS:
        for capability in CAPABILITIES:
            yield SeedOptions(scenario=scenario, capability=capability, **overrides)


__all__ = [
    "BUILT_IN",
    "CAPABILITIES",
    "CUSTOM",
    "MAX_BUDGET",
    "MAX_RETRIES",
    "SCENARIOS",
    "LabPolicies",
    "SeedOptions",
    "SeedResult",
    "all_combinations",
    "run_seed",
    "run_virtual",
]
