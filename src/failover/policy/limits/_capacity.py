"""Capacity planning: what a peak load needs from each target's rate limits.

Rate limits are per minute, so a peak of ``qps`` requests per second, each with ``input``
and ``output`` tokens on average, needs ``qps x 60`` requests, ``qps x 60 x input`` input
tokens and ``qps x 60 x output`` output tokens per minute. Against a target's configured
:class:`~failover.model.Limits`, each dimension covers ``limit x safety / need`` of the peak
(the client-side limiter only uses ``safety`` of each quota) and the smallest of those binds.

>>> from failover.model import Dialect, Limits, Target
>>> t = Target(name="claude", dialect=Dialect.ANTHROPIC, model="m", base_url="https://a",
...            limits=Limits(rpm=4_000, input_tpm=400_000, output_tpm=80_000))
>>> r = plan_capacity(20, 6_000, 800, [t])
>>> r.input_tpm, r.output_tpm
(7200000.0, 960000.0)
>>> p = r.targets[0]
>>> p.binding, round(p.dimension("input_tpm").raw_coverage or 0, 4), round(p.max_qps, 2)
('input_tpm', 0.0556, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...model import Target
from ._limiter import combined_tpm

__all__ = ["CapacityReport", "DimensionPlan", "TargetPlan", "plan_capacity", "render"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DimensionPlan:
    """One rate dimension of one target against the peak.

    ``need`` is per minute (for ``concurrency``: requests in flight); ``limit`` is the
    configured quota, None when not limited; ``usable`` is what the client-side limiter
    uses of it (``limit x safety``; concurrency is used whole). ``coverage`` is
    ``usable / need`` and ``raw_coverage`` is ``limit / need`` (``inf`` when nothing is
    needed, None when not limited). ``max_qps`` is the peak this dimension alone sustains.
    """

    dimension: str  # "rpm", "input_tpm", "output_tpm", "concurrency"
    need: float
    per_request: float  # what one request takes: 1, tokens, or seconds in flight
    limit: int | None
    usable: float | None
    coverage: float | None
    raw_coverage: float | None
    max_qps: float

    @property
    def short(self) -> bool:
        """The usable quota does not cover the peak."""
        return self.coverage is not None and self.coverage < 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetPlan:
    """One target against the peak: every limited dimension, and the one that binds."""

    target: str
    combined_tpm: bool  # input_tpm counts input + output tokens (OpenAI's TPM)
    dimensions: tuple[DimensionPlan, ...]
    binding: str | None  # the dimension with the lowest coverage; None when nothing is limited
    max_qps: float  # what this target alone sustains (inf when not limited)

    def dimension(self, name: str) -> DimensionPlan:
        for d in self.dimensions:
            if d.dimension == name:
                return d
        raise KeyError(name)

    @property
    def coverage(self) -> float | None:
        """The binding dimension's coverage: the fraction of the peak this target serves."""
        return None if self.binding is None else self.dimension(self.binding).coverage

    @property
    def covered(self) -> bool:
        return not any(d.short for d in self.dimensions)


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityReport:
    qps: float
    input_tokens: float  # average per request
    output_tokens: float
    safety: float
    latency: float | None  # seconds per request, when concurrency was assessed
    rpm: float  # needs per minute, for the whole peak
    input_tpm: float
    output_tpm: float
    concurrency: float | None  # requests in flight at the peak (qps x latency)
    targets: tuple[TargetPlan, ...]

    @property
    def total_max_qps(self) -> float:
        """The peak all targets sustain together, if the load is spread over all of them."""
        return sum(t.max_qps for t in self.targets)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.inf


def plan_capacity(
    qps: float,
    input_tokens: float,
    output_tokens: float,
    targets: Sequence[Target],
    safety: float = 0.9,
    *,
    latency: float | None = None,
) -> CapacityReport:
    """Needed RPM, input TPM and output TPM for a peak, per target against its limits.

    ``latency`` (seconds per request) also assesses concurrency limits, by Little's law:
    ``qps x latency`` requests are in flight at the peak.
    """
    if not qps > 0 or input_tokens < 0 or output_tokens < 0:
        raise ValueError("plan_capacity needs qps > 0 and token counts >= 0")
    if not 0 < safety <= 1:
        raise ValueError("safety must be in (0, 1]")
    if latency is not None and latency < 0:
        raise ValueError("latency must be >= 0")
    per_minute = qps * 60.0
    plans = []
    for target in targets:
        combined = combined_tpm(target)
        per_request: dict[str, float] = {
            "rpm": 1.0,
            "input_tpm": input_tokens + output_tokens if combined else input_tokens,
            "output_tpm": output_tokens,
        }
        dims = []
        for name, each in per_request.items():
            limit: int | None = getattr(target.limits, name)
            if limit is None:
                continue
            need = per_minute * each
            usable = limit * safety
            dims.append(
                DimensionPlan(
                    dimension=name,
                    need=need,
                    per_request=each,
                    limit=limit,
                    usable=usable,
                    coverage=_ratio(usable, need),
                    raw_coverage=_ratio(limit, need),
                    max_qps=_ratio(usable, 60.0 * each),
                )
            )
        slots = target.limits.concurrency
        if slots is not None and latency is not None:
            need = qps * latency
            dims.append(
                DimensionPlan(
                    dimension="concurrency",
                    need=need,
                    per_request=latency,
                    limit=slots,
                    usable=float(slots),
                    coverage=_ratio(slots, need),
                    raw_coverage=_ratio(slots, need),
                    max_qps=_ratio(slots, latency),
                )
            )
        binding = min(dims, key=lambda d: d.max_qps).dimension if dims else None
        plans.append(
            TargetPlan(
                target=target.name,
                combined_tpm=combined,
                dimensions=tuple(dims),
                binding=binding,
                max_qps=min((d.max_qps for d in dims), default=math.inf),
            )
        )
    return CapacityReport(
        qps=qps,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        safety=safety,
        latency=latency,
        rpm=per_minute,
        input_tpm=per_minute * input_tokens,
        output_tpm=per_minute * output_tokens,
        concurrency=None if latency is None else qps * latency,
        targets=tuple(plans),
    )


# -- rendering -------------------------------------------------------------------------------


def _trim(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def _num(value: float) -> str:
    """7,200,000 -> 7.2M; 960,000 -> 960K; 1,200 -> 1,200."""
    if math.isinf(value):
        return "unlimited"
    if value >= 1e6:
        return _trim(f"{value / 1e6:.2f}") + "M"
    if value >= 1e5:
        return _trim(f"{value / 1e3:.1f}") + "K"
    return f"{value:,.0f}" if value == int(value) else _trim(f"{value:,.1f}")


def _pct(fraction: float | None) -> str:
    """Rounded down, so coverage is never overstated: 0.05556 -> 5.5%."""
    if fraction is None or math.isinf(fraction):
        return "-"
    return f"{math.floor(fraction * 1000 + 1e-9) / 10:.1f}%"


def _qps(rate: float) -> str:
    if math.isinf(rate):
        return "unlimited"
    if rate >= 100:
        return f"{math.floor(rate):,}"
    return _trim(f"{math.floor(rate * 100 + 1e-9) / 100:.2f}")


def _label(plan: TargetPlan, dimension: str | None) -> str:
    return "tokens (in+out)" if dimension == "input_tpm" and plan.combined_tpm else str(dimension)


def render(report: CapacityReport) -> str:
    """A readable table: each target's limits against the peak, the binding dimension marked."""
    r = report
    lines = [
        f"Peak {_trim(f'{r.qps:,.2f}')} QPS x {_num(r.input_tokens)} input / {_num(r.output_tokens)} output "
        f"tokens per request (safety factor {r.safety:g})",
        f"needs {_num(r.rpm)} RPM, {_num(r.input_tpm)} input TPM, {_num(r.output_tpm)} output TPM"
        + (f", {_num(r.concurrency)} in flight at {r.latency:g}s each" if r.concurrency is not None else ""),
        "",
    ]
    if not r.targets:  # nothing to compare with: the need alone
        return "\n".join(lines)
    header = ("target", "dimension", "need", "limit", "usable", "covers", "raw", "max QPS", "")
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for plan in r.targets:
        if not plan.dimensions:
            rows.append((plan.target, "-", "", "", "", "", "", "unlimited", "no limits configured"))
            continue
        for i, d in enumerate(plan.dimensions):
            label = _label(plan, d.dimension)
            flags = []
            if d.dimension == plan.binding:
                flags.append("binding")
            if d.short:
                flags.append("SHORT")
            rows.append(
                (
                    plan.target if i == 0 else "",
                    label,
                    _num(d.need),
                    _num(d.limit) if d.limit is not None else "-",
                    _num(d.usable) if d.usable is not None else "-",
                    _pct(d.coverage),
                    _pct(d.raw_coverage),
                    _qps(d.max_qps),
                    ", ".join(flags),
                )
            )
        if plan.covered:
            verdict = f"covers the peak (up to {_qps(plan.max_qps)} QPS)"
        else:
            verdict = f"sustains {_qps(plan.max_qps)} QPS, {_pct(plan.coverage)} of the peak"
        notes.append(f"{plan.target}: {verdict}; binding: {_label(plan, plan.binding)}")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    right = {2, 3, 4, 5, 6, 7}  # numbers align right

    def line(row: tuple[str, ...]) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(cells).rstrip()

    lines.append(line(header))
    lines.append("  ".join("-" * w for w in widths[:-1]))
    lines.extend(line(row) for row in rows)
    lines.append("")
    whole = any(d.dimension == "concurrency" for p in r.targets for d in p.dimensions)
    uses = (
        "what the client-side limiter uses; concurrency is used whole" if whole else "what the client-side limiter uses"
    )
    lines.append(f"covers = limit x {r.safety:g} / need ({uses}); raw = limit / need")
    lines.extend(notes)
    if len(r.targets) > 1:
        total, n = r.total_max_qps, len(r.targets)
        if math.isinf(total):
            free = ", ".join(p.target for p in r.targets if math.isinf(p.max_qps))
            lines.append(f"spread over all {n} targets: no limit configured for {free}")
        else:
            lines.append(f"spread over all {n} targets: {_qps(total)} QPS, {_pct(_ratio(total, r.qps))} of the peak")
    return "\n".join(lines) + "\n"
