"""Plain-text rendering of a seed run: exclusions, the attempt timeline, the summary."""

from __future__ import annotations

from ..model import RouteRecord
from ._seed import SeedResult


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.0f}ms"


def timeline(record: RouteRecord) -> list[str]:
    rows: list[tuple[float, str]] = []
    for a in record.attempts:
        cap = f"cap {a.total_timeout:.2f}s"
        status = f" HTTP {a.status}" if a.status else ""
        marks = "".join(
            f", {name} +{(t - a.start) * 1000:.0f}ms"
            for name, t in (("connected", a.connected), ("first token", a.first_event))
            if t is not None and t > a.start
        )
        rows.append(
            (
                a.start,
                f"{_ms(a.start)} -{_ms(a.end)}  {a.target:<3} {a.phase.value:<9} {a.outcome}{status} ({cap}{marks})",
            )
        )
    for w in record.waits:
        rows.append((w.start, f"{_ms(w.start)} -{_ms(w.end)}  {w.target:<3} {'wait':<9} {w.reason}"))
    return [text for _, text in sorted(rows, key=lambda r: r[0])]


def render(result: SeedResult) -> str:
    o, rec = result.options, result.record
    reserve = "auto" if o.fallback_reserve is None else f"{o.fallback_reserve:.2f}s"
    lines = [
        f"== {o.scenario} | requires {o.capability} | budget {o.budget:.2f}s | A retries {o.a_extra_retries}"
        f" | reserve {reserve}",
    ]
    for e in rec.excluded:
        lines.append(f"   excluded  {e.target} ({e.phase.value}): {e.reason}")
    lines.extend("   " + row for row in timeline(rec))
    calls = ", ".join(f"{n}={c}" for n, c in result.calls.items())
    if result.error is None:
        lines.append(f"   result    ok via {rec.target_used} ({rec.workflow.value}): {result.text}")
    else:
        lines.append(f"   result    Unavailable: {result.error}")
    lines.append(
        f"   summary   attempts {len(rec.attempts)} | provider calls {calls} | recovered {rec.recovered}"
        f" | elapsed {rec.elapsed_ms:.0f}ms | added {rec.added_latency_ms:.0f}ms | cost ${rec.total_cost:.6f}"
    )
    if rec.recovery_reason:
        lines.append(f"   recovery  {rec.recovery_reason}")
    return "\n".join(lines)
