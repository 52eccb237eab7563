"""What a replay found: each request on each candidate, each candidate's summary, the report.

Rates and percentiles are computed from the per-request results; :meth:`ReplayReport.render`
is the side-by-side table ``failover replay`` prints, :meth:`ReplayReport.to_dict` its JSON.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["primary", "equivalent", "fallback", "candidate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestResult:
    """One recorded request on one candidate."""

    line: int
    id: str
    target: str
    excluded: str | None = None  # why the candidate cannot serve it under the contract (not sent)
    outcome: str = "ok"  # "ok", or the failure kind the router ended with
    message: str | None = None  # the router's explanation when not ok
    transport: bool = False  # a complete response arrived (usable or not)
    contract: bool = False  # the router returned a response that met the contract
    task: bool | None = None  # the quality gate passed (None: no gate ran)
    gate_error: str | None = None  # the gate raised: counted as a task failure
    attempts: int = 0
    latency_ms: float = 0.0  # end to end, replays and the repair included
    cost: float = 0.0  # USD, failed attempts included

    @property
    def sent(self) -> bool:
        return self.excluded is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "id": self.id,
            "excluded": self.excluded,
            "outcome": self.outcome,
            "message": self.message,
            "transport": self.transport,
            "contract": self.contract,
            "task": self.task,
            "gate_error": self.gate_error,
            "attempts": self.attempts,
            "latency_ms": round(self.latency_ms, 3),
            "cost": round(self.cost, 9),
        }


def _percentile(values: Sequence[float], percent: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100.0 * len(ordered)) - 1)]  # nearest rank


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateSummary:
    """One candidate's results over the whole set.

    Transport and contract success are over the requests sent (a request the candidate
    cannot serve under the contract is not sent and is listed as excluded); task success is
    over the requests a gate judged (with ``--gate``: every request sent; one that got no
    valid answer fails the task). Latency and cost are over the requests sent.
    """

    target: str
    model: str
    role: Role
    canary: float | None  # the candidate's canary share on the route, if on probation
    results: tuple[RequestResult, ...]

    @property
    def requests(self) -> int:
        return len(self.results)

    @property
    def sent(self) -> tuple[RequestResult, ...]:
        return tuple(r for r in self.results if r.sent)

    @property
    def transport_ok(self) -> int:
        return sum(r.transport for r in self.results)

    @property
    def contract_ok(self) -> int:
        return sum(r.contract for r in self.results)

    @property
    def task_checked(self) -> int:
        return sum(r.task is not None for r in self.results)

    @property
    def task_ok(self) -> int:
        return sum(r.task is True for r in self.results)

    def latency_ms(self, percent: float) -> float | None:
        return _percentile([r.latency_ms for r in self.sent], percent)

    @property
    def cost_total(self) -> float:
        return sum(r.cost for r in self.results)

    @property
    def cost_mean(self) -> float | None:
        n = len(self.sent)
        return self.cost_total / n if n else None

    @property
    def failures(self) -> dict[str, int]:
        """Requests by how they fell short: failure kinds, ``excluded``, ``task_failed``."""
        c: Counter[str] = Counter()
        for r in self.results:
            if r.excluded is not None:
                c["excluded"] += 1
            elif r.outcome != "ok":
                c[r.outcome] += 1
            elif r.task is False:
                c["task_failed"] += 1
        return dict(sorted(c.items()))

    def to_dict(self, *, results: bool = True) -> dict[str, Any]:
        n = len(self.sent)
        out: dict[str, Any] = {
            "target": self.target,
            "model": self.model,
            "role": self.role,
            "canary": self.canary,
            "requests": self.requests,
            "sent": n,
            "transport_ok": self.transport_ok,
            "contract_ok": self.contract_ok,
            "task_checked": self.task_checked,
            "task_ok": self.task_ok,
            "transport_rate": _rate(self.transport_ok, n),
            "contract_rate": _rate(self.contract_ok, n),
            "task_rate": _rate(self.task_ok, self.task_checked),
            "latency_p50_ms": _round(self.latency_ms(50), 3),
            "latency_p95_ms": _round(self.latency_ms(95), 3),
            "cost_total": round(self.cost_total, 9),
            "cost_mean": _round(self.cost_mean, 9),
            "failures": self.failures,
        }
        if results:
            out["results"] = [r.to_dict() for r in self.results]
        return out


def _rate(ok: int, total: int) -> float | None:
    return round(ok / total, 6) if total else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    source: str
    route: str
    requests: int
    concurrency: int
    gate: str | None
    fake: bool
    candidates: tuple[CandidateSummary, ...]

    def candidate(self, target: str) -> CandidateSummary:
        for c in self.candidates:
            if c.target == target:
                return c
        raise KeyError(target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "route": self.route,
            "requests": self.requests,
            "concurrency": self.concurrency,
            "gate": self.gate,
            "fake": self.fake,
            "candidates": [c.to_dict() for c in self.candidates],
        }

    def render(self, *, max_failures: int = 10) -> str:
        where = "fake providers, virtual time" if self.fake else "live providers"
        lines = [
            f"replay of {self.requests} requests from {self.source} on route {self.route} "
            f"({where}, concurrency {self.concurrency})",
            "",
        ]

        def ratio(ok: int, total: int) -> str:
            return "-" if not total else f"{ok}/{total} {100.0 * ok / total:.1f}%"

        def ms(millis: float | None) -> str:
            return "-" if millis is None else f"{millis:.0f} ms"

        def usd(dollars: float | None) -> str:
            return "-" if dollars is None else f"${dollars:.6f}"

        def role(candidate: CandidateSummary) -> str:
            return candidate.role if candidate.canary is None else f"{candidate.role} (canary {candidate.canary:g})"

        table: list[tuple[str, ...]] = [
            ("", *(c.target for c in self.candidates)),
            ("role", *(role(c) for c in self.candidates)),
            ("model", *(c.model for c in self.candidates)),
            ("sent", *(f"{len(c.sent)}/{c.requests}" for c in self.candidates)),
            ("transport success", *(ratio(c.transport_ok, len(c.sent)) for c in self.candidates)),
            ("contract success", *(ratio(c.contract_ok, len(c.sent)) for c in self.candidates)),
            ("task success", *(ratio(c.task_ok, c.task_checked) for c in self.candidates)),
            ("latency p50", *(ms(c.latency_ms(50)) for c in self.candidates)),
            ("latency p95", *(ms(c.latency_ms(95)) for c in self.candidates)),
            ("cost total", *(usd(c.cost_total) for c in self.candidates)),
            ("cost mean", *(usd(c.cost_mean) for c in self.candidates)),
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        short = [
            (c, r) for c in self.candidates for r in c.results if r.excluded or r.outcome != "ok" or r.task is False
        ]
        if short:
            lines += ["", "not successful:"]
            per: Counter[str] = Counter()
            for c, r in short:
                per[c.target] += 1
                if per[c.target] > max_failures:
                    continue
                lines.append(f"  {c.target:<{widths[0] or 1}}  {_label(r)}: {_why(r)}")
            for target, n in per.items():
                if n > max_failures:
                    lines.append(f"  {target}: ... and {n - max_failures} more (see --json)")
        return "\n".join(lines)


def _label(result: RequestResult) -> str:
    return f"line {result.line}" if result.id == f"line {result.line}" else f"line {result.line} ({result.id})"


def _why(result: RequestResult) -> str:
    if result.excluded is not None:
        return f"not sent: {result.excluded}"
    if result.outcome != "ok":
        if not result.message:
            return result.outcome
        text = f"{result.outcome}: {result.message}"
        return text if len(text) <= 200 else text[:197] + "..."  # the whole message is in --json
    if result.gate_error is not None:
        return f"quality gate error: {result.gate_error}"
    return "quality gate failed"
