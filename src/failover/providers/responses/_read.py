"""What a Responses API answer means: output items, usage, status, and the 200s that are failures.

Shared by the body parse and the stream parser of :mod:`.responses`, so a streamed answer and
the same answer as one body end the same way. Wire reference: openai-python's
``types/responses`` (``Response``, ``ResponseOutputItem``, ``ResponseUsage``).

Output items read here: ``message`` (``output_text`` parts are the text, a ``refusal`` part
makes the answer a refusal), ``function_call`` (``call_id`` is the id a tool result answers),
and ``reasoning`` (its summary, or for open models its ``reasoning_text`` content, as readable
text; ``encrypted_content`` as the signature the model needs back). The items of hosted tools
(``web_search_call``, ``file_search_call``...: any other type) are kept verbatim, in order, as
the answer's ``hosted_items``: only a request that sent hosted tools gets them, and a Responses
client is given them as they came.

``status`` says how it ended: ``completed``; ``incomplete`` with ``incomplete_details.reason``
``max_output_tokens`` (truncated) or ``content_filter`` (content_filtered; any other reason is
a cut answer too); ``failed`` / ``cancelled`` with ``error`` (classified by its code, as an
error body is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...model import REASONING_OPENAI_RESPONSES as SOURCE
from ...model import Failure, FailureKind, Reasoning, Response, StopReason, ToolCall, Usage
from .._common import as_dict, as_int, as_list, as_str, outcome_failure, tool_arguments
from .._headers import HeaderMeta

__all__ = [
    "PROVIDER",
    "SOURCE",
    "Answer",
    "block_text",
    "is_hosted",
    "judge",
    "raw_stop",
    "read_output",
    "result",
    "stop_reason",
    "usage",
]

PROVIDER: Final = "openai-responses"  # the label of this dialect's Failures
SUMMARY_JOIN: Final = "\n\n"  # between the parts of one reasoning item's summary

_INCOMPLETE: Final[Mapping[str, StopReason]] = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}


class Answer:
    """The content of an answer's output items, in output order."""

    __slots__ = ("calls", "hosted", "reasoning", "refusal", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: list[ToolCall] = []
        self.reasoning: list[Reasoning] = []
        self.hosted: list[dict[str, Any]] = []


def read_output(output: Any, origin: str) -> Answer:
    """Text, refusal, tool calls and reasoning blocks of a ``Response.output`` list."""
    answer = Answer()
    for raw in as_list(output):
        item = as_dict(raw)
        kind = item.get("type")
        if kind == "message":
            for part in as_list(item.get("content")):
                p = as_dict(part)
                if p.get("type") == "output_text":
                    answer.text.append(as_str(p.get("text")) or "")
                elif p.get("type") == "refusal":
                    answer.refusal.append(as_str(p.get("refusal")) or "")
        elif kind == "function_call":
            answer.calls.append(call(item))
        elif kind == "reasoning":
            text = block_text(item, None)
            signature = as_str(item.get("encrypted_content")) or None
            if text or signature:  # an item with neither holds nothing anyone can read back
                answer.reasoning.append(Reasoning(text=text, signature=signature, source=SOURCE, origin=origin))
        elif is_hosted(kind):
            answer.hosted.append(item)
    return answer


def is_hosted(kind: Any) -> bool:
    """Whether an output item's ``type`` is a hosted tool's (none failover reads itself)."""
    return isinstance(kind, str) and bool(kind) and kind not in ("message", "function_call", "reasoning")


def call(item: Mapping[str, Any]) -> ToolCall:
    """A ``function_call`` item as a ToolCall; its id is the ``call_id`` a tool result names."""
    arguments, parsed = tool_arguments(item.get("arguments"))
    call_id = as_str(item.get("call_id")) or as_str(item.get("id")) or ""
    return ToolCall(id=call_id, name=as_str(item.get("name")) or "", arguments=arguments, parsed=parsed)


def block_text(item: Mapping[str, Any], kind: str | None) -> str:
    """A reasoning item's readable text: its ``summary`` parts (OpenAI's models), else its
    ``content`` of ``reasoning_text`` parts (open models served over this API), each joined by
    a blank line. ``kind`` ("summary" / "content") picks one, as a stream that showed it did."""
    summary = [as_str(as_dict(p).get("text")) or "" for p in as_list(item.get("summary"))]
    content = [as_str(as_dict(p).get("text")) or "" for p in as_list(item.get("content"))]
    if kind == "content" or (kind is None and not any(summary)):
        return SUMMARY_JOIN.join(content)
    return SUMMARY_JOIN.join(summary)


def usage(raw: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=as_int(raw.get("input_tokens")),
        output_tokens=as_int(raw.get("output_tokens")),
        cached_input_tokens=as_int(as_dict(raw.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=as_int(as_dict(raw.get("output_tokens_details")).get("reasoning_tokens")),
    )


def raw_stop(body: Mapping[str, Any]) -> str | None:
    """How the response ended, as one word: its ``status``, or for an incomplete one the
    reason (``max_output_tokens``, ``content_filter``), or ``incomplete`` without one."""
    status = as_str(body.get("status"))
    if status == "incomplete":
        return as_str(as_dict(body.get("incomplete_details")).get("reason")) or "incomplete"
    return status


def stop_reason(raw: str | None, has_calls: bool, refused: bool) -> StopReason:
    if refused:
        return StopReason.REFUSAL
    if raw == "completed":
        return StopReason.TOOL_USE if has_calls else StopReason.END_TURN
    return _INCOMPLETE.get(raw or "", StopReason.OTHER)


def result(
    answer: Answer, *, raw: str | None, use: Usage, model: str | None, response_id: str | None, meta: HeaderMeta
) -> Response:
    """The normalized answer, from a body or from an assembled stream."""
    refusal = "".join(answer.refusal) if answer.refusal else None
    calls = tuple(answer.calls)
    return Response(
        text="".join(answer.text),
        tool_calls=calls,
        reasoning=tuple(answer.reasoning),
        hosted_items=tuple(answer.hosted),
        usage=use,
        stop_reason=stop_reason(raw, bool(calls), refusal is not None),
        raw_stop_reason=raw,
        refusal=refusal,
        model=model,
        provider_request_id=meta.request_id,
        rate_limits=meta.rate_limits,
        response_id=response_id,
    )


def _fail(res: Response, status: int, meta: HeaderMeta, kind: FailureKind, why: str) -> Failure:
    return outcome_failure(
        provider=PROVIDER, kind=kind, why=why, result=res, status=status, meta=meta, code=res.raw_stop_reason
    )


def judge(res: Response, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    # Order matters: a refusal or filter explains a cut-off answer, and a cut-off answer
    # explains half-written tool arguments.
    if res.refusal is not None:
        return _fail(res, status, meta, FailureKind.CONTENT_FILTERED, f"the model refused: {res.refusal}")
    stop = res.stop_reason
    if stop is StopReason.CONTENT_FILTER:
        why = "the output was withheld by the content filter (incomplete: content_filter)"
        return _fail(res, status, meta, FailureKind.CONTENT_FILTERED, why)
    if stop is StopReason.MAX_TOKENS:
        why = "the output hit max_output_tokens (incomplete: max_output_tokens)"
        return _fail(res, status, meta, FailureKind.TRUNCATED, why)
    if res.raw_stop_reason != "completed":
        return _fail(res, status, meta, FailureKind.TRUNCATED, f"the response is incomplete ({res.raw_stop_reason})")
    malformed = [c.name or "?" for c in res.tool_calls if c.parsed is None]
    if malformed:
        why = f"tool call arguments are not a JSON object: {', '.join(malformed)}"
        return _fail(res, status, meta, FailureKind.TOOL_CALL_MALFORMED, why)
    return res
