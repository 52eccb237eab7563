"""Reasoning: what a model thought before it answered, kept as its provider sent it.

Reasoning models send their thinking beside the answer: Anthropic as ``thinking`` blocks
(each with a ``signature``) and ``redacted_thinking`` blocks (encrypted ``data``), Gemini as
thought parts and ``thoughtSignature`` tokens, the OpenAI Responses API as ``reasoning``
items (a summary and ``encrypted_content``), DeepSeek and other OpenAI-compatible servers
as ``reasoning_content`` (or ``reasoning``) text beside the chat answer.

A :class:`Reasoning` block carries the text a person may read and the opaque parts only the
model that wrote them can read back (``signature``, ``redacted``). Those opaque parts are
why history needs care on a fallback: a model cannot read another provider's thinking (a
signature from Anthropic means nothing to Gemini), nor another model's (a block signed by
one Claude model is refused by another). So every block names its ``source`` (the format it
came in) and, when failover produced it, its ``origin`` (the equivalence key of the target
that wrote it). :func:`readable_by` is the rule the router applies to the history of every
attempt:

- a block whose ``origin`` is the target's own equivalence key is kept (the same model,
  on this or another cloud: Anthropic signatures are valid on Bedrock and Vertex too);
- a block with no known origin (history a client sent) is kept when its ``source`` is the
  format the target's dialect reads (the gateway gives a block it handed out raw its origin
  back first: see :mod:`failover.inbound._origins`);
- everything else is left out of that attempt, and the attempt's record counts it
  (``Attempt.reasoning_stripped``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["REASONING_SOURCES", "Reasoning", "readable_by"]

# The formats reasoning arrives in: the dialect whose wire carries it.
ANTHROPIC: Final = "anthropic"  # thinking / redacted_thinking blocks with signatures
GEMINI: Final = "gemini"  # thought parts and thoughtSignature tokens
OPENAI: Final = "openai"  # Chat Completions servers: reasoning_content / reasoning text (no signature)
OPENAI_RESPONSES: Final = "openai-responses"  # Responses API reasoning items: summary, encrypted_content
REASONING_SOURCES: Final = frozenset({ANTHROPIC, GEMINI, OPENAI, OPENAI_RESPONSES})


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    """One block of a model's reasoning.

    ``text``: the thinking (or its summary) as readable text; empty for a redacted block or
    a bare signature. ``signature``: the provider's token that lets the same model read the
    block back (Anthropic ``signature``, Gemini ``thoughtSignature``, OpenAI
    ``encrypted_content``); None when the format has none. ``redacted``: the encrypted
    ``data`` of an Anthropic ``redacted_thinking`` block. ``source``: the format it came in
    (a dialect name). ``origin``: the equivalence key of the target that produced it, None
    when failover did not (a client's history).
    """

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    source: str
    origin: str | None = None

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        extra = ", signed" if self.signature else ""
        extra += ", redacted" if self.redacted is not None else ""
        return f"Reasoning({shown!r}, source={self.source!r}{extra})"


def readable_by(block: Reasoning, target_key: str, target_source: str) -> bool:
    """Whether a target (its equivalence key, and the reasoning format its dialect reads) may
    be sent ``block`` in the history of a request. See the module docstring."""
    if block.origin is not None:
        return block.origin == target_key
    return block.source == target_source
