"""A schema limit is reported at the value that crossed it, in document order."""

from __future__ import annotations

import pytest

from failover.validation._schema import InvalidSchema, SchemaLimits, check_limits

LIMITS = SchemaLimits(max_bytes=10**6, max_depth=16, max_nodes=10_000, max_pattern_chars=100, max_patterns=200)


def test_the_pattern_over_the_limit_is_named_not_the_first() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"^{i}$"} for i in range(201)}}
    with pytest.raises(InvalidSchema) as caught:
        check_limits(schema, LIMITS)
    assert caught.value.limit == "max_schema_patterns"
    assert caught.value.field == ".properties.p200.pattern"


def test_a_pattern_property_over_the_limit_is_named_by_its_key() -> None:
    schema = {
        "properties": {
            "a": {"properties": {f"p{i}": {"pattern": f"^{i}$"} for i in range(150)}},
            "b": {"patternProperties": {f"^k{i}$": {} for i in range(60)}},
        }
    }
    with pytest.raises(InvalidSchema) as caught:
        check_limits(schema, LIMITS)
    assert caught.value.limit == "max_schema_patterns"
    assert "^k50$" in caught.value.field


def test_nested_patterns_count_in_document_order() -> None:
    schema = {
        "properties": {
            "a": {"properties": {f"x{i}": {"pattern": "^a$"} for i in range(150)}},
            "b": {"items": [{"pattern": f"^{i}$"} for i in range(100)]},
        }
    }
    with pytest.raises(InvalidSchema) as caught:
        check_limits(schema, LIMITS)
    assert caught.value.field == ".properties.b.items[50].pattern"
