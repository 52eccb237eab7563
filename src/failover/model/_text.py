"""Text that is not valid Unicode: lone UTF-16 surrogates.

JSON may escape a surrogate on its own (``"\\ud800"``), and Python's decoder accepts it (and
UTF-8 bytes of one); no encoder can send it on, so such text must be refused where it comes
in, naming where it is, not fail deep inside a provider's encoding with a UnicodeEncodeError.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

_LONE = re.compile("[\ud800-\udfff]")
# What a JSON body holds when it may decode to a surrogate: a \\uD800-\\uDFFF escape or the
# (invalid, yet accepted by json.loads) UTF-8 bytes of one. Anything else needs no walk.
_RAW_HINT = re.compile(rb"\\u[dD][89abcdefABCDEF]|\xed[\xa0-\xbf]")

LONE_SURROGATE = "the text holds a lone UTF-16 surrogate, which is not valid Unicode"
LONE_SURROGATE_FIX = (
    "send well-formed Unicode: a \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one "
    "(a surrogate pair), or the character left out"
)


def may_hold_surrogates(raw: bytes) -> bool:
    """Whether a JSON body can decode to text with a lone surrogate (a cheap byte scan)."""
    return _RAW_HINT.search(raw) is not None


def _join(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    name = str(key)
    if _LONE.search(name) is not None:
        name = repr(name.encode("utf-8", "backslashreplace").decode("ascii", "replace"))
    return f"{path}.{name}" if path else name


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """The path of the first string in ``value`` (JSON-like data, or dataclasses such as a
    Request) holding a lone surrogate, a key's own path for a bad key; None when there is none."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        v, where = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and _LONE.search(v) is not None:
                return where or "(the body)"
        elif isinstance(v, Mapping):
            items = list(v.items())
            for k, c in reversed(items):
                if isinstance(k, str) and not k.isascii() and _LONE.search(k) is not None:
                    return _join(where, k)
                stack.append((c, _join(where, k)))
        elif isinstance(v, list | tuple):
            stack.extend((c, _join(where, i)) for i, c in reversed(list(enumerate(v))))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = dataclasses.fields(v)
            stack.extend((getattr(v, f.name), _join(where, f.name)) for f in reversed(fields))
    return None


__all__ = ["LONE_SURROGATE", "LONE_SURROGATE_FIX", "lone_surrogate", "may_hold_surrogates"]
