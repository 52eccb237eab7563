"""Contract checks on a transport-successful response, before it counts as an answer.

A response that arrived is not yet an answer that works. ``validate`` checks, in one pass:

=====================  =====================================================  ====================
check                  fails when                                             failure kind
=====================  =====================================================  ====================
``schema``             JSON output does not parse, is not an object            schema_invalid
                       (``json_object``) or does not match the schema
``required_fields``    JSON output lacks a top-level key the contract needs    schema_invalid
``unknown_tool``       a call names a tool the request did not offer           tool_call_malformed
``tool_arguments``     call arguments are not a JSON object or do not match    tool_call_malformed
                       the tool's parameter schema
``no_tool_calls``      the contract forbids tool calls and the model made one  tool_call_malformed
``max_output_chars``   the answer is longer than allowed                       schema_invalid
``min_output_chars``   the answer is shorter than required                     schema_invalid
``output_languages``   the answer is mostly in a script no allowed language    schema_invalid
                       uses
``forbidden_patterns`` the answer (or a tool call's arguments) matches one     schema_invalid, or
                                                                               tool_call_malformed
                                                                               in arguments
=====================  =====================================================  ====================

All of these are things the model can fix by answering again, so each maps to a kind whose
disposition is "repair once": ``tool_call_malformed`` for anything about tool use,
``schema_invalid`` for the shape or content of the answer. ``contract_failure`` stays what
it is elsewhere: no candidate can meet the contract (a stop).

Every problem found is reported, not only the first, because there is a single repair: the
message names each failed check and how to fix it, and goes back to the model verbatim.
``Failure.checks`` names the failed checks (see :func:`failed_checks`); ``Failure.provider_code``
reads ``validation:<check>+<check>...`` for a person or a log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

from ..model import Contract, Failure, FailureKind, Request, Response, ToolCall, json_kind
from ._language import check_language, known_language, language_text_of
from ._schema import schema_errors

__all__ = ["Check", "check_contract", "checks_anything", "failed_checks", "validate"]

CODE_PREFIX = "validation:"
_EXCERPT = 200


class Check(StrEnum):
    """The checks ``validate`` runs; the names of the Contract fields where there is one."""

    SCHEMA = "schema"
    REQUIRED_FIELDS = "required_fields"
    UNKNOWN_TOOL = "unknown_tool"
    TOOL_ARGUMENTS = "tool_arguments"
    NO_TOOL_CALLS = "no_tool_calls"
    MAX_OUTPUT_CHARS = "max_output_chars"
    MIN_OUTPUT_CHARS = "min_output_chars"
    OUTPUT_LANGUAGES = "output_languages"
    FORBIDDEN_PATTERNS = "forbidden_patterns"


@dataclass(frozen=True, slots=True)
class _Problem:
    check: Check
    message: str
    about_tools: bool = False


def failed_checks(failure: Failure) -> frozenset[Check]:
    """The checks that failed, for a Failure made by :func:`validate` (empty for any other)."""
    out = set()
    for name in failure.checks:
        try:
            out.add(Check(name))
        except ValueError:
            continue
    return frozenset(out)


def check_contract(contract: Contract) -> None:
    """Raise ``ValueError`` for output constraints that can never be checked as written.

    Call it once per route at start-up (a bad regular expression should fail a deploy, not
    a request): forbidden patterns must compile, language codes must be known, and the
    length bounds must leave room for an answer.
    """
    _patterns(contract.forbidden_patterns)
    unknown = sorted(c for c in contract.output_languages if not known_language(c))
    if unknown:
        raise ValueError(
            f"Contract.output_languages: unknown language code(s) {', '.join(unknown)}; use ISO 639-1 codes such as"
            " en, de, zh, ja, ru (the check tells writing systems apart, see docs/contracts.md)"
        )
    lo, hi = contract.min_output_chars, contract.max_output_chars
    for name, value in (("min_output_chars", lo), ("max_output_chars", hi)):
        if value is not None and value < 0:
            raise ValueError(f"Contract.{name} must be >= 0, not {value}")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"Contract.min_output_chars ({lo}) is larger than max_output_chars ({hi})")
    for name in contract.required_fields:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Contract.required_fields: {name!r} is not a field name")


@lru_cache(maxsize=256)
def _patterns(sources: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    out = []
    for i, src in enumerate(sources):
        try:
            out.append(re.compile(src))
        except re.error as exc:
            raise ValueError(
                f"Contract.forbidden_patterns[{i}] {src!r} is not a valid regular expression: {exc}"
            ) from exc
    return tuple(out)


def validate(request: Request, response: Response, contract: Contract | None = None) -> Response | Failure:
    """The response with ``parsed`` filled in for JSON output, or a repairable Failure.

    Without a contract only the request's own demands are checked (structured output, tool
    calls); with one, its output constraints too. ``ValueError`` when the request's schema or
    the contract's patterns are broken: the caller's mistake, not the model's.
    """
    problems: list[_Problem] = []
    value: Any = None
    parsed = False
    if response.tool_calls:
        problems.extend(_tool_problems(request, response.tool_calls, contract))
    fmt = request.response_format
    wants_json = fmt is not None and fmt.kind != "text"
    if wants_json and not response.tool_calls:
        assert fmt is not None
        value, parsed, shape = _json_problems(request, response, contract)
        problems.extend(shape)
    if contract is not None and _constrains_output(contract):
        problems.extend(_output_problems(response, contract, value if parsed else None, parsed))
    if problems:
        kind = FailureKind.TOOL_CALL_MALFORMED if any(p.about_tools for p in problems) else FailureKind.SCHEMA_INVALID
        checks = list(dict.fromkeys(p.check.value for p in problems))
        if len(problems) == 1:
            message = problems[0].message
        else:
            message = "; ".join(f"({i}) {p.message}" for i, p in enumerate(problems, 1))
        return _fail(kind, message, response, checks)
    return replace(response, parsed=value) if parsed else response


def checks_anything(request: Request, contract: Contract | None = None) -> bool:
    """Does :func:`validate` check anything for this request? (the "contract" level: None if not)."""
    if request.tools or (request.response_format is not None and request.response_format.kind != "text"):
        return True
    return contract is not None and (contract.no_tool_calls or _constrains_output(contract))


def _constrains_output(contract: Contract) -> bool:
    return bool(
        contract.max_output_chars is not None
        or contract.min_output_chars is not None
        or contract.output_languages
        or contract.forbidden_patterns
    )


# -- tool calls ----------------------------------------------------------------------------


def _tool_problems(request: Request, calls: tuple[ToolCall, ...], contract: Contract | None) -> list[_Problem]:
    if contract is not None and contract.no_tool_calls:
        names = ", ".join(dict.fromkeys(repr(c.name) for c in calls))
        return [
            _Problem(
                Check.NO_TOOL_CALLS,
                f"the answer called {names}, but tools may not be called on this route:"
                " answer directly in text, without any tool call",
                about_tools=True,
            )
        ]
    tools = {t.name: t for t in request.tools}
    out = []
    for call in calls:
        tool = tools.get(call.name)
        if tool is None:
            offered = ", ".join(repr(n) for n in tools) if tools else None
            fix = f"call one of the offered tools ({offered}) or answer in text" if offered else "answer in text"
            what = f"tool {call.name!r} does not exist" + ("" if offered else " (no tools were offered)")
            out.append(_Problem(Check.UNKNOWN_TOOL, f"call {call.id or '?'}: {what}: {fix}", about_tools=True))
            continue
        if call.parsed is None:
            out.append(
                _Problem(
                    Check.TOOL_ARGUMENTS,
                    f"tool {call.name!r} (call {call.id or '?'}): the arguments are not a JSON object"
                    f"{_parse_error(call.arguments)}; you sent {_excerpt(call.arguments)}: send the arguments as"
                    " one JSON object that matches the tool's parameters",
                    about_tools=True,
                )
            )
            continue
        try:
            errs = schema_errors(tool.parameters, _plain(call.parsed))
        except ValueError as exc:  # the caller's tool definition is broken
            raise ValueError(f"tool {tool.name!r} parameters: {exc}") from exc
        if errs:
            out.append(
                _Problem(
                    Check.TOOL_ARGUMENTS,
                    f"tool {call.name!r} (call {call.id or '?'}): the arguments do not match its parameters schema"
                    " (call it again with arguments that match): "
                    + "; ".join(errs)
                    + f"; you sent {_excerpt(call.arguments or json.dumps(_plain(call.parsed)))}",
                    about_tools=True,
                )
            )
    return out


def _parse_error(arguments: str) -> str:
    try:
        json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        return f" ({exc})"
    return ""


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= _EXCERPT else text[:_EXCERPT] + "...")


def _plain(value: Any) -> Any:
    """Mappings as dicts, all the way down (validators want JSON-like values)."""
    if isinstance(value, dict) or not isinstance(value, Mapping):
        return value
    return {k: _plain(v) for k, v in value.items()}


# -- structured output ---------------------------------------------------------------------


def _json_problems(request: Request, response: Response, contract: Contract | None) -> tuple[Any, bool, list[_Problem]]:
    """(value, parsed?, problems) for a request that asked for JSON."""
    fmt = request.response_format
    assert fmt is not None
    if response.parsed is not None:
        value = response.parsed
    else:
        try:
            value = json.loads(response.text)
        except (ValueError, RecursionError) as exc:
            msg = (
                f"the output is not JSON ({exc}): return only the JSON value, with no text, markdown or code"
                " fences around it"
            )
            return None, False, [_Problem(Check.SCHEMA, msg)]
    out: list[_Problem] = []
    if fmt.kind == "json_object" and not isinstance(value, dict):
        out.append(
            _Problem(Check.SCHEMA, f"the output is JSON but not an object ({json_kind(value)}): return a JSON object")
        )
    if fmt.kind == "json_schema" and fmt.schema is not None:
        try:
            errs = schema_errors(fmt.schema, value)
        except ValueError as exc:
            raise ValueError(f"response_format.schema: {exc}") from exc
        if errs:
            out.append(
                _Problem(
                    Check.SCHEMA,
                    "the output does not match the schema (fix this and return JSON that matches it): "
                    + "; ".join(errs),
                )
            )
    if contract is not None and contract.required_fields:
        if not isinstance(value, dict):
            if not out:
                fields = ", ".join(repr(f) for f in contract.required_fields)
                out.append(
                    _Problem(
                        Check.REQUIRED_FIELDS,
                        f"the output must be a JSON object with the fields {fields}, not {json_kind(value)}",
                    )
                )
        else:
            missing = [f for f in contract.required_fields if f not in value]
            if missing:
                names = ", ".join(repr(f) for f in missing)
                s = "s" if len(missing) > 1 else ""
                out.append(
                    _Problem(
                        Check.REQUIRED_FIELDS,
                        f"the output lacks the required field{s} {names}: return a JSON object that includes"
                        f" {'them' if s else 'it'}",
                    )
                )
    return value, True, out


# -- output constraints (length, language, forbidden patterns) -----------------------------


def _output_problems(response: Response, contract: Contract, value: Any, parsed: bool) -> list[_Problem]:
    out: list[_Problem] = []
    text = response.text
    if not text and parsed:  # structured output that came back parsed only (a forced tool)
        text = json.dumps(value, ensure_ascii=False)
    if contract.forbidden_patterns:
        out.extend(_forbidden(text, response.tool_calls, _patterns(contract.forbidden_patterns)))
    if response.tool_calls:
        return out  # the answer is the call; any text beside it is a preamble, not checked for shape
    n = len(text)
    hi, lo = contract.max_output_chars, contract.min_output_chars
    if hi is not None and n > hi:
        out.append(
            _Problem(
                Check.MAX_OUTPUT_CHARS,
                f"the answer is {n:,} characters long, over the limit of {hi:,}: shorten it to at most {hi:,}"
                " characters, keeping what matters",
            )
        )
    if lo is not None and n < lo:
        out.append(
            _Problem(
                Check.MIN_OUTPUT_CHARS,
                f"the answer is {n:,} characters long, under the minimum of {lo:,}: give a complete answer of at"
                f" least {lo:,} characters",
            )
        )
    if contract.output_languages:
        prose = language_text_of(value) if parsed else text
        verdict = check_language(prose, contract.output_languages)
        if not verdict.ok and verdict.message is not None:
            out.append(_Problem(Check.OUTPUT_LANGUAGES, verdict.message))
    return out


def _forbidden(text: str, calls: tuple[ToolCall, ...], patterns: Iterable[re.Pattern[str]]) -> list[_Problem]:
    out: list[_Problem] = []
    sources: list[tuple[str, str, bool]] = [("the answer", text, False)]
    sources += [(f"the arguments of tool {c.name!r}", c.arguments, True) for c in calls]
    for i, rx in enumerate(patterns):
        for where, text, about_tools in sources:
            m = rx.search(text) if text else None
            if m is not None:
                # The matched text is not quoted: the pattern may guard secrets or personal data,
                # and this message is kept in the record.
                out.append(
                    _Problem(
                        Check.FORBIDDEN_PATTERNS,
                        f"{where} contains text that is not allowed here (forbidden pattern #{i} /{rx.pattern}/"
                        f" matches at character {m.start()}): rewrite it without that text",
                        about_tools=about_tools,
                    )
                )
                break
    return out


def _fail(kind: FailureKind, message: str, response: Response, checks: list[str]) -> Failure:
    return Failure(
        kind=kind,
        message=message,
        status=200,
        provider_code=CODE_PREFIX + "+".join(checks),
        checks=tuple(checks),
        usage=response.usage,
        response=response,
        provider_request_id=response.provider_request_id,
    )
