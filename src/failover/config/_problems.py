"""Collecting every problem of a config file, each with its place in the file and its fix.

pydantic reports all of a model's errors at once, but in its own words ("Extra inputs are
not permitted", "Value error, ..."); :meth:`Problems.validation` turns each into a
:class:`~failover.model.ConfigProblem`: the dotted field, the line and column, a "did you
mean" for a misspelt key (the keys allowed at that place come from the model itself), and a
fix that fits (a credential written into the file points at ``api_key_env`` /
``api_key_file``). Values are never quoted back unless they are numbers or booleans: a
string in the wrong place may be a key.
"""

from __future__ import annotations

import difflib
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..model import ConfigError, ConfigProblem, Severity
from ._yaml import Document, Loc, dotted

# where each top-level section is documented (the "fix" of an unknown key points there)
_DOCS = {"gateway": "docs/gateway.md", "ledger": "docs/deploy.md"}
# keys that mean "the secret itself": refused with the way to give a secret instead
_SECRET_KEYS = frozenset({"api_key", "apikey", "api-key", "key", "token", "secret", "password", "authorization"})
_PREFIXES = ("Value error, ", "Assertion failed, ")
_BOUNDS = {  # pydantic's number constraints: the fix names the bound
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}
_KINDS = {
    "dict_type": "a mapping (key: value lines, or {key: value})",
    "model_type": "a mapping (key: value lines, or {key: value})",
    "model_attributes_type": "a mapping (key: value lines, or {key: value})",
    "list_type": "a list ([a, b] or - item lines)",
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def allowed_keys(model: type[BaseModel], loc: Loc) -> list[str] | None:
    """The keys a mapping at ``loc`` (inside ``model``) may have, or None if it is not a model."""
    options: list[Any] = [model]
    for part in loc:
        nxt: list[Any] = []
        for option in options:
            for t in _members(option):
                if _is_model(t):
                    if isinstance(part, str) and part in t.model_fields:
                        nxt.append(t.model_fields[part].annotation)
                elif get_origin(t) is dict and isinstance(part, str):
                    nxt.append(get_args(t)[1])
                elif get_origin(t) is list and isinstance(part, int):
                    nxt.append(get_args(t)[0])
        options = nxt
    for option in options:
        for t in _members(option):
            if _is_model(t):
                return list(t.model_fields)
    return None


def _unknown_key_fix(key: str, allowed: list[str] | None, docs: str) -> str:
    if allowed is not None and key.lower() in _SECRET_KEYS:
        if "api_key_env" in allowed:
            return (
                "a credential never goes in the file: put it in an environment variable and name it with "
                "api_key_env (e.g. api_key_env: OPENAI_API_KEY), or in a file named by api_key_file "
                "(e.g. api_key_file: /run/secrets/openai)"
            )
        if "key_env" in allowed:
            return (
                "a key never goes in the file: name the environment variable that holds it with key_env, or list "
                'its SHA-256 under key_sha256 (printf %s "$KEY" | sha256sum)'
            )
    if allowed:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        if close:
            return f"did you mean {close[0]!r}?"
        return f"remove it; the keys allowed here are {', '.join(allowed)} ({docs})"
    return f"remove it, or check its spelling against {docs}"


class Problems:
    """The problems found so far in one document (errors and warnings, in the order found)."""

    def __init__(self, doc: Document | None = None) -> None:
        self.doc = doc if doc is not None else Document(data=None)
        self.items: list[ConfigProblem] = list(self.doc.duplicates)
        self.shadowed: list[Loc] = []  # paths taken out after errors: what contains them is not judged

    def add(self, loc: Loc, problem: str, fix: str, severity: Severity = "error") -> None:
        if any(path[: len(loc)] == loc for path in self.shadowed):
            return
        pos = self.doc.where(loc)
        self.items.append(
            ConfigProblem(
                field=dotted(loc) or "(top level)",
                problem=problem,
                fix=fix,
                severity=severity,
                source=self.doc.source,
                line=pos[0] if pos else None,
                column=pos[1] if pos else None,
            )
        )

    def error(self, loc: Loc, problem: str, fix: str) -> None:
        self.add(loc, problem, fix, "error")

    def warning(self, loc: Loc, problem: str, fix: str) -> None:
        self.add(loc, problem, fix, "warning")

    def config_error(self, exc: ConfigError) -> None:
        """A ConfigError raised by a lower layer's own check (its field is a plain dotted path)."""
        for p in exc.problems:
            self.error(tuple(p.field.split(".")), p.problem, p.fix)

    def validation(self, exc: ValidationError, model: type[BaseModel], base: Loc = ()) -> None:
        """Every error of a pydantic validation of ``model`` (found at ``base`` in the file)."""
        for e in exc.errors():
            loc: Loc = (*base, *e["loc"])
            kind = e["type"]
            msg = str(e["msg"])
            for prefix in _PREFIXES:
                msg = msg.removeprefix(prefix)
            if msg.startswith("Input should"):
                msg = "must" + msg.removeprefix("Input should")
            docs = _DOCS.get(str(loc[0]) if loc else "", "docs/config.md")
            key = loc[-1] if loc else ""
            if kind == "extra_forbidden":
                allowed = allowed_keys(model, tuple(e["loc"])[:-1])
                self.error(loc, f"unknown key {key!r}", _unknown_key_fix(str(key), allowed, docs))
                continue
            value = e.get("input")
            if isinstance(value, bool | int | float) and kind not in ("missing",):
                msg += f" (it is {value!r})"
            if kind == "missing":
                problem, fix = "required, but missing", f"add {key}: (see {docs})"
            elif kind in ("literal_error", "enum"):
                problem, fix = msg, "use one of the values listed"
            elif kind == "too_short":
                problem, fix = msg, "give at least one entry"
            elif kind == "string_pattern_mismatch" and str(key).endswith("_env"):
                problem = "must be the name of an environment variable (letters, digits and _)"
                fix = "name the variable that holds the value (e.g. OPENAI_API_KEY), never the value itself"
            elif kind in _KINDS:
                problem, fix = msg, f"give {_KINDS[kind]} here"
            elif kind in _BOUNDS:
                op, name = _BOUNDS[kind]
                problem, fix = msg, f"use a value {op} {e.get('ctx', {}).get(name)}"
            else:
                problem, fix = msg, "change the value"
            self.error(loc, problem, fix)

    @property
    def errors(self) -> list[ConfigProblem]:
        return [p for p in self.items if p.severity == "error"]

    @property
    def warnings(self) -> list[ConfigProblem]:
        return [p for p in self.items if p.severity == "warning"]
