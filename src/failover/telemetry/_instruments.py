"""What failover measures, and under which names: one definition for Prometheus and OpenTelemetry.

Where the OpenTelemetry GenAI semantic conventions define a metric, failover reports it under
that name, unit, attribute set and bucket boundaries; an attempt is one GenAI client operation.
What they do not cover (how a request was answered, recoveries, deadlines, limiter waits, the
cost of attempts that did not answer) has failover's own ``failover.*`` names. The Prometheus
name of each is derived from its OpenTelemetry name by the OpenTelemetry -> Prometheus rules
(dots become underscores, the unit ``s`` appends ``_seconds``, a unit in braces is dropped, a
counter gets ``_total``), so a Prometheus scrape of the gateway and an OpenTelemetry pipeline
exported to Prometheus give the same series:

    OpenTelemetry name (unit)                     Prometheus family
    gen_ai.client.operation.duration (s)          gen_ai_client_operation_duration_seconds
    gen_ai.client.operation.time_to_first_chunk   gen_ai_client_operation_time_to_first_chunk_seconds
    gen_ai.client.token.usage ({token})           gen_ai_client_token_usage
    failover.request.duration (s)                 failover_request_duration_seconds
    failover.request.time_to_first_chunk (s)      failover_request_time_to_first_chunk_seconds
    failover.limiter.wait (s)                     failover_limiter_wait_seconds
    failover.attempts (counter)                   failover_attempts_total
    failover.recoveries                           failover_recoveries_total
    failover.deadline_exhausted                   failover_deadline_exhausted_total
    failover.no_eligible_candidate                failover_no_eligible_candidate_total
    failover.cost.usd                             failover_cost_usd_total
    failover.failed_attempt.cost.usd              failover_failed_attempt_cost_usd_total
    failover.input_tokens ({token})               failover_input_tokens_total
    failover.cached_input_tokens ({token})        failover_cached_input_tokens_total

The two token counters count, per route and target, the input tokens every attempt's provider
reported (the answer's and failed attempts' alike) and the part of them it read from its prompt
cache, so their ratio is the cache-hit ratio of a route on a target. They are failover's own
rather than more ``gen_ai.token.type`` values on the GenAI token histogram: the conventions
define only ``input`` and ``output`` there, the histogram has no route, and a cached count
beside ``input`` would count the cached tokens twice in any sum over the types.

Attributes failover adds to a GenAI metric are namespaced (``failover.target``, label
``failover_target``); failover's own metrics, namespaced by their names, use plain attribute
names that are also their Prometheus labels. Every value is bounded by the configuration
(routes, targets, models, tenants) or by a closed set (outcomes, failure kinds, workflows).

:class:`Measures` is what both exporters implement; :func:`feed` turns the Router's events
into its calls (the hooks) and :func:`feed_record` a finished RouteRecord (the gateway, which
reads the record rather than paying for events on its hot path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..model import Attempt, Phase, RouteRecord
from ._events import AttemptEnded, Backoff, Event, RequestEnded

# The GenAI conventions' boundaries for durations (seconds; doubling from 10 ms) and token counts.
GENAI_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
GENAI_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
# Attempts and requests run minutes when a route allows long generations: two more doublings
# (to 5.5 min) on top of the conventions' boundaries, which stay a subset, so series from other
# GenAI instrumentations still line up bucket for bucket below 82 s.
LONG_SECONDS = (*GENAI_SECONDS, 163.84, 327.68)

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
FAILOVER_TARGET = "failover.target"

# gen_ai.provider.name's well-known values by dialect: an OpenAI-compatible server is "openai",
# as the dialect is all failover knows of it.
PROVIDERS = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}
OPERATION = "chat"  # every failover call is a chat completion / message (gen_ai.operation.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Instrument:
    """One metric: its OpenTelemetry definition, from which the Prometheus one follows."""

    name: str
    kind: Literal["counter", "histogram"]
    unit: str  # UCUM: "s", or an annotation in braces such as "{token}"
    description: str
    attributes: tuple[str, ...]
    buckets: tuple[float, ...] = ()

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(a.replace(".", "_") for a in self.attributes)

    @property
    def prometheus_name(self) -> str:
        """The name as prometheus_client takes it (it adds a counter's ``_total`` itself)."""
        base = self.name.replace(".", "_")
        if self.unit == "s":
            return base if base.endswith("_seconds") else f"{base}_seconds"
        if not (self.unit.startswith("{") and self.unit.endswith("}")):
            raise ValueError(f"{self.name}: unit {self.unit!r} has no Prometheus mapping here")
        return base

    @property
    def exposed_name(self) -> str:
        """The family name in the exposition: ``_total`` on counters; a histogram's series add
        ``_bucket``, ``_sum`` and ``_count``."""
        return f"{self.prometheus_name}_total" if self.kind == "counter" else self.prometheus_name


_GENAI = (GEN_AI_OPERATION_NAME, GEN_AI_PROVIDER_NAME, GEN_AI_REQUEST_MODEL)

OPERATION_DURATION = Instrument(
    name="gen_ai.client.operation.duration",
    kind="histogram",
    unit="s",
    description="GenAI operation duration: one attempt against one target",
    attributes=(*_GENAI, ERROR_TYPE, FAILOVER_TARGET),
    buckets=LONG_SECONDS,
)
TIME_TO_FIRST_CHUNK = Instrument(
    name="gen_ai.client.operation.time_to_first_chunk",
    kind="histogram",
    unit="s",
    description="Time from sending a streaming call to its first chunk",
    attributes=(*_GENAI, FAILOVER_TARGET),
    buckets=GENAI_SECONDS,
)
TOKEN_USAGE = Instrument(
    name="gen_ai.client.token.usage",
    kind="histogram",
    unit="{token}",
    description="Input and output tokens per attempt, as the provider reported them",
    attributes=(*_GENAI, GEN_AI_TOKEN_TYPE, FAILOVER_TARGET),
    buckets=GENAI_TOKENS,
)
REQUEST_DURATION = Instrument(
    name="failover.request.duration",
    kind="histogram",
    unit="s",
    description="End-to-end request latency, recovery included, by route, workflow, what answered and outcome",
    attributes=("route", "workflow", "answered_by", "outcome"),
    buckets=LONG_SECONDS,
)
REQUEST_TIME_TO_FIRST_CHUNK = Instrument(
    name="failover.request.time_to_first_chunk",
    kind="histogram",
    unit="s",
    description="Time from a request's start to the first chunk of the stream that answered it, recovery included",
    attributes=("route",),
    buckets=GENAI_SECONDS,
)
LIMITER_WAIT = Instrument(
    name="failover.limiter.wait",
    kind="histogram",
    unit="s",
    description="Waits for room in the client-side rate limiter, by target",
    attributes=("target",),
    buckets=GENAI_SECONDS,
)
ATTEMPTS = Instrument(
    name="failover.attempts",
    kind="counter",
    unit="{attempt}",
    description="Attempts against targets, by target and outcome",
    attributes=("target", "outcome"),
)
RECOVERIES = Instrument(
    name="failover.recoveries",
    kind="counter",
    unit="{request}",
    description="Requests answered after an earlier attempt failed or an earlier candidate was held away, "
    "by route, workflow and reason",
    attributes=("route", "workflow", "reason"),
)
DEADLINE_EXHAUSTED = Instrument(
    name="failover.deadline_exhausted",
    kind="counter",
    unit="{request}",
    description="Requests that ran out of their deadline",
    attributes=("route",),
)
NO_ELIGIBLE_CANDIDATE = Instrument(
    name="failover.no_eligible_candidate",
    kind="counter",
    unit="{request}",
    description="Requests refused before any attempt: no candidate could meet the contract",
    attributes=("route",),
)
COST = Instrument(
    name="failover.cost.usd",
    kind="counter",
    unit="{USD}",
    description="USD spent, failed attempts included",
    attributes=("route", "tenant"),
)
FAILED_ATTEMPT_COST = Instrument(
    name="failover.failed_attempt.cost.usd",
    kind="counter",
    unit="{USD}",
    description="USD spent on attempts that did not answer (failed, cut, or a lost hedge)",
    attributes=("route", "target"),
)

INPUT_TOKENS = Instrument(
    name="failover.input_tokens",
    kind="counter",
    unit="{token}",
    description="Input tokens the providers reported, cached ones included, by route and target "
    "(every attempt that reported usage, failed ones too)",
    attributes=("route", "target"),
)
CACHED_INPUT_TOKENS = Instrument(
    name="failover.cached_input_tokens",
    kind="counter",
    unit="{token}",
    description="Input tokens the providers read from their prompt cache (part of failover_input_tokens), "
    "by route and target",
    attributes=("route", "target"),
)

INSTRUMENTS = (
    OPERATION_DURATION,
    TIME_TO_FIRST_CHUNK,
    TOKEN_USAGE,
    REQUEST_DURATION,
    REQUEST_TIME_TO_FIRST_CHUNK,
    LIMITER_WAIT,
    ATTEMPTS,
    RECOVERIES,
    DEADLINE_EXHAUSTED,
    NO_ELIGIBLE_CANDIDATE,
    COST,
    FAILED_ATTEMPT_COST,
    INPUT_TOKENS,
    CACHED_INPUT_TOKENS,
)


def provider_name(dialect: str) -> str:
    """gen_ai.provider.name of a dialect."""
    return PROVIDERS.get(dialect, dialect)


def error_type(outcome: str, failure: str | None) -> str:
    """error.type of an attempt: its FailureKind value, ``cancelled``, or "" when it answered
    (the attribute is then absent; an empty Prometheus label is the same as none)."""
    if failure is not None:
        return failure
    return "" if outcome == "ok" else outcome


_FIRST_TRY = {Phase.PRIMARY: "primary", Phase.FAILOVER: "failover", Phase.FALLBACK: "fallback", Phase.REPAIR: "repair"}


def answered(record: RouteRecord) -> tuple[str, float | None]:
    """What answered the request, and when its first chunk came (seconds from the request's
    start; None unless the answer came over a streaming call).

    ``answered_by`` is ``primary`` (the primary's first attempt), ``retry`` (the primary after a
    replay), ``failover`` (an equivalent target), ``fallback`` (a cross-model fallback),
    ``repair`` (the corrective call after a repairable failure), ``degraded`` (the route's
    degrade handler) or ``none`` (nothing answered)."""
    if record.degraded:
        return "degraded", None
    used = record.target_used
    if used is None:
        return "none", None
    attempts = record.attempts
    first: Attempt | None = None
    answer: Attempt | None = None
    if len(attempts) == 1:  # the common case: one attempt, and it answered
        first = answer = attempts[0]
    else:
        for a in attempts:
            if a.target == used:
                first = first or a
                if a.ok:
                    answer = a
    if first is None or answer is None:
        return "none", None
    at = answer.first_event  # set on streaming calls only (a whole JSON body to one is its one chunk)
    if answer.phase is Phase.REPAIR:
        return "repair", at
    if first.phase is Phase.PRIMARY:
        return ("primary" if answer is first else "retry"), at
    return _FIRST_TRY[first.phase], at


class Measures(Protocol):
    """What an exporter records; :func:`feed` and :func:`feed_record` call it."""

    def attempt(
        self,
        route: str,
        target: str,
        model: str,
        provider: str | None,
        outcome: str,
        failure: str | None,
        seconds: float,
        first_chunk: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
        cached_input_tokens: int | None,
        cost: float,
    ) -> None:
        """One attempt ended. ``provider`` is the target's dialect (None: the exporter knows it).
        The token counts are None when the provider reported no usage; ``cached_input_tokens``
        is part of ``input_tokens``."""

    def limiter_wait(self, target: str, seconds: float) -> None:
        """The request waited for the client-side rate limiter."""

    def request(
        self,
        route: str,
        workflow: str,
        answered_by: str,
        outcome: str,
        seconds: float,
        first_chunk: float | None,
        recovery: str | None,
        attempts: int,
        cost: float,
        tenant: str | None,
    ) -> None:
        """One request ended; ``recovery`` is the record's recovery kind when it recovered."""


def feed(measures: Measures, event: Event) -> None:
    """Record what one of the Router's events measures (a hook's side)."""
    if isinstance(event, AttemptEnded):
        measures.attempt(
            event.route,
            event.target,
            event.model,
            event.provider,
            event.outcome,
            event.failure,
            event.duration,
            event.first_chunk,
            event.input_tokens,
            event.output_tokens,
            event.cached_input_tokens,
            event.cost,
        )
    elif isinstance(event, Backoff):
        if event.reason == "rate_limit":
            measures.limiter_wait(event.target, event.seconds)
    elif isinstance(event, RequestEnded):
        measures.request(
            event.route,
            event.workflow,
            event.answered_by,
            event.outcome,
            event.elapsed_ms / 1000.0,
            event.first_chunk,
            event.recovery_kind if event.recovered else None,
            event.attempts,
            event.total_cost,
            event.tenant,
        )


def feed_record(measures: Measures, record: RouteRecord, *, route: str, tenant: str | None) -> None:
    """Record what a finished request's RouteRecord measures (the gateway's side): the same
    calls its events would have made. ``route`` is the label to count it under."""
    for a in record.attempts:
        usage = a.usage
        measures.attempt(
            route,
            a.target,
            a.model,
            None,
            a.outcome,
            a.failure.kind.value if a.failure is not None else None,
            a.end - a.start,
            a.first_event - a.start if a.first_event is not None else None,
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
            usage.cached_input_tokens if usage is not None else None,
            a.cost,
        )
    for w in record.waits:
        if w.reason == "rate_limit":
            measures.limiter_wait(w.target, w.end - w.start)
    by, first_chunk = answered(record)
    measures.request(
        route,
        record.workflow.value,
        by,
        record.outcome,
        record.elapsed_ms / 1000.0,
        first_chunk,
        record.recovery_kind if record.recovered else None,
        len(record.attempts),
        record.total_cost,
        tenant,
    )
