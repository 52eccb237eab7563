"""Quality gates: task-level success, judged after the contract checks have passed.

A contract-valid answer can still miss the task (a refund reply that never mentions the
refund). A gate is any async callable ``(request, response) -> GateVerdict``; the router
runs the route's gate on every answer that passed :func:`validate` and records the verdict
as the task level of success. Three ways to build one:

- :func:`rule_gate` wraps a plain function (a predicate, or one returning a reason);
- :func:`all_of` chains gates, cheapest first, and stops at the first failure;
- :func:`judge_gate` asks a judge model, through the router, with its own small envelope.

A judge that cannot answer (Unavailable, or a verdict that does not parse) FAILS the gate by
default ("fail closed"): an answer nobody could check is not counted as a task success.
``on_error="pass"`` fails open instead, for gates that guard quality, not safety.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..model import Envelope, ImagePart, Message, Request, Response, ResponseFormat, TextPart, Unavailable

__all__ = ["JUDGE_SCHEMA", "GateVerdict", "Judge", "QualityGate", "all_of", "judge_gate", "rule_gate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    """What a gate decided. ``reason`` says why it failed (or anything worth recording);
    ``score`` is optional, for gates that grade (0..1 by convention)."""

    passed: bool
    reason: str | None = None
    score: float | None = None


class QualityGate(Protocol):
    """``async def gate(request, response) -> GateVerdict`` (any callable returning an awaitable)."""

    def __call__(self, request: Request, response: Response, /) -> Awaitable[GateVerdict]: ...


RuleResult = bool | str | None | GateVerdict
Rule = Callable[[Request, Response], RuleResult | Awaitable[RuleResult]]


def rule_gate(fn: Rule, *, name: str | None = None) -> QualityGate:
    """A gate from a function of ``(request, response)``.

    It may return ``True`` / ``None`` (passed), ``False`` (failed: the reason names the
    rule), a string (failed, for that reason) or a :class:`GateVerdict`; it may be async.
    An exception in the rule propagates: a broken rule is a bug, not a verdict (the router
    fails the gate for that answer, with the exception in the record, and tries the next model).
    """
    label = name or getattr(fn, "__name__", None) or "rule"

    async def gate(request: Request, response: Response, /) -> GateVerdict:
        result = fn(request, response)
        if inspect.isawaitable(result):
            result = await result
        return _verdict(result, label)

    gate.__name__ = f"rule_gate({label})"
    return gate


def _verdict(result: object, label: str) -> GateVerdict:
    if isinstance(result, GateVerdict):
        return result
    if result is None or result is True:
        return GateVerdict(passed=True)
    if result is False:
        return GateVerdict(passed=False, reason=f"rule {label!r} failed")
    if isinstance(result, str):
        return GateVerdict(passed=False, reason=result or f"rule {label!r} failed")
    raise TypeError(f"rule {label!r} returned {type(result).__name__}; expected bool, str, None or GateVerdict")


def all_of(*gates: QualityGate) -> QualityGate:
    """Passes when every gate passes. Runs them in order and stops at the first failure, so
    put cheap rules before a judge. The score, when any gate gave one, is the lowest."""

    async def gate(request: Request, response: Response, /) -> GateVerdict:
        scores: list[float] = []
        for g in gates:
            v = await g(request, response)
            if not v.passed:
                return v
            if v.score is not None:
                scores.append(v.score)
        return GateVerdict(passed=True, score=min(scores) if scores else None)

    return gate


class Judge(Protocol):
    """What :func:`judge_gate` needs of a router: ``await complete(route, request, envelope)``."""

    async def complete(self, route: str, request: Request, envelope: Envelope | None = None) -> Response: ...


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["pass", "reason"],
    "additionalProperties": False,
}

JUDGE_INSTRUCTIONS = (
    "You are a strict reviewer. Decide whether the ANSWER below does what the REQUEST asked, by these criteria:\n"
    "{criteria}\n\n"
    'Reply with JSON only: {{"pass": true or false, "reason": "one short sentence"}}.'
)


def judge_gate(
    router: Judge,
    route: str,
    *,
    prompt: str,
    budget: float = 5.0,
    max_attempts: int = 2,
    max_tokens: int = 300,
    max_chars: int = 8_000,
    on_error: Literal["fail", "pass"] = "fail",
) -> QualityGate:
    """A gate that asks a judge model, through ``router`` on ``route``, whether the answer passes.

    ``prompt`` holds the criteria; the judge sees them with the request (as a transcript) and
    the answer, each cut to ``max_chars``, and must reply ``{"pass": bool, "reason": str}``
    (asked for with a JSON-schema response format, so the router validates and repairs it).
    Each verdict is its own request: ``Envelope(budget=budget, max_attempts=max_attempts)``,
    so a slow judge cannot eat the caller's deadline beyond ``budget`` seconds.

    If the judge is unavailable or its reply does not parse, the gate fails with reason
    ``"judge unavailable: ..."`` (fail closed); ``on_error="pass"`` passes instead, with the
    same reason recorded. Give the judge its own route, without a gate of its own.
    """
    if on_error not in ("fail", "pass"):
        raise ValueError(f"on_error must be 'fail' or 'pass', not {on_error!r}")
    system = JUDGE_INSTRUCTIONS.format(criteria=prompt.strip())
    fmt = ResponseFormat.json_schema(JUDGE_SCHEMA, name="verdict")

    async def gate(request: Request, response: Response, /) -> GateVerdict:
        shown_request, shown_answer = _cut(render_request(request), max_chars), _cut(render_answer(response), max_chars)
        question = f"REQUEST:\n{shown_request}\n\nANSWER:\n{shown_answer}"
        ask = Request(
            messages=(Message.system(system), Message.user(question)),
            response_format=fmt,
            max_tokens=max_tokens,
            temperature=0.0,
        )
        try:
            reply = await router.complete(route, ask, Envelope(budget=budget, max_attempts=max_attempts))
        except Unavailable as exc:
            return _judge_error(f"{exc.reason.value}: {exc.message}", on_error)
        verdict = reply.parsed
        if verdict is None:
            try:
                verdict = json.loads(reply.text)
            except ValueError:
                verdict = None
        if not isinstance(verdict, dict) or not isinstance(verdict.get("pass"), bool):
            return _judge_error(f"unparseable verdict {_cut(reply.text, 200)!r}", on_error)
        reason = verdict.get("reason")
        reason = reason if isinstance(reason, str) and reason else None
        if verdict["pass"]:
            return GateVerdict(passed=True, reason=reason, score=1.0)
        return GateVerdict(passed=False, reason=f"judge: {reason or 'no reason given'}", score=0.0)

    return gate


def _judge_error(what: str, on_error: Literal["fail", "pass"]) -> GateVerdict:
    return GateVerdict(passed=on_error == "pass", reason=f"judge unavailable: {what}")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def render_request(request: Request) -> str:
    """The request as a plain transcript (images as ``[image]``), for a judge to read."""
    lines = []
    for m in request.messages:
        parts = [
            p.text if isinstance(p, TextPart) else "[image]" for p in m.content if isinstance(p, TextPart | ImagePart)
        ]
        parts += [f"[calls tool {c.name} with {c.arguments}]" for c in m.tool_calls]
        who = m.role if m.role != "tool" else f"tool result ({m.tool_call_id})"
        lines.append(f"{who}: {' '.join(parts)}")
    if request.tools:
        lines.append("tools offered: " + ", ".join(t.name for t in request.tools))
    if request.response_format is not None and request.response_format.schema is not None:
        lines.append("required output schema: " + json.dumps(request.response_format.schema, sort_keys=True))
    return "\n".join(lines)


def render_answer(response: Response) -> str:
    """The answer as text: its text, and any tool calls it made."""
    parts = [response.text] if response.text else []
    if not parts and response.parsed is not None:
        parts.append(json.dumps(response.parsed, ensure_ascii=False))
    parts += [f"[calls tool {c.name} with {c.arguments}]" for c in response.tool_calls]
    return "\n".join(parts) or "(empty)"
