"""A reply's data form: the tiny string ``name(arg, kw=value, ...)`` and the mappings
``{"kind": name, **kw}`` / ``{name: {**kw}}`` / ``{name: arg}``.

A string is parsed with :mod:`ast` and its arguments read with :func:`ast.literal_eval` (never
``eval``), so a form can only name a constructor and hand it literals; which constructors
there are is the caller's table. :func:`write_form` writes the string back from a reply's
fields, in the order each constructor takes them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from ._kinds import ReplyKind

__all__ = ["read_form", "write_form"]

T = TypeVar("T")


def read_form(spec: object, where: str, constructors: Mapping[str, Callable[..., T]]) -> T:
    """Build what ``spec`` names with the constructor of that name from ``constructors``.

    Raises ValueError naming ``where`` for a form that cannot be read, an unknown name, or
    arguments the constructor refuses."""
    if isinstance(spec, str):
        name, args, kwargs = _read_call(spec, where)
    elif isinstance(spec, Mapping):
        name, args, kwargs = _read_mapping(spec, where)
    else:
        raise ValueError(f"{where}: expected a reply string, mapping or Reply, got {spec!r}")
    make = constructors.get(name)
    if make is None:
        names = ", ".join(constructors)
        raise ValueError(f"{where}: {spec!r}: unknown reply kind {name!r}; expected one of {names}")
    try:
        return make(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {spec!r}: {exc}") from None


def _read_call(text: str, where: str) -> tuple[str, list[Any], dict[str, Any]]:
    source = text.strip()
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        raise ValueError(f"{where}: {text!r} is not of the form name(kw=value, ...)") from None
    if isinstance(node, ast.Name):
        return node.id, [], {}
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"{where}: {text!r} is not of the form name(kw=value, ...)")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    try:
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise ValueError("*args")
            args.append(ast.literal_eval(arg))
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs")
            kwargs[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        raise ValueError(
            f"{where}: {text!r}: arguments must be literals (numbers, strings, lists, dicts, True/False/None)"
        ) from None
    return node.func.id, args, kwargs


def _read_mapping(spec: Mapping[str, Any], where: str) -> tuple[str, list[Any], dict[str, Any]]:
    if "kind" in spec:
        kwargs = {str(k): v for k, v in spec.items() if k != "kind"}
        return str(spec["kind"]), [], kwargs
    if len(spec) == 1:
        ((name, value),) = spec.items()
        if value is None:
            return str(name), [], {}
        if isinstance(value, Mapping):
            return str(name), [], {str(k): v for k, v in value.items()}
        return str(name), [value], {}
    raise ValueError(f"{where}: {dict(spec)!r}: a reply mapping needs a 'kind' key, or one key naming the kind")


# The fields each constructor takes, for write_form(): positional first, then keywords.
_POSITIONAL: dict[ReplyKind, tuple[str, ...]] = {
    ReplyKind.OK: ("text",),
    ReplyKind.DELAY: ("seconds",),
    ReplyKind.INVALID: ("message",),
    ReplyKind.TRUNCATE: ("text",),
    ReplyKind.REFUSE: ("text",),
    ReplyKind.SCHEMA_INVALID: ("json",),
    ReplyKind.STALL_BEFORE_FIRST: ("seconds",),
    ReplyKind.STALL_AFTER: ("after", "seconds"),
    ReplyKind.HEARTBEATS_ONLY: ("heartbeat_interval", "seconds"),
    ReplyKind.DROP_AFTER: ("after",),
    ReplyKind.END_AFTER: ("after",),
    ReplyKind.MALFORMED_AFTER: ("after",),
    ReplyKind.ERROR_EVENT_AFTER: ("after",),
}
_TIMING = ("chunk_interval", "heartbeat_interval", "split_bytes", "latency")
_CONTENT = ("text", "tool_calls", "json", "usage", "reasoning", "redacted_thinking", "interleave")
_KEYWORDS: dict[ReplyKind, tuple[str, ...]] = {
    ReplyKind.OK: (*_CONTENT, *_TIMING, "plain"),
    ReplyKind.DELAY: (*_CONTENT, *_TIMING, "plain"),
    ReplyKind.HANG: ("latency",),
    ReplyKind.RATE_LIMIT: ("retry_after", "retry_after_ms", "retry_after_date", "message", "latency"),
    ReplyKind.QUOTA: ("message", "latency"),
    ReplyKind.OVERLOADED: ("retry_after", "retry_after_ms", "retry_after_date", "message", "latency"),
    ReplyKind.SERVER_ERROR: ("message", "latency"),
    ReplyKind.UNAUTHORIZED: ("message", "latency"),
    ReplyKind.NOT_FOUND: ("message", "latency"),
    ReplyKind.CONTEXT_OVERFLOW: ("prompt_tokens", "limit", "message", "latency"),
    ReplyKind.INVALID: ("message", "latency"),
    ReplyKind.TRUNCATE: ("text", "usage", "reasoning", "redacted_thinking", *_TIMING),
    ReplyKind.REFUSE: ("text", *_TIMING),
    ReplyKind.CONTENT_FILTER: _TIMING,
    ReplyKind.MALFORMED_TOOL_ARGS: ("tool_calls", "arguments", *_TIMING),
    ReplyKind.SCHEMA_INVALID: ("json", *_TIMING),
    ReplyKind.RESET: ("latency",),
    ReplyKind.CONNECT_ERROR: ("latency",),
    ReplyKind.STALL_BEFORE_FIRST: (*_CONTENT, *_TIMING),
    ReplyKind.STALL_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.HEARTBEATS_ONLY: (*_CONTENT, "chunk_interval", "split_bytes", "latency"),
    ReplyKind.DROP_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.END_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.MALFORMED_AFTER: (*_CONTENT, *_TIMING),
    ReplyKind.ERROR_EVENT_AFTER: ("cause", "message", *_CONTENT, *_TIMING),
}


def write_form(kind: ReplyKind, field: Callable[[str], Any]) -> str:
    """The string form of the reply of ``kind`` whose fields ``field(name)`` reads, which
    :func:`read_form` reads back to an equal reply."""
    parts: list[str] = []
    used: set[str] = set()
    for positional in _POSITIONAL.get(kind, ()):
        value = field(positional)
        if value is None:
            break
        parts.append(repr(_plain(value)))
        used.add(positional)
    if kind == ReplyKind.MALFORMED_TOOL_ARGS and field("tool_calls"):
        parts.append(repr(field("tool_calls")[0].name))
        used.add("tool_calls")
    for name in _KEYWORDS[kind]:
        if name in used:
            continue
        value = field(name)
        if name == "tool_calls":
            if value:
                parts.append(f"tool_calls={[{'name': t.name, 'args': dict(t.args)} for t in value]!r}")
            continue
        if value is None or value is False or (name in ("latency", "chunk_interval") and value == 0.0):
            continue
        if name == "cause" and value is ReplyKind.OVERLOADED:
            continue  # the default
        parts.append(f"{name}={_plain(value)!r}")
    return f"{kind.value}({', '.join(parts)})" if parts else kind.value


def _plain(value: Any) -> Any:
    """Floats that are whole numbers print as ints: ``retry_after=2``, not ``2.0``."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value
