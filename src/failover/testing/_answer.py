"""What a 200 says, before any dialect shapes it: the :class:`~._parts.Answer` a reply stands
for, given the request it answers.

The text, tool calls, stop, usage and reasoning come from the reply where it sets them, else
from the request: a structured-output request gets an object built from its schema, a
request that forces a tool gets a call to it, an unscripted usage is estimated from the
prompt. The request is read in its dialect's terms by the :class:`~._exchange.FakeDialect`
given; this module knows no dialect.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any

from ._exchange import Exchange, FakeDialect
from ._kinds import STREAM_FAULT_KINDS, ReplyKind
from ._parts import Answer, Call
from ._reply import Reply

__all__ = ["EXAMPLE_MAX_DEPTH", "EXAMPLE_MAX_ITEMS", "EXAMPLE_MAX_VALUES", "build_answer"]


_MALFORMED_ARGS = '{"query": "weather in Par'


def build_answer(reply: Reply, ex: Exchange, fake: FakeDialect) -> Answer:
    """What ``reply`` answers to the request of ``ex``, read in its dialect's terms by ``fake``."""
    kind = reply.kind
    name = ex.provider
    calls: list[Call] = []
    text: str | None = None
    refusal: str | None = None
    stop = "end"
    forced = _forced_tool(fake, ex.body)

    if kind in (ReplyKind.OK, ReplyKind.DELAY, ReplyKind.SCHEMA_INVALID) or kind in STREAM_FAULT_KINDS:
        obj: Any = reply.json
        if kind is ReplyKind.SCHEMA_INVALID and obj is None:
            obj = {"wrong": 1}
        for i, tc in enumerate(reply.tool_calls):
            calls.append(_call(fake, ex, i, tc.name, dict(tc.args)))
        if obj is not None:
            if forced is not None and not calls:
                calls.append(_call(fake, ex, 0, forced[0], obj))
            else:
                text = json.dumps(obj, separators=(",", ":"))
        elif not calls:
            wants, schema = fake.structured(ex.body)
            if forced is not None:
                calls.append(_call(fake, ex, 0, forced[0], _example(forced[1], forced[1], f"ok from {name}")))
            elif wants:
                example = _example(schema, schema, f"ok from {name}") if schema else {"text": f"ok from {name}"}
                text = json.dumps(example, separators=(",", ":"))
        if reply.text is not None:
            text = reply.text
        elif text is None and not calls:
            text = f"ok from {name}"
        stop = "tool" if calls else "end"
    elif kind is ReplyKind.TRUNCATE:
        wants, _ = fake.structured(ex.body)
        text = reply.text if reply.text is not None else ('{"' if wants else f"partial answer from {name}, cut")
        stop = "length"
    elif kind is ReplyKind.REFUSE:
        refusal = reply.text if reply.text is not None else "I'm sorry, but I can't assist with that."
        stop = "refusal"
    elif kind is ReplyKind.CONTENT_FILTER:
        stop = "filter"
    elif kind is ReplyKind.MALFORMED_TOOL_ARGS:
        tool = reply.tool_calls[0].name if reply.tool_calls else (forced[0] if forced else _first_tool(fake, ex))
        raw = reply.arguments if reply.arguments is not None else _MALFORMED_ARGS
        calls.append(Call(id=_call_id(fake, ex, 0), name=tool, args=raw, text=raw, valid=False))
        stop = "malformed"

    reasoning = reply.reasoning if kind in _REASONING_KINDS else None
    thought = math.ceil(len(reasoning) / 4) if reasoning else 0
    cached = 0
    if reply.usage is not None:
        input_tokens, output_tokens = reply.usage[0], reply.usage[1]
        cached = reply.usage[2] if len(reply.usage) == 3 else 0
    else:
        input_tokens = ex.input_tokens
        produced = len(text or "") + len(refusal or "") + sum(len(c.text) + len(c.name) for c in calls)
        output_tokens = max(1, math.ceil(produced / 4)) + thought
        if stop == "length":
            output_tokens = fake.max_tokens(ex.body) or output_tokens
    answer = Answer(text, calls, stop, refusal, input_tokens, output_tokens, cached_tokens=cached)
    if reasoning is not None:
        answer.reasoning = reasoning
        answer.reasoning_tokens = min(thought, output_tokens)
        answer.signature = _fake_signature(ex, "thinking")
    if reply.redacted_thinking and kind in _REASONING_KINDS:
        answer.redacted = _fake_signature(ex, "redacted")
    answer.interleave = reply.interleave
    return answer


# The replies whose answer may carry reasoning: those that answer like ``ok``, and ``truncate``
# (a reasoning model that spent its output budget thinking).
_REASONING_KINDS = frozenset({ReplyKind.OK, ReplyKind.DELAY, ReplyKind.TRUNCATE, *STREAM_FAULT_KINDS})


def _fake_signature(ex: Exchange, what: str) -> str:
    """An opaque token in the shape real ones have (base64), the same for the same response:
    what a model would need back to read its own reasoning in the next turn."""
    return base64.b64encode(f"failover-fake-{what}:{ex.provider}:{ex.response_id}".encode()).decode()


def _call(fake: FakeDialect, ex: Exchange, index: int, name: str, args: Any) -> Call:
    return Call(id=_call_id(fake, ex, index), name=name, args=args, text=json.dumps(args, separators=(",", ":")))


def _call_id(fake: FakeDialect, ex: Exchange, index: int) -> str:
    return f"{fake.CALL_PREFIX}{ex.response_id.rsplit('_', 1)[-1].rsplit('-', 1)[-1]}{index}"


def _first_tool(fake: FakeDialect, ex: Exchange) -> str:
    tools = fake.tools(ex.body)
    return tools[0][0] if tools else "lookup"


def _forced_tool(fake: FakeDialect, body: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The tool the request forces the model to call (name, schema), if any."""
    if "tools" not in body and "toolConfig" not in body:
        return None
    tools = fake.tools(body)
    if not tools:
        return None
    wanted, anyone = fake.forced(body)
    if wanted is not None:
        for tool in tools:
            if tool[0] == wanted:
                return tool
        return (wanted, None)
    return tools[0] if anyone else None


EXAMPLE_MAX_DEPTH = 12  # nesting (and $ref hops) followed before a plain string stands in
EXAMPLE_MAX_ITEMS = 100  # minItems / minProperties / minLength honoured up to this
EXAMPLE_MAX_VALUES = 2000  # values in one example in all: a hostile schema cannot make it large


def _example(schema: Any, root: Any, text: str, depth: int = 0, budget: list[int] | None = None) -> Any:
    """A small value that satisfies ``schema`` (JSON Schema, or Gemini's OpenAPI subset).

    Bounded whatever the schema asks: at most :data:`EXAMPLE_MAX_VALUES` values, nesting
    :data:`EXAMPLE_MAX_DEPTH`, and ``minItems`` / ``minProperties`` / ``minLength`` honoured up to
    :data:`EXAMPLE_MAX_ITEMS` (beyond that the example is too short: still an answer)."""
    left = budget if budget is not None else [EXAMPLE_MAX_VALUES]
    left[0] -= 1
    if depth > EXAMPLE_MAX_DEPTH or left[0] <= 0 or not isinstance(schema, Mapping):
        return text
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        return _example(target, root, text, depth + 1, left)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            chosen = next((o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")), options[0])
            return _example(chosen, root, text, depth + 1, left)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = kind.lower() if isinstance(kind, str) else ("object" if "properties" in schema else "string")
    if kind == "object":
        props = schema.get("properties")
        out: dict[str, Any] = {}
        for k, v in props.items() if isinstance(props, Mapping) else ():
            if left[0] <= 0:
                break
            out[k] = _example(v, root, text, depth + 1, left)
        extra = min(_count(schema.get("minProperties")), EXAMPLE_MAX_ITEMS)
        i = 0
        while len(out) < extra and left[0] > 0:
            left[0] -= 1
            out.setdefault(f"p{i}", text)
            i += 1
        return out
    if kind == "array":
        count = min(_count(schema.get("minItems")), EXAMPLE_MAX_ITEMS)
        items: list[Any] = []
        while len(items) < count and left[0] > 0:
            items.append(_example(schema.get("items"), root, text, depth + 1, left))
        return items
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        low = low if isinstance(low, int | float) and not isinstance(low, bool) else 0
        value = low + (1 if "exclusiveMinimum" in schema else 0)
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    short = min(_count(schema.get("minLength")), EXAMPLE_MAX_ITEMS)
    return text if len(text) >= short else text + "." * (short - len(text))


def _count(value: Any) -> int:
    """A schema's minimum count (minItems, ...) as a non-negative int (JSON may say 1e8)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return int(min(max(value, 0), 1 << 30))
