"""Canary fallbacks, and success per candidate at three levels.

A newly approved fallback starts on probation: ``Route.canary`` gives it a share of the
eligible failures (e.g. ``0.1``), and the router asks a :class:`CanaryGate` once an attempt of
the request failed (so that no attempt or time is kept back for a fallback its draw leaves
out). A request that never fails never draws; the draw is independent of what follows, so the
share is a share of the requests that actually reach the fallback stage, not of all traffic.

:class:`StatsBoard` counts, per route class and target, how attempts fared at each level of
success, so a canary is promoted (or dropped) on evidence:

* transport: a complete response arrived;
* contract: the response parsed and met the route's contract (schema, tools, output rules);
* task: the route's quality gate passed (only counted when a gate ran).

Both are pure: no I/O, no clock; the random draws come from the ``rng`` passed in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..model import Attempt, ExclusionCode, FailureKind, Route, RouteRecord, usd

CANARY_REASON = "canary"
"""Exclusion reasons written for a fallback left out by its canary draw start with this."""

# Failures found in a complete 2xx response: the provider answered, the answer was unusable
# (contract_failure: an output rule or the quality gate rejected it).
ANSWERED_FAILURES = frozenset(
    {
        FailureKind.CONTRACT_FAILURE,
        FailureKind.SCHEMA_INVALID,
        FailureKind.TOOL_CALL_MALFORMED,
        FailureKind.TRUNCATED,
        FailureKind.CONTENT_FILTERED,
    }
)


class CanaryGate:
    """The canary decisions of ONE request on one route: create one per request.

    >>> gate = CanaryGate(route, rng)            # route.canary == (("claude-new", 0.1),)
    >>> gate.admits("claude-new")                # True for about 1 request in 10
    >>> gate.admits("gemini-flash")              # not on probation: always True

    The first question about a target draws once from ``rng``; later questions in the same
    request get the same answer. A share of 1 (or more) admits without drawing. Fallbacks
    not listed in ``route.canary`` are fully enabled and never draw.
    """

    __slots__ = ("_draws", "_rng", "_shares")

    def __init__(self, route: Route, rng: random.Random) -> None:
        self._shares = route.canary
        self._rng = rng
        self._draws: dict[str, bool] | None = None

    def share(self, target_name: str) -> float | None:
        """The canary share of ``target_name``, or None when it is not on probation."""
        for name, share in self._shares:
            if name == target_name:
                return share
        return None

    def admits(self, target_name: str) -> bool:
        """May this request fall back to ``target_name``?"""
        if not self._shares:  # the common case: no canary on the route
            return True
        share = self.share(target_name)
        if share is None or share >= 1.0:
            return True
        draws = self._draws
        if draws is None:
            draws = self._draws = {}
        else:
            seen = draws.get(target_name)
            if seen is not None:
                return seen
        admitted = self._rng.random() < share
        draws[target_name] = admitted
        return admitted

    def why_not(self, target_name: str) -> str | None:
        """None when admitted; otherwise the exclusion reason for the RouteRecord."""
        if self.admits(target_name):
            return None
        share = self.share(target_name)
        assert share is not None
        return f"{CANARY_REASON}: outside this fallback's {share:.0%} share of eligible failures"


def canary_problems(route: Route) -> list[str]:
    """What is wrong with ``route.canary`` (empty when nothing): unknown names, bad shares."""
    fallbacks = {t.name for t in route.fallbacks}
    out: list[str] = []
    seen: set[str] = set()
    for name, share in route.canary:
        if name in seen:
            out.append(f"canary target {name!r} is listed twice")
        seen.add(name)
        if name not in fallbacks:
            out.append(f"canary target {name!r} is not a fallback of route {route.name!r}")
        if not 0.0 < share <= 1.0:  # also rejects NaN
            out.append(f"canary share of {name!r} must be in (0, 1], got {share!r}")
    return out


# -- three levels of success ----------------------------------------------------------------


def answered(attempt: Attempt) -> bool:
    """Did a complete response arrive (transport success), usable or not?"""
    if attempt.outcome == "ok":
        return True
    f = attempt.failure
    return f is not None and f.kind in ANSWERED_FAILURES and attempt.status is not None and 200 <= attempt.status < 300


def contract_level(attempt: Attempt) -> bool | None:
    """Did the attempt's result meet the contract? None when no response arrived.

    Reads ``Attempt.contract_ok`` when the router set it; otherwise an ``ok`` attempt passed
    validation (the router returns nothing that failed it) and an answered failure did not.
    """
    if attempt.contract_ok is not None:
        return attempt.contract_ok
    if not answered(attempt):
        return None
    return attempt.outcome == "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateStats:
    """A snapshot of one (route, target): counts since the board started, and rates.

    Each rate is over the attempts where that level could be judged: transport over all
    finished attempts, contract over the attempts that got a response, task over the
    responses a quality gate judged. None: nothing to judge yet.
    """

    route: str
    target: str
    attempts: int = 0  # finished attempts (cancelled ones are counted apart)
    transport_ok: int = 0  # a complete response arrived
    contract_checked: int = 0  # responses whose contract was judged
    contract_ok: int = 0
    task_checked: int = 0  # responses a quality gate judged
    task_ok: int = 0
    cancelled: int = 0  # lost hedges, callers gone: they say nothing about the target
    served: int = 0  # requests this target answered in the end (RouteRecord.target_used)
    canary_skipped: int = 0  # requests its canary draw kept away from it
    latency_ewma: float | None = None  # seconds, attempts that got a response
    cost: float = 0.0  # USD, every attempt (failed and cancelled ones cost too)

    @property
    def transport_rate(self) -> float | None:
        return self.transport_ok / self.attempts if self.attempts else None

    @property
    def contract_rate(self) -> float | None:
        return self.contract_ok / self.contract_checked if self.contract_checked else None

    @property
    def task_rate(self) -> float | None:
        return self.task_ok / self.task_checked if self.task_checked else None

    def as_dict(self) -> dict[str, object]:
        """Counts and rates, JSON-ready (for metrics exporters and admin pages)."""
        return {
            "route": self.route,
            "target": self.target,
            "attempts": self.attempts,
            "transport_ok": self.transport_ok,
            "contract_checked": self.contract_checked,
            "contract_ok": self.contract_ok,
            "task_checked": self.task_checked,
            "task_ok": self.task_ok,
            "cancelled": self.cancelled,
            "served": self.served,
            "canary_skipped": self.canary_skipped,
            "latency_ewma": self.latency_ewma,
            "cost": self.cost,
            "transport_rate": self.transport_rate,
            "contract_rate": self.contract_rate,
            "task_rate": self.task_rate,
        }


class _Acc:
    __slots__ = (
        "attempts",
        "canary_skipped",
        "cancelled",
        "contract_checked",
        "contract_ok",
        "cost",
        "latency",
        "served",
        "task_checked",
        "task_ok",
        "transport_ok",
    )

    def __init__(self) -> None:
        self.attempts = self.transport_ok = self.contract_checked = self.contract_ok = 0
        self.task_checked = self.task_ok = self.cancelled = self.served = self.canary_skipped = 0
        self.latency: float | None = None
        self.cost = 0.0


class StatsBoard:
    """Success per (route class, target) at the transport, contract and task levels.

    >>> board = StatsBoard()
    >>> board.observe(resp.record)               # or exc.record for an Unavailable
    >>> board.get("triage", "claude-new").contract_rate
    0.97
    >>> print(board.render())

    Feed it every RouteRecord (successes and Unavailable alike); :meth:`snapshot` gives
    frozen :class:`CandidateStats` for metrics.
    """

    __slots__ = ("_acc", "alpha")

    def __init__(self, *, alpha: float = 0.2) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.alpha = alpha  # EWMA weight of the newest latency
        self._acc: dict[tuple[str, str], _Acc] = {}

    def _of(self, route: str, target: str) -> _Acc:
        key = (route, target)
        acc = self._acc.get(key)
        if acc is None:
            acc = self._acc[key] = _Acc()
        return acc

    def observe(self, record: RouteRecord) -> None:
        route = record.route
        used = _used_attempt(record)
        for a in record.attempts:
            acc = self._of(route, a.target)
            acc.cost += a.cost
            if a.outcome == "cancelled":
                acc.cancelled += 1
                continue
            acc.attempts += 1
            if not answered(a):
                continue
            acc.transport_ok += 1
            d = a.duration
            acc.latency = d if acc.latency is None else acc.latency + self.alpha * (d - acc.latency)
            contract = contract_level(a)
            task = a.task_ok
            if a is used:  # the router may judge the final result only on the record
                if a.contract_ok is None and record.validation.contract is not None:
                    contract = record.validation.contract
                if task is None:
                    task = record.validation.task
            if contract is not None:
                acc.contract_checked += 1
                acc.contract_ok += contract
            if task is not None:
                acc.task_checked += 1
                acc.task_ok += task
        if record.target_used is not None:
            self._of(route, record.target_used).served += 1
        for e in record.excluded:
            if e.code is ExclusionCode.CANARY:
                self._of(route, e.target).canary_skipped += 1

    def get(self, route: str, target: str) -> CandidateStats | None:
        acc = self._acc.get((route, target))
        return None if acc is None else _frozen(route, target, acc)

    def snapshot(self) -> tuple[CandidateStats, ...]:
        """Every (route, target) seen so far, sorted by route then target."""
        return tuple(_frozen(r, t, acc) for (r, t), acc in sorted(self._acc.items()))

    def clear(self) -> None:
        self._acc.clear()

    def render(self) -> str:
        """A plain-text table, one row per (route, target)."""
        head = ("route", "target", "attempts", "transport", "contract", "task", "latency", "cost", "served", "canary")
        rows = [head]
        for s in self.snapshot():
            rows.append(
                (
                    s.route,
                    s.target,
                    str(s.attempts),
                    _ratio(s.transport_ok, s.attempts),
                    _ratio(s.contract_ok, s.contract_checked),
                    _ratio(s.task_ok, s.task_checked),
                    "-" if s.latency_ewma is None else f"{s.latency_ewma * 1000:.0f}ms",
                    usd(s.cost),
                    str(s.served),
                    f"{s.canary_skipped} skipped" if s.canary_skipped else "-",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _used_attempt(record: RouteRecord) -> Attempt | None:
    if record.target_used is None:
        return None
    for a in reversed(record.attempts):
        if a.outcome == "ok" and a.target == record.target_used:
            return a
    return None


def _frozen(route: str, target: str, acc: _Acc) -> CandidateStats:
    return CandidateStats(
        route=route,
        target=target,
        attempts=acc.attempts,
        transport_ok=acc.transport_ok,
        contract_checked=acc.contract_checked,
        contract_ok=acc.contract_ok,
        task_checked=acc.task_checked,
        task_ok=acc.task_ok,
        cancelled=acc.cancelled,
        served=acc.served,
        canary_skipped=acc.canary_skipped,
        latency_ewma=acc.latency,
        cost=acc.cost,
    )


def _ratio(ok: int, total: int) -> str:
    return "-" if not total else f"{ok}/{total} {100.0 * ok / total:.1f}%"


__all__ = [
    "ANSWERED_FAILURES",
    "CANARY_REASON",
    "CandidateStats",
    "CanaryGate",
    "StatsBoard",
    "answered",
    "canary_problems",
    "contract_level",
]
