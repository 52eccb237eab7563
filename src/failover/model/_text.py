"""Text that is not valid Unicode: lone UTF-16 surrogates.

JSON may escape a surrogate on its own (``"\\ud800"``), and Python's decoder accepts it (and
UTF-8 bytes of one); no encoder can send it on, so such text must be refused where it comes
in, naming where it is, not fail deep inside a provider's encoding with a UnicodeEncodeError.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._request import Request

_LONE = re.compile("[\ud800-\udfff]")
# What a JSON body holds when it may decode to a surrogate: a \\uD800-\\uDFFF escape, or the
# (invalid, yet accepted by json.loads) UTF-8 bytes of one. Two patterns, not one alternation:
# a literal first byte lets the regex engine skip ahead (an alternation scans every byte).
_RAW_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_RAW_UTF8 = re.compile(rb"\xed[\xa0-\xbf]")

LONE_SURROGATE = "the text holds a lone UTF-16 surrogate, which is not valid Unicode"
LONE_SURROGATE_FIX = (
    "send well-formed Unicode: a \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one "
    "(a surrogate pair), or the character left out"
)


def may_hold_surrogates(raw: bytes) -> bool:
    """Whether a JSON body can decode to text with a lone surrogate (a byte scan, no decoding)."""
    if _RAW_ESCAPE.search(raw) is not None:
        return True
    return b"\xed" in raw and _RAW_UTF8.search(raw) is not None


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
            if _bad(v):
                return where or "(the body)"
        elif isinstance(v, Mapping):
            items = list(v.items())
            for k, c in reversed(items):
                if isinstance(k, str) and _bad(k):
                    return _join(where, k)
                stack.append((c, _join(where, k)))
        elif isinstance(v, list | tuple):
            stack.extend((c, _join(where, i)) for i, c in reversed(list(enumerate(v))))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = dataclasses.fields(v)
            stack.extend((getattr(v, f.name), _join(where, f.name)) for f in reversed(fields))
    return None


def _bad(text: str | None) -> bool:
    # isascii() reads a flag of the string (no scan); encoding is several times faster than
    # a regex scan, and fails exactly on a surrogate
    if text is None or text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _bad_json(value: Any) -> bool:
    """Whether JSON-like data (a tool schema, parsed arguments) holds one: one C-speed dump."""
    if not value:
        return False
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return lone_surrogate(value) is not None
    return _bad(text)


def request_surrogate(request: Request) -> str | None:
    """:func:`lone_surrogate` of a Request, fast on the usual request (a Router checks every
    one): the field's path, such as ``messages[0].content[0].text``, or None."""
    hit = False
    for m in request.messages:
        if _bad(m.name) or _bad(m.tool_call_id):
            hit = True
        for p in m.content:
            if _bad(getattr(p, "text", None)) or _bad(getattr(p, "url", None)):
                hit = True
        for c in m.tool_calls:
            if _bad(c.id) or _bad(c.name) or _bad(c.arguments) or _bad_json(c.parsed):
                hit = True
    for t in request.tools:
        if _bad(t.name) or _bad(t.description) or _bad_json(t.parameters):
            hit = True
    if request.tool_choice is not None and _bad(request.tool_choice.name):
        hit = True
    rf = request.response_format
    if rf is not None and (_bad(rf.name) or _bad_json(rf.schema)):
        hit = True
    if any(_bad(s) for s in request.stop):
        hit = True
    return lone_surrogate(request) if hit else None  # the slow walk only to name the field


__all__ = ["LONE_SURROGATE", "LONE_SURROGATE_FIX", "lone_surrogate", "may_hold_surrogates", "request_surrogate"]
