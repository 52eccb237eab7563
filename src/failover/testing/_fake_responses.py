"""The fake provider's OpenAI Responses API: ``POST /v1/responses`` answers as the real API sends them.

Shapes follow openai-python's ``types/responses`` and real captures (``shared/wire``
openai-responses/01-03): a ``response`` object (``status`` completed or incomplete with
``incomplete_details.reason``, ``output`` items, ``usage`` with its details), and the stream as
``event: <type>`` / ``data: <json>`` pairs with a ``sequence_number`` counted from 0:
``response.created``, ``response.in_progress``, per output item ``response.output_item.added``,
its parts and deltas (reasoning summary, output text or refusal, function call arguments) and
``response.output_item.done``, then ``response.completed`` or ``response.incomplete`` with the
whole response. A mid-stream error is an ``error`` event (with the error under ``error``, as
recorded) followed by ``response.failed``. Errors before the stream are OpenAI's envelope, the
same as Chat Completions' (``_fake_openai`` renders them; a context overflow says it its own
way here), and so are the key, the headers and the keep-alive.

Reading the request: tools are flat (``{"type": "function", "name", "parameters"}``), a forced
tool is ``tool_choice`` ``{"type": "function", "name"}`` or ``"required"``, structured output is
``text.format``, the output budget is ``max_output_tokens`` (at least 16, as the real API
checks). Reasoning items carry ``encrypted_content`` only when ``include`` asks for
``reasoning.encrypted_content``, as the real API does. A request with a ``web_search`` tool
(any ``web_search*`` type) is answered with a ``web_search_call`` item first, as if the model
had searched for the last user text. A scripted call of a tool the request declares as
``{"type": "custom"}`` (a freeform tool, as Codex's ``apply_patch``) is answered as a
``custom_tool_call`` item whose ``input`` is the call's ``input`` argument (streamed as
``response.custom_tool_call_input.delta`` / ``.done``), as the real API sends one.

Pure: no I/O, no clock but the wall-clock ``created_at`` stamp; knows no other dialect than
Chat Completions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from . import _fake_openai as _openai
from . import _wire
from ._exchange import Endpoint, Exchange, Rendered
from ._kinds import ReplyKind
from ._parts import Answer, Call, dumps, in_turn, interleaved, pieces, split_args
from ._reply import Reply

# No __all__: this module is a FakeDialect (see ``_exchange``), whose members are its public
# names. Its response body and stream events are public too.

PATH: Final = "/responses"
DEFAULT_MODEL: Final = "gpt-5-mini"
CALL_PREFIX: Final = "call_"
RESPONSE_ID: Final = "resp_{name}_{serial}"  # str.format: the fake's name, the answer's serial
MIN_OUTPUT_TOKENS: Final = 16  # "Invalid 'max_output_tokens': integer below minimum value"
_ENCRYPTED: Final = "reasoning.encrypted_content"
_CALLS: Final = ("function_call", "custom_tool_call")


class Stamp(NamedTuple):
    """What names one response: the model it reports, its id, its wall-clock creation time."""

    model: str
    response_id: str
    created: int


# -- reading the request -------------------------------------------------------------------------


def endpoint(path: str) -> Endpoint | None:
    return Endpoint("generate") if path.endswith(PATH) else None


credentials = _openai.credentials  # the same key, where Chat Completions' clients put it


def tools(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(name, parameter schema) of each declared function tool."""
    declared = body.get("tools")
    out: list[tuple[str, Any]] = []
    for tool in declared if isinstance(declared, list) else ():
        if isinstance(tool, Mapping) and tool.get("type") == "function" and isinstance(tool.get("name"), str):
            out.append((tool["name"], tool.get("parameters")))
    return out


def forced(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(the tool the request names, whether any tool must be called)."""
    choice = body.get("tool_choice")
    if choice == "required":
        return None, True
    if isinstance(choice, Mapping) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return choice["name"], False
    return None, False


def structured(body: Mapping[str, Any]) -> tuple[bool, Any]:
    """(wants JSON, the schema if one was given)."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        return True, fmt.get("schema")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_object":
        return True, None
    return False, None


def max_tokens(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_output_tokens")
    return value if isinstance(value, int) and value > 0 else None


def prompt_chars(body: Mapping[str, Any]) -> int:
    """What the prompt is made of, for the token estimate: the input and the instructions."""
    return _wire.chars([body.get("input"), body.get("instructions")])


def check(endpoint: Endpoint, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Reply | None:
    """The 400 the real API sends for a request it rejects before any model runs."""
    if not isinstance(body.get("model"), str):
        return Reply.invalid("Missing required parameter: 'model'.")
    given = body.get("input")
    if not (isinstance(given, str) or (isinstance(given, list) and given)):
        return Reply.invalid("Missing required parameter: 'input'.")
    budget = body.get("max_output_tokens")
    if isinstance(budget, int) and budget < MIN_OUTPUT_TOKENS:
        return Reply.invalid(
            "Invalid 'max_output_tokens': integer below minimum value. "
            f"Expected a value >= {MIN_OUTPUT_TOKENS}, but got {budget} instead."
        )
    return None


_OVERFLOW: Final = "Your input exceeds the context window of this model. Please adjust your input and try again."


# -- answers -------------------------------------------------------------------------------------


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "input_tokens": answer.input_tokens,
        "input_tokens_details": {"cached_tokens": answer.cached_tokens},
        "output_tokens": answer.output_tokens,
        "output_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
        "total_tokens": answer.input_tokens + answer.output_tokens,
    }


def _status(answer: Answer) -> tuple[str, dict[str, str] | None]:
    if answer.stop == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if answer.stop == "filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _response(answer: Answer | None, request: Mapping[str, Any], stamp: Stamp) -> dict[str, Any]:
    """The ``response`` object: ``answer`` None for the in-progress snapshot the stream starts with."""
    model, response_id, created = stamp
    status, details = _status(answer) if answer is not None else ("in_progress", None)
    text = request.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    reasoning = request.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    summary = reasoning.get("summary") if isinstance(reasoning, Mapping) else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "completed_at": created if answer is not None else None,
        "error": None,
        "incomplete_details": details,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": model,
        "output": _output(answer, request, response_id) if answer is not None else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": effort, "summary": summary},
        "service_tier": "default" if answer is not None else "auto",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": fmt if isinstance(fmt, Mapping) else {"type": "text"}, "verbosity": "medium"},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": _usage(answer) if answer is not None else None,
        "user": None,
        "metadata": {},
    }


def _ids(response_id: str) -> str:
    return response_id.removeprefix("resp_")


def _reasoning_item(answer: Answer, request: Mapping[str, Any], response_id: str) -> dict[str, Any]:
    include = request.get("include")
    encrypted = answer.signature if isinstance(include, list) and _ENCRYPTED in include else None
    summary = [{"type": "summary_text", "text": answer.reasoning}] if answer.reasoning else []
    item: dict[str, Any] = {"id": f"rs_{_ids(response_id)}", "type": "reasoning", "summary": summary}
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def _content(answer: Answer) -> list[dict[str, Any]]:
    if answer.refusal is not None:
        return [{"type": "refusal", "refusal": answer.refusal}]
    return [{"type": "output_text", "annotations": [], "logprobs": [], "text": answer.text or ""}]


def _message(answer: Answer, response_id: str) -> dict[str, Any]:
    return {
        "id": f"msg_{_ids(response_id)}",
        "type": "message",
        "status": "incomplete" if answer.stop == "length" else "completed",
        "content": _content(answer),
        "role": "assistant",
    }


def _custom(request: Mapping[str, Any]) -> frozenset[str]:
    """The names of the freeform (``type: custom``) tools the request declares."""
    declared = request.get("tools")
    listed = declared if isinstance(declared, list) else ()
    return frozenset(
        t["name"]
        for t in listed
        if isinstance(t, Mapping) and t.get("type") == "custom" and isinstance(t.get("name"), str)
    )


def _call(call: Call, index: int, response_id: str, custom: frozenset[str] = frozenset()) -> dict[str, Any]:
    if call.name in custom:  # a freeform tool: its input is text, the scripted call's "input" argument
        try:
            args = json.loads(call.text)
        except ValueError:
            args = None
        text = args.get("input") if isinstance(args, dict) else None
        return {
            "id": f"ctc_{_ids(response_id)}_{index}",
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": call.id,
            "name": call.name,
            "input": text if isinstance(text, str) else call.text,
        }
    return {
        "id": f"fc_{_ids(response_id)}_{index}",
        "type": "function_call",
        "status": "completed",
        "arguments": call.text,
        "call_id": call.id,
        "name": call.name,
    }


def _searched(request: Mapping[str, Any], response_id: str) -> list[dict[str, Any]]:
    """A ``web_search_call`` item when the request offers web search (its query: the request's input)."""
    tools = request.get("tools")
    kinds = [t.get("type") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    if not any(isinstance(k, str) and k.startswith("web_search") for k in kinds):
        return []
    query = request.get("input")
    action = {"type": "search", "query": query if isinstance(query, str) else "the question"}
    return [{"id": f"ws_{_ids(response_id)}", "type": "web_search_call", "status": "completed", "action": action}]


def _output(answer: Answer, request: Mapping[str, Any], response_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = _searched(request, response_id)
    if answer.reasoning is not None:
        out.append(_reasoning_item(answer, request, response_id))
    if answer.text is not None or answer.refusal is not None:
        out.append(_message(answer, response_id))
    custom = _custom(request)
    out.extend(_call(c, i, response_id, custom) for i, c in enumerate(answer.calls))
    return out


def response_body(answer: Answer, request: Mapping[str, Any], stamp: Stamp) -> dict[str, Any]:
    """The JSON body of a non-streaming answer."""
    return _response(answer, request, stamp)


def stream_events(answer: Answer, request: Mapping[str, Any], stamp: Stamp) -> list[bytes]:
    """The SSE events of a streamed answer, one per element."""
    head = _response(None, request, stamp)
    final = _response(answer, request, stamp)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": head},
        {"type": "response.in_progress", "response": head},
    ]
    items = final["output"]
    plain = [item for item in items if item["type"] not in _CALLS]
    for at, item in enumerate(plain):
        events.extend(_item_events(item, at))
    calls = [_item_events(item, len(plain) + i) for i, item in enumerate(i for i in items if i not in plain)]
    events.extend(interleaved(calls) if answer.interleave else in_turn(calls))
    terminal = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append({"type": terminal, "response": final})
    return [_sse(ev, n) for n, ev in enumerate(events)]


def _sse(event: dict[str, Any], sequence: int) -> bytes:
    body = {"type": event["type"], **{k: v for k, v in event.items() if k != "type"}, "sequence_number": sequence}
    name: str = event["type"]
    return b"event: " + name.encode() + b"\ndata: " + dumps(body) + b"\n\n"


def _item_events(item: dict[str, Any], at: int) -> list[dict[str, Any]]:
    """An output item's events, from ``output_item.added`` to ``output_item.done``."""
    kind = item["type"]
    ref = {"item_id": item["id"], "output_index": at}
    events: list[dict[str, Any]] = []
    if kind == "reasoning":
        events.append({"type": "response.output_item.added", "output_index": at, "item": {**item, "summary": []}})
        for i, part in enumerate(item["summary"]):
            where = {**ref, "summary_index": i}
            empty = {"type": "summary_text", "text": ""}
            events.append({"type": "response.reasoning_summary_part.added", **where, "part": empty})
            deltas = pieces(part["text"])
            events.extend({"type": "response.reasoning_summary_text.delta", **where, "delta": d} for d in deltas)
            events.append({"type": "response.reasoning_summary_text.done", **where, "text": part["text"]})
            events.append({"type": "response.reasoning_summary_part.done", **where, "part": part})
    elif kind == "message":
        added = {**item, "status": "in_progress", "content": []}
        events.append({"type": "response.output_item.added", "output_index": at, "item": added})
        for i, part in enumerate(item["content"]):
            where = {**ref, "content_index": i}
            refusal = part["type"] == "refusal"
            empty = {"type": "refusal", "refusal": ""} if refusal else {**part, "text": ""}
            events.append({"type": "response.content_part.added", **where, "part": empty})
            text = part["refusal"] if refusal else part["text"]
            name = "refusal" if refusal else "output_text"
            extra: dict[str, Any] = {} if refusal else {"logprobs": []}
            for d in pieces(text) if text else ():
                events.append({"type": f"response.{name}.delta", **where, "delta": d, **extra})
            done_key = "refusal" if refusal else "text"
            events.append({"type": f"response.{name}.done", **where, done_key: text, **extra})
            events.append({"type": "response.content_part.done", **where, "part": part})
    elif kind == "custom_tool_call":
        events.append({"type": "response.output_item.added", "output_index": at, "item": {**item, "input": ""}})
        for d in split_args(item["input"]):
            events.append({"type": "response.custom_tool_call_input.delta", **ref, "delta": d})
        events.append({"type": "response.custom_tool_call_input.done", **ref, "input": item["input"]})
    elif kind != "function_call":  # a hosted tool's item: added in progress, then done
        events.append(
            {"type": "response.output_item.added", "output_index": at, "item": {**item, "status": "in_progress"}}
        )
    else:
        added = {**item, "status": "in_progress", "arguments": ""}
        events.append({"type": "response.output_item.added", "output_index": at, "item": added})
        for d in split_args(item["arguments"]):
            events.append({"type": "response.function_call_arguments.delta", **ref, "delta": d})
        events.append({"type": "response.function_call_arguments.done", **ref, "arguments": item["arguments"]})
    events.append({"type": "response.output_item.done", "output_index": at, "item": item})
    return events


def _failure(type_: str, code: str, message: str, stamp: Stamp, *, sequence: int) -> bytes:
    """A mid-stream failure: the ``error`` event, then ``response.failed`` (as recorded)."""
    error = {"type": type_, "code": code, "message": message, "param": None}
    failed = _response(None, {}, stamp)
    failed.update(status="failed", error={"code": code, "message": message})
    return _sse({"type": "error", "error": error}, sequence) + _sse(
        {"type": "response.failed", "response": failed}, sequence + 1
    )


# -- the HTTP answers ----------------------------------------------------------------------------


def ok(answer: Answer, ex: Exchange) -> Rendered:
    stamp = Stamp(ex.model, ex.response_id, int(time.time()))
    if ex.stream:
        chunks = stream_events(answer, ex.body, stamp)
        return _wire.stream_answer(chunks, (("content-type", _wire.SSE), *_openai.headers_of(ex)))
    return _wire.json_answer(200, response_body(answer, ex.body, stamp), _openai.headers_of(ex))


def error(reply: Reply, ex: Exchange) -> Rendered:
    """Chat Completions' error answers, but for a context overflow, which says it its own way."""
    if reply.kind is not ReplyKind.CONTEXT_OVERFLOW:
        return _openai.error(reply, ex)
    message = reply.message or _OVERFLOW
    body = _openai.envelope(message, "invalid_request_error", "input", "context_length_exceeded")
    return _wire.json_answer(400, body, _openai.headers_of(ex))


def error_event(reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
    cause = reply.cause or ReplyKind.OVERLOADED
    type_, code = _openai.STREAM_ERRORS[cause]
    message = reply.message or _openai.STREAM_MESSAGES[cause].format(model=ex.model)
    return _failure(type_, code, message, Stamp(ex.model, ex.response_id, int(time.time())), sequence=at)


unknown_path = _openai.unknown_path
heartbeat = _openai.heartbeat
malformed = _openai.malformed
