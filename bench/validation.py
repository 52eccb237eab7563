"""JSON Schema validation speed: microseconds per check, per validator, on two schemas.

    .venv/bin/python bench/validation.py

Prints numbers measured in this run; nothing is asserted. Every structured-output result and
every tool call is validated before it counts, so this runs on the hot path of each answer.

Validators compared (each compiled once, outside the timing):

- ``jsonschema`` (pure Python, draft 2020-12): the reference, and the source of our messages;
- ``jsonschema-rs`` (Rust, draft 2020-12): the verdict on the hot path when installed;
- ``fastjsonschema`` (generated Python code) for reference only when installed: it supports
  drafts 4, 6 and 7, not 2020-12 (no ``$defs``, ``prefixItems``, ``unevaluatedProperties``...),
  so it is measured on the same schemas read as draft 7 and cannot be adopted.

Also the whole ``failover.validation.validate`` call (parse the text, validate, fill ``parsed``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator

from failover.model import Contract, Request, Response, ResponseFormat
from failover.validation import fast_validator_name, validate

FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "shipping", "returns", "account", "other"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string", "maxLength": 200},
    },
    "required": ["category", "confidence", "reason"],
    "additionalProperties": False,
}
FLAT_OK = {"category": "shipping", "confidence": 0.92, "reason": "The parcel has not moved for five days."}
FLAT_BAD = {"category": "delivery", "confidence": 1.5, "reason": "x"}

NESTED: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "item": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                "qty": {"type": "integer", "minimum": 1},
                "price": {"type": "number", "exclusiveMinimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            },
            "required": ["sku", "qty", "price"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "order": {"type": "string"},
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "email": {"type": "string"},
                "address": {
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "city": {"type": "string"},
                        "country": {"type": "string", "minLength": 2, "maxLength": 2},
                    },
                    "required": ["city", "country"],
                },
            },
            "required": ["name", "address"],
        },
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
        "status": {"enum": ["open", "paid", "shipped", "cancelled"]},
        "notes": {"type": ["string", "null"]},
    },
    "required": ["order", "customer", "items", "status"],
}
NESTED_OK = {
    "order": "4417-2231",
    "customer": {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "address": {"street": "12 St James's Square", "city": "London", "country": "GB"},
    },
    "items": [
        {"sku": f"RUN-{1000 + i}", "qty": 1 + i % 3, "price": 19.5 + i, "tags": ["shoes", "sale"]} for i in range(10)
    ],
    "status": "paid",
    "notes": None,
}
NESTED_BAD = json.loads(json.dumps(NESTED_OK))
NESTED_BAD["items"][7]["sku"] = "run-1007"
NESTED_BAD["customer"]["address"]["country"] = "GBR"


def per_call_us(fn: Callable[[], object], seconds: float = 0.5) -> float:
    for _ in range(20):
        fn()
    n = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(100):
            fn()
        n += 100
    return elapsed / n * 1e6


def validators(schema: dict[str, Any]) -> dict[str, Callable[[Any], bool]]:
    out: dict[str, Callable[[Any], bool]] = {"jsonschema": Draft202012Validator(schema).is_valid}
    try:
        import jsonschema_rs

        out["jsonschema-rs"] = jsonschema_rs.Draft202012Validator(schema, offline=True).is_valid
    except ImportError:  # pragma: no cover - an optional speed-up
        pass
    try:
        import fastjsonschema

        draft7 = json.loads(
            json.dumps(schema).replace('"$defs"', '"definitions"').replace("#/$defs/", "#/definitions/")
        )
        check = fastjsonschema.compile(draft7)

        def fjs(instance: Any) -> bool:
            try:
                check(instance)
            except fastjsonschema.JsonSchemaException:
                return False
            return True

        out["fastjsonschema (draft 7)"] = fjs
    except ImportError:  # pragma: no cover - reference only
        pass
    return out


def main() -> None:
    print(f"failover.validation uses: {fast_validator_name()}")
    for label, schema, ok, bad in (("3-property", FLAT, FLAT_OK, FLAT_BAD), ("nested", NESTED, NESTED_OK, NESTED_BAD)):
        print(f"\n{label} schema: microseconds per check (lower is better)")
        print(f"  {'validator':<26} {'valid':>10} {'invalid':>10}   vs jsonschema (valid)")
        base = None
        for name, is_valid in validators(schema).items():
            assert is_valid(ok) and not is_valid(bad), name
            t_ok = per_call_us(lambda f=is_valid, x=ok: f(x))  # type: ignore[misc]
            t_bad = per_call_us(lambda f=is_valid, x=bad: f(x))  # type: ignore[misc]
            base = base or t_ok
            print(f"  {name:<26} {t_ok:>10.2f} {t_bad:>10.2f}   {base / t_ok:>6.1f}x faster")
        messages = Draft202012Validator(schema)
        t_msgs = per_call_us(lambda v=messages, x=bad: list(v.iter_errors(x)))  # type: ignore[misc]
        print(f"  {'jsonschema messages':<26} {'':>10} {t_msgs:>10.2f}   (only on failure)")
        request = Request.simple("x")
        request = Request(messages=request.messages, response_format=ResponseFormat.json_schema(schema))
        good = Response(text=json.dumps(ok))
        contract = Contract(required_fields=tuple(schema["required"]))
        t_full = per_call_us(lambda r=request, g=good, c=contract: validate(r, g, c))  # type: ignore[misc]
        print(f"  {'validate() end to end':<26} {t_full:>10.2f} {'':>10}   (json.loads + checks + parsed)")


if __name__ == "__main__":
    main()
