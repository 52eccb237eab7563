"""The waiting queue in front of a limiter: who is served next, and who can no longer make it.

Queued requests are served in fair order across tenants (start-time fair queuing, one FIFO
per tenant), strictly head first, so a tenant sending ten times more than another cannot
take the other's share, and large requests are not starved by small ones. A request's cost
is its dominant share of the buckets' capacity.

Waiting is bounded by each request's deadline. When it joins, the queue projects the buckets
forward over every request ahead of it (:meth:`FairQueue.estimate`); a request that cannot be
granted before its ``deadline_at`` is refused at once with :class:`LimitWaitTooLong`. One that
was admitted but later cannot fit any more (a 429 blocked the buckets, headers said less
remains, other tenants' requests were queued ahead of it) is rejected as soon as that is known
(:meth:`FairQueue.worse`), and at its deadline at the latest.

The queue owns no buckets and no slots: it reads the limiter's :class:`BucketSet`, asks
``slot_free()`` and calls ``grant(waiter, now)``, which takes the amounts and returns the
reservation the waiting caller receives.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, cast

from ...model import FailoverError
from ._buckets import Bucket, BucketSet, Dimension

DEFAULT_TENANT = ""  # the tenant of requests that name none


class LimitWaitTooLong(FailoverError):
    """The limiter cannot grant this request before its deadline: skip the candidate.

    ``wait_seconds`` is the wait that would still be needed (``math.inf`` when the request is
    larger than a whole bucket or the wait is unknown, as for a concurrency slot);
    ``left`` is the time that was left before ``deadline_at``; ``dimension`` names what
    binds; ``too_large`` says the request can never fit this target's bucket. ``reason``
    (also ``str(exc)``) is written for ``Exclusion.reason``.
    """

    def __init__(
        self,
        wait_seconds: float,
        dimension: Dimension,
        *,
        left: float,
        queued_ahead: int = 0,
        reason: str | None = None,
        too_large: bool = False,
    ) -> None:
        self.wait_seconds = wait_seconds
        self.too_large = too_large  # the request can never fit this target's bucket
        self.dimension: Dimension = dimension
        self.left = max(0.0, left)
        self.queued_ahead = queued_ahead
        if reason is None:
            ahead = f", {queued_ahead} queued ahead" if queued_ahead else ""
            reason = f"rate limit {dimension}: wait {wait_seconds:.1f}s exceeds {self.left:.1f}s left{ahead}"
        self.reason = reason
        super().__init__(reason)


def _fmt(amount: float) -> str:
    return f"{amount:,.0f}" if amount == int(amount) else f"{amount:,.1f}"


def too_large(dim: str, amount: float, cap: float, *, quota: int, safety: float, left: float) -> LimitWaitTooLong:
    """The error for a request larger than a whole bucket of ``cap`` (``quota`` x ``safety``): no wait helps."""
    unit = "request" if dim == "rpm" else "tokens"
    return LimitWaitTooLong(
        math.inf,
        cast(Dimension, dim),
        left=left,
        reason=(
            f"rate limit {dim}: needs {_fmt(amount)} {unit}, more than the whole bucket "
            f"({_fmt(cap)} = {quota:,} x {safety:g})"
        ),
        too_large=True,
    )


class _Grant(Protocol):
    def release(self, *, sent: bool) -> None: ...


G = TypeVar("G", bound=_Grant)


@dataclass(eq=False, slots=True, kw_only=True)
class Waiter(Generic[G]):
    """One request's amounts, deadline and fair-queuing tags, from its arrival to its grant."""

    tenant: str
    input_tokens: int
    max_output_tokens: int
    in_part: dict[str, float]
    out_part: dict[str, float]
    amounts: dict[str, float]
    deadline_at: float
    enqueued_at: float
    seq: int
    cost: float
    start: float = 0.0  # fair-queuing tags
    finish: float = 0.0
    blocking: Dimension = "concurrency"
    queued: bool = False
    future: asyncio.Future[G] | None = None


def _key(waiter: Waiter[G]) -> tuple[float, int]:
    return (waiter.start, waiter.seq)


@dataclass(slots=True)
class _Tenant(Generic[G]):
    queue: deque[Waiter[G]] = field(default_factory=deque)
    last_finish: float = 0.0


@dataclass(slots=True)
class _Projection:
    """The buckets as they would be once every queued request (in order) is granted."""

    buckets: dict[str, Bucket]
    t: float  # when the last one is granted
    dim: Dimension  # what made it wait
    last: tuple[float, int] | None  # its fair-queuing key
    count: int  # how many are projected


class FairQueue(Generic[G]):
    """Requests waiting for one limiter's buckets and slots, served fairly across tenants.

    ``slotted`` says the limiter has concurrency slots (a request that waits for none of its
    buckets then waits for a slot). ``rejected`` counts the requests this queue refused after
    they had joined it.
    """

    def __init__(
        self,
        quota: BucketSet,
        *,
        slot_free: Callable[[], bool],
        grant: Callable[[Waiter[G], float], G],
        slotted: bool,
    ) -> None:
        self._quota = quota
        self._slot_free = slot_free
        self._grant = grant
        self._slotted = slotted
        self._tenants: dict[str, _Tenant[G]] = {}
        self._queued = 0
        self._vtime = 0.0
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._projection: _Projection | None = None
        self.rejected = 0

    @property
    def queued(self) -> int:
        return self._queued

    def waiting(self) -> dict[str, int]:
        """Queued requests per tenant."""
        return {name: len(t.queue) for name, t in self._tenants.items() if t.queue}

    # -- joining ------------------------------------------------------------------------------

    def waiter(self, input_tokens: int, max_output: int, deadline_at: float, tenant: str, now: float) -> Waiter[G]:
        """One request's amounts and fair-queue cost; checked here for both the local and the shared path."""
        if input_tokens < 0 or max_output < 0:
            raise ValueError("token counts must be >= 0")
        quota = self._quota
        in_part, out_part = quota.parts(input_tokens, max_output)
        amounts = quota.amounts(in_part, out_part)
        # The fair-queuing cost is the request's dominant share of the capacity.
        cost = max((a / quota.buckets[d].capacity for d, a in amounts.items()), default=1.0)
        self._seq += 1
        return Waiter(
            tenant=tenant,
            input_tokens=input_tokens,
            max_output_tokens=max_output,
            in_part=in_part,
            out_part=out_part,
            amounts=amounts,
            deadline_at=deadline_at,
            enqueued_at=now,
            seq=self._seq,
            cost=max(cost, 1e-9),
        )

    def tag(self, waiter: Waiter[G]) -> None:
        """Give ``waiter`` its place in its tenant's share: start where the tenant's last request finished."""
        ten = self._tenants.get(waiter.tenant)
        if ten is None:
            ten = self._tenants[waiter.tenant] = _Tenant()
        waiter.start = max(self._vtime, ten.last_finish)
        waiter.finish = waiter.start + waiter.cost

    def admit(self, waiter: Waiter[G]) -> None:
        """``waiter`` is granted without queueing (nobody ahead, everything free): account for its share."""
        self._tenants[waiter.tenant].last_finish = waiter.finish
        self._projection = None
        self._vtime = max(self._vtime, waiter.start)

    def enqueue(self, waiter: Waiter[G], blocking: Dimension, now: float) -> asyncio.Future[G]:
        """Queue ``waiter`` (after :meth:`estimate` found it can make its deadline); its grant arrives on the future."""
        ten = self._tenants[waiter.tenant]
        waiter.blocking = blocking
        ten.last_finish = waiter.finish
        ten.queue.append(waiter)  # tags only grow within a tenant: its FIFO stays sorted
        waiter.queued = True
        self._queued += 1
        fut: asyncio.Future[G] = asyncio.get_running_loop().create_future()
        waiter.future = fut
        if self._quota.buckets and self._projection is None:  # it joined ahead of others: they may not fit now
            self._recheck(now)
        self.pump()
        return fut

    def abandon(self, waiter: Waiter[G]) -> None:
        """The caller stopped waiting: leave the queue, or give back a grant nobody will use."""
        fut = waiter.future
        if fut is not None and fut.done() and not fut.cancelled() and fut.exception() is None:
            fut.result().release(sent=False)  # granted in the same instant as the cancellation
            return
        if self._dequeue(waiter):
            self._projection = None
            self.pump()

    # -- projections --------------------------------------------------------------------------

    def _idle_dim(self) -> Dimension:
        """What a request that waits for none of its buckets waits for: a slot."""
        if self._slotted or not self._quota.buckets:
            return "concurrency"
        return cast(Dimension, next(iter(self._quota.buckets)))

    def _order(self) -> Iterator[Waiter[G]]:
        """Every queued request, in the order it will be served."""
        return heapq.merge(*(t.queue for t in self._tenants.values()), key=_key)

    def estimate(self, waiter: Waiter[G], now: float) -> tuple[float, Dimension, int]:
        """When ``waiter`` would be granted behind the requests queued ahead of it (a lower bound)."""
        quota = self._quota
        if not quota.buckets:
            return max(now, quota.blocked_until), "retry_after" if quota.blocked_until > now else "concurrency", 0
        if self._projection is None:
            self._recheck(now)
        p = self._projection
        assert p is not None
        if p.last is None or p.last < _key(waiter):  # joins at the tail: extend the projection
            at, dim = quota.fit(p.buckets, waiter.amounts, max(p.t, now), p.dim)
            if at < waiter.deadline_at and not math.isinf(at):
                for d, amount in waiter.amounts.items():
                    p.buckets[d].charge(amount, at)
                p.t, p.dim, p.last = at, dim, _key(waiter)
                p.count += 1
            return at, dim, p.count - (1 if p.last == _key(waiter) else 0)
        # Joins ahead of others (another tenant's turn): simulate the requests ahead of it.
        buckets = quota.clones()
        t, dim, ahead = now, self._idle_dim(), 0
        for other in self._order():
            if _key(other) > _key(waiter):
                break
            at, other_dim = quota.fit(buckets, other.amounts, t, dim)
            if at >= other.deadline_at:
                continue  # it will be rejected; it does not hold anyone up
            for d, amount in other.amounts.items():
                buckets[d].charge(amount, at)
            t, dim, ahead = at, other_dim, ahead + 1
        at, dim = quota.fit(buckets, waiter.amounts, t, dim)
        self._projection = None  # those behind it now wait longer: recheck once it is queued
        return at, dim, ahead

    def _recheck(self, now: float) -> None:
        """Project the whole queue; reject every request that can no longer be granted in time."""
        quota = self._quota
        buckets = quota.clones()
        t, t_dim, last, count = now, self._idle_dim(), None, 0
        late: list[tuple[Waiter[G], float, Dimension, int]] = []
        for w in list(self._order()):
            at, dim = quota.fit(buckets, w.amounts, t, t_dim)
            if at >= w.deadline_at:
                late.append((w, at, dim, count))
                continue
            for d, amount in w.amounts.items():
                buckets[d].charge(amount, at)
            t, t_dim, last, count = at, dim, _key(w), count + 1
        self._projection = _Projection(buckets, t, t_dim, last, count)
        for w, at, dim, ahead in late:
            self._reject(w, LimitWaitTooLong(at - now, dim, left=w.deadline_at - now, queued_ahead=ahead), keep=True)

    def worse(self, now: float) -> None:
        """The buckets just got worse than projected: recheck the queue and the head's timer."""
        self._projection = None
        if self._queued:
            self._recheck(now)
        self.pump()

    def changed(self) -> None:
        """The buckets or slots changed, for the better: serve whoever can be served now."""
        self._projection = None
        self.pump()

    # -- serving ------------------------------------------------------------------------------

    def _head(self) -> Waiter[G] | None:
        head: Waiter[G] | None = None
        idle: list[str] = []
        for name, t in self._tenants.items():
            if t.queue:
                if head is None or _key(t.queue[0]) < _key(head):
                    head = t.queue[0]
            elif t.last_finish <= self._vtime:
                idle.append(name)  # no credit or debt left to remember
        for name in idle:
            del self._tenants[name]
        return head

    def _dequeue(self, waiter: Waiter[G], *, granted: bool = False) -> bool:
        if not waiter.queued:
            return False
        ten = self._tenants[waiter.tenant]
        ten.queue.remove(waiter)
        waiter.queued = False
        self._queued -= 1
        if not granted and not ten.queue:  # its last request left unserved: no share consumed
            ten.last_finish = min(ten.last_finish, max(self._vtime, waiter.start))
        return True

    def _reject(self, waiter: Waiter[G], error: LimitWaitTooLong, *, keep: bool = False) -> None:
        self._dequeue(waiter)
        if not keep:
            self._projection = None
        self.rejected += 1
        if waiter.future is not None and not waiter.future.done():
            waiter.future.set_exception(error)

    def pump(self) -> None:
        """Grant queued requests, head first, while buckets and slots allow; then set a timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._queued:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        while (w := self._head()) is not None:
            assert w.future is not None
            if w.future.done():  # cancelled by its caller, not yet cleaned up
                self._dequeue(w)
                continue
            wait, dim = self._quota.wait(w.amounts, now)
            if wait > 0:
                if now + wait >= w.deadline_at:
                    error = LimitWaitTooLong(wait, dim, left=w.deadline_at - now)
                    self._reject(w, error)
                    continue
                w.blocking = dim
                self._timer = loop.call_at(now + wait, self.pump)
                return
            if not self._slot_free():
                w.blocking = "concurrency"
                return  # a settle or release pumps again
            self._dequeue(w, granted=True)
            granted = self._grant(w, now)
            self._vtime = max(self._vtime, w.start)
            w.future.set_result(granted)
