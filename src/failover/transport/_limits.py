"""How much of an upstream's answer a transport will hold, and bounded content decoding.

An upstream is not trusted to be small: a proxy that never ends a body, an answer padded to
gigabytes or a 1 MiB gzip body that inflates to 1 GiB must not take the gateway's memory or
stall its event loop. Every transport applies the same two limits per attempt:

* ``max_response_bytes``: the decoded body of a plain (non-streamed) response, an error body
  read from a stream request, and one event (or line) of an event stream;
* ``max_decoded_ratio``: decoded bytes per compressed byte. Past the first MiB, a compressed
  body (plain or streamed) may not inflate further than this ratio.

Decoding is done in bounded steps (``zlib`` with ``max_length``), so no step inflates more
than the room the limits leave: a bomb is stopped after a few MiB of work, in one loop turn.
Exceeding either limit fails the attempt with ``TransportError("too_large")`` after the
connection is closed (never pooled again); the router reads it as ``provider_server_error``.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Mapping

from ._types import TransportError

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_DECODED_RATIO = 100
RATIO_FLOOR = 1024 * 1024  # below this many decoded bytes the ratio is not checked
DECODED_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate"})


def check_limits(max_response_bytes: int, max_decoded_ratio: int) -> tuple[int, int]:
    if max_response_bytes < 1:
        raise ValueError(f"max_response_bytes must be at least 1, got {max_response_bytes}")
    if max_decoded_ratio < 1:
        raise ValueError(f"max_decoded_ratio must be at least 1, got {max_decoded_ratio}")
    return max_response_bytes, max_decoded_ratio


def too_large(what: str, limit: int) -> TransportError:
    """The failure of an answer over ``max_response_bytes``."""
    return TransportError(
        "too_large",
        f"the upstream's {what} is larger than max_response_bytes ({limit} bytes): "
        "reading stopped and the connection was closed",
    )


def inflated(ratio: int, encoded: int) -> TransportError:
    """The failure of a compressed body inflating past ``max_decoded_ratio``."""
    return TransportError(
        "too_large",
        f"the upstream's compressed body inflates more than max_decoded_ratio ({ratio}x) of its "
        f"{encoded} compressed bytes (a decompression bomb?): reading stopped and the connection was closed",
    )


class BoundedDecoder:
    """gzip / deflate (zlib-wrapped or raw) decoding, chunk by chunk, within the limits.

    ``cap`` bounds the whole decoded body (a plain answer); ``None`` for a stream, which is
    consumed as it arrives and bounded by the ratio only (its events by the stream's parser).
    Raises ``TransportError("too_large")``; ``zlib.error`` when the body is not what it says.
    """

    __slots__ = ("_cap", "_d", "_ratio", "_raw", "decoded", "encoded")

    def __init__(self, encoding: str, cap: int | None, ratio: int) -> None:
        self._raw = encoding == "deflate"
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the header
        self._cap = cap
        self._ratio = ratio
        self.encoded = 0
        self.decoded = 0

    def feed(self, data: bytes) -> bytes:
        self.encoded += len(data)
        room = max(self._ratio * self.encoded, RATIO_FLOOR) - self.decoded
        cap = self._cap
        if cap is not None and cap - self.decoded < room:
            room = cap - self.decoded
        try:
            out = self._d.decompress(data, room + 1)  # at most one byte past the room: never more work
        except zlib.error:
            if not self._raw or self.decoded:
                raise
            self._raw = False  # "deflate" sent as a raw stream, as some servers do
            self._d = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._d.decompress(data, room + 1)
        self.decoded += len(out)
        if len(out) > room:
            raise self._over()
        return out

    def flush(self) -> bytes:
        out = self._d.flush()
        self.decoded += len(out)
        cap = self._cap
        if (cap is not None and self.decoded > cap) or self.decoded > max(self._ratio * self.encoded, RATIO_FLOOR):
            raise self._over()
        return out

    def _over(self) -> TransportError:
        cap = self._cap
        if cap is not None and self.decoded > cap:
            return too_large("body", cap)
        return inflated(self._ratio, self.encoded)


def decoder_for(encoding: str, cap: int | None, ratio: int) -> BoundedDecoder | None:
    """A decoder for a ``content-encoding`` this client asked for, else None (passed as is)."""
    enc = encoding.strip().lower()
    return BoundedDecoder(enc, cap, ratio) if enc in DECODED_ENCODINGS else None


async def read_bounded(chunks: AsyncIterator[bytes], headers: Mapping[str, str], cap: int, ratio: int) -> bytes:
    """A whole body from its undecoded ``chunks``, decoded, at most ``cap`` bytes (else
    ``TransportError("too_large")``; a declared ``content-length`` over it is refused unread)."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_large(f"body ({declared} bytes declared)", cap)
    enc = headers.get("content-encoding")
    decoder = None if enc is None else decoder_for(enc, cap, ratio)
    parts: list[bytes] = []
    size = 0
    try:
        async for raw in chunks:
            chunk = raw if decoder is None else decoder.feed(raw)
            size += len(chunk)
            if size > cap:
                raise too_large("body", cap)
            parts.append(chunk)
        if decoder is not None:
            parts.append(decoder.flush())
    except zlib.error as exc:
        raise TransportError("read", f"the body does not decode as declared: {exc}") from None
    return b"".join(parts)
