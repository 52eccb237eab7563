"""Per-tenant rate limits (rpm, tpm) and cost budgets, enforced before a request is routed.

State is in memory, per worker process: with ``--workers N`` each process counts on its own,
so a tenant may get up to N times its limits in total (give each worker its share, or run
one worker per tenant-facing gateway).

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

import calendar
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..model import RouteRecord
from ..policy._ratelimit import WindowBucket
from ._errors import ApiError
from ._settings import Period, Tenant


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
    wait = max(0.0, wait)
    return {
        "retry-after": str(max(1, math.ceil(wait))),
        "retry-after-ms": str(max(1, math.ceil(wait * 1000))),
        "x-should-retry": "true" if retry else "false",
    }


@dataclass(slots=True)
class _State:
    tenant: Tenant
    rpm: WindowBucket | None
    tpm: WindowBucket | None
    period_start: float = 0.0
    period_end: float = 0.0
    spent: float = 0.0


class TenantQuotas:
    """The in-memory limits of every tenant. ``clock``: monotonic seconds; ``wall``: epoch seconds."""

    def __init__(
        self,
        tenants: Iterable[Tenant],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self._states = {
            t.name: _State(
                tenant=t,
                rpm=WindowBucket(t.rpm) if t.rpm else None,
                tpm=WindowBucket(t.tpm) if t.tpm else None,
            )
            for t in tenants
            if t.rpm or t.tpm or t.budget_usd
        }

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
            t = st.tenant
            raise ApiError(
                429,
                f"tenant {t.name!r} has spent its budget of ${t.budget_usd:g} for this {t.budget_period}; "
                f"it resets at {datetime.fromtimestamp(st.period_end, UTC).isoformat()}",
                type="insufficient_quota",
                code="budget_exhausted",
                headers=_retry_headers(st.period_end - self.wall(), retry=False),
            )
        now = self.clock()
        if st.tpm is not None and st.tpm.level(now) <= 0:
            wait = st.tpm.time_until(1, now)
            raise ApiError(
                429,
                f"rate limit reached: {st.tenant.tpm} tokens per minute for this key; retry in {wait:.1f}s",
                type="tokens",
                code="rate_limit_exceeded",
                headers=_retry_headers(wait, retry=True),
            )
        if st.rpm is not None and not st.rpm.reserve(1, now):
            wait = st.rpm.time_until(1, now)
            raise ApiError(
                429,
                f"rate limit reached: {st.tenant.rpm} requests per minute for this key; retry in {wait:.1f}s",
                type="requests",
                code="rate_limit_exceeded",
                headers=_retry_headers(wait, retry=True),
            )
        if left is None:
            return max_cost
        return left if max_cost is None else min(max_cost, left)

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


__all__ = ["TenantQuotas", "period_bounds"]
