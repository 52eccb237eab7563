"""JSON Schema (draft 2020-12) checks, fast verdict first, readable messages only on failure.

Every structured-output result and every tool call is validated before it counts, so the
check sits on the hot path of each answer. The verdict comes from ``jsonschema-rs`` (Rust,
draft 2020-12, 10-40x faster than the pure-Python ``jsonschema`` here: see bench/validation.py
and docs/contracts.md); only when that says "invalid" does ``jsonschema`` walk the instance
again to produce the messages the repair prompt sends back, in the wording the rest of the
library (and its tests) already use. ``fastjsonschema`` was measured too: it stops at draft 7.

A schema usually comes from whoever sends the request, so it is treated as hostile input:

- before anything is compiled, :func:`check_limits` walks it once (stopping at the first
  excess) against :class:`SchemaLimits`: size, depth, number of values, pattern length;
  every ``$ref`` must be local (``#...``, inside the same schema), ``$dynamicRef`` is refused;
- each distinct pattern is compiled alone first, in doubling size steps (:data:`_TIERS`), to
  learn how large it compiles: one that takes more than 8 MiB is refused, and all of a
  schema's patterns together may take ``SchemaLimits.max_pattern_bytes``. A counted repetition
  compiles to a copy per count (``^[\\s\\S]{0,300}$`` is ~300 KB in ``regex``), so a flat cap per
  pattern either refuses real agents' tool schemas or lets 200 patterns take gigabytes;
- nothing is ever fetched or read: ``jsonschema-rs`` runs ``offline``, ``jsonschema`` gets a
  ``referencing.Registry`` whose ``retrieve`` refuses;
- the schema is meta-validated against 2020-12 by ``jsonschema-rs`` (milliseconds where
  ``jsonschema`` takes seconds) and compiled with its linear-time ``regex`` engine: a pattern
  that engine cannot take (lookaround, backreferences) or a ``$ref`` that points nowhere is
  refused, so a schema that compiles is one both validators can run;
- ``jsonschema`` runs ``pattern``, ``patternProperties`` and ``additionalProperties`` with
  RE2 (linear time, ``$`` only at the end as in ECMA 262), never with Python's backtracking
  ``re``; for the one keyword combination whose Python implementation would still use ``re``
  (``unevaluatedProperties`` next to ``patternProperties``), the messages come from
  ``jsonschema-rs``; so do the messages of a schema with a pattern RE2 cannot take (a count
  over 1000, or more than 256 KiB), which ``regex`` can;
- compiled validators are cached by the estimated memory they hold, not by entry count
  (:data:`CACHE_BYTES`);
- ``format`` is an annotation, not an assertion, in both (the 2020-12 default).

Any refusal is an :class:`InvalidSchema` (a ``ValueError``) naming where in the schema.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Generic, TypeVar

import jsonschema_rs as _rs
import re2
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable

from ..model import LONE_SURROGATE, LONE_SURROGATE_FIX, FailoverError, Request, lone_surrogate

__all__ = [
    "CACHE_BYTES",
    "DEFAULT_LIMITS",
    "InvalidSchema",
    "SchemaLimits",
    "check_limits",
    "check_request_schemas",
    "check_schema",
    "fast_validator_name",
    "schema_errors",
]

MAX_MESSAGES = 5


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """How large a client's JSON Schema may be; checked before anything is compiled.

    ``max_bytes``: its size as compact JSON (characters of keys and strings, plus a few per
    value); ``max_depth``: how deeply objects and arrays nest inside it; ``max_nodes``: how many
    values it holds in all (every key and every array item counts one); ``max_pattern_chars``:
    the longest ``pattern`` or ``patternProperties`` key; ``max_patterns``: how many of those
    it holds; ``max_pattern_bytes``: what its distinct patterns may compile to together (each
    at most 8 MiB, measured in doubling steps; a compiled pattern holds ~1.1-1.5x that).
    """

    max_bytes: int = 1024 * 1024
    max_depth: int = 32
    max_nodes: int = 50_000
    max_pattern_chars: int = 1000
    max_patterns: int = 200
    max_pattern_bytes: int = 16 * 1024 * 1024


DEFAULT_LIMITS = SchemaLimits()

CACHE_BYTES = 64 * 1024 * 1024  # compiled validators kept, by estimated memory
CACHE_ENTRIES = 256
_FOOTPRINT = 24  # measured: a compiled schema (both validators and its dict) holds ~22x its JSON length
# jsonschema-rs's `regex` NFA per pattern (its size_limit). Measured (docs/architecture.md): a
# counted repetition takes a copy per count, ~1 KB for [\s\S] or ".", ~40 KB for \p{L}, so
# ^[\s\S]{0,300}$ is 301 KB, {0,5000} 5.0 MB (30 ms to compile), (a{1,1000}){1,1000} 72 MB.
_REGEX_BYTES = 8 * 1024 * 1024
_TIERS = tuple(16 * 1024 << i for i in range(10))  # 16 KiB, 32 KiB, ... 8 MiB: a pattern is charged its step
_DFA_BYTES = 256 * 1024  # each pattern's lazy DFA cache, filled while matching
_HELD = 3 / 2  # measured: a compiled pattern holds 1.1-1.5x its NFA size once it has matched
_RE2_BYTES = 256 * 1024  # RE2 (the messages): a pattern it cannot compile within this uses jsonschema-rs's


class InvalidSchema(FailoverError, ValueError):
    """A JSON Schema refused before use. ``field`` is where (``response_format.schema.properties.a``,
    or the part inside the schema, ``.properties.a``, when the caller gave no name); ``limit``
    names the :class:`SchemaLimits` field when a limit was exceeded."""

    def __init__(self, field: str, problem: str, *, limit: str | None = None) -> None:
        inside = field.startswith((".", "["))
        super().__init__(
            f"{problem} (at {field[1:] if field[0] == '.' else field})"
            if inside
            else f"{field}: {problem}"
            if field
            else problem
        )
        self.field = field
        self.problem = problem
        self.limit = limit

    def at(self, prefix: str) -> InvalidSchema:
        """The same refusal with ``prefix`` (the schema's own field name) in front of its path."""
        return InvalidSchema(prefix + self.field, self.problem, limit=self.limit)


def fast_validator_name() -> str:
    """``"jsonschema-rs <version>"``: the validator that gives the verdict."""
    try:
        return f"jsonschema-rs {version('jsonschema-rs')}"
    except PackageNotFoundError:  # pragma: no cover - metadata missing in an odd install
        return "jsonschema-rs"


# -- limits, before anything is compiled ----------------------------------------------------------

_DATA = frozenset({"const", "enum", "default", "examples"})  # values, not schemas: no $ref in them counts
# The meta-schemas both validators have built in; any other $schema would be fetched to be read.
_DRAFTS = frozenset(
    f"{scheme}://json-schema.org/{path}{end}"
    for scheme in ("http", "https")
    for path in (
        "draft/2020-12/schema",
        "draft/2019-09/schema",
        "draft-07/schema",
        "draft-06/schema",
        "draft-04/schema",
    )
    for end in ("", "#")
)


_Chain = tuple[Any, str | int] | None  # (parent chain, key): a path built only when it is shown


def _path(parts: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _unchain(chain: _Chain) -> list[str | int]:
    parts: list[str | int] = []
    while chain is not None:
        chain, key = chain
        parts.append(key)
    return parts[::-1]


def _too(what: str, limit: str, value: int, chain: _Chain, fix: str) -> InvalidSchema:
    return InvalidSchema(
        _path(_unchain(chain)), f"the schema is too large: {what} exceeds {limit}={value}; {fix}", limit=limit
    )


def check_limits(schema: Mapping[str, Any], limits: SchemaLimits = DEFAULT_LIMITS) -> int:
    """Walk ``schema`` once (stopping at the first excess): its approximate JSON size in bytes,
    or :class:`InvalidSchema` for a limit exceeded, a ``$ref`` that is not local or a
    ``$dynamicRef``. Linear in the schema and bounded by ``limits.max_nodes`` (about a
    microsecond a value): cheap enough to run before a request is admitted."""
    size = 0
    nodes = 0
    patterns = [0]
    max_nodes, max_bytes, max_depth = limits.max_nodes, limits.max_bytes, limits.max_depth
    # (value, depth, chain, inside a data value such as const/enum/default/examples); children
    # are pushed last first, so values are visited in document order and a limit is reported
    # at the value that crossed it (the 201st pattern, not the first)
    stack: list[tuple[Any, int, _Chain, bool]] = [(schema, 0, None, False)]
    while stack:
        node, depth, chain, data = stack.pop()
        mark = len(stack)
        if isinstance(node, dict | Mapping):
            if depth >= max_depth and node:
                raise _too("its nesting", "max_schema_depth", max_depth, chain, "flatten it or use $defs")
            nodes += len(node)
            if nodes > max_nodes:
                raise _too("its number of values", "max_schema_nodes", max_nodes, chain, "send a smaller schema")
            size += 2
            for key, value in node.items():
                if not isinstance(key, str):
                    raise InvalidSchema(_path(_unchain(chain)), f"the key {key!r} is not a string")
                size += len(key) + 4
                if not data and (key[:1] == "$" or key[:7] == "pattern"):
                    _check_keyword(key, value, (chain, key), limits, patterns)
                if isinstance(value, str):
                    size += len(value) + 2
                elif isinstance(value, dict | list | tuple | Mapping):
                    stack.append((value, depth + 1, (chain, key), data or key in _DATA))
                else:
                    size += 6
        elif isinstance(node, list | tuple):
            if depth >= max_depth and node:
                raise _too("its nesting", "max_schema_depth", max_depth, chain, "flatten it or use $defs")
            nodes += len(node)
            if nodes > max_nodes:
                raise _too("its number of values", "max_schema_nodes", max_nodes, chain, "send a smaller schema")
            size += 2
            for i, value in enumerate(node):
                if isinstance(value, str):
                    size += len(value) + 2
                elif isinstance(value, dict | list | tuple | Mapping):
                    stack.append((value, depth + 1, (chain, i), data))
                else:
                    size += 6
        if len(stack) - mark > 1:
            stack[mark:] = stack[mark:][::-1]
        if size > max_bytes:
            raise _too("its size", "max_schema_bytes", max_bytes, chain, "send a smaller schema")
    return size


def _check_keyword(key: str, value: Any, chain: _Chain, limits: SchemaLimits, patterns: list[int]) -> None:
    if key == "$ref" and isinstance(value, str) and not value.startswith("#"):
        raise InvalidSchema(
            _path(_unchain(chain)),
            f"$ref {value[:200]!r} is not a local reference: remote references are never fetched and files are"
            " never read; put the definition under $defs and refer to it as '#/$defs/<name>'",
        )
    if key == "$schema" and value not in _DRAFTS:
        raise InvalidSchema(
            _path(_unchain(chain)),
            f"$schema {str(value)[:200]!r} is not a JSON Schema draft failover knows (meta-schemas are never"
            " fetched); give 'https://json-schema.org/draft/2020-12/schema' or leave $schema out",
        )
    if key in ("$dynamicRef", "$recursiveRef") and isinstance(value, str):
        raise InvalidSchema(
            _path(_unchain(chain)), f"{key} is not supported; refer to a definition with $ref '#/$defs/<name>'"
        )
    if key == "pattern" and isinstance(value, str):
        patterns[0] += 1
        if len(value) > limits.max_pattern_chars:
            raise _too("the pattern", "max_schema_pattern_chars", limits.max_pattern_chars, chain, "use a shorter one")
    if key == "patternProperties" and isinstance(value, Mapping):
        for p in value:
            patterns[0] += 1
            if isinstance(p, str) and len(p) > limits.max_pattern_chars:
                raise _too(
                    "the pattern", "max_schema_pattern_chars", limits.max_pattern_chars, (chain, p), "use a shorter one"
                )
            if patterns[0] > limits.max_patterns:  # named at the key that crossed the limit
                limit = limits.max_patterns
                raise _too("its number of patterns", "max_schema_patterns", limit, (chain, p), "use fewer patterns")
    if patterns[0] > limits.max_patterns:
        raise _too("its number of patterns", "max_schema_patterns", limits.max_patterns, chain, "use fewer patterns")


# -- linear-time patterns for the Python validator ------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = _RE2_BYTES


class _NotForRe2(Exception):
    """A pattern RE2 cannot compile (a count over 1000, or over :data:`_RE2_BYTES`) but ``regex``
    can: the messages for this schema come from jsonschema-rs."""


@lru_cache(maxsize=256)  # compiled to at most _RE2_BYTES each: 64 MiB at worst
def _re2(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error:
        return None  # remembered: a refusal is not compiled again


def _rx(pattern: str) -> Any:
    rx = _re2(pattern)
    if rx is None:
        raise _NotForRe2(pattern)
    return rx


def _pattern(validator: Any, patrn: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _rx(patrn).search(instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        rx = _rx(pattern)
        for k, v in instance.items():
            if rx.search(k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties(
    validator: Any, ap: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [_rx(p) for p in schema.get("patternProperties", {})]
    extras = [k for k in instance if k not in properties and not any(rx.search(k) for rx in patterns)]
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(e) for e in sorted(extras))
            listed = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            word = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({', '.join(repr(e) for e in extras)} {word} unexpected)"
            )


_Linear = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties},
)


def _refuse(uri: str) -> Resource[Any]:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # never fetched, never read: only what the schema holds


_OFFLINE: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]


# -- compiling, cached by memory ------------------------------------------------------------------

_V = TypeVar("_V")


class ByteCache(Generic[_V]):
    """An LRU cache bounded by the estimated bytes its entries hold (and by entry count).
    Thread-safe: schemas are compiled off the event loop. An entry larger than the whole cap
    is not kept."""

    def __init__(self, max_bytes: int, max_entries: int) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.bytes = 0
        self._items: OrderedDict[Any, tuple[_V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Any) -> _V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Any, value: _V, cost: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if cost > self.max_bytes:
                return
            self._items[key] = (value, cost)
            self.bytes += cost
            while self.bytes > self.max_bytes or len(self._items) > self.max_entries:
                _, (_, c) = self._items.popitem(last=False)
                self.bytes -= c

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0


@dataclass(frozen=True, slots=True)
class _Compiled:
    fast: _rs.Validator
    slow: Validator | None  # None: messages come from jsonschema-rs (see _python_is_linear)
    pattern_bytes: int = 0  # what its patterns compiled to, by their steps (_TIERS)


_COMPILED: ByteCache[_Compiled] = ByteCache(CACHE_BYTES, CACHE_ENTRIES)
# The same schema object comes back with every request of a route: it is looked up by
# identity before paying for a canonical JSON key. The entry keeps the object alive (so its
# id cannot be reused) and is charged for it.
_BY_ID: ByteCache[tuple[Mapping[str, Any], str]] = ByteCache(CACHE_BYTES // 4, 1024)


def _python_is_linear(schema: Any) -> bool:
    """False when the schema has both ``unevaluatedProperties`` and ``patternProperties``:
    jsonschema's unevaluatedProperties runs patternProperties' regexes with Python's ``re``."""
    seen: set[str] = set()
    stack = [schema]
    while stack and not {"unevaluatedProperties", "patternProperties"} <= seen:
        node = stack.pop()
        if isinstance(node, Mapping):
            seen.update(k for k in node if k in ("unevaluatedProperties", "patternProperties"))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return not {"unevaluatedProperties", "patternProperties"} <= seen


def _where(parts: Sequence[str | int]) -> str:
    return _path(list(parts))


def _patterns(doc: Any) -> Iterator[tuple[_Chain, str]]:
    """Every ``pattern`` and ``patternProperties`` key of ``doc`` (not those inside data values
    such as ``const`` or ``default``), with where it is."""
    stack: list[tuple[Any, _Chain, bool]] = [(doc, None, False)]
    while stack:
        node, chain, data = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not data and key == "pattern" and isinstance(value, str):
                    yield (chain, key), value
                elif not data and key == "patternProperties" and isinstance(value, dict):
                    yield from (((chain, key), p) for p in value)
                if isinstance(value, dict | list):
                    stack.append((value, (chain, key), data or key in _DATA))
        elif isinstance(node, list):
            stack.extend((v, (chain, i), data) for i, v in enumerate(node) if isinstance(v, dict | list))


@lru_cache(maxsize=4096)  # patterns of at most max_pattern_chars: a few MiB at worst
def _pattern_size(pattern: str) -> int:
    """The smallest step of :data:`_TIERS` ``pattern`` compiles within in jsonschema-rs's
    ``regex``, or 0 (larger than 8 MiB, or not a pattern that engine takes). A step that is too
    small stops compiling when it is full, so finding the step costs about twice compiling
    the pattern once (~60 ms for 8 MiB)."""
    for tier in _TIERS:
        try:
            _rs.Draft202012Validator(
                {"pattern": pattern},
                offline=True,
                pattern_options=_rs.RegexOptions(size_limit=tier, dfa_size_limit=_DFA_BYTES),
            )
        except (_rs.ValidationError, ValueError):
            continue
        return tier
    return 0


def _sized_patterns(doc: Any, limits: SchemaLimits) -> tuple[int, int]:
    """(all distinct patterns' steps together, the largest step), or :class:`InvalidSchema`
    at the pattern that does not compile within 8 MiB or that takes the sum past
    ``limits.max_pattern_bytes``."""
    total = largest = 0
    seen: set[str] = set()
    for chain, pattern in _patterns(doc):
        if pattern in seen:
            continue
        seen.add(pattern)
        size = _pattern_size(pattern)
        if not size:
            raise _not_a_regex(_path(_unchain(chain)), f'{json.dumps(pattern)[:200]} is not a "regex"')
        total += size
        largest = max(largest, size)
        if total > limits.max_pattern_bytes:
            raise _too(
                "what its patterns compile to",
                "max_schema_pattern_bytes",
                limits.max_pattern_bytes,
                chain,
                "use fewer or smaller patterns: bound lengths with minLength/maxLength rather than repetition counts",
            )
    return total, largest


def _build(schema: Mapping[str, Any], key: str, limits: SchemaLimits) -> _Compiled:
    doc: dict[str, Any] = json.loads(key)  # plain JSON values (the Rust side takes nothing else)
    try:
        _rs.meta.validate(doc)
    except _rs.ValidationError as exc:  # the caller's schema is broken: not the model's fault
        raise InvalidSchema(
            _where(exc.instance_path), f"not a valid JSON Schema (draft 2020-12): {exc.message}"
        ) from None
    except _rs.ReferencingError as exc:
        raise InvalidSchema("", f"not a valid JSON Schema (draft 2020-12): {exc}") from None
    except UnicodeEncodeError:
        raise _not_unicode(doc) from None
    pattern_bytes, largest = _sized_patterns(doc, limits)
    try:
        fast = _rs.Draft202012Validator(
            doc,
            offline=True,
            pattern_options=_rs.RegexOptions(size_limit=max(largest, _TIERS[0]), dfa_size_limit=_DFA_BYTES),
        )
    except _rs.ValidationError as exc:
        raise _compile_error(exc) from None
    except (_rs.ReferencingError, ValueError) as exc:
        if lone_surrogate(doc) is not None:  # the compiler's own words for it are an encoding error
            raise _not_unicode(doc) from None
        raise InvalidSchema("", f"the schema cannot be compiled: {str(exc).splitlines()[0]}") from None
    slow = _Linear(doc, registry=_OFFLINE) if _python_is_linear(doc) else None
    return _Compiled(fast=fast, slow=slow, pattern_bytes=pattern_bytes)


def _not_unicode(doc: Any) -> InvalidSchema:
    """A schema with a lone surrogate, which is not Unicode (so the Rust side cannot take it): the
    place is looked for only then, a walk no other schema pays for."""
    lone = lone_surrogate(doc) or ""
    where = "." + lone if lone and lone[0] != "[" else lone
    return InvalidSchema(where, f"{LONE_SURROGATE}. Fix: {LONE_SURROGATE_FIX}")


def _compile_error(exc: _rs.ValidationError) -> InvalidSchema:
    first = exc.message.splitlines()[0] if exc.message else str(exc).splitlines()[0]
    where = _where(exc.instance_path)
    if 'is not a "regex"' in first:
        return _not_a_regex(where, first)
    if "does not exist" in first or "retrieving it failed" in first or "Unresolvable" in first:
        return InvalidSchema(
            where,
            f"a $ref cannot be resolved ({first}); refer to a definition inside the same schema, such as"
            " '#/$defs/<name>'",
        )
    return InvalidSchema(where, f"the schema cannot be compiled: {first}")


def _not_a_regex(where: str, first: str) -> InvalidSchema:
    return InvalidSchema(
        where,
        f"{first}: patterns run on a linear-time engine, which has no lookaround or backreferences"
        " and compiles a pattern to at most 8 MiB (a counted repetition takes a copy per count:"
        " [\\s\\S]{0,5000} is 5 MB, a nested one multiplies); rewrite it without them, and bound lengths"
        " with minLength/maxLength rather than large or nested repetition counts",
    )


def _canonical(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_as_json)


def _as_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise InvalidSchema("", f"a {type(value).__name__} is not a JSON value; a schema holds JSON values only")


def _compiled(schema: Mapping[str, Any], limits: SchemaLimits = DEFAULT_LIMITS) -> _Compiled:
    hit = _BY_ID.get(id(schema))
    key: str | None = None
    if hit is not None and hit[0] is schema:
        key = hit[1]
        c = _COMPILED.get(key)
        if c is not None:
            return c
    if key is None:
        check_limits(schema, limits)
        key = _canonical(schema)
        c = _COMPILED.get(key)
        if c is not None:
            _BY_ID.put(id(schema), (schema, key), len(key) * 8)
            return c
    c = _build(schema, key, limits)
    _COMPILED.put(key, c, len(key) * _FOOTPRINT + int(c.pattern_bytes * _HELD))
    _BY_ID.put(id(schema), (schema, key), len(key) * 8)
    return c


def check_schema(schema: Mapping[str, Any], limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Refuse ``schema`` (:class:`InvalidSchema`) unless it is within ``limits``, a valid
    2020-12 schema, and compiles (local refs resolve, patterns fit the linear-time engine).
    Compiles and caches it: the first call for a large schema can take tens of milliseconds,
    so a server runs it off its event loop."""
    _compiled(schema, limits)


def check_request_schemas(request: Request, limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Every JSON Schema of ``request`` (tool parameters, response format) through
    :func:`check_schema`; :class:`InvalidSchema` names the field (``tools[0].parameters``,
    ``response_format.schema``). The router calls it before the first attempt, so a broken
    schema never fails an answer that was already paid for."""
    fields: list[tuple[str, Mapping[str, Any]]] = [
        (f"tools[{i}].parameters", t.parameters) for i, t in enumerate(request.tools)
    ]
    fmt = request.response_format
    if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
        fields.append(("response_format.schema", fmt.schema))
    for param, schema in fields:
        try:
            check_schema(schema, limits)
        except InvalidSchema as exc:
            raise exc.at(param) from None


# -- validating -----------------------------------------------------------------------------------


def is_valid(schema: Mapping[str, Any], instance: Any) -> bool:
    """The verdict alone (the fast path when it can take the instance)."""
    c = _compiled(schema)
    try:
        return c.fast.is_valid(instance)
    except (ValueError, TypeError, OverflowError):  # an instance Rust cannot represent
        pass
    if c.slow is None:
        return False
    try:
        return bool(c.slow.is_valid(instance))
    except Unresolvable as exc:
        raise _unresolvable(exc) from exc
    except _NotForRe2:  # as when there is no slow validator: what Rust cannot hold is not checked
        return False


def _unresolvable(exc: Unresolvable) -> InvalidSchema:
    return InvalidSchema("", f"a $ref cannot be resolved ({exc}); remote references are never fetched, use $defs")


def schema_errors(schema: Mapping[str, Any], instance: Any, *, limit: int = MAX_MESSAGES) -> list[str]:
    """``["path: message", ...]`` (at most ``limit``), or ``[]`` when ``instance`` is valid.

    :class:`InvalidSchema` (a ``ValueError``) when ``schema`` itself is refused.
    """
    if is_valid(schema, instance):
        return []
    c = _compiled(schema)
    out = []
    if c.slow is not None:
        try:
            found = sorted(c.slow.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
        except Unresolvable as exc:
            raise _unresolvable(exc) from exc
        except _NotForRe2:  # a pattern only jsonschema-rs's regex takes: its messages, below
            found = []
        for err in found:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            out.append(f"{where}: {err.message}")
            if len(out) >= limit:
                break
    if not out:  # the fast verdict stands; say what it saw
        try:
            for rs_err in c.fast.iter_errors(instance):
                where = "/".join(str(p) for p in rs_err.instance_path) or "(root)"
                out.append(f"{where}: {rs_err.message}")
                if len(out) >= limit:
                    break
        except (ValueError, TypeError, OverflowError):
            out.append("(root): a number outside 64 bits cannot be checked against this schema")
    return out or ["(root): does not match the schema"]
