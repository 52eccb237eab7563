"""The ``x-failover-*`` headers, both ways: the caller's envelope in, the RouteRecord summary out.

Shared by the gateway and the in-process SDK client (``failover.httpx_client``), so a header
means the same thing whichever way a request arrives. No HTTP server here: a header that does
not parse, or asks for more than the caller is allowed, raises :class:`WireError` (400,
``code="invalid_header"``, ``param`` = the header) naming the header and the fix; nothing is
silently clamped.

Request headers: ``x-failover-deadline-ms``, ``x-failover-max-attempts``, ``x-failover-max-cost``,
``x-failover-allow-fallback``, ``x-failover-side-effects``, ``x-failover-request-id``,
``x-failover-task-id``, ``x-failover-hold-tokens`` and ``x-failover-hold-ms`` (this stream's
commit point: output held until that many tokens or milliseconds; 0 tokens shows output as it
comes); ``x-failover-max-tokens-policy`` (``cap`` or ``refuse``: a max_tokens above a target's
max output, see ``Route.max_tokens_policy``); ``x-failover-live-reasoning`` (a stream's
reasoning as it comes, see :func:`live_reasoning`); ``x-failover-session`` (the prompt-cache
affinity key, see :func:`with_affinity`; never sent upstream). A request that says it is a
client's retry (the official SDKs' ``x-stainless-retry-count`` above 0, or an
``Idempotency-Key`` seen before) is marked ``Envelope.client_retry``: its attempts are charged
to the retry budget, not counted as new traffic.

Response headers (:func:`record_headers`): the RouteRecord's summary, and
``x-failover-max-tokens`` when the answer's attempt was sent less max_tokens than the request
asked for (capped to its target's max output).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from ..model import Completed, Dialect, Envelope, FailureKind, RouteRecord, SideEffectMode, Unavailable
from ._wire import WireError

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
# The most a caller may ask a stream's commit point to hold (x-failover-hold-tokens / -ms).
MAX_HOLD_TOKENS = 100_000
MAX_HOLD_MS = 600_000
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}
_MAX_TOKENS_POLICIES = {"cap", "refuse"}
# A number header is ASCII digits, nothing else: Python's int() and float() also read "1_000",
# " +5", "inf", "nan" and digits of other scripts (U+0660...). A cost may have one dot and an
# exponent, as str(float) writes a small one ("1e-05").
_DIGITS = re.compile(r"[0-9]{1,18}")
_DECIMAL = re.compile(r"(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?")


def shown(raw: str, limit: int = 40) -> str:
    """A header value as the client sent it, for an error message: the server reads header
    bytes as latin-1, so UTF-8 text is read back as UTF-8 (other bytes stay as read), then
    cut to ``limit`` characters and quoted (``repr``: control characters escaped)."""
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):  # already text, or not UTF-8
        text = raw
    return repr(text[:limit])


def _bad(header: str, problem: str, fix: str) -> WireError:
    return WireError(400, f"header {header}: {problem}. Fix: {fix}", code="invalid_header", param=header)


def _identifier(headers: Mapping[str, str], name: str, fix: str) -> str | None:
    """An id header (request id, task id): one safe charset for both, since each ends up in logs and keys."""
    raw = headers.get(name)
    if raw is not None and not _REQUEST_ID.fullmatch(raw):
        raise _bad(name, "must be 1 to 128 characters of letters, digits and . _ : -", fix)
    return raw


def _int(headers: Mapping[str, str], name: str, low: int, high: int, unit: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not _DIGITS.fullmatch(text):
        raise _bad(name, f"{shown(raw)} is not an integer", f"send a whole number of {unit} from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise _bad(name, f"{value} is outside {low}..{high}", f"send a whole number of {unit} from {low} to {high}")
    return value


def client_retry(headers: Mapping[str, str], replayed: Callable[[str], bool] | None = None) -> bool:
    """Is this request a client's retry? ``x-stainless-retry-count`` > 0 (the openai and anthropic
    SDKs count their retries there), or an ``Idempotency-Key`` that ``replayed`` has seen before.
    A malformed count is not our header to refuse: it is read as no retry."""
    raw = headers.get("x-stainless-retry-count")
    if raw is not None:
        try:
            if int(raw.strip()) > 0:
                return True
        except ValueError:
            pass
    key = headers.get("idempotency-key")
    return key is not None and key != "" and replayed is not None and replayed(key)


def envelope_with_headers(
    base: Envelope,
    headers: Mapping[str, str],
    *,
    max_deadline_ms: int,
    max_attempts_limit: int,
    replayed: Callable[[str], bool] | None = None,
) -> Envelope:
    """``base`` changed by the caller's ``x-failover-*`` headers; ``headers`` must be case-insensitive.

    ``max_deadline_ms`` / ``max_attempts_limit`` cap what a header may ask for; ``replayed``
    says whether an ``Idempotency-Key`` was seen before (see :func:`client_retry`).
    """
    changes: dict[str, Any] = {}
    if client_retry(headers, replayed):
        changes["client_retry"] = True
    deadline_ms = _int(headers, "x-failover-deadline-ms", 1, max_deadline_ms, "milliseconds")
    if deadline_ms is not None:
        changes["budget"] = deadline_ms / 1000.0
    attempts = _int(headers, "x-failover-max-attempts", 1, max_attempts_limit, "attempts")
    if attempts is not None:
        changes["max_attempts"] = attempts
    raw = headers.get("x-failover-max-cost")
    if raw is not None:
        text = raw.strip()
        max_cost = float(text) if _DECIMAL.fullmatch(text) else math.nan
        if not math.isfinite(max_cost) or max_cost <= 0:
            raise _bad(
                "x-failover-max-cost",
                f"{shown(raw)} is not a positive number",
                "send USD as a decimal number, e.g. 0.05",
            )
        changes["max_cost"] = max_cost
    raw = headers.get("x-failover-allow-fallback")
    if raw is not None:
        v = raw.strip().lower()
        if v not in _TRUE | _FALSE:
            raise _bad("x-failover-allow-fallback", f"{shown(raw)} is not a boolean", "send true or false")
        changes["allow_fallback"] = v in _TRUE
    raw = headers.get("x-failover-side-effects")
    if raw is not None:
        try:
            changes["side_effects"] = SideEffectMode(raw.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in SideEffectMode)
            raise _bad(
                "x-failover-side-effects", f"{shown(raw)} is not a side-effect mode", f"send one of {choices}"
            ) from None
    raw = headers.get("x-failover-max-tokens-policy")
    if raw is not None:
        v = raw.strip().lower()
        if v not in _MAX_TOKENS_POLICIES:
            raise _bad(
                "x-failover-max-tokens-policy",
                f"{shown(raw)} is not a max_tokens policy",
                "send cap (a target with a smaller max output is sent its max) or refuse (it is left out)",
            )
        changes["max_tokens_policy"] = v
    hold_tokens = _int(headers, "x-failover-hold-tokens", 0, MAX_HOLD_TOKENS, "tokens (0: show output as it comes)")
    if hold_tokens is not None:
        changes["hold_tokens"] = hold_tokens
    hold_ms = _int(headers, "x-failover-hold-ms", 0, MAX_HOLD_MS, "milliseconds (0: no hold by time)")
    if hold_ms is not None:
        changes["hold_seconds"] = hold_ms / 1000.0
    request_id = _identifier(
        headers, "x-failover-request-id", "send a simple identifier, or leave it out to get one generated"
    )
    if request_id is not None:
        changes["request_id"] = request_id
    task_id = _identifier(
        headers, "x-failover-task-id", "send the agent task's id (the ledger's operation id), e.g. task-9"
    )
    if task_id is not None:
        changes["task_id"] = task_id
    return dataclasses.replace(base, **changes) if changes else base


def live_reasoning(headers: Mapping[str, str]) -> bool:
    """``x-failover-live-reasoning: true``: pass a stream's reasoning on as it comes
    (``Router.stream(live_reasoning=True)``), so the first reasoning delta is the commit point.
    By default reasoning waits with the attempt's other events until the answer begins, so a
    failure while the model thinks is still retried or failed over. A plain request ignores it."""
    raw = headers.get("x-failover-live-reasoning")
    if raw is None:
        return False
    v = raw.strip().lower()
    if v not in _TRUE | _FALSE:
        raise _bad("x-failover-live-reasoning", f"{shown(raw)} is not a boolean", "send true or false")
    return v in _TRUE


SESSION_HEADER = "x-failover-session"
# The longest affinity key a caller may name (x-failover-session).
MAX_SESSION_CHARS = 256
# The body fields that name a conversation or an end user, first that is present wins: OpenAI's
# prompt cache key (Chat Completions and Responses), its older ``user``; Anthropic's
# ``metadata.user_id`` below.
_SESSION_FIELDS = ("prompt_cache_key", "user")


def with_affinity(envelope: Envelope, headers: Mapping[str, str], request: object) -> Envelope:
    """``envelope`` with its ``affinity_key``: the ``x-failover-session`` header, else the body's
    ``prompt_cache_key``, ``user`` or (Anthropic) ``metadata.user_id`` as ``request`` passes them
    through; unchanged when none is present. With a tenant the key is prefixed with the tenant's
    name, so one tenant cannot steer another's placement.

    The header must be 1 to 256 printable characters (a 400 otherwise). A body field is the
    provider's own, which takes longer values: one over 256 characters or not printable is
    used by its digest instead of refused."""
    key = _session_header(headers)
    if key is None:
        key = _session_field(getattr(request, "passthrough", None))
    if key is None:
        return envelope
    if envelope.tenant is not None:
        key = f"{quote(envelope.tenant, safe='')}:{key}"
    return dataclasses.replace(envelope, affinity_key=key)


def _session_header(headers: Mapping[str, str]) -> str | None:
    raw = headers.get(SESSION_HEADER)
    if raw is None:
        return None
    try:  # the server reads header bytes as latin-1: UTF-8 text is read back as UTF-8
        text = raw.encode("latin-1").decode("utf-8").strip()
    except (UnicodeEncodeError, UnicodeDecodeError):
        text = raw.strip()
    if not text or len(text) > MAX_SESSION_CHARS or not text.isprintable():
        raise _bad(
            SESSION_HEADER,
            f"{shown(raw)} is not 1 to {MAX_SESSION_CHARS} printable characters",
            "send a short id of the conversation or session (e.g. its UUID), or leave the header out",
        )
    return text


def _session_field(passthrough: Any) -> str | None:
    fields = getattr(passthrough, "fields", None)
    if not fields:
        return None
    for name in _SESSION_FIELDS:
        value = fields.get(name)
        if isinstance(value, str) and value:
            return _usable(value)
    metadata = fields.get("metadata") if passthrough.dialect == Dialect.ANTHROPIC else None
    value = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    return _usable(value) if isinstance(value, str) and value else None


def _usable(value: str) -> str:
    if len(value) <= MAX_SESSION_CHARS and value.isprintable():
        return value
    return "sha256-" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# The longest wait a client is ever told (seconds): an open breaker's next probe is at most 5 s
# away; a provider's own Retry-After (a quota's hour) is passed on up to this, and a client that
# comes back sooner is answered at once while the hold lasts, without an upstream request.
MAX_RETRY_AFTER = 30


def retry_headers(exc: Unavailable) -> dict[str, str]:
    """What a server tells the client of a failure about retrying it.

    One layer owns retries: the router already retried, failed over and fell back within the
    deadline, so every client is told not to retry (``x-should-retry: false``, which the
    official SDKs obey even at their default ``max_retries``); ``x-failover-retryable`` says
    whether asking again later can succeed. ``Retry-After`` is sent only when a retry later
    really can succeed: the provider's own hint, or the end of a hold (an open breaker, a
    cool-down) that turned the candidates away. Never on a spent deadline: the time was the
    caller's, and coming back sooner or later changes nothing the router knows of.

    ``Retry-After`` is whole seconds, rounded up (a provider's wait is not cut short): the
    router says an open breaker's next probe in whole seconds already from one second on
    (rounded down), so the header is never later than that probe then. Under a second it is 1,
    never 0: Codex reads whole seconds only and retries a 0 at once, in a burst that the open
    breaker turns away dozens of times. Both are capped at :data:`MAX_RETRY_AFTER` seconds.
    ``retry-after-ms``, which the official SDKs read first, has the exact wait."""
    headers = {"x-should-retry": "false", "x-failover-retryable": "true" if exc.retryable else "false"}
    if exc.retry_after_ms is not None and exc.retryable and exc.reason is not FailureKind.DEADLINE_EXHAUSTED:
        ms = min(exc.retry_after_ms, MAX_RETRY_AFTER * 1000)
        headers["retry-after"] = str(max(1, math.ceil(ms / 1000)))
        headers["retry-after-ms"] = str(ms)
    return headers


def answered_by(record: RouteRecord | None, route: str) -> str:
    """The ``model`` an answer names: the upstream model that answered (``record.model_used``),
    so that usage and cost tools reading ``response.model`` bill the model actually used; the
    route the caller named only when no model answered (a degraded answer). The route stays in
    ``x-failover-route`` and ``RouteRecord.route``."""
    if record is not None and record.model_used:
        return record.model_used
    return route


def streamed_by(first: object, shown: str | None, route: str) -> str:
    """The ``model`` a stream names, known once its first event was yielded: ``shown``, the
    model of the attempt whose output the caller is shown (``RouteStream.model``), or, when the
    first event already ends the stream (a :class:`~failover.model.Completed`), the model its
    record says answered. The route only when no model answered (a degraded answer). Nothing
    is sent before the first event, so no event of the stream names another model."""
    if isinstance(first, Completed):
        return answered_by(first.response.record, route)
    return shown or route


def record_headers(request_id: str, record: RouteRecord | None) -> dict[str, str]:
    """The ``x-failover-*`` summary of a RouteRecord (``x-request-id`` too, which the SDKs read)."""
    h = {"x-failover-request-id": request_id, "x-request-id": request_id}
    if record is not None:
        h["x-failover-route"] = record.route
        h["x-failover-target"] = record.target_used or ""
        h["x-failover-attempts"] = str(len(record.attempts))
        h["x-failover-recovered"] = "true" if record.recovered else "false"
        h["x-failover-degraded"] = "true" if record.degraded else "false"
        h["x-failover-added-latency-ms"] = str(round(record.added_latency_ms))
        h["x-failover-workflow"] = record.workflow.value
        capped = capped_to(record)
        if capped is not None:
            h["x-failover-max-tokens"] = str(capped)
    return h


def capped_to(record: RouteRecord) -> int | None:
    """The max_tokens the answering attempt was sent when it was capped below the request's
    (``Attempt.max_tokens_capped_to``); None when it was sent the request's, or nothing answered."""
    used = next((a for a in reversed(record.attempts) if a.ok), None)
    return used.max_tokens_capped_to if used is not None else None


__all__ = [
    "answered_by",
    "client_retry",
    "envelope_with_headers",
    "live_reasoning",
    "record_headers",
    "retry_headers",
    "streamed_by",
    "with_affinity",
]
