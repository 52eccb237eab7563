"""The history one target may read: reasoning of another provider or model is left out."""

from __future__ import annotations

from dataclasses import replace

from ..model import Request, readable_by

__all__ = ["readable_history"]


def readable_history(request: Request, target_key: str, source: str) -> tuple[Request, int]:
    """``request`` as ``target`` may be sent it, and how many reasoning blocks were left out.

    A provider cannot read another's thinking blocks, nor a model another model's: on a
    fallback to another provider or model the history's reasoning must be left out, or the
    new target refuses the request. The request itself is returned, untouched, when nothing
    is left out.
    """
    messages = request.messages
    if not any(m.reasoning for m in messages):
        return request, 0
    stripped = 0
    kept = []
    for m in messages:
        if m.reasoning:
            readable = tuple(r for r in m.reasoning if readable_by(r, target_key, source))
            if len(readable) != len(m.reasoning):
                stripped += len(m.reasoning) - len(readable)
                m = replace(m, reasoning=readable)
        kept.append(m)
    if not stripped:
        return request, 0
    return replace(request, messages=tuple(kept)), stripped
