"""The balancer only orders what the selection kept: over random loads, quotas, limiter waits,
holds and strategies, it returns a permutation of the eligible deployments, puts every one that
can go now before any that would wait, and a held or ineligible deployment never comes out of
the plan."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import Envelope, Failure, FailureKind, Request, Route, Target
from failover.policy import BALANCES, HealthBoard, balance, plan, rendezvous
from failover.testing import FakeProvider

NAMES = [f"d{i}" for i in range(5)]


class _View:
    def __init__(self, data: dict[str, tuple[int, float | None, float | None, float]]) -> None:
        self.data = data

    def outstanding(self, target: Target) -> int:
        return self.data[target.name][0]

    def latency(self, target: Target, now: float) -> float | None:
        return self.data[target.name][1]

    def share_left(self, target: Target, now: float) -> float | None:
        return self.data[target.name][2]

    def wait(self, target: Target, now: float) -> float:
        return self.data[target.name][3]


def _targets(n: int) -> list[Target]:
    return [FakeProvider(NAMES[i], "openai").target(equivalence_key="m", tokenizer="estimate") for i in range(n)]


loads = st.tuples(
    st.integers(0, 50),
    st.none() | st.floats(0.01, 30),
    st.none() | st.floats(0, 1),
    st.sampled_from([0.0, 0.0, 0.001, 2.5]),
)


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(2, 5),
    data=st.lists(loads, min_size=5, max_size=5),
    strategy=st.sampled_from(BALANCES),
    seed=st.integers(0, 2**32),
    key=st.none() | st.text(min_size=1, max_size=8),
)
def test_balance_is_a_permutation_with_the_ready_ones_first(
    n: int, data: list[tuple[int, float | None, float | None, float]], strategy: str, seed: int, key: str | None
) -> None:
    targets = _targets(n)
    view = _View({t.name: data[i] for i, t in enumerate(targets)})

    def affine(ready: list[Target], load: list[float]) -> list[int] | None:
        return None if key is None else rendezvous(key, [t.name for t in ready], load)

    ordered, placement = balance(targets, strategy, view, 0.0, random.Random(seed), affine=affine)  # type: ignore[arg-type]
    assert sorted(t.name for t in ordered) == sorted(t.name for t in targets)
    waits = [view.wait(t, 0.0) for t in ordered]
    ready = [w <= 0 for w in waits]
    assert ready == sorted(ready, reverse=True), waits  # no waiting one before a ready one
    assert placement is not None and placement.chosen == ordered[0].name


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 5),
    held=st.sets(st.integers(0, 4)),
    strategy=st.sampled_from(BALANCES),
    seed=st.integers(0, 2**32),
)
def test_a_held_deployment_never_comes_out_of_a_balanced_plan(n: int, held: set[int], strategy: str, seed: int) -> None:
    targets = _targets(n)
    route = Route(name="r", primary=tuple(targets), balance=strategy)  # type: ignore[arg-type]
    health = HealthBoard()
    for i in held:
        if i < n:  # a 429 with Retry-After: the deployment's key cools down
            failure = Failure(kind=FailureKind.RATE_LIMITED, message="429", retry_after=30.0)
            health.observe(targets[i], failure, 0.1, now=0.0)
    view = _View({t.name: (0, 0.3, None, 0.0) for t in targets})
    rng = random.Random(seed)
    p = plan(
        route,
        Request.simple("hi"),
        Envelope(),
        input_tokens=lambda t: 10,
        health=health,
        now=1.0,
        balanced=lambda kept: balance(kept, route.balance, view, 1.0, rng),
    )
    chosen = {c.target.name for c in p.candidates}
    assert chosen == {targets[i].name for i in range(n) if i not in held}
