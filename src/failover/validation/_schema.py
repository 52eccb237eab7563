"""JSON Schema (draft 2020-12) checks, fast verdict first, readable messages only on failure.

Every structured-output result and every tool call is validated before it counts, so the
check sits on the hot path of each answer. The verdict comes from ``jsonschema-rs`` (Rust,
draft 2020-12, 10-40x faster than the pure-Python ``jsonschema`` here: see bench/validation.py
and docs/contracts.md); only when that says "invalid" does ``jsonschema`` walk the instance
again to produce the messages the repair prompt sends back, in the wording the rest of the
library (and its tests) already use. ``fastjsonschema`` was measured too: it stops at draft 7.

Rules that keep the two validators from disagreeing silently:

- a schema is checked against the 2020-12 meta-schema by ``jsonschema`` (a broken schema is
  the caller's mistake: ``ValueError``), then compiled once by both validators and cached;
- a schema ``jsonschema-rs`` cannot compile (a regex dialect difference, say), or an instance
  it cannot take (a number outside 64 bits), is validated by ``jsonschema`` alone;
- remote ``$ref`` is never fetched (``offline=True``), like ``jsonschema`` without a registry;
- ``format`` is an annotation, not an assertion, in both (the 2020-12 default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import jsonschema_rs as _rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

__all__ = ["fast_validator_name", "schema_errors"]

MAX_MESSAGES = 5


@dataclass(frozen=True, slots=True)
class _Compiled:
    slow: Draft202012Validator
    fast: _rs.Validator | None  # None: jsonschema-rs could not compile this schema


def fast_validator_name() -> str:
    """``"jsonschema-rs <version>"``: the validator that gives the verdict."""
    try:
        return f"jsonschema-rs {version('jsonschema-rs')}"
    except PackageNotFoundError:  # pragma: no cover - metadata missing in an odd install
        return "jsonschema-rs"


@lru_cache(maxsize=256)
def _compile(schema_json: str) -> _Compiled:
    schema = json.loads(schema_json)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:  # the caller's schema is broken: not the model's fault
        raise ValueError(f"not a valid JSON Schema (draft 2020-12): {exc.message}") from exc
    slow = Draft202012Validator(schema)
    fast: _rs.Validator | None
    try:
        fast = _rs.Draft202012Validator(schema, offline=True)
    except ValueError:  # e.g. a pattern only Python's re accepts (ValidationError is a ValueError)
        fast = None
    return _Compiled(slow=slow, fast=fast)


_BY_ID: dict[int, tuple[Mapping[str, Any], _Compiled]] = {}


def _compiled(schema: Mapping[str, Any]) -> _Compiled:
    # The same schema object comes back with every request of a route: look it up by
    # identity before paying for a canonical JSON key (kept alive by the entry itself).
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    c = _compile(json.dumps(schema, sort_keys=True))
    if len(_BY_ID) > 1024:
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, c)
    return c


def is_valid(schema: Mapping[str, Any], instance: Any) -> bool:
    """The verdict alone (the fast path when it can take the instance)."""
    c = _compiled(schema)
    if c.fast is not None:
        try:
            return c.fast.is_valid(instance)
        except (ValueError, TypeError, OverflowError):  # an instance Rust cannot represent
            pass
    try:
        return bool(c.slow.is_valid(instance))
    except Unresolvable as exc:
        raise _unresolvable(exc) from exc


def _unresolvable(exc: Unresolvable) -> ValueError:
    return ValueError(f"a $ref cannot be resolved ({exc.ref}); remote references are never fetched, use $defs")


def schema_errors(schema: Mapping[str, Any], instance: Any, *, limit: int = MAX_MESSAGES) -> list[str]:
    """``["path: message", ...]`` (at most ``limit``), or ``[]`` when ``instance`` is valid.

    ``ValueError`` when ``schema`` itself is not a valid draft 2020-12 schema.
    """
    if is_valid(schema, instance):
        return []
    c = _compiled(schema)
    out = []
    try:
        found = sorted(c.slow.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    except Unresolvable as exc:
        raise _unresolvable(exc) from exc
    for err in found:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        out.append(f"{where}: {err.message}")
        if len(out) >= limit:
            break
    if not out and c.fast is not None:  # the fast verdict stands; say what it saw
        for rs_err in c.fast.iter_errors(instance):
            where = "/".join(str(p) for p in rs_err.instance_path) or "(root)"
            out.append(f"{where}: {rs_err.message}")
            if len(out) >= limit:
                break
    return out or ["(root): does not match the schema"]
