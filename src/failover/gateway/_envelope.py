"""The Envelope of one gateway request: config defaults, then the caller's ``x-failover-*`` headers.

A header that does not parse, or asks for more than the gateway allows, is a 400 naming the
header and the fix; nothing is silently clamped. The headers are read by
:func:`failover.inbound._headers.envelope_with_headers`, which the in-process SDK client
(``failover.httpx_client``) shares, so a header means the same thing either way.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from ..inbound import WireError
from ..inbound._headers import envelope_with_headers, live_reasoning
from ..model import Envelope
from ._errors import ApiError
from ._settings import EnvelopeDefaults


class RecentKeys:
    """The ``Idempotency-Key`` values each tenant sent in the last ``ttl`` seconds.

    A key seen again is a client's retry of the same request: the gateway charges it to the
    retry budget instead of counting it as new traffic. Bounded: at most ``max_keys`` entries
    (the oldest leave first), each a 16-byte digest of tenant and key, so a flood of long or
    unique keys costs a fixed amount of memory. Per process: with several workers, a retry that
    lands on another worker is not recognised (the SDKs' own ``x-stainless-retry-count`` is).
    """

    def __init__(self, ttl: float = 600.0, max_keys: int = 100_000) -> None:
        self.ttl = ttl
        self.max_keys = max_keys
        self._seen: OrderedDict[bytes, float] = OrderedDict()

    def replayed(self, tenant: str | None, key: str) -> bool:
        now = time.monotonic()
        seen = self._seen
        while seen and (len(seen) >= self.max_keys or next(iter(seen.values())) <= now - self.ttl):
            seen.popitem(last=False)
        digest = hashlib.blake2b(f"{tenant or '-'}\0{key}".encode(errors="replace"), digest_size=16).digest()
        again = digest in seen
        seen[digest] = now
        seen.move_to_end(digest)
        return again

    def checker(self, tenant: str | None) -> Callable[[str], bool]:
        return lambda key: self.replayed(tenant, key)

    def __len__(self) -> int:
        return len(self._seen)


def envelope_from(
    headers: Mapping[str, str],
    defaults: EnvelopeDefaults,
    *,
    tenant: str | None,
    recent: RecentKeys | None = None,
) -> Envelope:
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
            base,
            headers,
            max_deadline_ms=d.max_deadline_ms,
            max_attempts_limit=d.max_attempts_limit,
            replayed=None if recent is None else recent.checker(tenant),
        )
    except WireError as err:
        raise ApiError(err.status, err.message, type=err.type, code=err.code, param=err.param) from None


def live_reasoning_from(headers: Mapping[str, str]) -> bool:
    """``x-failover-live-reasoning`` (see :func:`failover.inbound._headers.live_reasoning`); a
    value that is not a boolean is a 400 naming the header."""
    try:
        return live_reasoning(headers)
    except WireError as err:
        raise ApiError(err.status, err.message, type=err.type, code=err.code, param=err.param) from None
