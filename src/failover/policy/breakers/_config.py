"""How one circuit breaker judges its scope: the window, the rates that open it, the open period.

:class:`BreakerConfig` is validated once, on construction, and names every field it refuses;
:func:`breaker_params` gives the same numbers to the shared store (``failover.state``), whose
breakers follow the rules of :class:`~failover.policy.breakers._circuit.CircuitBreaker`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ...state import BreakerParams

WindowKind = Literal["count", "time"]

# The cap on a grown open period unless configured: the longest a recovered provider waits for
# its next probe (docs/health.md, "Recovery after an outage").
MAX_OPEN_DURATION = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerConfig:
    """How one breaker judges its scope. Rates are fractions (0.5 is 50 %), times seconds.

    ``slow_call_rate=1.0`` turns the slow-call rule off (long generations are normal for LLMs);
    below 1.0 it opens the breaker when that share of the window took longer than
    ``slow_call_duration``, and a slow probe counts as a failed probe.
    """

    window_kind: WindowKind = "count"
    window_size: int = 20  # count window: the last N recorded calls
    window_seconds: int = 60  # time window: the last N one-second buckets
    min_calls: int = 10  # no verdict on fewer calls in the window
    failure_rate: float = 0.5
    slow_call_rate: float = 1.0  # 1.0: off
    slow_call_duration: float = 30.0
    # Short and capped, so that a provider is found again within seconds of its recovery (see
    # "Recovery after an outage" in docs/health.md): 2, 3, 4.5, 5, 5 ... s while probes fail.
    open_duration: float = 2.0
    open_duration_growth: float = 1.5  # factor per re-open without a close in between
    max_open_duration: float | None = None  # None: MAX_OPEN_DURATION, or open_duration if longer
    half_open_probes: int = 2  # concurrent probes while half-open
    probe_successes_to_close: int | None = None  # None: half_open_probes

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.window_kind not in ("count", "time"):
            problems.append(f"window_kind must be 'count' or 'time', not {self.window_kind!r}")
        for name in ("window_size", "window_seconds", "min_calls", "half_open_probes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be an integer >= 1, not {value!r}")
        if self.probe_successes_to_close is not None and (
            isinstance(self.probe_successes_to_close, bool)
            or not isinstance(self.probe_successes_to_close, int)
            or self.probe_successes_to_close < 1
        ):
            problems.append(f"probe_successes_to_close must be an integer >= 1, not {self.probe_successes_to_close!r}")
        if (
            self.window_kind == "count"
            and isinstance(self.min_calls, int)
            and isinstance(self.window_size, int)
            and self.min_calls > self.window_size
        ):
            problems.append(
                f"min_calls {self.min_calls} > window_size {self.window_size}: a count window could never open"
            )
        for name in ("failure_rate", "slow_call_rate"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                problems.append(f"{name} must be in (0, 1], not {value!r}")
        for name in ("slow_call_duration", "open_duration", "max_open_duration"):
            value = getattr(self, name)
            if value is None and name == "max_open_duration":
                continue
            if not (value > 0.0 and math.isfinite(value)):
                problems.append(f"{name} must be a finite number of seconds > 0, not {value!r}")
        if not (self.open_duration_growth >= 1.0 and math.isfinite(self.open_duration_growth)):
            problems.append(f"open_duration_growth must be >= 1, not {self.open_duration_growth!r}")
        if self.max_open_duration is not None and self.max_open_duration < self.open_duration:
            problems.append(f"max_open_duration {self.max_open_duration} < open_duration {self.open_duration}")
        if problems:
            raise ValueError("BreakerConfig: " + "; ".join(problems))

    @property
    def open_cap(self) -> float:
        """The longest open period: ``max_open_duration``, by default 5 s (or ``open_duration``
        when that is longer)."""
        if self.max_open_duration is not None:
            return self.max_open_duration
        return max(MAX_OPEN_DURATION, self.open_duration)

    @property
    def successes_to_close(self) -> int:
        return self.half_open_probes if self.probe_successes_to_close is None else self.probe_successes_to_close

    @property
    def slow_rule(self) -> bool:
        """Is the slow-call rule on?"""
        return self.slow_call_rate < 1.0

    def open_period(self, streak: int, probe_duration: float = 0.0) -> float:
        """The open period of the ``streak``-th opening since the last close (1 for the first).

        After a failed probe that took ``probe_duration`` seconds, the period counts from the
        probe's start: a probe that hung for its whole timeout does not push the next one
        further away by that much (never less than ``open_duration`` from its end, though).
        So the next probe is due at most ``max_open_duration`` after the last one started (or
        ``open_duration`` after it ended, if it took longer than the difference), however
        the provider fails.
        """
        grown = min(self.open_cap, self.open_duration * self.open_duration_growth ** max(0, streak - 1))
        return max(self.open_duration, grown - probe_duration) if probe_duration > 0 else grown


def breaker_params(config: BreakerConfig, *, probe_lease: float = 120.0) -> BreakerParams:
    """``config`` as the shared store's parameters."""
    return BreakerParams(
        window_kind=config.window_kind,
        window_size=config.window_size,
        window_seconds=config.window_seconds,
        min_calls=config.min_calls,
        failure_rate=config.failure_rate,
        slow_call_rate=config.slow_call_rate,
        slow_call_duration=config.slow_call_duration,
        open_duration=config.open_duration,
        open_duration_growth=config.open_duration_growth,
        max_open_duration=config.open_cap,
        half_open_probes=config.half_open_probes,
        successes_to_close=config.successes_to_close,
        probe_lease=probe_lease,
    )
