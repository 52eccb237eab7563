"""Calibration: scale a target's counts by what the provider actually charged.

Two ways in, one per-target counter out (``counter_for(target)`` returns it):

* offline: :func:`calibrate` fits a factor to ``(request, actual input tokens)`` samples, and
  :func:`recalibrate` installs it (or a new base counter, when the model's tokenizer changed)
  for one target;
* online: :func:`observe_usage` is fed the estimate and the provider's reported input tokens
  after each call, keeps an EWMA of their ratio per target, and widens that target's counts
  when the provider charges more than was counted. It never narrows them below the
  calibrated (or base) counter.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from ..model import Request, Target
from . import _choose
from ._choose import _set_override, base_counter_for, target_key
from ._counter import TokenCounter

__all__ = [
    "CalibratedCounter",
    "Calibration",
    "calibrate",
    "calibration_of",
    "observe_usage",
    "recalibrate",
]

# observe_usage: EWMA weight of a new observation, for the ratio and its deviation.
ALPHA = 0.2
# Requests smaller than this are mostly framing, whose ratio says little about the tokenizer.
MIN_OBSERVED_TOKENS = 64
# A ratio beyond this is a bad usage report (or a different request), not a tokenizer: clipped.
MAX_RATIO = 4.0


class CalibratedCounter:
    """``base``'s count times ``factor``, rounded up.

    The name shows the factor (``estimate*0.62``), so counts cached under a counter's name
    never mix calibrations.

    >>> CalibratedCounter(EstimateCounter(), 0.5).count(Request.simple("Hello"))
    5
    """

    __slots__ = ("base", "factor", "name")

    base: TokenCounter
    factor: float
    name: str

    def __init__(self, base: TokenCounter, factor: float) -> None:
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"a calibration factor must be a positive number, got {factor!r}")
        if isinstance(base, CalibratedCounter):  # one factor, not a chain of them
            inner: CalibratedCounter = base
            base, factor = inner.base, inner.factor * factor
        self.base = base
        self.factor = factor
        self.name = f"{base.name}*{factor:.4g}"

    def __repr__(self) -> str:
        return f"CalibratedCounter({self.base!r}, {self.factor:.4g})"

    def count(self, request: Request) -> int:
        return math.ceil(self.base.count(request) * self.factor)


def _quantile(values: list[float], q: float) -> float:
    """The nearest-rank q-quantile: the smallest value with at least q of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def calibrate(
    counter: TokenCounter, samples: Iterable[tuple[Request, int]], *, quantile: float = 0.95
) -> CalibratedCounter:
    """A counter fitted to ``(request, actual input tokens)`` samples.

    The factor is the ``quantile`` (nearest rank) of ``actual / counter.count(request)`` over
    the samples: with the default 0.95, at most 5% of the samples are counted below what they
    actually cost, and with fewer than 20 samples that is none of them (the largest ratio).
    The factor may be below 1: an estimate that over-counts this target's traffic is tightened.
    Samples with no tokens on either side are skipped.

    >>> fitted = calibrate(EstimateCounter(), [(request, usage.input_tokens) for request, usage in history])
    >>> recalibrate(target, fitted.factor)
    """
    if not 0 < quantile <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile!r}")
    ratios = []
    for request, actual in samples:
        counted = counter.count(request)
        if counted > 0 and actual > 0:
            ratios.append(actual / counted)
    if not ratios:
        raise ValueError("calibrate needs at least one sample with tokens counted and charged")
    return CalibratedCounter(counter, _quantile(ratios, quantile))


@dataclass(slots=True)
class _State:
    """What is known about one target's counts."""

    base: TokenCounter  # recalibrate's base, or the counter target.tokenizer selects
    factor: float = 1.0  # recalibrate's factor
    online: float = 1.0  # observe_usage's widening, >= 1
    mean: float | None = None  # EWMA of actual / (base count x factor)
    deviation: float = 0.0  # EWMA of |ratio - mean|
    observations: int = 0

    def counter(self) -> TokenCounter:
        factor = self.factor * self.online
        return self.base if factor == 1.0 else CalibratedCounter(self.base, factor)


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """A target's calibration, for logs and dashboards."""

    counter: str  # the name of the counter counter_for(target) returns
    factor: float  # from recalibrate
    online: float  # from observe_usage (>= 1)
    mean_ratio: float | None  # EWMA of actual / calibrated count; None before any observation
    deviation: float
    observations: int


_lock = threading.Lock()
_states: dict[tuple[str, str], _State] = {}


def recalibrate(target: Target, factor: float = 1.0, *, base: TokenCounter | None = None) -> TokenCounter:
    """Replace the counter ``counter_for(target)`` returns, for this process, and return it.

    The new counter is ``base`` (default: the counter ``target.tokenizer`` selects) times
    ``factor``. Use it when a model's tokenizer changed: a new ``base`` (``HFTokenizerCounter``
    over the new vocabulary) or a factor fitted by :func:`calibrate` on fresh usage. What
    :func:`observe_usage` had learned for the target is forgotten: it was measured against the
    old counter. ``recalibrate(target)`` with no arguments goes back to the default counter.

    Targets are told apart by name and model, so the calibration of a target whose model is
    replaced in configuration does not follow it to the new model.
    """
    state = _State(base=base if base is not None else base_counter_for(target), factor=factor)
    counter = state.counter()  # validates the factor
    key = target_key(target)
    with _lock:
        if base is None and factor == 1.0:
            _states.pop(key, None)
            _set_override(key, None)
        else:
            _states[key] = state
            _set_override(key, counter)
    return counter


def observe_usage(target: Target, estimated: int, actual: int) -> float:
    """Learn from one call: ``estimated`` input tokens were counted, the provider charged ``actual``.

    ``estimated`` is what ``counter_for(target).count(request)`` gave for the request that was
    sent (never a count the provider returned); ``actual`` is the response's
    ``usage.input_tokens``. Calls under ``MIN_OBSERVED_TOKENS`` (64) are ignored: they are
    mostly framing.

    The rule, per target: the ratio r = actual / (estimated / online), clipped to [0, 4], is
    the provider's count over the calibrated count. Its EWMA m and the EWMA d of |r - m| are
    updated with weight 0.2 (the first observation sets m = r, d = 0). The online factor is
    ``max(1, m + 2d)``, rounded up to a hundredth: counts only ever widen, enough to cover the
    high ratios the target has shown lately, and come back to the calibrated counter (never
    below it) once the provider stops charging more than was counted. Returns the online factor.
    """
    if estimated < MIN_OBSERVED_TOKENS or actual <= 0:
        return _online(target)
    key = target_key(target)
    with _lock:
        state = _states.get(key)
        if state is None:
            state = _states[key] = _State(base=base_counter_for(target))
        ratio = min(MAX_RATIO, actual * state.online / estimated)
        if state.mean is None:
            state.mean = ratio
        else:
            state.deviation += ALPHA * (abs(ratio - state.mean) - state.deviation)
            state.mean += ALPHA * (ratio - state.mean)
        state.observations += 1
        online = max(1.0, math.ceil((state.mean + 2 * state.deviation) * 100 - 1e-9) / 100)
        if online != state.online:
            state.online = online
            counter = state.counter()
            _set_override(key, None if counter is base_counter_for(target) else counter)
        return state.online


def _online(target: Target) -> float:
    state = _states.get(target_key(target))
    return state.online if state is not None else 1.0


def calibration_of(target: Target) -> Calibration:
    """What recalibrate and observe_usage have set for ``target``."""
    with _lock:
        state = _states.get(target_key(target))
        if state is None:
            return Calibration(
                counter=base_counter_for(target).name,
                factor=1.0,
                online=1.0,
                mean_ratio=None,
                deviation=0.0,
                observations=0,
            )
        return Calibration(
            counter=state.counter().name,
            factor=state.factor,
            online=state.online,
            mean_ratio=state.mean,
            deviation=state.deviation,
            observations=state.observations,
        )


def _clear_caches() -> None:
    """Forget loaded counters, failed loads, per-target overrides and calibrations (tests).

    Here, at the top of the package's state: calibrations scale the counters ``_choose`` loads.
    """
    _choose._clear()
    with _lock:
        _states.clear()
