"""Compact JSON on the hot path: pydantic-core's encoder and parser, with the standard
library's as the fallback, so every edge case reads exactly as ``json`` would have it.

pydantic-core (Rust, already installed with pydantic) encodes a chat completion about 4x
faster than ``json.dumps`` and parses one about 2.5x faster than ``json.loads``; a gateway
request does one of each on each side (docs/benchmarks.md). What it does not do the same way
falls back to the standard library: a value it cannot encode (a lone surrogate, an unknown
type: the same exception as before), and a body it will not parse (a UTF-8 BOM, an escaped
lone surrogate, nesting past its limit).

JSON has no NaN or Infinity. Both libraries accept and write them by default; here
:func:`dumps` refuses to write one and :func:`loads_strict` (what provider answers are read
with) refuses to read one, also a number too large for a float (``1e999``, read as infinity).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json

_SEPARATORS = (",", ":")
# A number that may overflow a float: an exponent of 3+ digits, or 300+ digits in a row (found
# as a run of "0" once every digit is one: translate and find run at memory speed, where one
# regex trying each digit position took 16x the parse of an embeddings answer). Inside a
# string either only costs the exact (slower) parse below, never a refusal.
_EXPONENT_LOWER = re.compile(rb"e\+?[0-9]{3}")  # two patterns, each with a literal first: fast
_EXPONENT_UPPER = re.compile(rb"E\+?[0-9]{3}")
_ONE_DIGIT = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 300


def may_overflow(raw: bytes) -> bool:
    # spelled out (no generator over the patterns): every request and every answer is asked
    return (
        _EXPONENT_LOWER.search(raw) is not None
        or _EXPONENT_UPPER.search(raw) is not None
        or (len(raw) >= len(_LONG_RUN) and _LONG_RUN in raw.translate(_ONE_DIGIT))
    )


class NonFiniteNumber(ValueError):
    """A JSON text holds NaN, Infinity, -Infinity or a number no float can hold."""

    def __init__(self, token: str) -> None:
        super().__init__(f"{token} is not a JSON number")
        self.token = token


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (no ASCII escaping), as ``json.dumps(separators=(",", ":"),
    ensure_ascii=False, allow_nan=False).encode()``: a non-finite float raises ValueError
    (nothing invalid is ever written)."""
    try:
        out = to_json(value)
    except PydanticSerializationError:
        return json.dumps(value, separators=_SEPARATORS, ensure_ascii=False, allow_nan=False).encode("utf-8")
    # "NaN" / "Infinity" in a string leaves both encodings the same; a non-finite float does not
    if (b"NaN" in out or b"Infinity" in out) and to_json(value, inf_nan_mode="null") != out:
        raise ValueError("a non-finite number (NaN or Infinity) has no JSON form")
    return out


def loads(raw: bytes | str) -> Any:
    """``json.loads``, faster for what providers send; raises what ``json.loads`` raises."""
    try:
        return from_json(raw)
    except ValueError:
        return json.loads(raw)


def _constant(token: str) -> Any:
    raise NonFiniteNumber(token)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumber(text if len(text) <= 40 else text[:40] + "…")
    return value


def loads_strict(raw: bytes | str) -> Any:
    """:func:`loads` for strict JSON: :class:`NonFiniteNumber` (a ValueError) for NaN,
    Infinity, -Infinity or a number that overflows a float; other errors as ``json.loads``.

    A text over :data:`SLICED_ABOVE` bytes is decoded in slices (see :func:`_sliced`): the same
    value, but no single call holds the GIL for more than a slice."""
    if isinstance(raw, bytes) and len(raw) > SLICED_ABOVE:
        try:
            return _Slices(raw).document()
        except NonFiniteNumber:
            raise
        except (ValueError, IndexError, RecursionError):
            pass  # not well-formed as the walk reads it: the whole text again, for the precise error
    return _whole(raw)


def _whole(raw: bytes | str) -> Any:
    try:
        if not may_overflow(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")):
            return from_json(raw, allow_inf_nan=False)
    except ValueError:
        pass
    return json.loads(raw, parse_constant=_constant, parse_float=_finite)


# -- a large text, decoded in slices -----------------------------------------------------------
# A worker thread decoding a provider's 3 MB embeddings answer in one call held the GIL ~30 ms,
# and the event loop waits for the GIL behind every such call (a /healthz probe waits for two
# or three of them). Walked here instead: an object or array that does not close within
# SLICE_BYTES is read member by member, anything that does (a vector, a key, a number) in one C
# call. A text made of many small parts would cost more walking than it saves: past WALK_STEPS
# steps (a member, a bracket or quote looked at) it is decoded whole, as before.
SLICED_ABOVE = 1024 * 1024
SLICE_BYTES = 64 * 1024
WALK_STEPS = 20_000  # ~10 ms of walking; a 3 MB embeddings answer takes ~1,500
_STRUCTURE = (b"[", b"]", b"{", b"}", b'"')  # each found with bytes.find: memchr, where a regex class is 10x slower
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*"', re.DOTALL)  # after an opening quote
_SCALAR = re.compile(rb"[^,\]}\s]+")
_SPACE = re.compile(rb"[ \t\n\r]*")


class _Slices:
    """One pass over ``raw``: :meth:`document` returns what :func:`_whole` would, or raises
    ValueError where the text is not what the walk expects or has too many parts (the caller
    then decodes it whole, which gives the precise error)."""

    __slots__ = ("raw", "steps")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.steps = WALK_STEPS

    def document(self) -> Any:
        value, end = self.value(self.space(0))
        if self.space(end) != len(self.raw):
            raise ValueError("extra data")
        return value

    def space(self, pos: int) -> int:
        match = _SPACE.match(self.raw, pos)
        assert match is not None  # the pattern matches the empty string
        return match.end()

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise ValueError("too many parts to walk")

    def value(self, pos: int) -> tuple[Any, int]:
        self.step()
        raw = self.raw
        first = raw[pos]
        if first == 0x22:  # '"'
            end = self.string_end(pos)
        elif first in (0x5B, 0x7B):  # '[' or '{'
            closed = self.closed_within(pos, pos + SLICE_BYTES)
            if closed is None:
                return self.array(pos) if first == 0x5B else self.object(pos)
            end = closed
        else:
            match = _SCALAR.match(raw, pos)
            if match is None:
                raise ValueError("a value was expected")
            end = match.end()
        return _whole(raw[pos:end]), end

    def string_end(self, pos: int) -> int:
        match = _STRING_REST.match(self.raw, pos + 1)
        if match is None:
            raise ValueError("an unterminated string")
        return match.end()

    def closed_within(self, pos: int, limit: int) -> int | None:
        """Just after the bracket that closes the one at ``pos`` if it comes before ``limit``
        (strings skipped; which kind closes it is checked when the slice is decoded)."""
        raw, depth, at = self.raw, 0, pos
        while True:
            self.step()
            found = [i for i in (raw.find(c, at, limit) for c in _STRUCTURE) if i >= 0]
            if not found:
                return None
            at = min(found)
            char = raw[at]
            if char == 0x22:
                string = _STRING_REST.match(raw, at + 1, limit)
                if string is None:
                    return None
                at = string.end()
                continue
            depth += 1 if char in (0x5B, 0x7B) else -1
            at += 1
            if depth == 0:
                return at

    def array(self, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        at = self.space(pos + 1)
        if self.raw[at] == 0x5D:  # ']'
            return out, at + 1
        while True:
            item, at = self.value(at)
            out.append(item)
            at = self.space(at)
            if self.raw[at] == 0x5D:
                return out, at + 1
            at = self.space(self.expect(at, 0x2C))  # ','

    def object(self, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        at = self.space(pos + 1)
        if self.raw[at] == 0x7D:  # '}'
            return out, at + 1
        while True:
            if self.raw[at] != 0x22:
                raise ValueError("a key was expected")
            end = self.string_end(at)
            key = _whole(self.raw[at:end])
            at = self.space(self.expect(self.space(end), 0x3A))  # ':'
            out[key], at = self.value(at)
            at = self.space(at)
            if self.raw[at] == 0x7D:
                return out, at + 1
            at = self.space(self.expect(at, 0x2C))

    def expect(self, pos: int, char: int) -> int:
        if self.raw[pos] != char:
            raise ValueError(f"{chr(char)!r} was expected")
        return pos + 1


def json_kind(value: object) -> str:
    """What a value is in JSON's words ("a string", "an array", "null"), for messages that say
    what a client or a model sent."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"
