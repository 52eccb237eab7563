"""Schemas real agent runtimes send (Claude Code / the Claude Agent SDK, Codex, the OpenAI Agents
SDK, pydantic models) are accepted; the pattern blow-ups the limits are for are still refused."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from failover.validation import DEFAULT_LIMITS, InvalidSchema, check_schema, schema_errors

# The Claude Agent SDK's CLI sends this tool (measured: a 400 before, with a 256 KiB cap per pattern)
SEND_MESSAGE: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "the teammate's name"},
        "message": {"type": "string", "pattern": "^[\\s\\S]{0,300}$", "description": "at most 300 characters"},
        "summary": {"type": "string", "pattern": "^[\\s\\S]{1,1000}$"},
    },
    "required": ["to", "message"],
    "additionalProperties": False,
}


def pydantic_chain(levels: int) -> dict[str, Any]:
    """A pydantic-generated schema: ``levels`` models each holding the next, all under ``$defs``."""
    space: dict[str, Any] = {"BaseModel": BaseModel, "Literal": Literal}
    code = f"class M{levels}(BaseModel):\n    leaf: str\n"
    for i in range(levels - 1, -1, -1):
        code += (
            f"class M{i}(BaseModel):\n    name: str\n    kind: Literal['a', 'b'] = 'a'\n"
            f"    child: 'M{i + 1} | None' = None\n    items: 'list[M{i + 1}]' = []\n"
        )
    exec(code, space)  # test data: model classes built from a fixed template
    model: type[BaseModel] = space["M0"]
    model.model_rebuild(_types_namespace=space)
    return model.model_json_schema()


def big_enum(n: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "enum": [f"ICD-{i:05d}-{'x' * 12}" for i in range(n)]}},
        "required": ["code"],
    }


@pytest.mark.parametrize(
    "pattern",
    [
        "^[\\s\\S]{0,300}$",
        "^[\\s\\S]{1,1000}$",
        "^[\\s\\S]{0,5000}$",
        "^.{1,1000}$",
        "^.{0,5000}$",
        "^[^\\n]{0,2000}$",
        "^\\w{1,1000}$",
        "^[a-zA-Z0-9_-]{1,4000}$",
        "^\\p{L}{0,100}$",
    ],
)
def test_bounded_quantifiers_up_to_a_few_thousand_are_accepted(pattern: str) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string", "pattern": pattern}}}
    check_schema(schema)
    assert schema_errors(schema, {"text": "ok"}) == []


def test_the_claude_agent_sdk_send_message_tool_is_accepted_and_its_pattern_enforced() -> None:
    check_schema(SEND_MESSAGE)
    assert schema_errors(SEND_MESSAGE, {"to": "lead", "message": "line one\nline two"}) == []
    errors = schema_errors(SEND_MESSAGE, {"to": "lead", "message": "x" * 301})
    assert len(errors) == 1 and errors[0].startswith("message: ") and "does not match" in errors[0]


def test_a_count_over_1000_is_told_by_the_fast_validator() -> None:
    # RE2 (the messages' engine) refuses counts over 1000; the messages then come from jsonschema-rs
    schema = {"type": "object", "properties": {"body": {"type": "string", "pattern": "^[\\s\\S]{0,5000}$"}}}
    errors = schema_errors(schema, {"body": "y" * 5001})
    assert len(errors) == 1 and errors[0].startswith("body: ") and "does not match" in errors[0]
    assert schema_errors(schema, {"body": "y" * 5000}) == []


def test_a_pydantic_schema_with_30_levels_of_defs_is_accepted() -> None:
    schema = pydantic_chain(30)
    assert len(schema["$defs"]) == 30
    check_schema(schema)
    leaf: dict[str, Any] = {"leaf": "end"}
    for i in range(30, 0, -1):
        leaf = {"name": f"m{i}", "child": leaf} if i < 30 else leaf
    assert schema_errors(schema, {"name": "top", "child": leaf}) == []
    assert schema_errors(schema, {"name": "top", "child": {"name": 1}}) != []


def test_a_2000_value_enum_is_accepted() -> None:
    schema = big_enum(2000)
    check_schema(schema)
    assert schema_errors(schema, {"code": "ICD-01999-xxxxxxxxxxxx"}) == []
    assert schema_errors(schema, {"code": "nope"}) != []


@pytest.mark.parametrize(
    "pattern",
    [
        "^(a{1,1000}){1,1000}$",  # nested counts multiply: 72 MB compiled
        "^((a{1,100}){1,100}){1,100}$",
        "^[\\s\\S]{0,9000}$",  # over 8 MiB on its own
        "^\\p{L}{0,1000}$",  # 43 MB: a Unicode class is ~40 KB per count
    ],
)
def test_patterns_that_compile_too_large_are_refused_naming_the_field_and_the_fix(pattern: str) -> None:
    with pytest.raises(InvalidSchema) as caught:
        check_schema({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}})
    assert caught.value.field == ".properties.a.pattern"
    assert "8 MiB" in str(caught.value) and "minLength/maxLength" in str(caught.value)


def test_what_all_patterns_compile_to_together_is_bounded() -> None:
    # each is a real client's pattern (1.0 MB compiled); 40 distinct ones pass the 16 MiB budget
    many = {"properties": {f"p{i}": {"pattern": f"^[\\s\\S]{{0,1000}}{i}$"} for i in range(40)}}
    with pytest.raises(InvalidSchema) as caught:
        check_schema(many)
    assert caught.value.limit == "max_schema_pattern_bytes" and caught.value.field.endswith(".pattern")
    assert str(DEFAULT_LIMITS.max_pattern_bytes) in str(caught.value)
    # the same pattern many times is compiled once and counted once
    check_schema({"properties": {f"p{i}": {"pattern": "^[\\s\\S]{0,1000}$"} for i in range(40)}})
