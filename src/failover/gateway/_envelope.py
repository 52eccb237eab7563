"""The Envelope of one gateway request: config defaults, then the caller's ``x-failover-*`` headers.

A header that does not parse, or asks for more than the gateway allows, is a 400 naming the
header and the fix; nothing is silently clamped. The headers are read by
:func:`failover.inbound._headers.envelope_with_headers`, which the in-process SDK client
(``failover.httpx_client``) shares, so a header means the same thing either way.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..inbound import WireError
from ..inbound._headers import envelope_with_headers
from ..model import Envelope
from ._errors import ApiError
from ._settings import EnvelopeDefaults


def envelope_from(headers: Mapping[str, str], defaults: EnvelopeDefaults, *, tenant: str | None) -> Envelope:
    """Build the Envelope; ``headers`` must be case-insensitive (Starlette's are)."""
    d = defaults
    added = d.max_added_latency_ms
    base = Envelope(
        budget=d.deadline_ms / 1000.0,
        max_attempts=d.max_attempts,
        max_cost=d.max_cost,
        max_added_latency=None if added is None else added / 1000.0,
        allow_failover=d.allow_failover,
        allow_fallback=d.allow_fallback,
        side_effects=d.side_effects,
        tenant=tenant,
    )
    try:
        return envelope_with_headers(
            base, headers, max_deadline_ms=d.max_deadline_ms, max_attempts_limit=d.max_attempts_limit
        )
    except WireError as err:
        raise ApiError(err.status, err.message, type=err.type, code=err.code, param=err.param) from None
