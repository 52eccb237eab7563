"""Repair once: the corrective request after a repairable failure (a new, paid attempt)."""

from __future__ import annotations

from dataclasses import replace

from ..model import Failure, FailureKind, Message, Request, Target

REPAIR_PROMPT = (
    "Your previous answer could not be used: {error}. "
    "Answer again, correcting this, and return only the corrected answer."
)


def repair_request(request: Request, failure: Failure, target: Target, input_tokens: int) -> Request | None:
    """The request to send for one repair, or None when no repair can help on ``target``.

    Truncation raises max_tokens (doubling, within the target's max output and context
    window). A malformed tool call or schema-invalid output is shown to the model with the
    validation error, and it is asked once more.
    """
    if failure.kind is FailureKind.TRUNCATED:
        current = request.max_tokens or (failure.usage.output_tokens if failure.usage else 0) or 1024
        room = min(target.max_output_tokens, target.context_window - input_tokens)
        larger = min(current * 2, room)
        if larger <= current:
            return None
        return replace(request, max_tokens=larger)
    if failure.kind in (FailureKind.SCHEMA_INVALID, FailureKind.TOOL_CALL_MALFORMED):
        bad = failure.response
        previous = Message.assistant(bad.text) if bad is not None and bad.text else None
        note = Message.user(REPAIR_PROMPT.format(error=failure.message))
        extra = (previous, note) if previous is not None else (note,)
        return replace(request, messages=(*request.messages, *extra))
    return None
