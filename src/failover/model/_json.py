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
_EXPONENTS = (re.compile(rb"e\+?[0-9]{3}"), re.compile(rb"E\+?[0-9]{3}"))  # a literal first: fast
_ONE_DIGIT = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 300


def _may_overflow(raw: bytes) -> bool:
    return any(r.search(raw) is not None for r in _EXPONENTS) or _LONG_RUN in raw.translate(_ONE_DIGIT)


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
    Infinity, -Infinity or a number that overflows a float; other errors as ``json.loads``."""
    try:
        if not _may_overflow(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")):
            return from_json(raw, allow_inf_nan=False)
    except ValueError:
        pass
    return json.loads(raw, parse_constant=_constant, parse_float=_finite)
