"""The hook protocol and the fan-out the Router calls."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Protocol

from ._events import Event

log = logging.getLogger("failover.telemetry")


class Hook(Protocol):
    """Receives every event of every request, synchronously, on the event loop.

    Keep it quick (hand slow work to a queue); an exception it raises is logged and ignored.

    >>> events = []
    >>> router = Router(routes, hooks=[events.append])
    """

    def __call__(self, event: Event, /) -> None: ...


class Hooks:
    """Calls each hook in turn; one that raises is logged and never breaks the request.

    Falsy when empty, so the Router builds no event at all when nobody listens.
    """

    __slots__ = ("_hooks",)

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self._hooks: tuple[Hook, ...] = tuple(hooks)

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def __len__(self) -> int:
        return len(self._hooks)

    def __iter__(self) -> Iterator[Hook]:
        return iter(self._hooks)

    def __repr__(self) -> str:
        return f"Hooks({list(self._hooks)!r})"

    def __call__(self, event: Event, /) -> None:
        for hook in self._hooks:
            try:
                hook(event)
            except Exception:
                log.exception("telemetry hook %r failed on %s", hook, type(event).__name__)
