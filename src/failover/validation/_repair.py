"""Repair once: the corrective request after a repairable failure (a new, paid attempt).

Truncation raises ``max_tokens``. Every failure :func:`validate` reports (schema, required
fields, tool calls, length, language, forbidden patterns) goes back to the model as it was
written (it names what failed and how to fix it), and the model is asked once more:

- the previous answer's text, if any, is replayed as the assistant turn, so "shorten it" or
  "rewrite it without..." has something to work on;
- the validation error follows as a USER message, never as a ``tool`` result paired with the
  bad call. Pairing would mean replaying the bad call in an assistant turn, and the APIs
  cannot carry it faithfully: Anthropic's ``tool_use.input`` and Gemini's
  ``functionCall.args`` must be JSON objects (malformed arguments would be replayed as ``{}``),
  a call to a tool that does not exist cannot be answered, and OpenAI and Anthropic reject an
  assistant tool call that is not answered by a tool result for every call. A user message
  is accepted by every dialect after any history, and it quotes the arguments the model sent;
- after a tool call on a route that forbids tools, ``tool_choice`` becomes ``none`` (the
  tools stay declared: history may refer to them), so the corrected answer cannot call one.
"""

from __future__ import annotations

from dataclasses import replace

from ..model import LOWER_EFFORT, Failure, FailureKind, Message, Request, Target, ToolChoice
from ._contract import Check, failed_checks

REPAIR_PROMPT = (
    "Your previous answer could not be used: {error}. "
    "Answer again, correcting this, and return only the corrected answer."
)


def repair_request(request: Request, failure: Failure, target: Target, input_tokens: int) -> Request | None:
    """The request to send for one repair, or None when no repair can help on ``target``.

    Truncation raises max_tokens (doubling, within the target's max output and context
    window). A failure found by :func:`validate` is shown to the model with the validation
    error, and it is asked once more (see the module docstring for why as a user message).
    """
    if failure.kind is FailureKind.TRUNCATED:
        current = request.max_tokens or (failure.usage.output_tokens if failure.usage else 0) or 1024
        room = target.max_output_tokens  # an unknown window: the target's max output bounds it
        if target.context_window is not None:
            room = min(room, target.context_window - input_tokens)
        larger = min(current * 2, room)
        usage = failure.usage
        thought_out = usage is not None and usage.reasoning_tokens * 2 >= max(usage.output_tokens, 1)
        effort = request.reasoning_effort
        lower = LOWER_EFFORT.get(effort) if effort is not None else None
        if lower is not None and (thought_out or larger <= current):
            # thinking used up the budget (or there is no room to grow): think less, and grow
            # max_tokens too where the window and the target's max output allow it
            return replace(request, reasoning_effort=lower, max_tokens=max(larger, current))
        if larger <= current:
            return None
        return replace(request, max_tokens=larger)
    if failure.kind in (FailureKind.SCHEMA_INVALID, FailureKind.TOOL_CALL_MALFORMED):
        bad = failure.response
        previous = Message.assistant(bad.text) if bad is not None and bad.text else None
        note = Message.user(REPAIR_PROMPT.format(error=failure.message.rstrip(". ")))
        extra = (previous, note) if previous is not None else (note,)
        repaired = replace(request, messages=(*request.messages, *extra))
        if Check.NO_TOOL_CALLS in failed_checks(failure) and request.tools:
            repaired = replace(repaired, tool_choice=ToolChoice(mode="none"))
        return repaired
    return None
