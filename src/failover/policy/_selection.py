"""Candidate selection: the hard contract filter first, then health, then ranking.

A candidate that fails the contract is never called, however healthy or cheap: ranking
only orders candidates that already passed every hard constraint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..model import (
    Capability,
    Dialect,
    Envelope,
    Exclusion,
    ExclusionCode,
    FailureKind,
    Phase,
    Request,
    Route,
    Target,
    usd,
)
from ._balance import Placement
from ._health import HealthBoard
from ._windows import WindowBoard, window_of
from .breakers import BreakerBoard, NoBreakers


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    target: Target
    phase: Phase


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    candidates: tuple[Candidate, ...]
    excluded: tuple[Exclusion, ...]
    required: frozenset[Capability]
    # the exclusions that are only for now (a cool-down, an open breaker): until when, and why
    holds: tuple[Hold, ...] = ()
    # how the balancer ordered the primary tier (None: one candidate, or no balancer asked)
    placement: Placement | None = None


@dataclass(frozen=True, slots=True)
class Violation:
    """Why a candidate is left out (it cannot serve the request, or cannot be sent it now): the
    code decisions read, and the reason a person does."""

    code: ExclusionCode
    reason: str


@dataclass(frozen=True, slots=True)
class Hold:
    """A candidate left out for now: it may be called again at loop time ``until``.

    ``kind`` is what keeps it away: ``rate_limited`` for a cool-down, and for an open breaker
    the failure kind that opened it (the provider's server error when unknown)."""

    target: str
    until: float
    kind: FailureKind
    reason: str = ""  # as recorded in the exclusion: "circuit open for 12.3s more (10/10 failed)"


def required_capabilities(route: Route, request: Request, envelope: Envelope) -> frozenset[Capability]:
    """The route's contract, the envelope's extra needs, and what the request itself uses."""
    need = frozenset(route.contract.capabilities)  # no copy when it is one already
    if envelope.required:
        need = need.union(envelope.required)
    if request.tools:
        need = need.union((Capability.TOOLS,))
    if request.wants_json_schema:
        need = need.union((Capability.STRUCTURED_OUTPUT,))
    if request.has_images:
        need = need.union((Capability.VISION,))
    return need


def caps_max_tokens(route: Route, envelope: Envelope) -> bool:
    """Whether a max_tokens above a target's max output is capped for this request (the
    envelope's ``max_tokens_policy``, else the route's), rather than the target refused."""
    return (envelope.max_tokens_policy or route.max_tokens_policy) == "cap"


def max_tokens_for(target: Target, max_tokens: int | None, cap: bool) -> int | None:
    """The max_tokens ``target`` is sent: the request's, or with ``cap`` at most its
    ``max_output_tokens``."""
    if cap and max_tokens is not None and max_tokens > target.max_output_tokens:
        return target.max_output_tokens
    return max_tokens


def contract_violation(
    target: Target,
    route: Route,
    required: frozenset[Capability],
    input_tokens: int,
    max_tokens: int | None,
    windows: WindowBoard | None = None,
    *,
    cap: bool = False,
) -> str | None:
    """Why ``target`` cannot serve this request under the route's contract, or None (the
    reason of :func:`contract_check`)."""
    v = contract_check(target, route, required, input_tokens, max_tokens, windows, cap=cap)
    return None if v is None else v.reason


def contract_check(
    target: Target,
    route: Route,
    required: frozenset[Capability],
    input_tokens: int,
    max_tokens: int | None,
    windows: WindowBoard | None = None,
    *,
    cap: bool = False,
) -> Violation | None:
    """Why ``target`` cannot serve this request under the route's contract, or None.

    Its window is the declared one, else the one its provider stated (``windows``); an unknown
    window turns nothing away (the provider's own answer will say). With ``cap``, a max_tokens
    above the target's max output is no reason (it is sent its max output, and the window
    must hold that); without, it is."""
    max_tokens = max_tokens_for(target, max_tokens, cap)
    X = ExclusionCode
    if not required <= target.capabilities:
        missing = ", ".join(sorted(c.value for c in required - target.capabilities))
        return Violation(X.CAPABILITY, "missing capability: " + missing)
    c = route.contract
    window = window_of(target, windows)
    if c.min_context and window is not None and window < c.min_context:
        return Violation(
            X.MIN_CONTEXT, f"context window {window}{_learned(target, window)} < contract minimum {c.min_context}"
        )
    if not target.fits(input_tokens, max_tokens, window):
        return Violation(
            X.CONTEXT_WINDOW,
            f"input ~{input_tokens} + max_tokens {max_tokens or 0} tokens exceeds "
            f"context window {window}{_learned(target, window)}",
        )
    if max_tokens is not None and max_tokens > target.max_output_tokens:
        return Violation(X.MAX_OUTPUT, f"max_tokens {max_tokens} exceeds max output {target.max_output_tokens}")
    if c.regions and target.region not in c.regions:
        allowed = ", ".join(sorted(c.regions))
        return Violation(X.DATA_BOUNDARY, f"region {target.region or 'unknown'} not in allowed regions {allowed}")
    if not c.retention <= target.retention:
        return Violation(X.DATA_BOUNDARY, "data retention lacks " + ", ".join(sorted(c.retention - target.retention)))
    if c.safety_profile and c.safety_profile not in target.safety_profiles:
        return Violation(X.CONTRACT, f"safety profile {c.safety_profile} not offered")
    if c.languages and target.languages and not c.languages <= target.languages:
        return Violation(X.CONTRACT, "languages not supported: " + ", ".join(sorted(c.languages - target.languages)))
    return None


def hosted_violation(target: Target, request: Request) -> Violation | None:
    """Why ``target`` cannot take the request's hosted tools (web_search...) or the calls of
    freeform tools in its history, or None: only the OpenAI Responses dialect passes them on; any
    other would answer without them (or read a freeform call as something it is not)."""
    if target.dialect is Dialect.OPENAI_RESPONSES:
        return None
    if request.freeform_calls:
        return Violation(
            ExclusionCode.DIALECT,
            f"custom_tool_call items (calls of freeform tools) need an {Dialect.OPENAI_RESPONSES.value} target, not "
            f"{target.dialect.value}: their free-form input has no function-call form that round-trips exactly",
        )
    if not request.hosted_tools:
        return None
    kinds = ", ".join(sorted({str(t.get("type")) for t in request.hosted_tools}))
    return Violation(
        ExclusionCode.DIALECT,
        f"hosted tools ({kinds}) need an {Dialect.OPENAI_RESPONSES.value} target, not {target.dialect.value}",
    )


def _learned(target: Target, window: int | None) -> str:
    """How the window in an exclusion is known, when it is not the declared one."""
    return (
        " (stated by its provider in an overflow error)" if window is not None and target.context_window is None else ""
    )


def embedding_violation(
    target: Target,
    route: Route,
    reference: Target,
    dimensions: int | None,
    largest_input: int,
    windows: WindowBoard | None = None,
) -> str | None:
    """Why ``target`` cannot embed for ``route``, or None (the reason of :func:`embedding_check`)."""
    v = embedding_check(target, route, reference, dimensions, largest_input, windows)
    return None if v is None else v.reason


def embedding_check(
    target: Target,
    route: Route,
    reference: Target,
    dimensions: int | None,
    largest_input: int,
    windows: WindowBoard | None = None,
) -> Violation | None:
    """Why ``target`` cannot embed for ``route``, or None.

    Vectors are only comparable with those of the same model at the same size, so the only
    candidates are equivalents of ``reference`` (the route's first primary: what the caller's
    stored vectors came from) giving vectors of its size: ``dimensions`` when the request
    names one, else each target's own ``dimensions``. A cross-model fallback is never one.
    The route's contract still applies (regions, retention, safety, languages, minimum
    window), and each input must fit the target's window on its own."""
    differs = ExclusionCode.EMBEDDING_MODEL_DIFFERS
    if target not in route.primary:
        return Violation(
            differs,
            f"embedding_model_differs: {target.key} is a cross-model fallback; its vectors are not "
            f"comparable with {reference.key}'s",
        )
    if target.key != reference.key:
        return Violation(
            differs, f"embedding_model_differs: {target.key} is not {reference.key}; their vectors are not comparable"
        )
    want = dimensions if dimensions is not None else reference.dimensions
    got = dimensions if dimensions is not None else target.dimensions
    if got != want:
        return Violation(
            ExclusionCode.DIMENSIONS_DIFFER,
            f"dimensions_differ: {target.name} gives vectors of {got or 'the model default'} dimensions, "
            f"{reference.name} of {want or 'the model default'}",
        )
    v = contract_check(target, route, frozenset(), largest_input, None, windows)
    if v is not None and v.code is ExclusionCode.CONTEXT_WINDOW:
        window = window_of(target, windows)
        return Violation(
            v.code, f"an input of ~{largest_input} tokens exceeds context window {window}{_learned(target, window)}"
        )
    return v


def plan(
    route: Route,
    request: Request,
    envelope: Envelope,
    *,
    input_tokens: Callable[[Target], int],
    health: HealthBoard,
    now: float,
    breakers: BreakerBoard | NoBreakers | None = None,
    violation: Callable[[Target], Violation | None] | None = None,
    windows: WindowBoard | None = None,
    balanced: Callable[[list[Target]], tuple[list[Target], Placement | None]] | None = None,
) -> Plan:
    """Order the route's targets into candidates, with a reason for every one left out.

    ``balanced`` orders the primary tier's eligible targets (the route's balancer, see
    :mod:`~failover.policy._balance`) in place of its ``ranking``. ``violation`` replaces the
    contract filter (:func:`contract_check`) for requests of another kind: embeddings
    (:func:`embedding_check`). ``windows``: the windows providers
    stated for targets that declare none (a target whose window is known and too small for the
    request is left out; one whose window is unknown is kept)."""
    required = required_capabilities(route, request, envelope)
    cap = caps_max_tokens(route, envelope)
    # hosted tools, or calls of freeform tools, turn away every dialect but one: asked once, not per target
    hosted = violation is None and (bool(request.hosted_tools) or request.freeform_calls)
    excluded: list[Exclusion] = []
    holds: list[Hold] = []
    candidates: list[Candidate] = []
    placement: Placement | None = None

    def admit(targets: Iterable[Target], tier: Phase) -> None:
        kept: list[Target] = []
        for t in targets:
            if violation is None:
                why = contract_check(t, route, required, input_tokens(t), request.max_tokens, windows, cap=cap)
                if why is None and hosted:
                    why = hosted_violation(t, request)
            else:
                why = violation(t)
            if why is None and request.passthrough is not None:  # a field only its own dialect can honour
                text = request.passthrough.ineligible(t.dialect, takes=t.passthrough)
                why = None if text is None else Violation(ExclusionCode.PASSTHROUGH, text)
            if why is None and tier is Phase.FALLBACK and not envelope.allow_fallback:
                why = Violation(ExclusionCode.FALLBACK_NOT_ALLOWED, "cross-model fallback not allowed by the envelope")
            if why is None and envelope.max_cost is not None:
                est = t.price.cost(input_tokens(t), max_tokens_for(t, request.max_tokens, cap) or 0)
                if est > envelope.max_cost:
                    why = Violation(
                        ExclusionCode.MAX_COST, f"estimated cost {usd(est)} exceeds max_cost {usd(envelope.max_cost)}"
                    )
            held = None
            if why is None and (health.cooling(t, now) is not None or (breakers and breakers.rejection(t, now))):
                held = hold_of(t, now, health, breakers)  # the rare case: build the hold only then
                if held is not None:
                    why = Violation(ExclusionCode.HELD, held.reason)
                    holds.append(held)
            if why is not None:
                excluded.append(
                    Exclusion(target=t.name, phase=tier, code=why.code, reason=why.reason, temporary=held is not None)
                )
            else:
                kept.append(t)
        if balanced is not None and tier is not Phase.FALLBACK and len(kept) > 1:
            nonlocal placement
            ranked, placement = balanced(kept)
        else:
            ranked = _rank(kept, route, health, input_tokens, lambda t: max_tokens_for(t, request.max_tokens, cap) or 0)
        if cap and request.max_tokens is not None and len(ranked) > 1:
            # a target that gives the full max_tokens before one that would be capped, within
            # the tier (a stable sort: the ranking holds among each)
            want = request.max_tokens
            ranked = sorted(ranked, key=lambda t: t.max_output_tokens < want)
        if tier is Phase.FALLBACK:
            candidates.extend(Candidate(target=t, phase=tier) for t in ranked)
            return
        # The first choice of the primary tier is the primary attempt, unless the configured
        # primary itself was left out: then whatever serves instead is already a failover.
        lead_ok = bool(kept) and kept[0] is route.primary[0]  # kept keeps route.primary's order
        for i, t in enumerate(ranked):
            phase = Phase.PRIMARY if i == 0 and lead_ok else Phase.FAILOVER
            if phase is Phase.FAILOVER and not envelope.allow_failover:
                excluded.append(
                    Exclusion(
                        target=t.name,
                        phase=phase,
                        code=ExclusionCode.FAILOVER_NOT_ALLOWED,
                        reason="equivalent failover not allowed by the envelope",
                    )
                )
                continue
            candidates.append(Candidate(target=t, phase=phase))

    admit(route.primary, Phase.PRIMARY)
    if route.fallbacks:
        admit(route.fallbacks, Phase.FALLBACK)
    return Plan(
        candidates=tuple(candidates),
        excluded=tuple(excluded),
        required=required,
        holds=tuple(holds),
        placement=placement,
    )


def hold_of(target: Target, now: float, health: HealthBoard, breakers: BreakerBoard | NoBreakers | None) -> Hold | None:
    """What keeps ``target`` away for now, the longer of: its key's cool-down after a 429, and an
    open (or full half-open) breaker."""
    held: Hold | None = None
    cooling = health.cooling(target, now)
    if cooling is not None:
        seconds, why = cooling
        held = Hold(
            target.name, now + seconds, FailureKind.RATE_LIMITED, f"cooling down after {why} for another {seconds:.1f}s"
        )
    if breakers is None:
        return held
    reason = breakers.rejection(target, now)
    if reason is None:
        return held
    h = breakers.hold(target, now)
    wait = h.wait if h is not None else 0.0
    if held is not None and held.until >= now + wait:
        return held
    kind = (h.kind if h is not None else None) or FailureKind.PROVIDER_SERVER_ERROR
    return Hold(target.name, now + wait, kind, reason)


def _rank(
    targets: list[Target],
    route: Route,
    health: HealthBoard,
    tokens: Callable[[Target], int],
    max_tokens: Callable[[Target], int],
) -> list[Target]:
    if route.ranking == "order" or len(targets) < 2:
        return targets
    if route.ranking == "cost":
        return sorted(targets, key=lambda t: t.price.cost(tokens(t), max_tokens(t)))
    if route.ranking == "latency":
        return sorted(targets, key=lambda t: (health.of(t).latency is None, health.of(t).latency or 0.0))
    return sorted(targets, key=lambda t: -health.of(t).success)
