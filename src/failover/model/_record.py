"""What a request produced: each call's Response or Failure, and the RouteRecord of all of them.

These types refer to one another: a Response carries the RouteRecord of its request, whose
Attempts carry their Failures, and a Failure keeps the 200 Response it rejected (a truncation,
a refusal). Split across modules they would import each other, so they share this one; the
parts that refer to nothing here live below it (``_failure``: the kinds and what each allows;
``_usage``: usage and rate-limit headers).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ._failure import DISPOSITIONS, SPARED, Disposition, FailureKind, HealthEffect, TimeoutPhase
from ._reasoning import Reasoning
from ._request import Message, ToolCall
from ._usage import RateLimitInfo, Usage


class StopReason(enum.StrEnum):
    END_TURN = "end_turn"  # openai "stop", anthropic "end_turn", gemini "STOP"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"  # openai "tool_calls"
    MAX_TOKENS = "max_tokens"  # openai "length", gemini "MAX_TOKENS"
    CONTENT_FILTER = "content_filter"  # openai "content_filter", gemini SAFETY & co
    REFUSAL = "refusal"  # anthropic "refusal", openai message.refusal
    OTHER = "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """What a provider answered, normalized.

    ``parsed`` holds the decoded JSON for structured output. ``record`` is attached by the
    router: the RouteRecord of the request that produced this response.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[Reasoning, ...] = ()  # what the model thought first, in order (see Reasoning)
    # output items of hosted tools (web_search_call...), verbatim, from a Responses-dialect target
    hosted_items: tuple[Mapping[str, Any], ...] = ()
    parsed: Any = None
    usage: Usage = Usage()  # noqa: RUF009 - a frozen dataclass, shared safely
    stop_reason: StopReason = StopReason.END_TURN
    raw_stop_reason: str | None = None
    refusal: str | None = None
    model: str | None = None
    provider_request_id: str | None = None
    response_id: str | None = None
    rate_limits: RateLimitInfo | None = None  # what the provider's rate-limit headers said
    record: RouteRecord | None = None

    @property
    def reasoning_text(self) -> str:
        """The readable reasoning of every block, joined (empty when the model sent none)."""
        return "".join(r.text for r in self.reasoning)

    def message(self) -> Message:
        """This answer as the assistant turn of the next request's history (with its reasoning,
        which a provider needs back in a tool loop, and which failover only sends to a target
        that can read it)."""
        return Message.assistant(self.text, tool_calls=self.tool_calls, reasoning=self.reasoning)

    @property
    def degraded(self) -> bool:
        """True for a non-model fallback answer (see ``record.degraded_reason``)."""
        return self.record is not None and self.record.degraded


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """One classified outcome that is not an acceptable answer.

    ``retry_after`` is the provider's requested wait in seconds (from ``retry-after-ms``,
    ``retry-after`` or Gemini ``RetryInfo``); ``should_retry`` is ``x-should-retry`` when
    present. ``response`` keeps a 200 body that is still a failure (truncation, refusal),
    so its usage is paid for and reported. ``detail`` is the raw provider text, trimmed.

    A context overflow may say the provider's own numbers: ``window_limit`` is the maximum it
    stated for the model (its context window), ``window_used`` what it counted for this request;
    ``window_includes_output`` says whether that count includes the completion the request
    asked for (``max_tokens``), as in "you requested 5000 tokens (4000 in the messages, 1000 in
    the completion)", or is the input alone ("prompt is too long: 210000 tokens"). None when
    the message does not say (a wording failover does not know gives None, never a guess).

    ``quality_gate`` marks the route's quality gate refusing an answer that met the contract, or
    failing to judge it (a judge that timed out or raised): another model may do better, so the
    router moves on to the next candidate instead of stopping.

    ``checks`` names the route's contract checks a result failed (``failover.validation.Check``
    values; empty for any other failure): what a repair reads. ``provider_code`` says the same
    for a reader (``validation:<check>+<check>``), and nothing decides on it.

    ``not_target`` says why a failure whose kind would count against the target's health is
    not the target's doing (None: its kind decides): ``"slow_reader"``, the caller's
    backpressure held the stream back when its timer cut it (:data:`SLOW_READER`), or
    ``"cannot_embed"``, an embeddings call answered by a model that does not embed
    (:data:`CANNOT_EMBED`). Its :attr:`disposition` then has no health effect: no breaker and
    no health score counts it, while its kind still decides what the router does next.
    """

    kind: FailureKind
    message: str
    status: int | None = None
    phase: TimeoutPhase | None = None
    provider_code: str | None = None
    retry_after: float | None = None
    should_retry: bool | None = None
    provider_request_id: str | None = None
    rate_limits: RateLimitInfo | None = None
    usage: Usage | None = None
    response: Response | None = field(default=None, repr=False)
    detail: str | None = field(default=None, repr=False)
    window_limit: int | None = None
    window_used: int | None = None
    window_includes_output: bool = False
    quality_gate: bool = False
    checks: tuple[str, ...] = ()
    not_target: str | None = None

    @property
    def disposition(self) -> Disposition:
        found = DISPOSITIONS[self.kind]
        if self.not_target is not None and found.health is not HealthEffect.NONE:
            return SPARED[self.kind]
        return found

    @property
    def label(self) -> str:
        """``timeout:first_event`` for timeouts, the kind otherwise."""
        return f"{self.kind}:{self.phase}" if self.phase else str(self.kind)


class Phase(enum.StrEnum):
    PRIMARY = "primary"  # the primary target, and replays on it
    FAILOVER = "failover"  # an equivalent target (same model contract)
    FALLBACK = "fallback"  # an approved cross-model fallback
    REPAIR = "repair"  # a corrective call after a repairable failure


class Workflow(enum.StrEnum):
    DIRECT = "direct"  # the first attempt succeeded
    RETRY_FAILOVER = "retry_failover"  # workflow 1: replay and equivalent failover
    FALLBACK = "fallback"  # workflow 2: controlled cross-model fallback
    STOP = "stop"  # workflow 3: stop, reconcile or escalate


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One try against one target. Times are loop seconds relative to the request start."""

    index: int
    target: str
    model: str
    phase: Phase
    start: float
    end: float
    connect_timeout: float
    total_timeout: float
    outcome: str  # "ok", a Failure label such as "rate_limited", "timeout:total", or "cancelled"
    failure: Failure | None = None
    status: int | None = None
    usage: Usage | None = None
    cost: float = 0.0
    cost_estimated: bool = False  # no usage came back: input cost assumed spent
    provider_request_id: str | None = None
    first_event_timeout: float | None = None  # streamed attempts: the time-to-first-event cap
    idle_timeout: float | None = None  # streamed attempts: the cap between events
    first_event: float | None = None  # streamed attempts: when the first event arrived
    # streamed attempts held at the commit point: when their output was committed to the caller
    # (None: it never was, or the hold was off and the first content event committed it)
    committed: float | None = None
    connected: float | None = None  # when the connection was up (None: the transport cannot tell)
    hedge: bool = False  # started as a hedge while an earlier attempt was still running
    streamed: bool = False  # the exchange with the provider was a stream (the caller's or failover's choice)
    contract_ok: bool | None = None  # the result parsed and met the contract (None: no result)
    # reasoning blocks of the history left out of this attempt: another provider's or another
    # model's, which this target cannot read (see failover.model.Reasoning)
    reasoning_stripped: int = 0
    # the client's hints this target went without (a Request.passthrough for another dialect:
    # "cache_control", "metadata", "anthropic-beta", ...): they change cost, not the answer
    passthrough_dropped: tuple[str, ...] = ()
    task_ok: bool | None = None  # the route's quality gate passed (None: no gate or no result)
    # The max_tokens this attempt sent when it was less than the request's: the target's
    # max_output_tokens under the route's max_tokens_policy "cap" (None: sent as asked)
    max_tokens_capped_to: int | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def duration(self) -> float:
        return self.end - self.start


_CONNECTED: ContextVar[list[float] | None] = ContextVar("failover_attempt_connected", default=None)


def watch_connect() -> list[float]:
    """Collect the connect time of the attempt about to run in this task (the router's side)."""
    marks: list[float] = []
    _CONNECTED.set(marks)
    return marks


def mark_connected(at: float) -> None:
    """A transport reports that the current attempt's connection is up at loop time ``at``.

    Why a context variable: it adds no parameter to the Transport protocol, and transports
    that cannot tell simply never call it (``Attempt.connected`` stays None)."""
    marks = _CONNECTED.get()
    if marks is not None and not marks:
        marks.append(at)


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Time spent not talking to any provider: a backoff or a Retry-After wait."""

    target: str
    start: float
    end: float
    reason: str  # "backoff", "retry_after"


class ExclusionCode(enum.StrEnum):
    """Why a candidate was left out, as a closed set: what the router and any reader of the record
    decide on (``Exclusion.reason`` is the same told for a person, and its wording may change)."""

    # the route's contract or the request's shape: this candidate can never serve this request
    CAPABILITY = "capability"  # a capability the request needs (tools, vision, structured output...)
    MIN_CONTEXT = "min_context"  # a context window below the contract's min_context
    CONTEXT_WINDOW = "context_window"  # a window too small for this request (input + max_tokens)
    MAX_OUTPUT = "max_output"  # max_tokens above the target's max output (max_tokens_policy "refuse")
    DATA_BOUNDARY = "data_boundary"  # outside the contract's regions, or lacking its data retention
    CONTRACT = "contract"  # another contract term: a safety profile, languages
    DIALECT = "dialect"  # hosted tools or freeform tool calls only the OpenAI Responses dialect carries
    PASSTHROUGH = "passthrough"  # pass-through fields only another dialect (or a taking target) honours
    EMBEDDING_MODEL_DIFFERS = "embedding_model_differs"  # another embedding model: vectors not comparable
    DIMENSIONS_DIFFER = "dimensions_differ"  # embedding vectors of another size
    EMBEDDINGS_UNSUPPORTED = "embeddings_unsupported"  # the target's dialect has no embeddings endpoint
    # the envelope
    FAILOVER_NOT_ALLOWED = "failover_not_allowed"  # allow_failover is off
    FALLBACK_NOT_ALLOWED = "fallback_not_allowed"  # allow_fallback is off
    MAX_COST = "max_cost"  # its estimated cost would pass max_cost
    MAX_ADDED_LATENCY = "max_added_latency"  # its wait would pass max_added_latency
    MAX_ATTEMPTS = "max_attempts"  # the last of max_attempts is kept for the next candidate
    # time
    SHORT_OF_TIME = "short_of_time"  # less of the deadline left than an attempt needs
    RESERVE = "reserve"  # a replay would eat the time kept back for the next candidate
    # only for now (temporary)
    HELD = "held"  # an open breaker or a key's cool-down after a 429
    RATE_LIMITED = "rate_limited"  # the client-side rate limiter has no room in time
    RETRY_BUDGET = "retry_budget"  # the retry budget of the target's upstream is spent
    # recovery
    CANARY = "canary"  # a fallback's canary share did not draw this request
    NO_REPLAY = "no_replay"  # not tried again: x-should-retry false, a client's own retry, a
    # backoff longer than one target is waited on, a Retry-After longer than the next candidate needs,
    # or a timeout (a slow failure) that moves on at once
    NO_REPAIR = "no_repair"  # a repairable failure, and the request's one repair is used
    NO_HEDGE = "no_hedge"  # the hedge could not start (the envelope or the deadline): the lead goes on alone


@dataclass(frozen=True, slots=True, kw_only=True)
class Exclusion:
    """A candidate that was not called, or not called again, and why.

    ``code`` is the reason as a closed set (:class:`ExclusionCode`), ``reason`` the same for a
    person. ``replay`` marks an exclusion recorded after the candidate's own attempts: why it was
    not tried again (a replay or the repair); without it the candidate received no request."""

    target: str
    phase: Phase
    code: ExclusionCode
    reason: str  # e.g. "missing capability: vision", "retry-after 56s exceeds 3.2s left"
    # Left out only for now (an open breaker, a cool-down, the limiter, the retry budget): passing
    # over such a candidate is a recovery; a contract, window or envelope reason is not.
    temporary: bool = False
    replay: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """Three levels of success, recorded separately. None: not checked."""

    transport: bool = False
    contract: bool | None = None
    task: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteRecord:
    request_id: str
    route: str
    workflow: Workflow
    outcome: str  # "ok" or the terminal FailureKind
    attempts: tuple[Attempt, ...]
    waits: tuple[Wait, ...]
    excluded: tuple[Exclusion, ...]
    recovered: bool
    recovery_reason: str | None
    target_used: str | None
    elapsed_ms: float
    added_latency_ms: float
    total_cost: float
    degraded: bool = False
    degraded_reason: str | None = None
    validation: Validation = Validation()
    input_tokens_estimated: int | None = None
    retry_budget_exhausted: bool = False
    uncertain_operation: str | None = None  # the side-effecting tool call that blocked a replay
    # Why the request needed a recovery, as a closed set for metrics: the FailureKind value of
    # the failure recovery_reason names, or "held" when a candidate listed earlier was held away
    # for now (an open breaker, a cool-down, the limiter, a spent retry budget). None: no recovery.
    recovery_kind: str | None = None
    # The upstream model that answered: the ``model`` of the target_used attempt (its Target's
    # ``model``), which the gateway and the SDK drop-in show as a response's ``model``; ``route``
    # is the name the caller asked for. None when no target answered (a failure, a degraded answer).
    model_used: str | None = None
    # How the route's balancer chose among the primary tier's deployments ("p2c: east (lower
    # latency x load of two)", "order: west (spill: east is at its client-side rate limit)");
    # None when one deployment could serve or the route has one.
    placement: str | None = None

    def attempts_in(self, phase: Phase) -> tuple[Attempt, ...]:
        return tuple(a for a in self.attempts if a.phase is phase)

    @property
    def failures(self) -> tuple[FailureKind, ...]:
        return tuple(a.failure.kind for a in self.attempts if a.failure is not None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (raw provider detail and bodies left out)."""
        out = _plain(self)
        assert isinstance(out, dict)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Failure):
        out = {
            "kind": str(value.kind),
            "phase": str(value.phase) if value.phase else None,
            "message": value.message,
            "status": value.status,
            "provider_code": value.provider_code,
            "retry_after": value.retry_after,
            "provider_request_id": value.provider_request_id,
        }
        if value.kind is FailureKind.CONTEXT_OVERFLOW:  # the provider's own numbers (None: not said)
            out["window_limit"] = value.window_limit
            out["window_used"] = value.window_used
            out["window_includes_output"] = value.window_includes_output
        if value.quality_gate:  # refused (or left unjudged) by the route's quality gate
            out["quality_gate"] = True
        if value.not_target is not None:  # not the target's doing: no breaker counted it
            out["not_target"] = value.not_target
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list | frozenset | set):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value
