"""What the balancer reads for one request (:class:`~failover.policy.LoadView`): the router's
load board (requests in flight, peak-EWMA latency, the provider's quota headers) and each
deployment's client-side limiter, asked for this request's tokens."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from ..model import Envelope, Request, Route, Target
from ..policy import LimiterBoard, LoadBoard, Placement, affinity_key, balance, rendezvous

# Requests in flight below which a deployment is never over its share for affinity: with a few
# in flight, the bound alone (1.25 x the mean) moved 12% of a conversation's turns off the
# deployment that cached its prefix (bench/balance.py), with no deployment near its capacity.
AFFINITY_FLOOR = 4.0


class RequestLoad:
    """The :class:`~failover.policy.LoadView` of one request."""

    __slots__ = ("input_tokens", "latency", "limiters", "load", "output_tokens", "outstanding")

    def __init__(
        self,
        load: LoadBoard,
        limiters: LimiterBoard | None,
        input_tokens: Callable[[Target], int],
        output_tokens: Callable[[Target], int],
    ) -> None:
        self.load = load
        self.limiters = limiters
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        # the board's own methods, bound once: the balancer reads them for every deployment
        self.outstanding: Callable[[Target], int] = load.outstanding
        self.latency: Callable[[Target, float], float | None] = load.latency

    def share_left(self, target: Target, now: float) -> float | None:
        said = self.load.share_left(target, now)
        limiter = self.limiters.existing(target) if self.limiters is not None else None
        ours = None if limiter is None else limiter.share_left(now)
        if said is None or ours is None:
            return said if ours is None else ours
        return min(said, ours)

    def wait(self, target: Target, now: float) -> float:
        limiter = self.limiters.existing(target) if self.limiters is not None else None
        if limiter is None:
            return 0.0
        return limiter.wait_for(self.input_tokens(target), self.output_tokens(target), now)


def balancer(
    route: Route, view: RequestLoad, now: float, rng: random.Random, request: Request, envelope: Envelope
) -> Callable[[list[Target]], tuple[list[Target], Placement | None]]:
    """The route's balancer for one request, as :func:`~failover.policy.plan` asks it (only
    when two or more deployments could serve: the affinity key is worked out only then)."""
    weights = dict(route.weights) if route.balance == "weighted" else {}

    def weight(target: Target) -> float:
        return weights.get(target.name, 1.0)

    def affine(ready: Sequence[Target], loads: Sequence[float]) -> list[int] | None:
        key = affinity_key(request, envelope.affinity_key)
        return None if key is None else rendezvous(key, [t.name for t in ready], loads, floor=AFFINITY_FLOOR)

    def order(kept: Sequence[Target]) -> tuple[list[Target], Placement | None]:
        return balance(kept, route.balance, view, now, rng, weights=weight, affine=affine if route.affinity else None)

    return order


__all__ = ["AFFINITY_FLOOR", "RequestLoad", "balancer"]
