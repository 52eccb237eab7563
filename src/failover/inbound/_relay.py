"""What a client was sent of one streamed answer, kept so that it can never differ from the record.

A client assembles its answer from the pieces it is sent (text deltas, reasoning deltas, a tool
call's id and name, then argument fragments); failover records the answer its dialect parser
finished (the ``Completed`` Response). The two must be equal: text, reasoning, every tool call's
id, name and arguments, in order. :class:`Relay` is the bookkeeping every renderer shares (the
Chat Completions chunks, the Messages events, the framework adapters): it is told each piece as
it is sent, says what is still missing when a call or a reasoning block is finished (the rest of
its arguments or text, when the final value extends what was sent) and, at the end, what the
answer holds that the client was never sent (a call or a block given only whole). A final value
that does NOT extend what the client already holds cannot be sent any more (a stream cannot take
a piece back): that raises :class:`RelayMismatch`, and the server ends the stream with an error
event instead of letting the client keep an answer failover did not record.

Text is kept as its length and a CRC-32 (a relay passes every delta on and keeps no second copy of
the text); a reasoning block's text and a tool call's arguments are kept while they are open, to
send the rest of them.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..model import Reasoning, Response, ToolCall

__all__ = ["Missing", "Relay", "RelayMismatch", "mismatch_message", "nth"]

T = TypeVar("T")


class RelayMismatch(Exception):
    """The answer failover finished differs from what the client was already sent, in a way no
    further piece can mend (the arguments of a call, a block's text or the text changed under
    it). The message names the part, never its content (it may hold the user's data)."""


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    done: ToolCall | None = None

    @property
    def sent(self) -> str:
        return "".join(self.parts)


@dataclass(slots=True)
class Missing:
    """What the finished answer holds that the client was never sent, in answer order."""

    text: str = ""
    reasoning: list[tuple[int, Reasoning]] = field(default_factory=list)  # (block index, block), whole
    calls: list[tuple[int, ToolCall]] = field(default_factory=list)  # (call index, call), whole


class Relay:
    """The pieces one client was sent (see the module docstring). The renderer calls the
    ``sent_*`` methods as it sends, and the ``finish_*`` / :meth:`missing` methods for what to
    send next; each raises :class:`RelayMismatch` when the record can no longer match."""

    __slots__ = ("_calls", "_calls_next", "_text_crc", "_text_len", "_thinking", "_thought", "_thought_next")

    def __init__(self) -> None:
        self._thought_next = 0  # the first reasoning block not finished yet
        self._calls_next = 0  # the first tool call not started yet
        self._text_len = 0
        self._text_crc = 0
        self._thinking: dict[int, list[str]] = {}  # reasoning block index -> text sent, while open
        self._thought: dict[int, Reasoning] = {}  # reasoning block index -> the finished block
        self._calls: dict[int, _Call] = {}

    # -- text -------------------------------------------------------------------------------------

    def sent_text(self, text: str) -> None:
        self._text_len += len(text)
        self._text_crc = zlib.crc32(text.encode("utf-8", "surrogatepass"), self._text_crc)

    @property
    def text_sent(self) -> bool:
        return self._text_len > 0

    def missing_text(self, text: str) -> str:
        """``text`` (the finished answer's) when the client was sent none of it; "" when it was
        sent all of it. Anything else cannot be mended."""
        if self._text_len == 0:
            return text
        if self._text_len != len(text) or self._text_crc != zlib.crc32(text.encode("utf-8", "surrogatepass")):
            raise RelayMismatch("the answer's text differs from the text deltas the client was sent")
        return ""

    # -- reasoning ----------------------------------------------------------------------------------

    def sent_reasoning(self, index: int, text: str) -> None:
        if index in self._thought:
            raise RelayMismatch(f"reasoning block {index} got more text after it was finished")
        self._thinking.setdefault(index, []).append(text)

    def next_reasoning(self) -> int:
        """The first reasoning block not finished yet. Blocks go out in order (a Chat Completions
        client joins their text, an Anthropic client keeps their order): a renderer holds back a
        later block's events until every earlier one is finished."""
        while self._thought_next in self._thought:
            self._thought_next += 1
        return self._thought_next

    def reasoning_open(self, index: int) -> bool:
        return index in self._thinking

    def reasoning_done(self, index: int) -> bool:
        return index in self._thought

    def finish_reasoning(self, index: int, block: Reasoning) -> str:
        """The rest of block ``index``'s text the client still needs (all of it if it was sent
        none); the block counts as sent whole afterwards. A block finished twice must be the same."""
        before = self._thought.get(index)
        if before is not None:
            if before != block:
                raise RelayMismatch(f"reasoning block {index} was finished twice, differently")
            return ""
        sent = "".join(self._thinking.pop(index, ()))
        if not block.text.startswith(sent):
            raise RelayMismatch(f"reasoning block {index}'s text differs from the deltas the client was sent")
        self._thought[index] = block
        return block.text[len(sent) :]

    # -- tool calls ---------------------------------------------------------------------------------

    def sent_call(self, index: int, call_id: str, name: str) -> None:
        self._calls[index] = _Call(call_id, name)

    def next_call(self) -> int:
        """The first tool call not started yet. Calls start in order: the openai SDK files a new
        index at the end of its list, so a call must not start before every earlier one has."""
        while self._calls_next in self._calls:
            self._calls_next += 1
        return self._calls_next

    def call_known(self, index: int) -> bool:
        return index in self._calls

    def call_done(self, index: int) -> bool:
        call = self._calls.get(index)
        return call is not None and call.done is not None

    def sent_arguments(self, index: int, arguments: str) -> None:
        self._calls[index].parts.append(arguments)

    def finish_call(self, index: int, call: ToolCall) -> str:
        """The rest of call ``index``'s arguments the client still needs; the call must have been
        started (:meth:`sent_call`) with the same id and name. A call finished twice must be the same."""
        sent = self._calls[index]
        if sent.done is not None:
            if _shown(sent.done) != _shown(call):
                raise RelayMismatch(f"tool call {index} was finished twice, differently")
            return ""
        if (sent.id, sent.name) != (call.id, call.name):
            raise RelayMismatch(f"tool call {index}'s id or name differs from the one the client was sent")
        so_far = sent.sent
        if not call.arguments.startswith(so_far):
            raise RelayMismatch(
                f"tool call {index} ({call.name}): its arguments differ from the fragments the client was sent"
            )
        sent.parts = [call.arguments]
        sent.done = call
        return call.arguments[len(so_far) :]

    # -- the end ------------------------------------------------------------------------------------

    def open_calls(self) -> list[int]:
        return sorted(i for i, c in self._calls.items() if c.done is None)

    def open_reasoning(self) -> list[int]:
        return sorted(self._thinking)

    def missing(self, resp: Response) -> Missing:
        """Check everything sent against the finished answer and list what it still lacks.

        Every open call or reasoning block must have been finished first (the renderer does it
        with the answer's own, :meth:`finish_call` / :meth:`finish_reasoning`)."""
        out = Missing(text=self.missing_text(resp.text))
        out.reasoning = _whole(self._thought, resp.reasoning, "reasoning block", self._thinking)
        calls = {i: _shown(c.done) for i, c in self._calls.items()}
        final = [_shown(c) for c in resp.tool_calls]
        open_calls = self.open_calls()
        shown = _whole(calls, final, "tool call", open_calls)
        out.calls = [(i, resp.tool_calls[i]) for i, _ in shown]
        return out


def _shown(call: ToolCall | None) -> tuple[str, str, str] | None:
    """What a client assembles of a call: its id, name and arguments (not failover's parse of them)."""
    return None if call is None else (call.id, call.name, call.arguments)


def _whole(sent: Mapping[int, T | None], final: Sequence[T], what: str, still_open: object) -> list[tuple[int, T]]:
    """Items of ``final`` by position: those sent must be equal, those never sent are returned."""
    if still_open:
        raise RelayMismatch(f"a {what} was still open at the end of the answer")
    extra = [i for i in sent if i >= len(final) or i < 0]
    if extra:
        raise RelayMismatch(f"the client was sent {what} {extra[0]}, which the answer does not hold")
    out: list[tuple[int, T]] = []
    for i, item in enumerate(final):
        if i not in sent:
            out.append((i, item))
        elif sent[i] != item:
            raise RelayMismatch(f"{what} {i} differs from the one the client was sent")
    return out


def nth(items: Sequence[T], index: int, what: str) -> T:
    """``items[index]`` of the finished answer, for a call or block the client was sent."""
    if 0 <= index < len(items):
        return items[index]
    raise RelayMismatch(f"the client was sent {what} {index}, which the answer does not hold")


def mismatch_message(exc: RelayMismatch, request_id: str) -> str:
    """The error event's message when the finished answer differs from what a stream sent."""
    return (
        f"stream_mismatch: the answer failover finished differs from what this stream already sent ({exc}); "
        f"the stream ends here so that no client keeps an answer failover did not record (request id {request_id})"
    )
