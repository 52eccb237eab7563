"""Contract validation of results, repair requests, and task-level quality gates.

- :func:`validate` checks a response against the request (structured output, tool calls) and
  the route's Contract (required fields, no tool calls, length, language, forbidden patterns);
- :func:`repair_request` builds the one corrective request after a repairable failure;
- :class:`QualityGate` and its builders (:func:`rule_gate`, :func:`all_of`, :func:`judge_gate`)
  judge task-level success.

See docs/contracts.md.
"""

from ._contract import Check, check_contract, checks_anything, failed_checks, validate
from ._gates import JUDGE_SCHEMA, GateVerdict, Judge, QualityGate, all_of, judge_gate, rule_gate
from ._language import check_language
from ._repair import REPAIR_PROMPT, repair_request
from ._schema import (
    CACHE_BYTES,
    DEFAULT_LIMITS,
    InvalidSchema,
    SchemaLimits,
    check_limits,
    check_request_schemas,
    check_schema,
    fast_validator_name,
    schema_errors,
)

__all__ = [
    # contract level
    "validate",
    "Check",
    "check_contract",
    "checks_anything",
    "failed_checks",
    "schema_errors",
    "check_language",
    "fast_validator_name",
    # client schemas
    "InvalidSchema",
    "SchemaLimits",
    "DEFAULT_LIMITS",
    "CACHE_BYTES",
    "check_limits",
    "check_schema",
    "check_request_schemas",
    # repair
    "repair_request",
    "REPAIR_PROMPT",
    # task level
    "QualityGate",
    "GateVerdict",
    "rule_gate",
    "all_of",
    "judge_gate",
    "Judge",
    "JUDGE_SCHEMA",
]
