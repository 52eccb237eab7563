"""A provider's prompt cache, simulated per deployment for fake providers.

A provider caches a prompt's prefix on the deployment that processed it; a later request
that starts with the same prefix, on the same deployment, is billed its cached tokens at a
fraction of the price. :class:`PromptCache` answers, for a request a deployment receives,
how many of its input tokens were cached: the longest prefix of whole messages that
deployment has seen before, when that prefix is at least 1,024 tokens, rounded down to a
multiple of 128 tokens past 1,024 (OpenAI's documented steps; Anthropic caches at marked
breakpoints, which this does not model). Tokens are estimated at four characters of a
message's JSON each. Nothing expires: a run lasts minutes, under the providers' cache
lifetimes of five minutes and more after the last use.

The lab's load mode and ``bench/balance.py`` answer each fake request with this usage, so
the router sees cache hits exactly where its balancer sent a prefix back to the deployment
that has it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

MIN_CACHED = 1024  # no provider caches a shorter prefix
CACHE_STEP = 128  # past the minimum, the cached prefix grows in steps of this many tokens
CHARS_PER_TOKEN = 4
# The request body's parts that hold the prompt, in prompt order, per dialect (OpenAI Chat,
# Anthropic, Gemini): a system field, then the messages.
_PROMPT_KEYS = ("system", "systemInstruction", "messages", "contents")


class PromptCache:
    """Per deployment (a name), the digests of every message prefix it has processed."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, set[bytes]] = {}

    def usage(self, deployment: str, body: Mapping[str, Any] | None) -> tuple[int, int]:
        """(input tokens, cached input tokens) of a request body reaching ``deployment``; its
        prefixes are cached from now on."""
        seen = self._seen.setdefault(deployment, set())
        digest = hashlib.sha256()
        total = hit = 0
        for part in _prompt(body):
            text = json.dumps(part, sort_keys=True, separators=(",", ":"))
            digest.update(text.encode())
            total += max(1, len(text) // CHARS_PER_TOKEN)
            key = digest.digest()
            if key in seen:
                hit = total
            else:
                seen.add(key)
        return max(1, total), cached_tokens(hit)


def cached_tokens(prefix: int) -> int:
    """What a provider bills as cached of a ``prefix`` tokens long that it has seen before."""
    if prefix < MIN_CACHED:
        return 0
    return MIN_CACHED + (prefix - MIN_CACHED) // CACHE_STEP * CACHE_STEP


def _prompt(body: Mapping[str, Any] | None) -> list[Any]:
    if body is None:
        return []
    parts: list[Any] = []
    for key in _PROMPT_KEYS:
        value = body.get(key)
        if isinstance(value, list):
            parts.extend(value)
        elif value is not None:
            parts.append(value)
    return parts


__all__ = ["CACHE_STEP", "MIN_CACHED", "PromptCache", "cached_tokens"]
