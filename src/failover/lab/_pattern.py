"""A real request's fault pattern as a custom lab scenario: replay it, then turn the knobs.

:func:`scenario_from_record` reads a public record of the live view (:mod:`._live`) and writes
what each of its targets answered, attempt by attempt, in the fault kit's vocabulary, for the
lab's route (A, then fallbacks B and C)::

    real record (route chat)                      custom scenario
      main     primary  rate_limited 429, RA 0.2    a: [rate_limit(retry_after=0.2, latency=0.004),
      main     primary  ok                              ok(latency=0.012)]
      backup   (never called)                        b: absent  ...

* The targets the request called, in the order it first called them, become A, B and C (the
  lab's route has three; a fourth and later ones are left out, with a note). A fallback slot no
  target fills is ``absent`` (not in the route), so the replay cannot succeed where the real
  request had nothing left to try.
* Each attempt becomes one reply to that provider's next call: ``ok(latency=...)`` (the time
  from the connection to the first event, or to the answer), a failure kind's own reply with
  the same wait (``rate_limit(retry_after=...)`` keeps the provider's Retry-After), ``hang``
  for an attempt cut at its cap, ``stall_before_first`` / ``stall_after(1)`` for a stream that
  went silent. After its last listed reply, a provider keeps answering like its last attempt,
  so raising A's retries shows what more of the same would have done.
* The settings: the budget is the request's deadline as far as the record shows it (an
  attempt's start plus its cap never passes the deadline, and the first attempt's cap is the
  deadline unless the target's own cap is shorter), the per-attempt cap is the cap a timed-out
  attempt met (else the longest cap), and A's extra retries are A's attempts after its first.

Only metadata is read (targets, phases, outcomes, failure kinds, statuses, Retry-After,
times): nothing of the request or the answer exists in a public record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import FailureKind
from ..testing import Reply, ReplyKind
from ._custom import ABSENT, MAX_REPLIES, MAX_SECONDS, PROVIDERS
from ._seed import MAX_BUDGET, MAX_RETRIES

_MIN_CAP = 0.05  # the lab's targets need at least this (their min_useful)


class NothingToReplay(ValueError):
    """The record made no attempt: there is no fault pattern (every candidate was excluded)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reenactment:
    """A custom scenario (its text, for the page's editor) and the settings to run it with."""

    text: str
    settings: dict[str, Any]  # the POST /api/run body, without "custom"
    mapping: dict[str, str]  # lab provider -> the real target
    notes: tuple[str, ...]  # where the replay differs from the real request

    def to_dict(self) -> dict[str, Any]:
        return {"custom": self.text, "settings": self.settings, "mapping": self.mapping, "notes": list(self.notes)}


# A failure kind whose reply needs only its wait: the fault kit's reply of that kind.
_SIMPLE = {
    FailureKind.QUOTA_EXHAUSTED: ReplyKind.QUOTA,
    FailureKind.PROVIDER_SERVER_ERROR: ReplyKind.SERVER_ERROR,
    FailureKind.AUTHENTICATION_OR_PERMISSION: ReplyKind.UNAUTHORIZED,
    FailureKind.MODEL_NOT_FOUND: ReplyKind.NOT_FOUND,
    FailureKind.CONTEXT_OVERFLOW: ReplyKind.CONTEXT_OVERFLOW,
    FailureKind.INVALID_REQUEST: ReplyKind.INVALID,
    FailureKind.CONTENT_FILTERED: ReplyKind.CONTENT_FILTER,
    FailureKind.TRUNCATED: ReplyKind.TRUNCATE,
    FailureKind.TOOL_CALL_MALFORMED: ReplyKind.MALFORMED_TOOL_ARGS,
    FailureKind.SCHEMA_INVALID: ReplyKind.SCHEMA_INVALID,
    FailureKind.CONTRACT_FAILURE: ReplyKind.SCHEMA_INVALID,
}


def _seconds(value: float) -> float:
    return round(min(MAX_SECONDS, max(0.0, value)), 3)


def _reply(attempt: Mapping[str, Any]) -> Reply:
    """What the provider answered to one attempt, as the fault kit's reply."""
    base = attempt["connected"] if attempt.get("connected") is not None else attempt["start"]
    end = (
        attempt["first_event"]
        if attempt["outcome"] == "ok" and attempt.get("first_event") is not None
        else attempt["end"]
    )
    latency = _seconds(end - base)
    failure = attempt.get("failure")
    if attempt["outcome"] == "ok" or failure is None:
        return Reply.hang() if attempt["outcome"] == "cancelled" else Reply.ok(latency=latency)
    kind, phase = failure["kind"], failure.get("phase")
    retry_after = failure.get("retry_after")
    retry_after = None if retry_after is None else _seconds(retry_after)
    if kind == FailureKind.TIMEOUT:
        if phase == "first_event":
            return Reply.stall_before_first()
        if phase == "idle":
            return Reply.stall_after(1)
        return Reply.hang()
    if kind == FailureKind.TRANSPORT_TRANSIENT:
        return Reply.connect_error() if attempt.get("connected") is None else Reply.reset(latency=latency)
    if kind == FailureKind.RATE_LIMITED:
        return Reply.rate_limit(retry_after=retry_after, latency=latency)
    if kind == FailureKind.PROVIDER_OVERLOADED:
        return Reply.overloaded(retry_after=retry_after, latency=latency)
    if kind == FailureKind.PARTIAL_OUTPUT:
        return Reply.drop_after(1, latency=latency)
    return Reply(kind=_SIMPLE.get(kind, ReplyKind.SERVER_ERROR), latency=latency)


def _comment(text: str) -> str:
    """One YAML comment line. Names come from the config and request ids are plain tokens; even
    so, a line break in one never ends the comment."""
    indent = "  " if text.startswith("  ") else ""
    return f"# {indent}{' '.join(text.split())}"


def _slots(rec: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """The real targets on A, B and C: those the request called, in the order it first called
    them, then the route's other candidates that were not left out, in the route's order (they
    were not needed, and answer like healthy providers). The rest are returned apart."""
    order: list[str] = []
    for a in attempts:
        if a["target"] not in order:
            order.append(a["target"])
    called = len(order)
    excluded = {e["target"] for e in rec["excluded"]}
    order += [c for c in rec.get("candidates", ()) if c not in order and c not in excluded]
    over = order[len(PROVIDERS) :]
    return dict(zip(PROVIDERS, order, strict=False)), [t for t in over if t in order[:called]]


def scenario_from_record(rec: Mapping[str, Any]) -> Reenactment:
    """The custom scenario and settings that replay ``rec`` (a live-view public record)."""
    attempts = sorted(rec["attempts"], key=lambda a: (a["start"], a["index"]))
    if not attempts:
        reasons = "; ".join(f"{e['target']}: {e['reason']}" for e in rec["excluded"]) or "no candidate"
        raise NothingToReplay(
            f"request {rec['request_id']} called no provider ({reasons}), so it has no fault pattern to replay; "
            "the lab starts every run with closed breakers and empty limiters"
        )
    slots, left_out = _slots(rec, attempts)
    real_to_lab = {real: lab for lab, real in slots.items()}
    called = {a["target"] for a in attempts}
    notes: list[str] = []
    if left_out:
        notes.append(f"the lab's route has three targets; {', '.join(left_out)}, called later, left out")
    replies: dict[str, list[Reply]] = {n: [] for n in slots}
    connect: dict[str, float] = {}
    for a in attempts:
        lab = real_to_lab.get(a["target"])
        if lab is None:
            continue
        replies[lab].append(_reply(a))
        if lab not in connect and a.get("connected") is not None:
            connect[lab] = _seconds(a["connected"] - a["start"])
    stream = any(a.get("streamed") for a in attempts)
    kinds = {a["failure"]["kind"] for a in attempts if a.get("failure")}
    structured = bool(kinds & {FailureKind.SCHEMA_INVALID.value, FailureKind.CONTRACT_FAILURE.value})

    # The settings: the deadline as far as the record shows it, the cap a timeout met, A's retries.
    deadline = max([rec["elapsed_ms"] / 1000.0, *(a["start"] + a["total_timeout"] for a in attempts)])
    budget = min(MAX_BUDGET, math.ceil(deadline * 100 - 1e-6) / 100)
    if deadline > MAX_BUDGET:
        notes.append(f"the deadline ({deadline:.1f}s) is longer than the lab allows; the replay uses {MAX_BUDGET:g}s")
    timed_out = [a["end"] - a["start"] for a in attempts if str(a["outcome"]).startswith("timeout")]
    cap = min(timed_out) if timed_out else max(a["total_timeout"] for a in attempts)
    cap = min(MAX_BUDGET, max(_MIN_CAP, math.ceil(cap * 100 - 1e-6) / 100))
    on_a = [a for a in attempts if a["target"] == slots["a"] and a["phase"] != "repair"]
    extra = min(MAX_RETRIES, len(on_a) - 1)
    if len(on_a) - 1 > MAX_RETRIES:
        notes.append(f"{slots['a']} was tried {len(on_a)} times; the lab allows A at most {MAX_RETRIES} retries")
    for lab in ("b", "c"):
        tried = len(replies.get(lab, ()))
        if tried > 1:
            notes.append(f"{slots[lab]} was tried {tried} times; the lab's fallbacks get one try each")
    if any(a["phase"] == "failover" for a in attempts):
        notes.append("an equivalent failover target is a cross-model fallback in the lab's route")
    if any(a.get("hedge") for a in attempts):
        notes.append("hedged attempts are replayed one after another: the lab's route does not hedge")
    for e in rec["excluded"]:
        if e["target"] not in real_to_lab:
            notes.append(f"{e['target']} was left out ({e['reason']}), so it is not in the replay's route")
    timeouts = {str(a["outcome"]) for a in attempts if str(a["outcome"]).startswith("timeout")}
    if timeouts - {"timeout:total"}:
        notes.append(
            "the lab cuts attempts at one per-attempt cap: a first-event or idle timeout may read timeout:total"
        )

    comments = [
        f"Replay of request {rec['request_id']} (route {rec['route']}): {rec['outcome']}, workflow {rec['workflow']}",
        *(
            f"  {lab.upper()} = {real}" + ("" if real in called else " (not called: answers like a healthy provider)")
            for lab, real in slots.items()
        ),
        *(f"  note: {n}" for n in notes),
        "Each reply is what that target answered, attempt by attempt; then it keeps answering like the last.",
        f"Budget {budget:g}s: the deadline as far as the record shows it (raise it if the request had longer).",
    ]
    lines = [_comment(c) for c in comments]
    if stream:
        lines.append("stream: true")
    lines.append("providers:")
    for lab in PROVIDERS:
        if lab not in slots:
            lines.append(f"  {lab}: {ABSENT}")
            continue
        if not replies[lab]:
            continue  # a candidate the request did not need: the lab's healthy answer
        rs = replies[lab][:MAX_REPLIES]
        lines.append(f"  {lab}:")
        if lab in connect and connect[lab] >= 0.001:
            lines.append(f"    connect: {connect[lab]:g}")
        lines.append("    replies:")
        lines += [f"      - {r.to_string()}" for r in rs]
        lines.append(f"    default: {rs[-1].to_string()}")
    settings = {
        "scenario": "custom",
        "capability": "structured_output" if structured else "chat",
        "budget": budget,
        "attempt_cap": min(cap, budget),
        "a_extra_retries": max(0, extra),
        "fallback_reserve": None,
    }
    return Reenactment(text="\n".join(lines) + "\n", settings=settings, mapping=dict(slots), notes=tuple(notes))


__all__ = ["NothingToReplay", "Reenactment", "scenario_from_record"]
