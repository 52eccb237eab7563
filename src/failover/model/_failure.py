"""Failures: every provider outcome that is not an acceptable answer, in one closed set.

Each kind has exactly one disposition, which says what the router may do next and whether
the failure says anything about the target's health.

====================  ==========  ======  =============================================
kind                  action      health  why
====================  ==========  ======  =============================================
transport_transient   replay      yes     the request may never have arrived
rate_limited          replay      key     wait for Retry-After; scoped to key + model
quota_exhausted       next        key     money, not flow: this key will not recover soon
provider_overloaded   replay      yes     provider capacity; longer backoff, fallback
provider_server_error replay      yes     5xx
timeout               replay      yes     connect / first_event / idle / total
auth_or_permission    next        yes     this credential cannot call this model
model_not_found       next        yes     wrong or retired model name on this target
invalid_request       stop        no      the request is at fault; resending costs again
context_overflow      next        no      only a target with a larger window may help
content_filtered      stop        no      policy; never retried or routed around
truncated             repair      no      raise max_tokens once (a new paid call)
tool_call_malformed   repair      no      send the parse error back once
schema_invalid        repair      no      send the validation error back once
deadline_exhausted    stop        no      no time left
contract_failure      stop        no      no candidate can meet the contract
partial_output        stop        no      output reached the caller; never spliced
side_effect_uncertain stop        no      a side effect may have happened
====================  ==========  ======  =============================================

A failure that is not the target's doing although its kind would count (``Failure.not_target``)
keeps its kind's action and has no health effect:

* ``slow_reader``: a streamed attempt cut by its timer (or its connection dropped) while the
  caller's backpressure held it back: the time was the caller's, not the provider's;
* ``cannot_embed``: an embeddings call answered by a model that does not embed (404
  ``model_not_found``, or a 2xx that is not an embeddings answer): it says what the request
  asked of this target, not how the target serves the requests it can answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum


class FailureKind(StrEnum):
    TRANSPORT_TRANSIENT = "transport_transient"
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    PROVIDER_OVERLOADED = "provider_overloaded"
    PROVIDER_SERVER_ERROR = "provider_server_error"
    TIMEOUT = "timeout"
    AUTHENTICATION_OR_PERMISSION = "authentication_or_permission"
    MODEL_NOT_FOUND = "model_not_found"
    INVALID_REQUEST = "invalid_request"
    CONTEXT_OVERFLOW = "context_overflow"
    CONTENT_FILTERED = "content_filtered"
    TRUNCATED = "truncated"
    TOOL_CALL_MALFORMED = "tool_call_malformed"
    SCHEMA_INVALID = "schema_invalid"
    DEADLINE_EXHAUSTED = "deadline_exhausted"
    CONTRACT_FAILURE = "contract_failure"
    PARTIAL_OUTPUT = "partial_output"
    SIDE_EFFECT_UNCERTAIN = "side_effect_uncertain"


class TimeoutPhase(StrEnum):
    CONNECT = "connect"
    FIRST_EVENT = "first_event"
    IDLE = "idle"
    TOTAL = "total"


class Action(StrEnum):
    REPLAY = "replay"  # the same request may succeed: back off and retry, then fail over
    REPAIR = "repair"  # one corrective call (send the error back, raise max_tokens)
    NEXT = "next"  # never replay on this target; another candidate may succeed
    STOP = "stop"  # nothing else may be tried


class HealthEffect(StrEnum):
    NONE = "none"  # the caller's fault or policy: says nothing about the provider
    TARGET = "target"  # counts against the target's whole scope
    KEY_MODEL = "key_model"  # counts only against the credential + model that got it


@dataclass(frozen=True, slots=True, kw_only=True)
class Disposition:
    action: Action
    health: HealthEffect
    retryable: bool  # may the caller succeed by asking again later?


_D = Disposition
DISPOSITIONS: Mapping[FailureKind, Disposition] = {
    FailureKind.TRANSPORT_TRANSIENT: _D(action=Action.REPLAY, health=HealthEffect.TARGET, retryable=True),
    FailureKind.RATE_LIMITED: _D(action=Action.REPLAY, health=HealthEffect.KEY_MODEL, retryable=True),
    FailureKind.QUOTA_EXHAUSTED: _D(action=Action.NEXT, health=HealthEffect.KEY_MODEL, retryable=False),
    FailureKind.PROVIDER_OVERLOADED: _D(action=Action.REPLAY, health=HealthEffect.TARGET, retryable=True),
    FailureKind.PROVIDER_SERVER_ERROR: _D(action=Action.REPLAY, health=HealthEffect.TARGET, retryable=True),
    FailureKind.TIMEOUT: _D(action=Action.REPLAY, health=HealthEffect.TARGET, retryable=True),
    FailureKind.AUTHENTICATION_OR_PERMISSION: _D(action=Action.NEXT, health=HealthEffect.TARGET, retryable=False),
    FailureKind.MODEL_NOT_FOUND: _D(action=Action.NEXT, health=HealthEffect.TARGET, retryable=False),
    FailureKind.INVALID_REQUEST: _D(action=Action.STOP, health=HealthEffect.NONE, retryable=False),
    FailureKind.CONTEXT_OVERFLOW: _D(action=Action.NEXT, health=HealthEffect.NONE, retryable=False),
    FailureKind.CONTENT_FILTERED: _D(action=Action.STOP, health=HealthEffect.NONE, retryable=False),
    FailureKind.TRUNCATED: _D(action=Action.REPAIR, health=HealthEffect.NONE, retryable=False),
    FailureKind.TOOL_CALL_MALFORMED: _D(action=Action.REPAIR, health=HealthEffect.NONE, retryable=True),
    FailureKind.SCHEMA_INVALID: _D(action=Action.REPAIR, health=HealthEffect.NONE, retryable=True),
    FailureKind.DEADLINE_EXHAUSTED: _D(action=Action.STOP, health=HealthEffect.NONE, retryable=True),
    FailureKind.CONTRACT_FAILURE: _D(action=Action.STOP, health=HealthEffect.NONE, retryable=False),
    FailureKind.PARTIAL_OUTPUT: _D(action=Action.STOP, health=HealthEffect.NONE, retryable=True),
    FailureKind.SIDE_EFFECT_UNCERTAIN: _D(action=Action.STOP, health=HealthEffect.NONE, retryable=False),
}


# Failure.not_target: why a failure is not the target's doing (see the module docstring)
SLOW_READER = "slow_reader"
CANNOT_EMBED = "cannot_embed"

# The dispositions of failures that are not the target's doing: the same action, no health effect.
SPARED: Mapping[FailureKind, Disposition] = {
    kind: replace(d, health=HealthEffect.NONE) for kind, d in DISPOSITIONS.items()
}


def disposition(kind: FailureKind) -> Disposition:
    return DISPOSITIONS[kind]
