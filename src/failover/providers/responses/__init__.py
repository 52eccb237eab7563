"""The OpenAI Responses API: ``POST {base_url}/responses``, stateless.

Wire reference: platform.openai.com/docs/api-reference/responses and openai-python's
``types/responses`` (``ResponseCreateParams``, ``Response``, the stream events).

The request is built from the normalized Request alone, never from server-side state:
``store`` is always false (a replayed or failed-over request must not leave a second stored
response, nor depend on one), and ``previous_response_id`` is never sent. System messages
become ``instructions``; the rest of the history becomes ``input`` items: user messages
(``input_text`` / ``input_image`` parts), an assistant turn's text (an assistant message), its
tool calls (``function_call`` items, without item ids: nothing is stored to refer to; a
freeform tool's call a ``custom_tool_call`` with its ``input`` text), tool results
(``function_call_output``, or ``custom_tool_call_output`` for a freeform call), and the
reasoning items this dialect read earlier, sent back by their ``encrypted_content`` (an item
without it can only be found by id in a store, so it is left out). Tools are flat function
tools (``name``, ``description``, ``parameters``, ``strict``), structured output is
``text.format``, ``max_tokens`` is ``max_output_tokens``
(at least 16: the API refuses less).

A reasoning effort asks for ``reasoning.effort`` and ``include: ["reasoning.encrypted_content"]``
(the only way a stateless tool loop can give a reasoning model its reasoning back; models
without reasoning refuse the include, so it is only sent for a request that reasons). A
summary of the reasoning (readable text, ``ReasoningDelta`` events) is asked for only when the
target's ``extra`` holds ``("reasoning_summary", "auto" | "concise" | "detailed")``: OpenAI
refuses summaries to organizations that are not verified (400 on ``reasoning.summary``).
The API has no ``stop`` sequences and no ``seed``; a Request's are not sent.

What a Responses client asked for that only this API has goes verbatim: the Request's
``hosted_tools`` after its function tools, its ``include`` (joined with the one above), and its
``reasoning_summary`` as ``reasoning.summary`` (before the target's ``extra``), and the
top-level fields of its ``passthrough`` (a Request from a Responses client), each where no
field failover writes itself has the name (``stream_options`` only on a streamed request).

Errors come in OpenAI's envelope, read by the same table as Chat Completions
(``openai._errors``); so are the ``error`` stream event and a ``failed`` response's ``error``.
Azure OpenAI serves this API at ``https://<resource>.openai.azure.com/openai/v1`` (the
deployment is the ``model``); ``azure_deployment`` sends the key in the ``api-key`` header.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ...model import (
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Request,
    Response,
    Target,
    TextPart,
    Tool,
    ToolCall,
    ToolChoice,
)
from ...transport import HttpRequest, HttpResponse
from .._base import StreamParser
from .._common import as_dict, as_str, decode_json, error_failure, non_finite, unreadable, with_query
from .._headers import HeaderMeta, openai_rate_limits, read_meta
from .._streaming import with_partial
from ..openai._errors import openai_error
from ._read import PROVIDER, SOURCE, judge, raw_stop, read_output, result, usage
from ._stream import ResponsesStream

__all__ = ["OpenAIResponsesDialect"]

REQUEST_ID_HEADERS: Final = ("x-request-id", "apim-request-id")
MIN_OUTPUT_TOKENS: Final = 16  # the least max_output_tokens the API accepts
_SUMMARIES: Final = frozenset({"auto", "concise", "detailed"})
_ENDED: Final = frozenset({"completed", "incomplete"})
_FAILED: Final = frozenset({"failed", "cancelled"})


class OpenAIResponsesDialect:
    """The Responses API: ``POST {base_url}/responses`` (``base_url`` ends in ``/v1``).

    >>> Target(name="gpt", dialect=Dialect.OPENAI_RESPONSES, model="gpt-5-mini",
    ...        base_url="https://api.openai.com/v1", api_key=Secret("sk-..."))
    """

    name: str = PROVIDER
    reasoning_source: str = SOURCE

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        if target.api_key:
            if target.azure_deployment:
                headers["api-key"] = target.api_key.reveal()
            else:
                headers["authorization"] = f"Bearer {target.api_key.reveal()}"
        headers.update(target.headers)  # static extras (api-version, org, project) win
        url = with_query(f"{target.base_url.rstrip('/')}/responses", target.query)
        return HttpRequest(method="POST", url=url, headers=headers, json=request_body(target, request, stream=stream))

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=REQUEST_ID_HEADERS, rate_limits=openai_rate_limits)
        data = decode_json(response.body)
        if (bad := non_finite(PROVIDER, target, response, meta, data)) is not None:
            return bad
        if not 200 <= response.status < 300:
            return openai_error(PROVIDER, target, response, meta, data)
        body = as_dict(data)
        if "output" in body or body.get("object") == "response":
            return _parse_response(target, response, meta, body)
        if isinstance(body.get("error"), dict):  # a proxy's 200 error envelope
            return openai_error(PROVIDER, target, response, meta, body)
        return unreadable(PROVIDER, target, response, meta, "a response object")

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        del request  # the events say everything
        meta = read_meta(headers, request_id_headers=REQUEST_ID_HEADERS, rate_limits=openai_rate_limits)
        return ResponsesStream(target, headers, meta)


def _parse_response(
    target: Target, response: HttpResponse, meta: HeaderMeta, data: dict[str, Any]
) -> Response | Failure:
    answer = read_output(data.get("output"), target.key)
    raw = raw_stop(data)
    res = result(
        answer,
        raw=raw,
        use=usage(as_dict(data.get("usage"))),
        model=as_str(data.get("model")),
        response_id=as_str(data.get("id")),
        meta=meta,
    )
    status = as_str(data.get("status"))
    if status in _FAILED:
        err = as_dict(data.get("error")) or {"message": f"the response {status}"}
        return with_partial(openai_error(PROVIDER, target, response, meta, {"error": err}), res)
    if status not in _ENDED:  # queued or in progress: a background response, which is never asked for
        failure = error_failure(
            provider=PROVIDER,
            kind=FailureKind.PROVIDER_SERVER_ERROR,
            target=target,
            response=response,
            meta=meta,
            code=status,
            message=f"the response is not finished (status {status})",
        )
        return with_partial(failure, res)
    return judge(res, response.status, meta)


# -------------------------------------------------------------------- build helpers


def request_body(target: Target, request: Request, *, stream: bool = False) -> dict[str, Any]:
    """The JSON body of a create-response request (see the module docstring)."""
    out: dict[str, Any] = {"model": target.model}
    instructions = request.system_text
    if instructions:
        out["instructions"] = instructions
    freeform = frozenset(c.id for m in request.messages for c in m.tool_calls if c.freeform)
    out["input"] = [item for m in request.messages if m.role != "system" for item in _items(m, freeform)]
    out["store"] = False
    if request.tools or request.hosted_tools:
        out["tools"] = [*(_tool(t) for t in request.tools), *(dict(t) for t in request.hosted_tools)]
        if request.tool_choice is not None:
            out["tool_choice"] = _tool_choice(request.tool_choice)
    fmt = request.response_format
    if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
        schema = {"type": "json_schema", "name": fmt.name, "schema": dict(fmt.schema), "strict": fmt.strict}
        out["text"] = {"format": schema}
    elif fmt is not None and fmt.kind == "json_object":
        out["text"] = {"format": {"type": "json_object"}}
    if request.max_tokens is not None:
        # the API refuses a budget under 16 (400 integer_below_min_value): ask for its least
        out["max_output_tokens"] = max(request.max_tokens, MIN_OUTPUT_TOKENS)
    if request.temperature is not None:
        out["temperature"] = request.temperature
    if request.top_p is not None:
        out["top_p"] = request.top_p
    reasoning: dict[str, Any] = {}
    if request.reasoning_effort is not None:
        reasoning["effort"] = request.reasoning_effort
    summary = request.reasoning_summary or _extra(target, "reasoning_summary")
    if request.reasoning_summary is not None or summary in _SUMMARIES:
        reasoning["summary"] = summary
    if reasoning:
        out["reasoning"] = reasoning
    include = list(dict.fromkeys(request.include))
    if reasoning or any(item.get("type") == "reasoning" for item in out["input"]):
        # a reasoning model: its reasoning comes back encrypted, to be sent back in a tool loop
        include = list(dict.fromkeys(["reasoning.encrypted_content", *include]))
    if include:
        out["include"] = include
    if stream:
        out["stream"] = True
    passed = request.passthrough
    if passed is not None and passed.receives(PROVIDER, takes=target.passthrough):  # the client's own fields
        for k, v in passed.fields.items():
            if k != "stream_options" or stream:  # the API refuses stream_options without stream
                out.setdefault(k, v)  # never over failover's (store stays false)
    return out


def _extra(target: Target, name: str) -> str | None:
    for key, value in target.extra:
        if key == name:
            return value
    return None


def _items(message: Message, freeform: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """A message as input items; ``freeform``: the ids of the freeform tools' calls, whose
    calls and results go back as the ``custom_tool_call`` / ``custom_tool_call_output`` they were."""
    if message.role == "tool":
        kind = "custom_tool_call_output" if message.tool_call_id in freeform else "function_call_output"
        return [{"type": kind, "call_id": message.tool_call_id or "", "output": message.text}]
    if message.role != "assistant":
        return [{"type": "message", "role": message.role, "content": [_part(p) for p in message.content]}]
    items: list[dict[str, Any]] = []
    # The turn's reasoning first, where the model wrote it. Only this format's blocks with their
    # encrypted content: the router has already left out what this target cannot read, and
    # without a store an item is found by nothing else.
    for block in message.reasoning:
        if block.source == SOURCE and block.signature:
            summary = [{"type": "summary_text", "text": block.text}] if block.text else []
            items.append({"type": "reasoning", "summary": summary, "encrypted_content": block.signature})
    if message.text:
        items.append({"type": "message", "role": "assistant", "content": message.text})
    items.extend(_call(tc) for tc in message.tool_calls)
    return items


def _call(tc: ToolCall) -> dict[str, Any]:
    if tc.freeform:
        text = tc.parsed.get("input") if tc.parsed is not None else None
        return {"type": "custom_tool_call", "call_id": tc.id, "name": tc.name, "input": text or ""}
    return {"type": "function_call", "call_id": tc.id, "name": tc.name, "arguments": _arguments_text(tc)}


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    return {"type": "input_image", "image_url": part.url, "detail": part.detail or "auto"}


def _arguments_text(tc: ToolCall) -> str:
    if tc.arguments.strip():
        return tc.arguments
    return json.dumps(dict(tc.parsed) if tc.parsed is not None else {}, separators=(",", ":"))


def _tool(tool: Tool) -> dict[str, Any]:
    # strict is sent either way: this API makes a function tool without it strict (the schema
    # normalized: every property required, no others), which Chat Completions never did.
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = dict(tool.parameters)
    out["strict"] = tool.strict
    return out


def _tool_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool" and choice.name:
        return {"type": "function", "name": choice.name}
    if choice.mode == "tool":  # a forced tool without a name: any tool will do
        return "required"
    return choice.mode
