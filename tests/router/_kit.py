from __future__ import annotations

import random
from collections.abc import Iterable

from failover import Capability, Price, Route, Router, Target, Timeouts
from failover.policy import Backoff, BreakerBoard, NoBreakers, RetryBudget, Unlimited
from failover.testing import FakeNetwork, FakeProvider

C = Capability
ALL = frozenset({C.CHAT, C.VISION, C.STRUCTURED_OUTPUT, C.TOOLS})


def target(
    p: FakeProvider,
    *,
    caps: Iterable[Capability] = ALL,
    attempts: int = 1,
    cap: float = 1.0,
    window: int | None = 128_000,
    price: Price | None = None,
    key: str | None = None,
) -> Target:
    return p.target(
        capabilities=frozenset(caps),
        timeouts=Timeouts(connect=cap, total=cap, min_useful=0.05),
        max_attempts=attempts,
        context_window=window,
        price=price or Price(input_per_mtok=1.0, output_per_mtok=2.0),
        equivalence_key=key,
        tokenizer="estimate",
    )


def router(
    primary: Iterable[Target],
    fallbacks: Iterable[Target] = (),
    *providers: FakeProvider,
    budget: RetryBudget | Unlimited | None = None,
    backoff: Backoff | None = None,
    breakers: BreakerBoard | NoBreakers | None = None,
    fallback_reserve: float | None = None,
) -> Router:
    route = Route(name="r", primary=tuple(primary), fallbacks=tuple(fallbacks), fallback_reserve=fallback_reserve)
    return Router(
        [route],
        transport=FakeNetwork(*providers),
        retry_budget=budget if budget is not None else Unlimited(),
        backoff=backoff or Backoff(base=0.1, cap=1.0),
        rng=random.Random(1),
        breakers=breakers if breakers is not None else NoBreakers(),
    )
