"""The Envelope of one gateway request: config defaults, then the caller's ``x-failover-*`` headers.

A header that does not parse, or asks for more than the gateway allows, is a 400 naming the
header and the fix; nothing is silently clamped. The headers are read by
:func:`failover.inbound._headers.envelope_with_headers`, which the in-process SDK client
(``failover.httpx_client``) shares, so a header means the same thing either way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from ..inbound import envelope_with_headers
from ..model import Envelope
from ._settings import EnvelopeDefaults

# An answer with one of these statuses may be followed by the client's own retry of the same
# body: a failure the client may retry (5xx, 429, 408), or a client that gave up waiting (499).
_RETRIED_AFTER = frozenset({408, 429, 499})


# Headers that name the task or session a request belongs to. An agent that runs many tasks
# sends the same opening turn for each ("Buy one A-1", the same tools): bodies of different
# tasks or sessions are different requests however alike, never each other's retries.
# Claude Code 2.1 sends x-claude-code-session-id, Codex 0.171 session-id (captured); earlier
# Codex releases sent session_id and conversation_id.
_CALLER_HEADERS = (
    "x-failover-task-id",
    "x-failover-session",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "conversation_id",
)


def caller_of(headers: Mapping[str, str]) -> str:
    """Which task or session sent the request, from the headers that name one ("" if none)."""
    return "\0".join(headers.get(name, "") for name in _CALLER_HEADERS)


def unmarked(headers: Mapping[str, str]) -> bool:
    """Is the request judged by its body? Unless it brings its own ``Idempotency-Key`` (the
    client then says which requests are the same). ``x-stainless-retry-count: 0`` proves no
    first attempt: Claude Code retries in a loop of its own around an SDK client that never
    retries, and every one of its retries says 0."""
    return "idempotency-key" not in headers


class RecentRequests:
    """What each tenant asked for lately, so that a client's own retry is known for one.

    Two marks: an ``Idempotency-Key`` seen in the last ``key_ttl`` seconds, and, for a request
    with no key of its own (:func:`unmarked`), a body that the same tenant sent to the same
    endpoint, byte for byte, for the same task or session (:func:`caller_of`), and that failed
    after an upstream attempt (a 5xx, 429 or 408 answer, or a client that left before the
    answer) less than that request's deadline ago. Each such failure is matched by one retry:
    the first repeat after it is the retry, and a further identical body needs a further
    failure (many callers may send the same body; one failure is one caller's).
    The agent runtimes retry without a marker (no ``Idempotency-Key``; Codex sends no
    ``x-stainless-retry-count``, Claude Code sends 0 on every retry): a byte-identical body
    after a failure is their retry, and is charged to the retry budget like a marked one.
    Identical bodies sent side by side, after a success, or after an answer that made no
    upstream attempt (a hold: the client came back when told) are new requests.

    Bounded: at most ``max_entries`` of each (the oldest leave first), each a 16-byte digest of
    tenant, endpoint and key or body, so a flood of long or unique requests costs a fixed amount
    of memory. Per process: with several workers, a retry that lands on another worker is not
    recognised (the SDKs' own ``x-stainless-retry-count`` is).
    """

    def __init__(
        self, key_ttl: float = 600.0, max_entries: int = 100_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.key_ttl = key_ttl
        self.max_entries = max_entries
        self.clock = clock
        self._until: OrderedDict[bytes, float] = OrderedDict()  # digest -> when it is forgotten
        self._failures: dict[bytes, int] = {}  # body digest -> failures not yet matched by a retry
        # request id -> (digest, deadline, whether it is the retry of an earlier failure)
        self._running: OrderedDict[str, tuple[bytes, float, bool]] = OrderedDict()

    def _forget_old(self, now: float) -> None:
        until = self._until
        while until and (len(until) >= self.max_entries or next(iter(until.values())) <= now):
            self._failures.pop(until.popitem(last=False)[0], None)

    def _remember(self, digest: bytes, seconds: float, now: float) -> None:
        self._forget_old(now)
        until = self._until
        until[digest] = max(until.get(digest, 0.0), now + seconds)
        until.move_to_end(digest)

    def _known(self, digest: bytes, now: float) -> bool:
        return self._until.get(digest, 0.0) > now

    def replayed(self, tenant: str | None, key: str) -> bool:
        """Was ``key`` (an ``Idempotency-Key``) sent by ``tenant`` in the last ``key_ttl`` seconds?"""
        now = self.clock()
        digest = b"k" + hashlib.blake2b(f"{tenant or '-'}\0{key}".encode(errors="replace"), digest_size=16).digest()
        again = self._known(digest, now)
        self._remember(digest, self.key_ttl, now)
        return again

    @staticmethod
    def digest(tenant: str | None, path: str, body: bytes, caller: str = "") -> bytes:
        """The mark of one body: of ``tenant``, to ``path``, from ``caller`` (:func:`caller_of`)."""
        h = hashlib.blake2b(f"{tenant or '-'}\0{path}\0{caller}\0".encode(errors="replace"), digest_size=16)
        h.update(body)
        return b"b" + h.digest()

    def failed_before(self, digest: bytes) -> bool:
        """Did the same body fail for the same tenant less than its deadline ago, in a failure
        no earlier repeat was matched to? A True takes that failure: this repeat is its retry."""
        left = self._failures.get(digest, 0)
        if left <= 0 or not self._known(digest, self.clock()):
            return False
        if left == 1:
            del self._failures[digest]
        else:
            self._failures[digest] = left - 1
        return True

    def started(self, request_id: str, digest: bytes, deadline: float, *, retry: bool = False) -> None:
        """A request with this body is routed (``retry``: :meth:`failed_before` matched it to a
        failure); :meth:`ended` says how it ended."""
        running = self._running
        while len(running) >= self.max_entries:
            running.popitem(last=False)
        running[request_id] = (digest, deadline, retry)

    def ended(
        self, request_id: str | None, status: int, *, cut: bool = False, tried: bool = True, spent: bool = False
    ) -> None:
        """The request ended with ``status`` (``cut``: a stream that ended in an error event after
        its 200): a failure the client may retry is remembered for its deadline, so that the
        retry is known for one. Not one answered without an upstream attempt (``tried`` false:
        a hold or a limiter's refusal): a client that comes back when told to should not pay
        for it, so a retry answered that way gives back the failure it was matched to, and the
        client's next repeat is its retry again. Except a retry the retry budget refused
        (``spent``): its failure is used up. Given back, every identical body after it would
        be a retry in turn, none would deposit in the budget, and it would never refill: one
        load test's abandoned requests refused every identical request after them."""
        if request_id is None:
            return
        got = self._running.pop(request_id, None)
        if got is None:
            return
        digest, deadline, retry = got
        now = self.clock()
        if tried and (cut or status >= 500 or status in _RETRIED_AFTER):
            earlier = self._failures.get(digest, 0) if self._known(digest, now) else 0
            self._remember(digest, deadline, now)
            self._failures[digest] = earlier + 1
        elif retry and not tried and not spent and self._known(digest, now):
            self._failures[digest] = self._failures.get(digest, 0) + 1

    def checker(self, tenant: str | None) -> Callable[[str], bool]:
        return lambda key: self.replayed(tenant, key)

    def __len__(self) -> int:
        return len(self._until)


def envelope_from(
    headers: Mapping[str, str],
    defaults: EnvelopeDefaults,
    *,
    tenant: str | None,
    recent: RecentRequests | None = None,
    repeat: bool = False,
) -> Envelope:
    """Build the Envelope; ``headers`` must be case-insensitive (Starlette's are). A request
    is a client's retry when it says so (``x-stainless-retry-count``), when ``recent`` has seen
    its ``Idempotency-Key``, or when it is a ``repeat`` of a body that failed (see
    :class:`RecentRequests`)."""
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
    env = envelope_with_headers(  # a header that does not parse: a WireError naming it
        base,
        headers,
        max_deadline_ms=d.max_deadline_ms,
        max_attempts_limit=d.max_attempts_limit,
        replayed=None if recent is None else recent.checker(tenant),
    )
    if repeat and not env.client_retry:
        env = dataclasses.replace(env, client_retry=True)
    return env
