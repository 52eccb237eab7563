"""AWS Bedrock Converse: ``POST {base_url}/model/{modelId}/converse`` (and ``/converse-stream``).

``base_url`` is the region's runtime endpoint, ``https://bedrock-runtime.{region}.amazonaws.com``.
``modelId`` is a model id (``anthropic.claude-sonnet-4-5-20250929-v1:0``), a cross-region
inference profile (``us.anthropic.claude-...``, ``global.anthropic.claude-...``) or an ARN;
all are just the model of a target, percent-encoded in the path as botocore encodes it. The
request is signed with SigV4 after it is built (``failover.auth``): this module never sees a
credential, and sends the body as exact bytes (``HttpRequest.content``) so the signature
covers what goes on the wire.

Wire reference: botocore's service model of ``bedrock-runtime`` (``Converse``,
``ConverseStream``; the tests validate every body built here against it), the Bedrock API
reference (API_runtime_Converse, API_runtime_ConverseStreamOutput, "Troubleshooting Amazon
Bedrock API Error Codes"), and the user guide's pages on tool use and extended thinking.

A ConverseStream answer is AWS event-stream framing, decoded by :mod:`._eventstream`
(botocore's parser) into the SSE events the stream parser here reads.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, urlsplit

from ...model import (
    Failure,
    ImagePart,
    Message,
    Reasoning,
    Request,
    Response,
    Target,
    TextPart,
    Tool,
    ToolChoice,
    dumps,
)
from ...transport import HttpRequest, HttpResponse
from .._base import StreamDecoder, StreamParser
from .._common import as_dict, decode_json, non_finite, tool_input, unreadable, with_query
from .._headers import read_meta
from ..anthropic import _THINKING_BUDGET
from ._eventstream import EventStreamDecoder
from ._parse import JSON_TOOL, REASONING_SOURCE, REQUEST_ID_HEADERS, error, parse_converse
from ._stream import ConverseStreamParser

__all__ = ["JSON_TOOL", "BedrockDialect"]

_NOT_IN_ID: Final = re.compile(r"[^a-zA-Z0-9_.:-]")
_IMAGE_FORMATS: Final = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}


class BedrockDialect:
    """AWS Bedrock Converse and ConverseStream.

    Requests: ``messages`` (text, ``image`` as base64 bytes or an ``s3://`` location,
    ``toolUse``, ``toolResult``, Claude's ``reasoningContent``), ``system``,
    ``inferenceConfig`` (``maxTokens``: the request's or the target's ``max_output_tokens``),
    ``toolConfig``. Consecutive turns of one role are merged into one message (Converse
    wants the roles to alternate; results of parallel calls share one user turn).

    Structured output (a JSON schema, or ``json_object``) goes through a tool named
    ``json_output`` whose input schema is the requested schema (its root must be an object),
    forced with ``toolChoice`` when the request has no tools of its own (beside the caller's
    tools it is offered, not forced). The model's call to it is read back as the answer's
    text: the JSON the validation module checks. Forcing a tool works on every model that
    supports tool choice (Claude, Mistral Large, Nova); Bedrock's native ``outputConfig`` is
    not used, since few models have it.

    Reasoning (``reasoning_effort``) is Claude's extended thinking through
    ``additionalModelRequestFields.thinking`` with the same budgets and rules as the
    Anthropic dialect; other model families get no reasoning field. ``tool_choice: none``
    has no Converse equivalent: the tools are left out (or, when the history holds tool
    blocks, which need ``toolConfig``, declared with the model's default choice).
    """

    name: str = "bedrock"
    reasoning_source: str = REASONING_SOURCE  # Claude's thinking, as Anthropic's API carries it

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        body = converse_body(target, request)
        path = f"/model/{quote(target.model, safe='-._~')}/{'converse-stream' if stream else 'converse'}"
        url = with_query(target.base_url.rstrip("/") + path, target.query)
        headers = {
            "content-type": "application/json",
            "accept": "application/vnd.amazon.eventstream" if stream else "application/json",
        }
        headers.update(target.headers)
        return HttpRequest(method="POST", url=url, headers=headers, json=body, content=dumps(body))

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=REQUEST_ID_HEADERS)
        raw = decode_json(response.body)
        if (bad := non_finite(self.name, target, response, meta, raw)) is not None:
            return bad
        data = as_dict(raw)
        if 200 <= response.status < 300:
            message = as_dict(as_dict(data.get("output")).get("message"))
            if isinstance(message.get("content"), list):
                return parse_converse(data, message, target, response.status, meta)
            return unreadable(self.name, target, response, meta, "a Converse answer")
        return error(target, response, meta, data)

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        del request  # the events say everything
        return ConverseStreamParser(target, headers, read_meta(headers, request_id_headers=REQUEST_ID_HEADERS))

    def stream_decoder(self, limit: int) -> StreamDecoder:
        """ConverseStream is AWS event-stream framing, not SSE: read by botocore's parser."""
        return EventStreamDecoder(limit)


# -------------------------------------------------------------------- build helpers


def converse_body(target: Target, request: Request) -> dict[str, Any]:
    """The Converse (and ConverseStream) body, without ``modelId`` (it is in the path)."""
    messages = _messages(request.messages)
    body: dict[str, Any] = {"messages": messages}
    system = [{"text": m.text} for m in request.messages if m.role == "system" and m.text]
    if system:
        body["system"] = system
    max_tokens = request.max_tokens if request.max_tokens is not None else target.max_output_tokens
    config: dict[str, Any] = {"maxTokens": max_tokens}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    stops = [s for s in request.stop if s]
    if stops:
        config["stopSequences"] = stops
    body["inferenceConfig"] = config
    # request.seed: Converse has no seed.
    tools = _tool_config(request, messages)
    if tools is not None:
        body["toolConfig"] = tools
    thinking = _thinking(target, request, max_tokens, tools, messages)
    if thinking is not None:
        body["additionalModelRequestFields"] = {"thinking": thinking}
    elif messages and messages[-1]["role"] == "assistant":
        # Without thinking, a prefilled last turn cannot hold thinking blocks (as on Anthropic's API).
        last = messages[-1]
        last["content"] = [b for b in last["content"] if "reasoningContent" not in b]  # text or a call stays
    return body


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]]
    for m in messages:
        if m.role == "system":
            continue  # hoisted to the top-level "system"
        if m.role == "tool":
            result: dict[str, Any] = {
                "toolUseId": tool_use_id(m.tool_call_id),
                "content": [{"text": m.text}] if m.text else [],
            }
            role, blocks = "user", [{"toolResult": result}]
        elif m.role == "assistant":
            role = "assistant"
            # Thinking first, as the model wrote it (Claude needs a tool loop's thinking back).
            blocks = [b for r in m.reasoning if (b := _reasoning_block(r)) is not None]
            if m.text:
                blocks.append({"text": m.text})
            blocks.extend(
                {"toolUse": {"toolUseId": tool_use_id(tc.id), "name": tc.name, "input": tool_input(tc)}}
                for tc in m.tool_calls
            )
            if not m.text and not m.tool_calls:
                continue  # an empty turn is refused; thinking alone answers nothing
        else:
            role = "user"
            blocks = [b for p in m.content if (b := _part(p)) is not None]
            if not blocks:
                continue  # blank text is refused ("The text field in the ContentBlock object is blank")
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # Converse wants the roles to alternate
        else:
            out.append({"role": role, "content": blocks})
    return out


def tool_use_id(call_id: str | None) -> str:
    """A call id as Converse takes it (``[a-zA-Z0-9_.:-]{1,64}``): another provider's id (a
    history from before a failover) is mapped, the same way for the call and its result."""
    text = _NOT_IN_ID.sub("_", call_id or "")[:64]
    return text or "tooluse_0"


def _part(part: TextPart | ImagePart) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"text": part.text} if part.text else None
    if part.is_data:
        media_type, data = part.data()
        return {"image": {"format": _image_format(media_type), "source": {"bytes": data}}}
    # Converse takes image bytes or an S3 location; any other URL is the provider's to refuse.
    guessed, _ = mimetypes.guess_type(urlsplit(part.url).path)
    return {"image": {"format": _image_format(guessed or ""), "source": {"s3Location": {"uri": part.url}}}}


def _image_format(media_type: str) -> str:
    kind = media_type.lower()
    return _IMAGE_FORMATS.get(kind) or kind.rpartition("/")[2] or "png"


def _reasoning_block(reasoning: Reasoning) -> dict[str, Any] | None:
    """A reasoning block as Converse takes it back (Claude's thinking), or None.

    Like the Anthropic dialect: a block without a signature (nothing lets the model verify
    it) is left out, and so is one of another format."""
    if reasoning.source != REASONING_SOURCE:
        return None
    if reasoning.redacted is not None:
        return {"reasoningContent": {"redactedContent": reasoning.redacted}}
    if reasoning.signature:
        return {"reasoningContent": {"reasoningText": {"text": reasoning.text, "signature": reasoning.signature}}}
    return None


def _tool_spec(tool: Tool) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": tool.name, "inputSchema": {"json": dict(tool.parameters)}}
    if tool.description:
        spec["description"] = tool.description
    if tool.strict:
        spec["strict"] = True
    return {"toolSpec": spec}


def _tool_config(request: Request, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    tools = [_tool_spec(t) for t in request.tools]
    choice = request.tool_choice
    fmt = request.response_format
    wants_json = fmt is not None and fmt.kind in ("json_schema", "json_object")
    if wants_json and fmt is not None:
        schema = dict(fmt.schema) if fmt.kind == "json_schema" and fmt.schema is not None else {"type": "object"}
        description = "Give your final answer by calling this tool: its input is the answer, as JSON."
        json_tool = {"toolSpec": {"name": JSON_TOOL, "description": description, "inputSchema": {"json": schema}}}
        if not request.tools:
            return {"tools": [json_tool], "toolChoice": {"tool": {"name": JSON_TOOL}}}
        tools.append(json_tool)
    if not tools:
        return None
    if choice is not None and choice.mode == "none":
        if not _has_tool_blocks(messages):
            return None
        return {"tools": tools}
    config: dict[str, Any] = {"tools": tools}
    if choice is not None:
        config["toolChoice"] = _tool_choice(choice)
    return config


def _has_tool_blocks(messages: list[dict[str, Any]]) -> bool:
    return any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])


def _tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "tool" and choice.name:
        return {"tool": {"name": choice.name}}
    if choice.mode in ("required", "tool"):
        return {"any": {}}
    return {"auto": {}}


def _thinking(
    target: Target,
    request: Request,
    max_tokens: int,
    tools: dict[str, Any] | None,
    messages: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Claude's ``thinking`` for ``request.reasoning_effort``, or None (see the Anthropic
    dialect's ``_thinking`` for why each case goes without): not a Claude model, a budget
    under 1024 tokens, a forced tool, or a tool loop whose last assistant turn lost its
    thinking."""
    if request.reasoning_effort is None or "anthropic.claude" not in target.model:
        return None
    budget = min(_THINKING_BUDGET[request.reasoning_effort], max_tokens - 1)
    if budget < 1024:
        return None
    choice = as_dict(tools.get("toolChoice")) if tools is not None else {}
    if "any" in choice or "tool" in choice:
        return None
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if last is not None:
        content = last["content"]
        if any("toolUse" in b for b in content) and "reasoningContent" not in content[0]:
            return None
    return {"type": "enabled", "budget_tokens": budget}
