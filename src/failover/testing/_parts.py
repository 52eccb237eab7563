"""What the fake providers' answers are made of, before any dialect shapes them: the answer a
reply stands for (text, tool calls, stop, usage, reasoning) and the ways its text and tool
arguments are cut into stream deltas. Shared by every dialect's renderer; knows none of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "Call", "dumps", "in_turn", "interleaved", "pieces", "split_args"]


@dataclass(slots=True)
class Call:
    id: str
    name: str
    args: Any  # the decoded object, or the raw text when malformed
    text: str  # the arguments as JSON text (or the broken text)
    valid: bool = True


@dataclass(slots=True)
class Answer:
    text: str | None
    calls: list[Call]
    stop: str  # end | tool | length | refusal | filter | malformed
    refusal: str | None
    input_tokens: int
    output_tokens: int  # reasoning included
    reasoning: str | None = None
    reasoning_tokens: int = 0  # part of output_tokens
    signature: str = ""  # the fake signature of the reasoning (Anthropic signature, Gemini thoughtSignature)
    redacted: str | None = None  # Anthropic: the data of a redacted_thinking block
    interleave: bool = False  # OpenAI streams: interleave the fragments of parallel tool calls
    cached_tokens: int = 0  # prompt-cache reads, part of input_tokens (each dialect's own field)


def pieces(text: str) -> list[str]:
    """Stream deltas: a word (with its trailing space) at a time."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def in_turn(calls: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each call's deltas, one call after the other (what OpenAI itself sends)."""
    return [d for deltas in calls for d in deltas]


def interleaved(calls: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The calls' deltas interleaved: each round, every call already started sends its next
    delta and one more call starts. For two calls: head 0, fragment 0, head 1, fragment 0,
    fragment 1, ... (each call's own deltas stay in order, as the wire's ``index`` requires)."""
    queues = [list(deltas) for deltas in calls]
    out: list[dict[str, Any]] = []
    started = 0
    while started < len(queues) or any(queues):
        started = min(started + 1, len(queues))
        for queue in queues[:started]:
            if queue:
                out.append(queue.pop(0))
    return out


def split_args(text: str) -> list[str]:
    size = 8
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
