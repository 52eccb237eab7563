"""What both server-side dialects share: the neutral :class:`WireError` and field paths.

A dialect module knows a wire format, not an HTTP server: a body it cannot accept raises
:class:`WireError` (status, message naming the field, OpenAI-style ``type`` / ``code``),
and whoever serves it (the gateway, an in-process httpx client) turns that into its own
error answer.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..model import Response, json_kind
from ..validation import DEFAULT_LIMITS, InvalidSchema, SchemaLimits, check_limits, check_schema

SchemaField = tuple[str, Mapping[str, Any]]  # (the field's dotted path, the client's JSON Schema)


class WireError(Exception):
    """A request body the dialect refuses: ``status`` (400 unless said), a message that names
    the field and the fix, ``param`` (the dotted field path), ``type`` and ``code``; any error
    answer a server gives (``headers``: what it adds to the answer), rendered for each client
    by :func:`failover.inbound._failures.render`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type: str = "invalid_request_error",
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.type = type
        self.code = code
        self.headers: dict[str, str] = dict(headers) if headers else {}

    def __repr__(self) -> str:
        return f"WireError({self.status}, {self.message!r}, param={self.param!r})"


def field_path(loc: tuple[int | str, ...], *, tags: Collection[str], unions: Collection[str]) -> str:
    """A dotted field path without pydantic's union branch names (``messages[0].content[1].source``).

    ``tags`` are the branch names pydantic puts in a location after a list index or after one
    of the ``unions`` fields (discriminator values, ``str``, model names); parts with ``[``
    (``list[...]``, ``function-after[...]``) are always branch names.
    """
    out = ""
    after_union = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            after_union = True
            continue
        if "[" in part or (after_union and part in tags):
            after_union = False
            continue
        out += f".{part}" if out else part
        after_union = part in unions
    return out


def validation_error(
    exc: ValidationError, *, tags: Collection[str], unions: Collection[str], explain_tags: bool = False
) -> WireError:
    """The 400 for a pydantic error: the deepest problem, its field path, and how many more.

    ``explain_tags``: an unknown discriminator value (a content block ``type`` the dialect
    does not carry) is reported at ``<path>.type`` as "not supported here; use one of ...".
    """
    errs = exc.errors(include_url=False)
    first = max(errs, key=lambda e: len(e["loc"]))
    param = field_path(tuple(first["loc"]), tags=tags, unions=unions) or None
    message = str(first["msg"])
    if explain_tags and first["type"] == "union_tag_invalid":
        ctx: dict[str, Any] = dict(first.get("ctx") or {})
        param = f"{param}.{ctx.get('discriminator', 'type').strip(chr(39))}" if param else param
        message = f"{ctx.get('tag')!r} is not supported here; use one of {ctx.get('expected_tags')}"
    kind = str(first["type"])
    # pydantic's error types as the codes OpenAI's API gives the same problems
    if kind == "missing":
        code = "missing_required_parameter"
    else:
        code = "invalid_type" if kind.endswith(("_type", "_parsing")) else "invalid_value"
    if code == "invalid_type":
        message += f" (got {json_kind(first.get('input'))})"
    more = f" (and {len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
    where = f"{param}: " if param else ""
    return WireError(400, f"invalid request body: {where}{message}{more}", param=param, code=code)


def schema_refused(exc: InvalidSchema, param: str) -> WireError:
    """The 400 for a client schema refused at ``param`` (its field path and what to change)."""
    full = exc.at(param)
    code = "schema_too_large" if exc.limit is not None else "invalid_schema"
    return WireError(400, str(full), param=full.field, code=code)


def check_schemas(fields: Sequence[SchemaField], limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Every client schema within ``limits`` (checked first, by one linear walk), then
    meta-validated and compiled (cached): a broken one is a 400 here,
    before any upstream call, never a failure after the answer was paid for. Can take tens
    of milliseconds for a large new schema: a server runs it off its event loop."""
    for param, schema in fields:
        try:
            check_schema(schema, limits)
        except InvalidSchema as exc:
            raise schema_refused(exc, param) from None


def check_schema_limits(fields: Sequence[SchemaField], limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Only the linear walk of :func:`check_schemas` (size, depth, values, patterns, refs): no
    meta-validation, no compilation. Pure Python, so a thread running it shares the GIL."""
    for param, schema in fields:
        try:
            check_limits(schema, limits)
        except InvalidSchema as exc:
            raise schema_refused(exc, param) from None


def image_url(url: str) -> str:
    """A client's image URL as the OpenAI wire formats take it: http(s), or a base64 data URL."""
    if not url.startswith(("https://", "http://", "data:image/")) or (
        url.startswith("data:") and ";base64," not in url
    ):
        raise ValueError("must be an http(s) URL or a data:image/...;base64 URL")
    return url


def record_summary(resp: Response, request_id: str | None = None) -> dict[str, Any]:
    """The ``x_failover`` object on a stream's last event: which target answered, and how.

    ``request_id`` is shown when the response carries no RouteRecord.
    """
    summary: dict[str, Any] = {"request_id": request_id}
    record = resp.record
    if record is not None:
        summary.update(
            request_id=record.request_id,
            target=record.target_used,
            attempts=len(record.attempts),
            recovered=record.recovered,
            degraded=record.degraded,
            added_latency_ms=round(record.added_latency_ms),
        )
    return summary


__all__ = [
    "SchemaField",
    "WireError",
    "check_schemas",
    "field_path",
    "image_url",
    "record_summary",
    "schema_refused",
    "validation_error",
]
