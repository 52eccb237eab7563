"""Which model wrote the reasoning a client was handed raw (:class:`Origins`).

A client of the Messages or the Responses API is given the reasoning of a model of its own
dialect as that provider sent it: a thinking block keeps its Anthropic ``signature``, a
reasoning item its OpenAI ``encrypted_content`` (the bytes are the provider's, and a client
may check them). Sent back in the next request's history, such a block names no origin, and
:func:`failover.model.readable_by` would give it to any target of that dialect, another
model among them, which refuses another model's signed or encrypted reasoning with a 400 no
fallback can recover from.

So the gateway (and the in-process SDK drop-in, one map per client) remembers, for each such
block it hands out, a 16-byte digest of its opaque
part (the signature, the encrypted content or the redacted data) and the equivalence key of
the target that wrote it; when a request comes, each block of its history with no known
origin whose digest is remembered gets that origin back, and the router leaves it out of an
attempt on another model (the attempt's record counts it, ``Attempt.reasoning_stripped``).

The map is bounded (``capacity`` entries, about 150 bytes each; the least recently handed out
or read back is forgotten first) and lives in one process: a block another worker (or a
restart) handed out is unknown here, and goes to any target of its dialect, as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from hashlib import blake2b
from typing import Final, TypeVar

from ..model import Completed, PartialOutput, Reasoning, Request, Response

__all__ = ["CAPACITY", "Origins"]

CAPACITY: Final = 100_000

_T = TypeVar("_T")


def _opaque(block: Reasoning) -> str | None:
    """The part of a block only the model that wrote it can read back, if it has one."""
    return block.signature if block.signature is not None else block.redacted


def _digest(opaque: str) -> bytes:
    return blake2b(opaque.encode(), digest_size=16).digest()


class Origins:
    """A bounded map: the digest of a reasoning block's opaque part -> the equivalence key of the
    target that wrote it (see the module docstring)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._keys: dict[bytes, str] = {}  # insertion order: the least recently used first
        self._names: dict[str, str] = {}  # one string per equivalence key, shared by its entries

    def __len__(self) -> int:
        return len(self._keys)

    def remember(self, answer: object, source: str | None) -> None:
        """Remember the blocks of ``answer`` (a Response, or a stream's Completed or PartialOutput)
        whose opaque part goes to the client raw: those of ``source``, the reasoning format the
        client's dialect reads (None: its dialect hands none out raw)."""
        if source is None:
            return
        if isinstance(answer, Completed):
            answer = answer.response
        if isinstance(answer, Response | PartialOutput):
            self._add(b for b in answer.reasoning if b.source == source)

    def _add(self, blocks: Iterable[Reasoning]) -> None:
        keys = self._keys
        for block in blocks:
            opaque = _opaque(block)
            if opaque is None or block.origin is None:
                continue
            digest = _digest(opaque)
            keys.pop(digest, None)
            keys[digest] = self._names.setdefault(block.origin, block.origin)
            if len(keys) > self.capacity:
                del keys[next(iter(keys))]  # the least recently used
        if len(self._names) > 4 * self.capacity:  # keys retired by reloads: keep only those in use
            self._names = {k: k for k in set(keys.values())}

    def known(self, request: _T) -> _T:
        """``request`` with the origin of each remembered block of its history filled in (the
        request itself when there is none, or it is not a chat Request)."""
        if not self._keys or not isinstance(request, Request):
            return request
        keys = self._keys
        changed = False
        messages = list(request.messages)
        for i, m in enumerate(messages):
            if not m.reasoning:
                continue
            blocks = list(m.reasoning)
            for j, block in enumerate(blocks):
                opaque = _opaque(block) if block.origin is None else None
                if opaque is None:
                    continue
                digest = _digest(opaque)
                origin = keys.pop(digest, None)
                if origin is None:
                    continue
                keys[digest] = origin  # read back: used most recently
                blocks[j] = dataclasses.replace(block, origin=origin)
                messages[i] = dataclasses.replace(m, reasoning=tuple(blocks))
                changed = True
        if not changed:
            return request
        return dataclasses.replace(request, messages=tuple(messages))
