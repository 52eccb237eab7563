"""What recent requests taught us about each target, for selection and ranking.

This is the lightweight per-process view the core router needs: a success rate and a
latency average per target scope for ranking, and a cool-down per credential + model after
a 429 or an exhausted quota, so that the next request does not walk into the same 429. Full
circuit breakers (windows, half-open probes) build on the same observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Failure, FailureKind, HealthEffect, Target

# How long a credential + model is left alone after "insufficient quota": money does not
# come back within one request, and probing costs a request each time.
QUOTA_COOLDOWN = 300.0


@dataclass(slots=True)
class TargetHealth:
    success: float = 1.0  # EWMA of success (1) / health-relevant failure (0)
    latency: float | None = None  # EWMA of successful attempt latency, seconds
    observations: int = 0


@dataclass(slots=True, kw_only=True)
class HealthBoard:
    alpha: float = 0.2  # EWMA weight of the newest observation
    _targets: dict[str, TargetHealth] = field(default_factory=dict, repr=False)
    _cooldown: dict[str, tuple[float, str]] = field(default_factory=dict, repr=False)

    @staticmethod
    def key_model(target: Target) -> str:
        return f"{target.base_url}|{target.credential or '-'}|{target.model}"

    def of(self, target: Target) -> TargetHealth:
        h = self._targets.get(target.scope)
        if h is None:
            h = self._targets[target.scope] = TargetHealth()
        return h

    def latency(self, target: Target) -> float | None:
        """The latency EWMA of successful attempts on ``target``'s scope; None before the first."""
        h = self._targets.get(target.scope)
        return None if h is None else h.latency

    def observe(self, target: Target, failure: Failure | None, latency: float, now: float) -> None:
        h = self.of(target)
        h.observations += 1
        if failure is None:
            h.success += self.alpha * (1.0 - h.success)
            h.latency = latency if h.latency is None else h.latency + self.alpha * (latency - h.latency)
            return
        effect = failure.disposition.health
        if effect is HealthEffect.TARGET:
            h.success += self.alpha * (0.0 - h.success)
        elif effect is HealthEffect.KEY_MODEL:
            until = None
            if failure.kind is FailureKind.QUOTA_EXHAUSTED:
                until = now + QUOTA_COOLDOWN
            elif failure.retry_after is not None and failure.retry_after > 0:
                until = now + failure.retry_after
            if until is not None:
                # Writes drop the cool-downs that are over (reads never do).
                for key in [k for k, (end, _) in self._cooldown.items() if end <= now]:
                    del self._cooldown[key]
                prev = self._cooldown.get(self.key_model(target))
                if prev is None or prev[0] < until:
                    self._cooldown[self.key_model(target)] = (until, failure.label)

    def cooling(self, target: Target, now: float) -> tuple[float, str] | None:
        """``(seconds left, why)`` while this credential + model should not be called (a read: a
        cool-down that is over is dropped by the next one written)."""
        if not self._cooldown:  # the common case: no key is cooling down
            return None
        entry = self._cooldown.get(self.key_model(target))
        if entry is None or entry[0] <= now:
            return None
        until, why = entry
        return until - now, why
