"""Context windows: the one a target declares, else the one its provider stated.

A target that declares no ``context_window`` has an unknown window: it is never assumed to be
any size. When its provider answers a context overflow stating its maximum ("This model's
maximum context length is 8192 tokens", "... > 200000 maximum", "... allowed (1048576)"), the
:class:`WindowBoard` keeps that number for the upstream endpoint and model, and from then on
:meth:`WindowBoard.known` answers it: the next request's plan leaves the target out when the
request cannot fit, and the engine skips it after another target's overflow. The learned value
is only ever what a provider said, never an estimate.
"""

from __future__ import annotations

from collections import OrderedDict

from ..model import Failure, FailureKind, Target

__all__ = ["WindowBoard", "window_of"]


def _key(target: Target) -> tuple[str, str]:
    return (target.base_url, target.model)


class WindowBoard:
    """The context windows providers stated in overflow errors, per upstream endpoint + model.

    Bounded: past ``max_entries`` the least recently learned is forgotten (a forgotten
    window is unknown again, which costs at most one more overflow)."""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max(1, max_entries)
        self._learned: OrderedDict[tuple[str, str], int] = OrderedDict()

    def learn(self, target: Target, failure: Failure | None) -> int | None:
        """Keep the window ``failure`` states for ``target``'s endpoint and model (a context
        overflow with a stated limit; anything else is ignored). The newest statement wins."""
        if failure is None or failure.kind is not FailureKind.CONTEXT_OVERFLOW:
            return None
        limit = failure.window_limit
        if limit is None or limit <= 0:
            return None
        key = _key(target)
        self._learned[key] = limit
        self._learned.move_to_end(key)
        while len(self._learned) > self.max_entries:
            self._learned.popitem(last=False)
        return limit

    def learned(self, target: Target) -> int | None:
        """The window ``target``'s provider stated, or None when none was stated yet."""
        learned = self._learned
        return learned.get(_key(target)) if learned else None  # as a rule none is: no key built

    def known(self, target: Target) -> int | None:
        """``target``'s declared window, else the learned one; None: unknown."""
        if target.context_window is not None:
            return target.context_window
        return self.learned(target)

    def source(self, target: Target) -> str:
        """How :meth:`known` knows: "declared", "stated by the provider" or "unknown"."""
        if target.context_window is not None:
            return "declared"
        return "stated by the provider" if self.learned(target) is not None else "unknown"

    def forget(self) -> None:
        self._learned.clear()

    def __len__(self) -> int:
        return len(self._learned)


def window_of(target: Target, windows: WindowBoard | None) -> int | None:
    """``target``'s known window: declared, else learned on ``windows`` (when given)."""
    if target.context_window is not None or windows is None:
        return target.context_window
    return windows.learned(target)
