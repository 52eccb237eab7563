"""The events a Router reports to its telemetry hooks.

Every event is a frozen, slotted, keyword-only dataclass of plain values. ``at`` is the event
loop's clock (``loop.time()``, seconds; virtual under looptime), the same clock the RouteRecord
measures from, so events of one request can be placed on one time line.

This module is the redaction boundary: events carry names, numbers and labels, never a header,
an API key, a prompt, a completion or a provider's raw error body. A hook that ships events
elsewhere cannot leak what was never put in them.

    RequestStarted
      AttemptStarted -> AttemptEnded       one pair per attempt (a cancelled attempt ends too)
      Backoff                              a wait between attempts (backoff, retry_after, rate_limit)
      ...
    RequestEnded                           from the final RouteRecord, success or not

    BreakerChanged                         a circuit breaker changed state (not tied to one request)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestStarted:
    request_id: str
    route: str
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStarted:
    """An attempt is about to be sent (admitted by its breaker and rate limiter).

    ``index`` is the position the attempt will most likely take in ``record.attempts``: the
    same as its AttemptEnded's, except when hedged attempts overlap and end out of order.
    No two attempts of one request on the same ``(target, phase)`` are ever in flight at once.
    """

    request_id: str
    route: str
    target: str
    model: str
    phase: str  # a Phase value: primary, failover, fallback, repair
    index: int
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptEnded:
    """An attempt ended: built from its :class:`~failover.Attempt` in the RouteRecord."""

    request_id: str
    route: str
    target: str
    model: str
    provider: str  # the target's dialect: openai, anthropic, gemini
    phase: str
    index: int  # the attempt's position in record.attempts
    outcome: str  # "ok", a Failure label ("rate_limited", "timeout:total"), or "cancelled"
    failure: str | None  # the FailureKind value; None when ok or cancelled
    status: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float
    duration: float  # seconds
    stop_reason: str | None  # a StopReason value, when a response came back
    provider_request_id: str | None
    at: float
    first_chunk: float | None = None  # streaming calls: seconds from sending to the first chunk
    cached_input_tokens: int | None = None  # prompt-cache reads, part of input_tokens (None: no usage)


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """The request waited without talking to any provider; emitted when the wait is over.

    ``at`` is when the wait began, ``seconds`` how long it lasted.
    """

    request_id: str
    target: str
    seconds: float
    reason: str  # "backoff", "retry_after" or "rate_limit" (a client-side limiter)
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestEnded:
    """The request is over; the values are the final RouteRecord's.

    ``outcome`` is "ok", "degraded", a FailureKind value, or "cancelled" / "error" when the
    call was cancelled or raised before a RouteRecord existed.
    """

    request_id: str
    route: str
    outcome: str
    workflow: str  # a Workflow value
    recovered: bool
    degraded: bool
    target_used: str | None
    attempts: int
    elapsed_ms: float
    total_cost: float
    at: float
    tenant: str | None = None  # the envelope's tenant, for per-tenant cost and counts
    # primary, retry, failover, fallback, repair, degraded or none (telemetry._instruments.answered)
    answered_by: str = "none"
    first_chunk: float | None = None  # over a streaming call: seconds from the request start to its first chunk
    recovery_kind: str | None = None  # the record's: the FailureKind value, or "held", behind a recovery


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerChanged:
    """A circuit breaker moved from ``old`` to ``new`` (closed, open, half_open).

    ``scope`` is the breaker's scope (base URL | credential reference | model [| region]: the
    name of where a key comes from, never the key); ``layer`` is "target" or "key_model".
    Emitted by the call that made the change, whichever request it belonged to.
    """

    scope: str
    layer: str
    old: str
    new: str
    reason: str  # "5/10 failed", "probe failed", "open period of 30s elapsed", ...
    at: float


Event = RequestStarted | AttemptStarted | AttemptEnded | Backoff | RequestEnded | BreakerChanged
