"""The policy objects of a ``state:`` config section, and closing them.

``Router.from_config`` asks :func:`shared_policies` for the breakers, limiters, retry budget
and balancer's load board that keep their state in the configured store; the memory backend
asks for nothing, so the router builds its usual in-process objects.
"""

from __future__ import annotations

from typing import Any

from ..state import GuardedStore, StateConfig
from ._balance import LoadBoard
from ._budget import RetryBudget, Unlimited
from ._shared_load import SharedLoadBoard
from .breakers import BreakerBoard, NoBreakers
from .limits import LimiterBoard


def shared_policies(state: StateConfig, retry_budget: RetryBudget) -> dict[str, Any]:
    """Router keyword arguments for ``state`` (empty for the memory backend)."""
    store = state.build()
    if store is None:
        return {}
    budget = RetryBudget(
        ratio=retry_budget.ratio,
        floor=retry_budget.floor,
        window=retry_budget.window,
        scope=retry_budget.scope,
        store=store,
    )
    limiters = LimiterBoard(store=store, lease=state.lease)
    return {
        "breakers": BreakerBoard(store=store),
        "limiters": limiters,
        "retry_budget": budget,
        "load": SharedLoadBoard(store, limiters=limiters),
    }


async def close_shared(
    breakers: BreakerBoard | NoBreakers,
    limiters: LimiterBoard | None,
    budget: RetryBudget | Unlimited,
    load: LoadBoard | None = None,
) -> None:
    """Let background writes reach the store, then close it (nothing to do in memory)."""
    stores: list[GuardedStore] = []
    if isinstance(load, SharedLoadBoard):  # first: it says goodbye to the fleet on the store
        await load.aclose()
        stores.append(load.store)
    if isinstance(breakers, BreakerBoard) and breakers.store is not None:
        await breakers.drain()
        stores.append(breakers.store)
    if limiters is not None and limiters.store is not None:
        await limiters.drain()
        stores.append(limiters.store)
    if isinstance(budget, RetryBudget) and budget.store is not None:
        await budget.drain()
        stores.append(budget.store)
    for s in {id(s): s for s in stores}.values():
        await s.aclose()
