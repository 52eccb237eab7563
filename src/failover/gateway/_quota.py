"""Per-tenant rate limits (rpm, tpm) and cost budgets, enforced before a request is routed.

Without a ``state:`` backend the counters are in memory, per worker process: with
``--workers N`` each process counts on its own, so a tenant may get up to N times its limits
in total. With ``state: {backend: sqlite | redis}`` (the router's store) they hold across
every process that shares the store: rpm and tpm are one shared window bucket per tenant
(``tenant:<name>``, one atomic reservation per request), the budget one counter per tenant and
period that expires when the period ends. When the store does not answer, each process falls
back to local counters at ``local_share`` of every limit and budget (fail open, as the
provider limits do), counted from the moment it went local.

* ``rpm``: a :class:`~failover.policy.WindowBucket` of ``rpm`` requests per rolling 60 s; a
  request takes one when it is admitted (a refused one takes nothing).
* ``tpm``: a WindowBucket of ``tpm`` tokens per rolling 60 s, charged after the request with
  the tokens every attempt reported (input + output, failed attempts included). A request is
  admitted while the bucket is not in debt, so one large request may overshoot; the
  overshoot delays the next ones.
* ``budget_usd`` per ``budget_period`` (calendar minute, hour, day, ISO week or month, in
  UTC): charged after each request with ``RouteRecord.total_cost`` (failed attempts
  included). A request is refused once the budget is spent, and the remaining budget is
  handed to the router as ``Envelope.max_cost`` (the smaller of it and the caller's own
  ceiling), so one request cannot spend more than what is left. Concurrent requests of one
  tenant each get the remaining budget at their start, so together they may overshoot it by
  what they spend while in flight.
"""

from __future__ import annotations

import asyncio
import calendar
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ..model import RouteRecord
from ..policy import WindowBucket
from ..state import GuardedStore, StateUnavailable
from ._errors import ApiError
from ._settings import Period, Tenant

_WINDOW = 60.0  # rpm and tpm are per rolling minute


def period_bounds(period: Period, now: float) -> tuple[float, float]:
    """The calendar period (UTC, epoch seconds) that contains ``now``: (start, end)."""
    t = datetime.fromtimestamp(now, UTC)
    if period == "minute":
        start = t.replace(second=0, microsecond=0)
        end = start + timedelta(minutes=1)
    elif period == "hour":
        start = t.replace(minute=0, second=0, microsecond=0)
        end = start + timedelta(hours=1)
    elif period == "day":
        start = t.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=1)
    elif period == "week":
        start = t.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=t.weekday())
        end = start + timedelta(days=7)
    else:
        start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        days = calendar.monthrange(t.year, t.month)[1]
        end = start + timedelta(days=days)
    return start.timestamp(), end.timestamp()


def _retry_headers(wait: float, *, retry: bool) -> dict[str, str]:
    """A tenant refusal: when the limit lets the tenant back in (``Retry-After``), whether a retry
    can succeed at all (``x-failover-retryable``); the SDKs are told not to retry on their own,
    as for every gateway failure (one layer owns retries)."""
    wait = max(0.0, wait)
    return {
        "retry-after": str(max(1, math.ceil(wait))),
        "retry-after-ms": str(max(1, math.ceil(wait * 1000))),
        "x-should-retry": "false",
        "x-failover-retryable": "true" if retry else "false",
    }


@dataclass(slots=True)
class _State:
    tenant: Tenant
    rpm: WindowBucket | None
    tpm: WindowBucket | None
    period_start: float = 0.0
    period_end: float = 0.0
    spent: float = 0.0


def _budget_error(tenant: Tenant, period_end: float, now: float) -> ApiError:
    return ApiError(
        429,
        f"tenant {tenant.name!r} has spent its budget of ${tenant.budget_usd:g} for this {tenant.budget_period}; "
        f"it resets at {datetime.fromtimestamp(period_end, UTC).isoformat()}",
        type="insufficient_quota",
        code="budget_exhausted",
        headers=_retry_headers(period_end - now, retry=False),
    )


def _rate_error(what: str, limit: int | None, wait: float) -> ApiError:
    return ApiError(
        429,
        f"rate limit reached: {limit} {what} per minute for this key; retry in {wait:.1f}s",
        type=what,
        code="rate_limit_exceeded",
        headers=_retry_headers(wait, retry=True),
    )


def _share(tenant: Tenant, share: float) -> Tenant:
    """``tenant`` with ``share`` of each limit: what one process allows while the shared store is away."""
    return replace(
        tenant,
        rpm=None if tenant.rpm is None else max(1, math.floor(tenant.rpm * share)),
        tpm=None if tenant.tpm is None else max(1, math.floor(tenant.tpm * share)),
        budget_usd=None if tenant.budget_usd is None else tenant.budget_usd * share,
    )


class TenantQuotas:
    """The limits of every tenant. ``clock``: monotonic seconds; ``wall``: epoch seconds.

    ``store`` (the router's :class:`~failover.state.GuardedStore`, if any) makes them
    fleet-wide: the gateway then calls ``await admit_shared(...)`` (``local`` says which), and
    :meth:`charge` writes in the background (``await drain()`` waits for it).
    """

    def __init__(
        self,
        tenants: Iterable[Tenant],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        store: GuardedStore | None = None,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self.store = store
        self.local = store is None
        self._states = {
            t.name: _State(
                tenant=t,
                rpm=WindowBucket(t.rpm) if t.rpm else None,
                tpm=WindowBucket(t.tpm) if t.tpm else None,
            )
            for t in tenants
            if t.rpm or t.tpm or t.budget_usd
        }
        if store is not None:
            # While the store is away: local counters at local_share of each limit (fail open).
            tenants = [st.tenant for st in self._states.values()]
            self.fallback = TenantQuotas([_share(t, store.local_share) for t in tenants], clock=clock, wall=wall)
            self._tasks: set[asyncio.Task[None]] = set()
            self.charge = self._charge_shared  # type: ignore[method-assign]
            self.snapshot = self._snapshot_shared  # type: ignore[method-assign]

    def _budget(self, st: _State) -> float | None:
        """What is left of the tenant's budget in the current period (None: no budget)."""
        budget = st.tenant.budget_usd
        if budget is None:
            return None
        now = self.wall()
        if not st.period_start <= now < st.period_end:
            st.period_start, st.period_end = period_bounds(st.tenant.budget_period, now)
            st.spent = 0.0
        return budget - st.spent

    def admit(self, tenant: Tenant | None, max_cost: float | None) -> float | None:
        """Admit one request, or raise a 429 ApiError; returns the request's cost ceiling."""
        st = self._states.get(tenant.name) if tenant is not None else None
        if st is None:
            return max_cost
        left = self._budget(st)
        if left is not None and left <= 0:
            raise _budget_error(st.tenant, st.period_end, self.wall())
        now = self.clock()
        if st.tpm is not None and st.tpm.level(now) <= 0:
            raise _rate_error("tokens", st.tenant.tpm, st.tpm.time_until(1, now))
        if st.rpm is not None and not st.rpm.reserve(1, now):
            raise _rate_error("requests", st.tenant.rpm, st.rpm.time_until(1, now))
        return _ceiling(left, max_cost)

    # -- shared (failover.state) ------------------------------------------------------------

    async def admit_shared(self, tenant: Tenant | None, max_cost: float | None) -> float | None:
        """:meth:`admit` on the shared store: the budget read, then one atomic rpm/tpm reservation.

        A refused request takes nothing. Falls back to local counters at ``local_share``
        while the store is unavailable.
        """
        st = self._states.get(tenant.name) if tenant is not None else None
        if st is None:
            return max_cost
        guard = self.store
        assert guard is not None, "admit_shared needs TenantQuotas(store=...)"
        t = st.tenant
        try:
            left: float | None = None
            if t.budget_usd is not None:
                key, end, ttl = self._period_key(t)
                left = t.budget_usd - await guard.call(guard.store.counter, key, 0.0, ttl=ttl)
                if left <= 0:
                    raise _budget_error(t, end, self.wall())
            if t.rpm or t.tpm:
                amounts: dict[str, float] = {}
                caps: dict[str, float] = {}
                if t.rpm:
                    amounts["requests"], caps["requests"] = 1.0, float(t.rpm)
                if t.tpm:
                    # Admitted while the bucket is not in debt (used < tpm): nothing is taken
                    # here, the tokens are charged when the request ends.
                    amounts["tokens"], caps["tokens"] = 0.0, t.tpm - 0.5
                r = await guard.call(
                    guard.store.reserve,
                    f"tenant:{t.name}",
                    amounts,
                    caps,
                    window=_WINDOW,
                    reservation_id=os.urandom(6).hex(),
                )
                if not r.granted:
                    if r.dimension == "tokens":
                        raise _rate_error("tokens", t.tpm, r.wait)
                    raise _rate_error("requests", t.rpm, r.wait)
        except StateUnavailable:
            return self.fallback.admit(tenant, max_cost)
        return _ceiling(left, max_cost)

    def _period_key(self, tenant: Tenant) -> tuple[str, float, float]:
        """The budget counter of ``tenant``'s current period: (name, period end, seconds to keep it)."""
        now = self.wall()
        start, end = period_bounds(tenant.budget_period, now)
        return f"tenant:{tenant.name}:budget:{tenant.budget_period}:{start:.0f}", end, end - now + 60.0

    def _charge_shared(self, tenant: Tenant | None, record: RouteRecord | None) -> None:
        st = self._states.get(tenant.name) if tenant is not None else None
        if st is None or record is None or tenant is None:
            return
        cost = record.total_cost if st.tenant.budget_usd is not None else 0.0
        tokens = 0
        if st.tenant.tpm is not None:
            tokens = sum(a.usage.total_tokens for a in record.attempts if a.usage is not None)
        if cost <= 0 and not tokens:
            return
        task = asyncio.get_running_loop().create_task(self._write(tenant, record, cost, tokens))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, tenant: Tenant, record: RouteRecord, cost: float, tokens: int) -> None:
        guard = self.store
        assert guard is not None
        t = self._states[tenant.name].tenant
        try:
            if cost > 0:
                key, _, ttl = self._period_key(t)
                await guard.call(guard.store.counter, key, cost, ttl=ttl)
            if tokens:
                await guard.call(
                    guard.store.settle,
                    f"tenant:{t.name}",
                    "",
                    granted_at=0.0,
                    window=_WINDOW,
                    refund={},
                    charge={"tokens": float(tokens)},
                    free_slot=False,
                )
        except StateUnavailable:
            self.fallback.charge(tenant, record)  # counted locally while the store is away

    async def drain(self) -> None:
        """Wait until every charge written in the background has reached the store."""
        while self.store is not None and self._tasks:
            await asyncio.gather(*tuple(self._tasks), return_exceptions=True)

    async def shared_snapshot(self) -> dict[str, dict[str, object]]:
        """:meth:`snapshot` with the fleet's figures read from the store (``counted`` says whose).

        Read-only (one bucket view and one counter read per tenant, pipelined); while the store
        is unreachable, this process's local counters at ``local_share``.
        """
        out = self.snapshot()
        guard = self.store
        if guard is None or not guard.up:
            return out

        async def read(name: str) -> None:
            t, row = self._states[name].tenant, out[name]
            caps = {d: float(c) for d, c in (("requests", t.rpm), ("tokens", t.tpm)) if c}
            if caps:
                v = await guard.call(guard.store.bucket_view, f"tenant:{name}", caps)
                row["rpm_available"] = v.levels.get("requests")
                row["tpm_available"] = v.levels.get("tokens")
            if t.budget_usd is not None:
                key, _, ttl = self._period_key(t)
                spent = await guard.call(guard.store.counter, key, 0.0, ttl=ttl)
                row["budget_spent_usd"] = round(spent, 6)
                row["budget_left_usd"] = round(max(0.0, t.budget_usd - spent), 6)

        try:
            await asyncio.gather(*(read(name) for name in out))
        except StateUnavailable:
            return self.snapshot()  # went down meanwhile: the local view, marked as such
        return out

    def _snapshot_shared(self) -> dict[str, dict[str, object]]:
        """In shared mode the counters are in the store: say so, and show the local fallback's."""
        guard = self.store
        assert guard is not None
        out = self.fallback.snapshot()
        for name, row in out.items():
            t = self._states[name].tenant
            row.update(
                counted="fleet-wide in the state store" if guard.up else "locally (state store unreachable)",
                rpm=t.rpm,
                tpm=t.tpm,
                budget_usd=t.budget_usd,
                local_share=guard.local_share,
            )
            if guard.up:  # the fallback's figures say nothing while the store counts
                for k in ("rpm_available", "tpm_available", "budget_spent_usd", "budget_left_usd"):
                    row[k] = None
        return out

    def charge(self, tenant: Tenant | None, record: RouteRecord | None) -> None:
        """Charge what a finished request spent (every attempt, failed ones included)."""
        st = self._states.get(tenant.name) if tenant is not None else None
        if st is None or record is None:
            return
        if st.tenant.budget_usd is not None and record.total_cost > 0:
            self._budget(st)  # roll the period over first if it ended meanwhile
            st.spent += record.total_cost
        if st.tpm is not None:
            tokens = sum(a.usage.total_tokens for a in record.attempts if a.usage is not None)
            if tokens:
                st.tpm.charge(tokens, self.clock())

    def snapshot(self) -> dict[str, dict[str, object]]:
        """Per tenant: limits, what is used now, budget spent and left (for /admin/health)."""
        now = self.clock()
        out: dict[str, dict[str, object]] = {}
        for name, st in self._states.items():
            t = st.tenant
            left = self._budget(st)
            out[name] = {
                "rpm": t.rpm,
                "rpm_available": None if st.rpm is None else st.rpm.level(now),
                "tpm": t.tpm,
                "tpm_available": None if st.tpm is None else st.tpm.level(now),
                "budget_usd": t.budget_usd,
                "budget_period": t.budget_period,
                "budget_spent_usd": round(st.spent, 6) if left is not None else None,
                "budget_left_usd": None if left is None else round(max(0.0, left), 6),
            }
        return out

    def carry_over(self, old: TenantQuotas) -> None:
        """Keep the counters of tenants whose limits are unchanged (a config reload)."""
        if self.store is not None and old.store is not None:
            self.fallback.carry_over(old.fallback)  # the shared counters are in the store already
            return
        for name, st in self._states.items():
            prev = old._states.get(name)
            if prev is None:
                continue
            t, p = st.tenant, prev.tenant
            if (t.rpm, t.tpm) == (p.rpm, p.tpm):
                st.rpm, st.tpm = prev.rpm, prev.tpm
            if t.budget_period == p.budget_period:  # a new amount applies to what was already spent
                st.period_start, st.period_end, st.spent = prev.period_start, prev.period_end, prev.spent

    def spent(self, tenant: str) -> float:
        st = self._states.get(tenant)
        return 0.0 if st is None else st.spent


def store_of(router: object) -> GuardedStore | None:
    """The router's shared state store (its ``state:`` section), which the tenant quotas share too."""
    for policy in ("breakers", "limiters", "retry_budget"):
        store = getattr(getattr(router, policy, None), "store", None)
        if isinstance(store, GuardedStore):
            return store
    return None


def _ceiling(left: float | None, max_cost: float | None) -> float | None:
    if left is None:
        return max_cost
    return left if max_cost is None else min(max_cost, left)


__all__ = ["TenantQuotas", "period_bounds", "store_of"]
