"""The fast validator (jsonschema-rs) agrees with jsonschema, the reference, on draft 2020-12."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from failover.validation import fast_validator_name, schema_errors
from failover.validation._schema import InvalidSchema, _compiled, is_valid

FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "other"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string", "maxLength": 20},
    },
    "required": ["category", "confidence"],
    "additionalProperties": False,
}
NESTED: dict[str, Any] = {
    "$defs": {
        "item": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "pattern": "^[a-z]+$"},
                "qty": {"type": "integer", "minimum": 1, "multipleOf": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
            },
            "required": ["sku"],
        }
    },
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
        "status": {"enum": ["open", "paid", None, 1, True]},
        "notes": {"type": ["string", "null"]},
    },
    "required": ["items"],
}
MODERN: dict[str, Any] = {  # 2020-12 keywords draft 7 does not have
    "type": "object",
    "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        "kind": {"const": "a"},
        "count": {"type": "integer"},
        "bag": {"type": "array", "contains": {"type": "integer"}, "minContains": 2},
    },
    "dependentRequired": {"kind": ["count"]},
    "unevaluatedProperties": False,
    "if": {"required": ["kind"]},
    "then": {"properties": {"count": {"minimum": 1}}},
    "else": {"properties": {"count": {"maximum": 0}}},
}
COMBINED: dict[str, Any] = {
    "oneOf": [{"type": "integer", "exclusiveMinimum": 10}, {"type": "string", "minLength": 2}],
    "not": {"const": 42},
}
SCHEMAS = {"flat": FLAT, "nested": NESTED, "modern": MODERN, "combined": COMBINED}

KEYS = st.sampled_from(["category", "confidence", "reason", "items", "sku", "qty", "tags", "status", "notes", "pair",
                        "kind", "count", "bag", "x"])  # fmt: skip
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-5, max_value=50)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from([0.0, 1.0, 0.5, 2.5, 11, 42, "a", "ab", "billing", "shipping", "open", "paid", "abc", "AB"])
    | st.text(max_size=25)
)
JSON = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)


# Instances shaped like each schema, with near-miss values, so that both verdicts occur often.
SMALL = st.integers(min_value=-2, max_value=12)
SHAPED = {
    "flat": st.fixed_dictionaries(
        {
            "category": st.sampled_from(["billing", "shipping", "other", "refund", 1]),
            "confidence": st.floats(min_value=-0.5, max_value=1.5) | SMALL,
        },
        optional={"reason": st.text(max_size=25)},
    ),
    "nested": st.fixed_dictionaries(
        {
            "items": st.lists(
                st.fixed_dictionaries(
                    {"sku": st.sampled_from(["abc", "ABC", "a1", ""]) | st.from_regex("^[a-z]{1,4}$")},
                    optional={
                        "qty": SMALL | st.sampled_from([1.0, 2.5, "2"]),
                        "tags": st.lists(st.sampled_from(["a", "b", "c", 1]), max_size=4),
                    },
                ),
                max_size=3,
            )
        },
        optional={"status": st.sampled_from(["open", "paid", None, 1, 1.0, True, False, 0]), "notes": LEAVES},
    ),
    "modern": st.fixed_dictionaries(
        {},
        optional={
            "pair": st.lists(SMALL | st.sampled_from(["a", 1.0]), max_size=3),
            "kind": st.sampled_from(["a", "b"]),
            "count": SMALL,
            "bag": st.lists(SMALL | st.just("x"), max_size=4),
            "extra": LEAVES,
        },
    ),
    "combined": LEAVES | SMALL | st.sampled_from([10, 10.5, 11.0, 42, 42.0]),
}


def reference(schema: dict[str, Any], instance: Any) -> bool:
    return bool(Draft202012Validator(schema).is_valid(instance))


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(sorted(SCHEMAS)))
    return name, draw(SHAPED[name] | JSON)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_fast_and_reference_give_the_same_verdict(case: tuple[str, Any]) -> None:
    name, instance = case
    schema = SCHEMAS[name]
    fast = _compiled(schema).fast
    assert fast is not None
    expected = reference(schema, instance)
    if name == "nested" and _sku_ends_with_newline(instance):
        # The one known difference: "pattern" is ECMA 262, where "$" does not match before a
        # final newline; Python's re (used by jsonschema) does. The fast verdict is the right one.
        expected = False
    assert fast.is_valid(instance) == expected
    assert (schema_errors(schema, instance) == []) == expected


def _sku_ends_with_newline(instance: Any) -> bool:
    items = instance.get("items") if isinstance(instance, dict) else None
    return isinstance(items, list) and any(
        isinstance(i, dict) and isinstance(i.get("sku"), str) and i["sku"].endswith("\n") for i in items
    )


def test_pattern_dollar_follows_ecma_262_in_both_validators() -> None:
    instance = {"items": [{"sku": "abc\n"}]}
    assert reference(NESTED, instance)  # Python's re: "$" matches before the final newline
    assert not is_valid(NESTED, instance)
    # the messages' validator runs patterns with RE2, where "$" is the end of the text, as in ECMA 262
    assert schema_errors(NESTED, instance) == ["items/0/sku: 'abc\\n' does not match '^[a-z]+$'"]


@pytest.mark.parametrize(
    ("name", "instance", "valid"),
    [
        ("flat", {"category": "billing", "confidence": 0.5}, True),
        ("flat", {"category": "billing", "confidence": 1.5}, False),
        ("flat", {"category": "billing", "confidence": 0.5, "extra": 1}, False),
        ("nested", {"items": [{"sku": "abc", "qty": 2, "tags": ["a", "b"]}], "status": None}, True),
        ("nested", {"items": [{"sku": "abc", "qty": 2.0}]}, True),  # 2.0 is an integer in 2020-12
        ("nested", {"items": [{"sku": "abc", "tags": ["a", "a"]}]}, False),
        ("nested", {"items": []}, False),
        ("nested", {"items": [{"sku": "ABC"}]}, False),
        ("nested", {"items": [{"sku": "abc"}], "status": 1.0}, True),  # enum: 1.0 == 1
        ("nested", {"items": [{"sku": "abc"}], "status": False}, False),  # but False is not 0 or None
        ("modern", {"pair": [1, "a"], "kind": "a", "count": 3}, True),
        ("modern", {"pair": [1, "a", 3]}, False),  # items: false after the prefix
        ("modern", {"kind": "a"}, False),  # dependentRequired
        ("modern", {"count": 0, "bag": [1, 2, "x"]}, True),
        ("modern", {"count": 1}, False),  # else: maximum 0
        ("modern", {"bag": [1, "x"]}, False),  # minContains
        ("modern", {"surprise": 1}, False),  # unevaluatedProperties
        ("combined", 11, True),
        ("combined", 42, False),
        ("combined", "ab", True),
        ("combined", 5, False),
    ],
)
def test_known_verdicts(name: str, instance: Any, valid: bool) -> None:
    schema = SCHEMAS[name]
    assert reference(schema, instance) is valid
    assert is_valid(schema, instance) is valid
    assert (schema_errors(schema, instance) == []) is valid


def test_messages_come_from_jsonschema_with_the_path() -> None:
    errs = schema_errors(NESTED, {"items": [{"sku": "ABC", "qty": 0}]})
    assert errs == ["items/0/qty: 0 is less than the minimum of 1", "items/0/sku: 'ABC' does not match '^[a-z]+$'"]


def test_messages_are_capped() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    assert len(schema_errors(schema, list(range(50)))) == 5


def test_numbers_rust_cannot_hold_fall_back_to_the_reference() -> None:
    schema = {"type": "integer", "minimum": 0}
    assert is_valid(schema, 2**80) and not is_valid(schema, -(2**80))
    assert not is_valid({"type": "number", "maximum": 1}, math.inf)


def test_a_pattern_the_linear_engine_cannot_compile_is_refused() -> None:
    schema = {"type": "string", "pattern": "^(?P<word>[a-z]+)(?P=word)$"}  # a Python-only backreference syntax
    with pytest.raises(InvalidSchema, match="linear-time engine") as caught:
        is_valid(schema, "abab")
    assert caught.value.field == ".pattern"


def test_remote_refs_are_never_fetched() -> None:
    with pytest.raises(ValueError, match="remote references are never fetched"):
        is_valid({"$ref": "https://example.invalid/schema.json"}, 1)


def test_the_fast_validator_is_in_use() -> None:
    assert fast_validator_name().startswith("jsonschema-rs")
