"""Contract checks on a transport-successful response: structured output and tool calls.

A response that arrived is not yet an answer that works. Structured output must parse and
match the requested JSON Schema (draft 2020-12); tool calls must name a tool the request
offered, with arguments that match that tool's parameter schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..model import Failure, FailureKind, Request, Response


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator:
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


_BY_ID: dict[int, tuple[Mapping[str, Any], Draft202012Validator]] = {}


def _validator_for(schema: Mapping[str, Any]) -> Draft202012Validator:
    # The same schema object comes back with every request of a route: look it up by
    # identity before paying for a canonical JSON key (kept alive by the entry itself).
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    v = _validator(json.dumps(schema, sort_keys=True))
    if len(_BY_ID) > 1024:
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, v)
    return v


def _errors(schema: Mapping[str, Any], instance: Any) -> list[str]:
    try:
        v = _validator_for(schema)
    except SchemaError as exc:  # the caller's schema is broken: not the model's fault
        raise ValueError(f"response_format.schema is not a valid JSON Schema: {exc.message}") from exc
    out = []
    for err in sorted(v.iter_errors(instance), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        out.append(f"{where}: {err.message}")
    return out


def validate(request: Request, response: Response) -> Response | Failure:
    """The response with ``parsed`` filled in, or a ``schema_invalid`` / ``tool_call_malformed`` Failure."""
    tools = {t.name: t for t in request.tools}
    for call in response.tool_calls:
        tool = tools.get(call.name)
        if tool is None:
            return _fail(FailureKind.TOOL_CALL_MALFORMED, f"call to unknown tool {call.name!r}", response)
        if call.parsed is None:
            return _fail(
                FailureKind.TOOL_CALL_MALFORMED, f"tool {call.name!r}: arguments are not a JSON object", response
            )
        errs = _errors(tool.parameters, dict(call.parsed))
        if errs:
            return _fail(
                FailureKind.TOOL_CALL_MALFORMED, f"tool {call.name!r} arguments: " + "; ".join(errs[:5]), response
            )
    fmt = request.response_format
    if fmt is None or fmt.kind == "text" or response.tool_calls:
        return response
    if response.parsed is not None:
        value = response.parsed
    else:
        try:
            value = json.loads(response.text)
        except ValueError as exc:
            return _fail(FailureKind.SCHEMA_INVALID, f"output is not JSON: {exc}", response)
    if fmt.kind == "json_object" and not isinstance(value, dict):
        return _fail(FailureKind.SCHEMA_INVALID, "output is JSON but not an object", response)
    if fmt.kind == "json_schema" and fmt.schema is not None:
        errs = _errors(fmt.schema, value)
        if errs:
            return _fail(
                FailureKind.SCHEMA_INVALID, "output does not match the schema: " + "; ".join(errs[:5]), response
            )
    return replace(response, parsed=value)


def _fail(kind: FailureKind, message: str, response: Response) -> Failure:
    return Failure(
        kind=kind,
        message=message,
        status=200,
        usage=response.usage,
        response=response,
        provider_request_id=response.provider_request_id,
    )
