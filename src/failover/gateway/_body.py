"""Reading a request body: its size and time limits, and decoding its JSON within a depth limit
without stalling the event loop.

A body over ``max_body_bytes`` is a 413 (before reading it, when its Content-Length says so);
one not complete within ``body_timeout_s`` is a 408 and its connection is closed. A body of
many JSON values (:func:`heavy_json`) is decoded by the pure-Python scanner in a worker thread,
which gives the GIL back between its steps, where the C decoder would hold it for the body's
whole length.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import json.scanner
import math
from collections.abc import Mapping
from typing import Any

from starlette.types import Receive, Scope

from ..model import LONE_SURROGATE, LONE_SURROGATE_FIX, lone_surrogate, may_hold_surrogates, may_overflow
from ._disconnect import BODY_RECEIVED
from ._errors import ApiError
from ._settings import GatewaySettings

HEAVY_JSON_BYTES = 64 * 1024  # a smaller body decodes in a few milliseconds, however it is made
HEAVY_JSON_VALUES = 20_000  # more '{', '[' and ',' than this: decoded off the loop, step by step


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


def heavy_json(raw: bytes) -> bool:
    """Whether ``raw`` may hold so many JSON values that decoding it in one C call would stall the
    loop. Commas and brackets inside strings are counted too: an overestimate, which only sends a
    body to the slower, interruptible decoder."""
    return len(raw) > HEAVY_JSON_BYTES and raw.count(b"{") + raw.count(b"[") + raw.count(b",") > HEAVY_JSON_VALUES


def _no_constant(token: str) -> Any:
    """Strict JSON: NaN, Infinity and -Infinity (which Python's json reads by default) are not."""
    raise ValueError(f"{token} is not a JSON number")


def _python_json_decoder() -> json.JSONDecoder:
    """A decoder whose scanner is the standard library's pure-Python one: Python bytecode, so a
    thread running it gives the GIL back every switch interval (the C scanner never does)."""
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder


_PY_JSON = _python_json_decoder()


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        for c in v.values() if isinstance(v, dict) else v:
            if isinstance(c, dict | list):
                stack.append((c, depth + 1))
    return False


_NO_TIMER = contextlib.nullcontext()


def _body_timeout(seconds: float) -> ApiError:
    return ApiError(
        408,
        f"request body not received within {seconds:g}s; send the whole body at once "
        "(or raise gateway.limits.body_timeout_s)",
        code="body_timeout",
        headers={"connection": "close"},
    )


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"request body larger than {limit} bytes; send a smaller request (or raise gateway.limits.max_body_bytes)",
        code="request_too_large",
    )


async def read_body(
    settings: GatewaySettings, receive: Receive, headers: Mapping[str, str], scope: Scope | None = None
) -> bytes:
    """The whole request body, within ``max_body_bytes`` and ``body_timeout_s``.

    A client that sends its body slowly (or never finishes it) gets a 408 and its
    connection is closed, so it cannot hold a request slot; one that disconnects while
    sending raises :class:`ClientGone`. When the serving protocol says the whole body is
    already here (``scope``'s ``failover.body_received``), it is read without the timer."""
    limit = settings.max_body_bytes
    declared = headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    extensions = None if scope is None else scope.get("extensions")
    received = None if extensions is None else extensions.get(BODY_RECEIVED)
    # a body already here is read by a receive() that cannot wait: no timer to arm
    timer = _NO_TIMER if received is not None and received() else asyncio.timeout(settings.body_timeout_s)
    chunks: list[bytes] = []
    size = 0
    try:
        async with timer:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    raise ClientGone
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > limit:
                        raise _too_large(limit)
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise _body_timeout(settings.body_timeout_s) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def decode_json(raw: bytes, max_depth: int) -> Any:
    """Decode a body: a 400 for invalid JSON, nesting deeper than ``max_depth`` or a lone
    surrogate. A :func:`heavy_json` body is read by the pure-Python scanner (call this in a
    worker thread for it)."""
    deep = ApiError(400, f"request body nested deeper than {max_depth} levels", code="json_too_deep")
    try:
        data = (
            _PY_JSON.decode(raw.decode(json.detect_encoding(raw)))
            if heavy_json(raw)
            else json.loads(raw, parse_constant=_no_constant)
        )
    except RecursionError:
        raise deep from None
    except ValueError as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if isinstance(data, dict | list) and _too_deep(data, max_depth):
        raise deep
    if may_hold_surrogates(raw) and (where := lone_surrogate(data)) is not None:
        raise ApiError(
            400,
            f"{where}: {LONE_SURROGATE}. Fix: {LONE_SURROGATE_FIX}",
            code="invalid_unicode",
            param=where,
        )
    if may_overflow(raw) and (where := _infinite_at(data)) is not None:
        raise ApiError(
            400,
            f"{where}: a number too large for a double (such as 1e999) is not JSON any provider reads. "
            "Fix: send a finite number (at most about 1.8e308), or the value as a string",
            code="invalid_json",
            param=where,
        )
    return data


def _infinite_at(data: Any) -> str | None:
    """The path of the first number that overflowed to infinity as it was decoded (a number
    JSON's grammar allows and no float holds); None when there is none."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where or "(the body)"
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
    return None


__all__ = ["HEAVY_JSON_BYTES", "HEAVY_JSON_VALUES", "ClientGone", "decode_json", "heavy_json", "read_body"]
