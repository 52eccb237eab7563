"""The Envelope of one gateway request: config defaults, then the caller's ``x-failover-*`` headers.

A header that does not parse, or asks for more than the gateway allows, is a 400 naming the
header and the fix; nothing is silently clamped.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping

from ..model import Envelope, SideEffectMode
from ._errors import ApiError
from ._settings import EnvelopeDefaults

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _bad(header: str, problem: str, fix: str) -> ApiError:
    return ApiError(400, f"header {header}: {problem}. Fix: {fix}", code="invalid_header", param=header)


def _int(headers: Mapping[str, str], name: str, low: int, high: int, unit: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise _bad(
            name, f"{raw[:40]!r} is not an integer", f"send a whole number of {unit} from {low} to {high}"
        ) from None
    if not low <= value <= high:
        raise _bad(name, f"{value} is outside {low}..{high}", f"send a whole number of {unit} from {low} to {high}")
    return value


def envelope_from(headers: Mapping[str, str], defaults: EnvelopeDefaults, *, tenant: str | None) -> Envelope:
    """Build the Envelope; ``headers`` must be case-insensitive (Starlette's are)."""
    d = defaults
    deadline_ms = _int(headers, "x-failover-deadline-ms", 1, d.max_deadline_ms, "milliseconds")
    attempts = _int(headers, "x-failover-max-attempts", 1, d.max_attempts_limit, "attempts")
    max_cost = d.max_cost
    raw = headers.get("x-failover-max-cost")
    if raw is not None:
        try:
            max_cost = float(raw.strip())
        except ValueError:
            max_cost = math.nan
        if not math.isfinite(max_cost) or max_cost <= 0:
            raise _bad("x-failover-max-cost", f"{raw[:40]!r} is not a positive number", "send USD, e.g. 0.05")
    allow_fallback = d.allow_fallback
    raw = headers.get("x-failover-allow-fallback")
    if raw is not None:
        v = raw.strip().lower()
        if v in _TRUE:
            allow_fallback = True
        elif v in _FALSE:
            allow_fallback = False
        else:
            raise _bad("x-failover-allow-fallback", f"{raw[:40]!r} is not a boolean", "send true or false")
    side_effects = d.side_effects
    raw = headers.get("x-failover-side-effects")
    if raw is not None:
        try:
            side_effects = SideEffectMode(raw.strip().lower())
        except ValueError:
            choices = ", ".join(m.value for m in SideEffectMode)
            raise _bad(
                "x-failover-side-effects", f"{raw[:40]!r} is not a side-effect mode", f"send one of {choices}"
            ) from None
    raw = headers.get("x-failover-request-id")
    request_id: str | None = None
    if raw is not None:
        if not _REQUEST_ID.fullmatch(raw):
            raise _bad(
                "x-failover-request-id",
                "must be 1 to 128 characters of letters, digits and . _ : -",
                "send a simple identifier, or leave it out to get one generated",
            )
        request_id = raw
    added = d.max_added_latency_ms
    env = Envelope(
        budget=(deadline_ms if deadline_ms is not None else d.deadline_ms) / 1000.0,
        max_attempts=attempts if attempts is not None else d.max_attempts,
        max_cost=max_cost,
        max_added_latency=None if added is None else added / 1000.0,
        allow_failover=d.allow_failover,
        allow_fallback=allow_fallback,
        side_effects=side_effects,
        tenant=tenant,
    )
    return env if request_id is None else dataclasses.replace(env, request_id=request_id)
