"""Routes, contracts and envelopes: what a request needs and how far recovery may go."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from ._ids import new_id
from ._target import Capability, Target


class SideEffectMode(StrEnum):
    NONE = "none"
    READ_ONLY = "read_only"
    WRITE_POSSIBLE = "write_possible"


@dataclass(frozen=True, slots=True, kw_only=True)
class Contract:
    """What a route class cannot do without. A candidate failing any of it is never called.

    ``regions`` and ``languages`` are allow-lists (empty: no constraint); ``retention`` tags
    must all be present on the target; ``safety_profile`` must be one the target offers.
    """

    capabilities: frozenset[Capability] = frozenset({Capability.CHAT})
    min_context: int = 0
    regions: frozenset[str] = frozenset()
    retention: frozenset[str] = frozenset()
    safety_profile: str | None = None
    languages: frozenset[str] = frozenset()
    schema_id: str | None = None
    schema_version: str | None = None
    # Output constraints, checked on every result before it counts (validation level "contract"):
    max_output_chars: int | None = None
    min_output_chars: int | None = None
    output_languages: frozenset[str] = frozenset()  # e.g. {"en", "de"}; empty: any
    forbidden_patterns: tuple[str, ...] = ()  # regular expressions the output must not match
    no_tool_calls: bool = False  # the model must not call tools on this route
    required_fields: tuple[str, ...] = ()  # top-level keys structured output must have


Ranking = Literal["order", "health", "latency", "cost"]
# How a route's primary tier (one model's deployments) shares its requests: see
# failover.policy.balance. The default, ``least_busy`` (the fewest requests in flight, the
# configured order among equals), was chosen by measurement (bench/balance.py); with every
# strategy a deployment at its client-side rate limit never holds a request while an
# equivalent has room.
Balance = Literal["order", "weighted", "least_busy", "p2c", "quota"]
# A request's max_tokens above a target's max_output_tokens: ``cap`` keeps the target eligible
# and sends it its max_output_tokens (a target giving the full amount is preferred within its
# tier); ``refuse`` leaves it out (a contract_failure when no target gives the full amount).
MaxTokensPolicy = Literal["cap", "refuse"]

# The default commit point of a stream: a short answer (about 100 tokens, or what arrives within
# 2 s of its first token) is held whole, so a stream that breaks early is recovered invisibly.
DEFAULT_HOLD_TOKENS = 100
DEFAULT_HOLD_SECONDS = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """A named route class.

    ``primary`` holds the primary target first and then its equivalents (same equivalence
    key: another region, deployment or capacity pool). ``fallbacks`` are other models,
    pre-approved for this route, used only when the envelope allows cross-model fallback.
    """

    name: str
    contract: Contract = Contract()
    primary: tuple[Target, ...] = ()
    fallbacks: tuple[Target, ...] = ()
    ranking: Ranking = "order"
    # The primary tier's balancer (policy.balance) and its weights (target name -> weight,
    # ``weighted`` only; 1 when not given); ``affinity``: requests with a prompt-cache key go to
    # the deployment it hashes to while that one has room and is not over its share.
    balance: Balance = "least_busy"
    weights: tuple[tuple[str, float], ...] = ()
    affinity: bool = True
    hedge_after: float | None = None  # seconds; race the next candidate if no answer by then
    # Newly approved fallbacks on probation: target name -> share of eligible failures that
    # may use it (e.g. 0.1). Fallbacks not listed are fully enabled.
    canary: tuple[tuple[str, float], ...] = ()
    # Seconds of the deadline a replay on one target must leave to the next eligible candidate.
    # None (automatic): that candidate's min_useful plus its expected latency from the health
    # board. 0: replays may use the whole deadline (the next tier may then never be called).
    fallback_reserve: float | None = None
    # Replay a target after it timed out? None: only with an explicit fallback_reserve; with the
    # automatic reserve, a timeout moves to the next eligible candidate at once.
    replay_timeouts: bool | None = None
    # The commit point of a stream: its output is held until this many tokens (estimated) or
    # seconds after its first content have arrived, or it ended. A failure before that is
    # recovered invisibly (replay, failover, fallback); after it, the stream ends as partial.
    # 0 tokens: the first content event commits (no hold).
    hold_tokens: int = DEFAULT_HOLD_TOKENS
    hold_seconds: float = DEFAULT_HOLD_SECONDS
    # max_tokens above a target's max_output_tokens (see MaxTokensPolicy); Envelope overrides
    max_tokens_policy: MaxTokensPolicy = "cap"

    @property
    def targets(self) -> tuple[Target, ...]:
        return self.primary + self.fallbacks


def _new_request_id() -> str:
    return new_id("req_")


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """Per-request bounds on recovery.

    ``budget`` is the end-to-end time in seconds, counted from the moment the router
    receives the request: routing, connecting, waiting, backoff and fallback all spend it.

    >>> Envelope(budget=8.0, max_attempts=4, allow_fallback=False)
    """

    request_id: str = field(default_factory=_new_request_id)
    budget: float = 30.0
    max_attempts: int = 6
    max_added_latency: float | None = None  # seconds of recovery on top of a clean call
    max_cost: float | None = None  # USD over all attempts, failed ones included
    allow_failover: bool = True  # equivalent targets
    allow_fallback: bool = True  # approved cross-model fallbacks
    allow_after_partial: bool = False
    side_effects: SideEffectMode = SideEffectMode.NONE
    required: frozenset[Capability] = frozenset()
    schema_version: str | None = None
    tenant: str | None = None
    task_id: str | None = None  # the agent task this request belongs to (tool-execution ledger)
    resumed_from: int | None = None  # the checkpoint version the task resumed from, if any
    # The caller's own retry of a request that already failed (an SDK's retry, a repeated
    # Idempotency-Key): every attempt is charged to the retry budget, none counts as new traffic.
    client_retry: bool = False
    # This request's commit point, in place of the route's (None: the route's hold_tokens /
    # hold_seconds); hold_tokens=0 shows every event as it comes.
    hold_tokens: int | None = None
    hold_seconds: float | None = None
    # This request's max_tokens_policy, in place of the route's (None: the route's).
    max_tokens_policy: MaxTokensPolicy | None = None
    # The prompt-cache affinity key the caller named: requests with the same key go to the same
    # one of equivalent deployments while it is healthy and not over its share, so the
    # provider's cache of their common prompt prefix is hit. A session or conversation id; the
    # gateway takes it from x-failover-session, else the body's prompt_cache_key, user or
    # metadata.user_id, prefixed with the tenant's name. None: the key is the request's own
    # cacheable prefix (its system prompt, tools and first message), when it is long enough.
    affinity_key: str | None = None
