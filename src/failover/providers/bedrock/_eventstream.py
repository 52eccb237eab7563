"""AWS event-stream framing (``application/vnd.amazon.eventstream``) in, SSE events out.

Bedrock's ``ConverseStream`` answers with binary frames, not ``text/event-stream``: each
message is a prelude (total length, headers length, CRC-32), typed headers, a payload and a
CRC-32 of the whole. The frames are read by botocore's own parser
(``botocore.eventstream.EventStreamBuffer``, which checks both checksums and the size
limits); this module only turns each message into the :class:`~._base.SSEEvent` a
:class:`~._base.StreamParser` reads, so the parser never sees the framing:

* ``:message-type: event``: ``SSEEvent(event=<:event-type>, data=<payload text>)``, e.g.
  ``contentBlockDelta`` with ``{"contentBlockIndex": 0, "delta": {"text": "Hi"}}``;
* ``:message-type: exception``: ``SSEEvent(event=<:exception-type>, data=<payload text>)``,
  e.g. ``throttlingException`` with ``{"message": "..."}``;
* ``:message-type: error``: ``SSEEvent(event=<:error-code>, data={"message": <:error-message>})``;
* any other message type: an :class:`~._base.SSEComment` (proof the stream is alive, no content).

A frame botocore refuses (a checksum mismatch, a length past its limits) ends the decoding:
one ``SSEEvent(event=MALFORMED, data=<why>)`` is returned and every later byte is ignored
(nothing after a broken frame can be trusted to start at a frame boundary); the dialect's
parser turns it into a failure. A body that starts with ``{`` or ``[`` is not framed at all
(a frame's first byte is the top byte of its length, never that large): it yields nothing,
so the router reads it as the plain JSON answer it is.

botocore is imported when the first decoder is made (the ``bedrock`` extra).
"""

from __future__ import annotations

import json
from typing import Any, Final

from .._base import SSEComment, SSEEvent
from .._sse import MAX_EVENT_CHARS, EventTooLarge

__all__ = ["MALFORMED", "EventStreamDecoder"]

MALFORMED: Final = ":malformed-frame"  # the event name of a frame botocore could not read


class EventStreamDecoder:
    """Feed body chunks as they arrive (any boundary, even inside a prelude); ``flush`` at the end.

    ``limit``: the most bytes one message may take; a longer one raises :class:`EventTooLarge`
    as soon as that many bytes of it are buffered.
    """

    __slots__ = ("_buffer", "_done", "_limit", "_parser_error", "_pending", "_plain", "_started")

    def __init__(self, limit: int = MAX_EVENT_CHARS) -> None:
        try:
            from botocore.eventstream import EventStreamBuffer, ParserError
        except ImportError as exc:  # pragma: no cover - the bedrock extra brings it
            raise ImportError(
                f"reading Bedrock streams needs botocore: pip install 'failover[bedrock]' ({exc})"
            ) from exc
        self._buffer: Any = EventStreamBuffer()
        self._parser_error: type[Exception] = ParserError
        self._limit = limit
        self._pending = 0  # bytes buffered that no complete message has taken yet
        self._started = False
        self._plain = False  # the body is a JSON document, not frames
        self._done = False  # a frame was refused: the rest is ignored

    def feed(self, chunk: bytes) -> list[SSEEvent | SSEComment]:
        out: list[SSEEvent | SSEComment] = []
        if not chunk or self._done or self._plain:
            return out
        if not self._started:
            self._started = True
            if chunk[:1] in (b"{", b"["):
                self._plain = True
                return out
        self._buffer.add_data(chunk)
        self._pending += len(chunk)
        while True:
            try:
                message = self._buffer.next()
            except StopIteration:
                break
            except self._parser_error as exc:
                self._done = True
                out.append(SSEEvent(event=MALFORMED, data=f"{type(exc).__name__}: {exc}"))
                return out
            self._pending -= message.prelude.total_length
            item = _item(message.headers, message.payload)
            if item is not None:
                out.append(item)
        if self._pending > self._limit:
            raise EventTooLarge(self._limit)
        return out

    def flush(self) -> list[SSEEvent | SSEComment]:
        """Nothing is dispatched at the end: a frame cut short is simply not a message (the
        dialect's parser sees the stream end without its terminal event)."""
        return []


def _item(headers: dict[str, Any], payload: bytes) -> SSEEvent | SSEComment | None:
    kind = headers.get(":message-type")
    if kind == "event":
        return SSEEvent(event=str(headers.get(":event-type") or ""), data=payload.decode("utf-8", errors="replace"))
    if kind == "exception":
        return SSEEvent(event=str(headers.get(":exception-type") or ""), data=payload.decode("utf-8", errors="replace"))
    if kind == "error":
        message = str(headers.get(":error-message") or "")
        return SSEEvent(event=str(headers.get(":error-code") or "error"), data=json.dumps({"message": message}))
    return SSEComment(str(kind or ""))
