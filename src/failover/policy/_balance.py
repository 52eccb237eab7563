"""Balancing equivalents: which deployment of one model takes a request.

A route's primary tier is one model on several deployments (regions, accounts, capacity
pools), each a quota of its own: sharing load across them is capacity. :func:`balance` orders
the tier's eligible targets for one request (cross-model fallbacks stay an ordered tier after
it: balancing never crosses the contract), by the route's ``balance``:

``order``        the configured order (the first is preferred while it can take the request)
``weighted``     a weighted random draw (``Route.weights``, 1 each by default)
``least_busy``   the fewest requests in flight, the configured order among equals (the
                 default: never worse than second over the scenarios of bench/balance.py)
``p2c``          power of two random choices over a peak-EWMA of latency x (1 + 0.1 x requests
                 in flight): the faster and less loaded of two random picks
``quota``        the most of its quota left (the client-side limiter's buckets, and the share
                 the provider's rate-limit headers say remains), the least busy among equals

Whatever the strategy, a deployment whose client-side limiter would make the request wait
(its buckets are empty, its queue is not, all its concurrency slots are taken, or a 429 blocks
it) goes after every one that can take the request now: no request waits in one queue while an
equivalent has room. With a prompt-cache affinity key, the deployment the key hashes to
(rendezvous hashing with bounded load) is preferred while it can take the request now and is
not over its share: requests that share a prompt prefix find the deployment that cached it.

Everything here is a read of :class:`LoadView` at ``now`` plus draws from the ``rng`` passed in:
asked twice with equally seeded sources, it answers the same and changes nothing.
"""

from __future__ import annotations

import math
import random
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ..model import Balance, RateLimitInfo, Target

BALANCES: tuple[Balance, ...] = ("order", "weighted", "least_busy", "p2c", "quota")

# Peak-EWMA's time constant (Finagle's default): a latency observation weighs e^-1 after 10 s.
# Read between observations, the cost decays towards zero at that rate, so a deployment left
# alone for being slow is tried again before long (its next answer says whether it recovered).
PEAK_DECAY_S = 10.0
# p2c's cost is latency x (1 + LOAD_WEIGHT x requests in flight): a model API answers concurrent
# requests side by side (a queueing server's cost grows with each, Linkerd's latency x (in flight
# + 1)); in flight still parts deployments of equal latency, and each one's quota shares its load.
LOAD_WEIGHT = 0.1
# A share of quota under this counts as this much (quota strategy, p2c's cost): a deployment
# with 1% left is not infinitely worse than one with 5%, only much less attractive.
MIN_SHARE = 0.05


class LoadView(Protocol):
    """What :func:`balance` reads about each deployment, at ``now``."""

    def outstanding(self, target: Target) -> int:
        """Requests in flight to ``target`` (this process's, or the fleet's on a shared store)."""
        ...

    def latency(self, target: Target, now: float) -> float | None:
        """Its peak-EWMA latency (seconds), decayed to ``now``; None before its first answer."""
        ...

    def share_left(self, target: Target, now: float) -> float | None:
        """The share of its quota left, 0..1 (the tightest of its limiter's buckets and of what
        the provider's headers said); None when nothing says."""
        ...

    def wait(self, target: Target, now: float) -> float:
        """How long its client-side limiter would hold this request; 0: it can go now."""
        ...


class Placement(NamedTuple):
    """How the balancer chose, for the record: ``strategy``, the deployment put first, and why
    in a few words (``affinity`` when a key decided it, ``spill`` when the preferred one had
    no room). A tuple: one is made for every balanced request, and a frozen dataclass costs
    three ``object.__setattr__`` calls to build."""

    strategy: str
    chosen: str
    reason: str

    def __str__(self) -> str:
        return f"{self.strategy}: {self.chosen} ({self.reason})"


def balance(
    targets: Sequence[Target],
    strategy: Balance,
    view: LoadView,
    now: float,
    rng: random.Random,
    *,
    weights: Callable[[Target], float] | None = None,
    affine: Callable[[Sequence[Target], Sequence[float]], list[int] | None] | None = None,
) -> tuple[list[Target], Placement | None]:
    """``targets`` (one tier's eligible equivalents, in configured order) in the order to try
    them, and how the first was chosen (None with one target or none).

    ``affine``: the affinity order, given the targets that can go now and their requests in
    flight: their indices in the order the request's key prefers them (the first within its
    share of the load), None to let the strategy choose."""
    if len(targets) < 2:
        return list(targets), None
    waits = [view.wait(t, now) for t in targets]
    if max(waits) > 0:
        ready = [t for t, w in zip(targets, waits, strict=True) if w <= 0]
        held = sorted((w, i) for i, w in enumerate(waits) if w > 0)  # the shortest wait first
        waiting = [targets[i] for _, i in held]
    else:  # the usual case: every one can take it now
        ready, waiting = list(targets), []
    if not ready:  # every one would hold it: the shortest wait first
        return waiting, Placement(strategy, waiting[0].name, "every one is at its client-side rate limit")
    busy = [view.outstanding(t) for t in ready]  # read once: the key and the strategies use it
    preferred = affine(ready, busy) if affine is not None and len(ready) > 1 else None
    if preferred is not None:  # the key's order throughout: a failover goes where the key goes next
        ordered, reason = [ready[i] for i in preferred], "affinity"
    else:
        ordered, reason = _strategy(ready, busy, strategy, view, now, rng, weights)
    if strategy == "order" and targets[0] in waiting:
        reason = f"spill: {targets[0].name} is at its client-side rate limit"
    return ordered + waiting, Placement(strategy, ordered[0].name, reason)


def _strategy(
    ready: list[Target],
    busy: list[int],
    strategy: Balance,
    view: LoadView,
    now: float,
    rng: random.Random,
    weights: Callable[[Target], float] | None,
) -> tuple[list[Target], str]:
    if strategy == "order" or len(ready) < 2:
        return ready, "configured order"
    if strategy == "least_busy":  # sorted is stable: the configured order among equals
        return [ready[i] for i in sorted(range(len(ready)), key=busy.__getitem__)], "fewest in flight"
    if strategy == "quota":
        keys = [(-_share(view, t, now), n) for t, n in zip(ready, busy, strict=True)]
        return [ready[i] for i in sorted(range(len(ready)), key=keys.__getitem__)], "most quota left"
    if strategy == "weighted":
        return _weighted(ready, weights or (lambda t: 1.0), rng), "weighted draw"
    return _p2c(ready, busy, view, now, rng), "lower latency x load of two"


def _share(view: LoadView, target: Target, now: float) -> float:
    share = view.share_left(target, now)
    return 1.0 if share is None else max(MIN_SHARE, share)


def _weighted(ready: list[Target], weight: Callable[[Target], float], rng: random.Random) -> list[Target]:
    """A draw without replacement, each in proportion to its weight (a weight of 0: last)."""
    left = list(ready)
    out: list[Target] = []
    while left:
        total = sum(max(0.0, weight(t)) for t in left)
        if total <= 0:
            out.extend(left)
            break
        x = rng.random() * total
        for i, t in enumerate(left):
            x -= max(0.0, weight(t))
            if x < 0 or i == len(left) - 1:
                out.append(left.pop(i))
                break
    return out


def _p2c(ready: list[Target], busy: list[int], view: LoadView, now: float, rng: random.Random) -> list[Target]:
    """Two distinct random picks; the one of lower cost first, then the rest by cost. A
    deployment with no latency yet costs the highest known one (zero when none is known), so a
    new one is tried without being flooded."""
    # Loops rather than generators and helpers: this runs for every request of a p2c route.
    costs: list[float] = []
    unmeasured: list[tuple[int, float]] = []
    slowest = 0.0
    for k, t in enumerate(ready):
        share = view.share_left(t, now)
        factor = (1.0 + LOAD_WEIGHT * busy[k]) / (1.0 if share is None else share if share > MIN_SHARE else MIN_SHARE)
        latency = view.latency(t, now)
        if latency is None:
            unmeasured.append((k, factor))
            costs.append(0.0)
        else:
            slowest = latency if latency > slowest else slowest
            costs.append(latency * factor)
    for k, factor in unmeasured:  # costed at the slowest measured latency
        costs[k] = slowest * factor
    n = len(ready)  # two distinct picks, uniform over the pairs (random.sample's Python is ~5x this)
    i = int(rng.random() * n)
    j = int(rng.random() * (n - 1))
    j += j >= i
    first = i if costs[i] <= costs[j] else j
    rest = sorted(range(n), key=costs.__getitem__)
    rest.remove(first)
    return [ready[first], *[ready[k] for k in rest]]


# -- what the balancer reads: one process's view ----------------------------------------------


@dataclass(slots=True)
class _Load:
    outstanding: int = 0
    starts: list[float] = field(default_factory=list)  # when each request in flight started
    cost: float | None = None  # peak-EWMA latency at ``stamp``
    stamp: float = 0.0
    share: float | None = None  # of the provider's quota left, per its headers
    share_until: float = math.inf  # when that reading is over (its reset)


class LoadBoard:
    """Per deployment (a target's name): requests in flight, a peak-EWMA of latency, and the
    share of the provider's quota its rate-limit headers said was left.

    Peak-EWMA (Finagle): an answer slower than the current cost replaces it at once (a
    deployment that slows down is avoided at once); a faster one is blended in, weighted by the
    time since the last (``decay``). Read between answers, the cost decays towards zero at the
    same rate, so a deployment left alone is tried again and re-measured."""

    __slots__ = ("_loads", "decay")

    def __init__(self, decay: float = PEAK_DECAY_S) -> None:
        self.decay = decay
        self._loads: dict[str, _Load] = {}

    def _of(self, target: Target) -> _Load:
        load = self._loads.get(target.name)
        if load is None:
            load = self._loads[target.name] = _Load()
        return load

    def started(self, target: Target, now: float) -> None:
        load = self._of(target)
        load.outstanding += 1
        insort(load.starts, now)  # kept in order: the oldest is the first (at the end, as a rule)

    def ended(self, target: Target, started: float, latency: float | None, now: float) -> None:
        """An attempt on ``target`` that started at ``started`` is over; ``latency``: how long it
        took to answer (None: it failed, which says nothing of its speed)."""
        load = self._of(target)
        load.outstanding = max(0, load.outstanding - 1)
        if started in load.starts:
            load.starts.remove(started)
        if latency is None:
            return
        if load.cost is None or latency > load.cost:
            load.cost = latency
        else:
            w = math.exp(-max(0.0, now - load.stamp) / self.decay)
            load.cost = load.cost * w + latency * (1.0 - w)
        load.stamp = now

    def outstanding(self, target: Target) -> int:
        load = self._loads.get(target.name)
        return 0 if load is None else load.outstanding

    def latency(self, target: Target, now: float) -> float | None:
        """The decayed peak-EWMA, and at least the age of its oldest request in flight: a
        deployment that stopped answering is seen before its requests time out."""
        load = self._loads.get(target.name)
        if load is None or load.cost is None:  # not measured yet: the balancer assumes one
            return None
        since = now - load.stamp
        decayed = load.cost * math.exp(-since / self.decay) if since > 0 else load.cost
        starts = load.starts  # in the order they started: the oldest first
        return decayed if not starts or now - starts[0] <= decayed else now - starts[0]

    def observe(self, target: Target, info: RateLimitInfo | None, now: float) -> None:
        """Follow a response's rate-limit headers: the tightest remaining/limit, until its reset."""
        if info is None:
            return
        shares: list[tuple[float, float | None]] = []
        for remaining, limit, reset in (
            (info.remaining_requests, info.limit_requests, info.reset_requests),
            (info.remaining_tokens, info.limit_tokens, info.reset_tokens),
            (info.remaining_input_tokens, info.limit_input_tokens, info.reset_input_tokens),
            (info.remaining_output_tokens, info.limit_output_tokens, info.reset_output_tokens),
        ):
            if remaining is not None and limit:
                shares.append((max(0.0, min(1.0, remaining / limit)), reset))
        if not shares:
            return
        share, reset = min(shares, key=lambda s: s[0])
        load = self._of(target)
        load.share = share
        load.share_until = math.inf if reset is None else now + max(0.0, reset)

    def share_left(self, target: Target, now: float) -> float | None:
        load = self._loads.get(target.name)
        if load is None or load.share is None or now >= load.share_until:
            return None
        return load.share

    def snapshot(self, now: float) -> dict[str, dict[str, float | int | None]]:
        """Each deployment's numbers, for operators (``/admin``, the lab)."""
        out: dict[str, dict[str, float | int | None]] = {}
        for name, load in sorted(self._loads.items()):
            decayed = None if load.cost is None else load.cost * math.exp(-max(0.0, now - load.stamp) / self.decay)
            share = load.share if now < load.share_until else None
            out[name] = {"in_flight": load.outstanding, "latency_s": decayed, "quota_left": share}
        return out


__all__ = [
    "BALANCES",
    "LOAD_WEIGHT",
    "MIN_SHARE",
    "PEAK_DECAY_S",
    "Balance",
    "LoadBoard",
    "LoadView",
    "Placement",
    "balance",
]
