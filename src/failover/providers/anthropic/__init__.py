"""Anthropic Messages: ``POST {base_url}/messages`` (``base_url`` ends in ``/v1``).

Wire reference: platform.claude.com/docs/en/api/messages, .../api/errors,
.../api/rate-limits, .../build-with-claude/structured-outputs, .../build-with-claude/streaming,
.../build-with-claude/extended-thinking, and anthropic-sdk-python's ``types`` and its stream
accumulator (``lib/streaming/_messages.py``, ``accumulate_event``), which the stream parser
must agree with.

A target with ``vertex`` is Claude on Vertex AI (anthropic-sdk-python's ``AnthropicVertex``):
``rawPredict`` / ``streamRawPredict`` at the publisher model's URL (``_vertex``), the body
without ``model`` and with ``"anthropic_version": "vertex-2023-10-16"``, a google-auth token
instead of an API key. Answers and stream events are Anthropic's; errors are Anthropic's, or
Google's envelope when Vertex itself refuses the request (``_google``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...model import REASONING_ANTHROPIC as REASONING_SOURCE
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
    ToolCall,
    ToolChoice,
)
from ...transport import HttpRequest, HttpResponse
from .._base import StreamParser
from .._common import as_dict, decode_json, non_finite, tool_input, unreadable, with_query
from .._headers import anthropic_rate_limits, read_meta
from .._vertex import ANTHROPIC_VERTEX_VERSION, anthropic_count_url, model_url
from ._parse import REQUEST_ID_HEADERS, error, parse_message
from ._stream import MessageStream

__all__ = ["AnthropicDialect"]

ANTHROPIC_VERSION = "2023-06-01"  # the only Messages API version; features are opt-in per field

# What /v1/messages/count_tokens takes of a Messages body (MessageCountTokensParams). With
# ``thinking`` the count treats the history's thinking blocks as the request will.
_COUNT_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "output_config", "thinking", "context_management"}
)


class AnthropicDialect:
    """Anthropic Messages API.

    ``max_tokens`` is required by the API: the request's, else the target's
    ``max_output_tokens``.

    JSON-schema output uses native structured outputs, ``output_config.format`` (GA; it
    replaced the beta ``output_format`` + ``structured-outputs-2025-11-13`` header). The
    JSON arrives as the text of the answer, like OpenAI's, so nothing special happens on
    parse and the validation module checks it. A forced tool would also work on older
    models, but it occupies ``tool_choice`` (so it cannot coexist with the caller's tools)
    and turns the answer into a tool call; targets that lack structured outputs should
    simply not declare the capability. ``json_object`` has no Anthropic equivalent and is
    left to validation.
    """

    name: str = "anthropic"
    reasoning_source: str = REASONING_SOURCE

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        vertex = target.vertex is not None
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        body: dict[str, Any]
        if vertex:
            # Claude on Vertex AI: the model is in the URL, the API version in the body, and
            # a google-auth token (failover.auth) authorises it, never an API key.
            body = {"anthropic_version": ANTHROPIC_VERTEX_VERSION}
            method = "streamRawPredict" if stream else "rawPredict"
            url = with_query(model_url(target, "anthropic", method), target.query)
        else:
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if target.api_key:
                headers["x-api-key"] = target.api_key.reveal()
            body = {"model": target.model}
            url = with_query(target.base_url.rstrip("/") + "/messages", target.query)
        headers.update(target.headers)  # e.g. anthropic-beta
        passed = request.passthrough
        if passed is not None and not passed.receives(self.name, takes=target.passthrough):
            passed = None  # another dialect's fields, or a target that takes none: nothing for it
        if passed is not None:
            _merge_headers(headers, passed.headers)

        body["max_tokens"] = request.max_tokens if request.max_tokens is not None else target.max_output_tokens
        # A client's mid-conversation system message stays in place on the Claude API; Vertex AI
        # does not take one (the feature is the Claude API's): it joins the top-level system.
        inline = not vertex
        body["messages"] = _messages(request.messages, inline)
        system = _system(request.messages, inline)
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
            if request.tool_choice is not None:
                body["tool_choice"] = _tool_choice(request.tool_choice)
        fmt = request.response_format
        if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": dict(fmt.schema)}}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        # request.seed: the Messages API has no seed; sampling is not reproducible there.
        thinking = _thinking(request, body)
        if thinking is not None:
            body["thinking"] = thinking
        else:
            _strip_final_thinking(body["messages"])
        if stream:
            body["stream"] = True
        if passed is not None:  # the client's own fields, verbatim; never over failover's
            for k, v in passed.fields.items():
                body.setdefault(k, v)
        return HttpRequest(method="POST", url=url, headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        raw = decode_json(response.body)
        if (bad := non_finite(self.name, target, response, meta, raw)) is not None:
            return bad
        data = as_dict(raw)
        if 200 <= response.status < 300:
            if data.get("type") == "message" or isinstance(data.get("content"), list):
                return parse_message(data, response.status, meta, target.key)
            if data.get("type") == "error":
                return error(target, response, meta, data)
            return unreadable(self.name, target, response, meta, "a message")
        return error(target, response, meta, data)

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        del request  # the events say everything
        meta = read_meta(headers, request_id_headers=REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        return MessageStream(target, headers, meta)

    # ---------------------------------------------------------------- token counting

    def build_count(self, target: Target, request: Request) -> HttpRequest:
        """``POST {base_url}/messages/count_tokens``: the Messages body, less what it rejects.

        The endpoint takes the prompt's fields (model, messages, system, tools, tool_choice,
        output_config, thinking) and answers 400 to max_tokens, stream and the sampling
        parameters.
        Counting is free of charge and has its own rate limit. On Vertex AI the count is
        ``.../publishers/anthropic/models/count-tokens:rawPredict``, with the model in the body
        (beside ``anthropic_version``), in the regions that offer it.
        """
        full = self.build(target, request)
        body = {k: v for k, v in (full.json or {}).items() if k in _COUNT_FIELDS}
        if target.vertex is not None:
            body = {"anthropic_version": ANTHROPIC_VERTEX_VERSION, "model": target.model, **body}
            url = with_query(anthropic_count_url(target), target.query)
        else:
            url = with_query(target.base_url.rstrip("/") + "/messages/count_tokens", target.query)
        return HttpRequest(method="POST", url=url, headers=full.headers, json=body)

    def parse_count(self, target: Target, response: HttpResponse) -> int | Failure:
        """``input_tokens`` of a 200 ``{"input_tokens": N}``; a classified Failure otherwise."""
        meta = read_meta(response.headers, request_id_headers=REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        raw = decode_json(response.body)
        if (bad := non_finite(self.name, target, response, meta, raw)) is not None:
            return bad
        data = as_dict(raw)
        if 200 <= response.status < 300:
            tokens = data.get("input_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
                return tokens
            return unreadable(self.name, target, response, meta, "a token count")
        return error(target, response, meta, data)


# -------------------------------------------------------------------- build helpers


def _merge_headers(headers: dict[str, str], extra: Mapping[str, str]) -> None:
    """Add the client's headers: a comma-separated list (``anthropic-beta``) is joined with the
    target's own, each value once, the target's first."""
    for name, value in extra.items():
        have = next((k for k in headers if k.lower() == name), None)
        if have is None:
            headers[name] = value
            continue
        items = [v.strip() for v in headers[have].split(",") if v.strip()]
        items += [v for v in (v.strip() for v in value.split(",")) if v and v not in items]
        headers[have] = ",".join(items)


def _hoisted(message: Message, inline: bool) -> bool:
    """Whether ``message`` goes into the top-level ``system``: every system message, but a client's
    mid-conversation one (``Message.inline``) where it can stay in place (``inline``)."""
    return message.role == "system" and not (inline and message.inline is not None)


def _system(messages: tuple[Message, ...], inline: bool = False) -> str | list[dict[str, Any]]:
    """The top-level ``system``: one string, or text blocks when a block carries a
    ``cache_control`` marker (each keeps its own)."""
    hoisted = [m for m in messages if _hoisted(m, inline)]
    parts = [p for m in hoisted for p in m.content if isinstance(p, TextPart)]
    if any(p.cache_control is not None for p in parts):
        return [_part(p) for p in parts]
    return "\n\n".join(m.text for m in hoisted)


def _messages(messages: tuple[Message, ...], inline: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if not _hoisted(m, inline):  # a client's mid-conversation system message, as it came
                out.append(dict(m.inline or {}))
            continue  # else hoisted to the top-level "system"
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.text}
            mark = next((p.cache_control for p in m.content if p.cache_control is not None), None)
            if mark is not None:
                block["cache_control"] = mark
            # Results of parallel calls must share ONE user turn, right after the tool_use turn.
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and last.get("_tool_results"):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_tool_results": True})
            continue
        if m.role == "assistant":
            if not m.text and not m.tool_calls:
                continue  # the API rejects an empty turn; thinking alone answers nothing: drop it
            # Thinking first, as the model wrote it: with tools, the API requires the turn's
            # thinking blocks back, complete and in their order, before its tool_use blocks.
            blocks = [b for r in m.reasoning if (b := _thinking_block(r)) is not None]
            if any(p.cache_control is not None for p in m.content):  # each text block with its marker
                blocks.extend(_part(p) for p in m.content if isinstance(p, TextPart))
            elif m.text:
                blocks.append({"type": "text", "text": m.text})
            blocks.extend(_tool_use(tc) for tc in m.tool_calls)
            out.append({"role": "assistant", "content": blocks})
            continue
        if len(m.content) == 1 and isinstance(m.content[0], TextPart) and m.content[0].cache_control is None:
            out.append({"role": "user", "content": m.content[0].text})
        else:
            out.append({"role": "user", "content": [_part(p) for p in m.content]})
    for item in out:
        item.pop("_tool_results", None)
    return out


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(part, TextPart):
        out = {"type": "text", "text": part.text}
    elif part.is_data:
        media_type, data = part.data()
        out = {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    else:
        out = {"type": "image", "source": {"type": "url", "url": part.url}}
    if part.cache_control is not None:
        out["cache_control"] = part.cache_control
    return out


def _tool_use(tc: ToolCall) -> dict[str, Any]:
    out = {"type": "tool_use", "id": tc.id, "name": tc.name, "input": tool_input(tc)}
    if tc.cache_control is not None:
        out["cache_control"] = tc.cache_control
    return out


def _tool(tool: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "input_schema": dict(tool.parameters)}
    if tool.description:
        out["description"] = tool.description
    if tool.strict:
        out["strict"] = True  # strict tool use (structured outputs); older models reject the key
    if tool.cache_control is not None:
        out["cache_control"] = tool.cache_control
    return out


_THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def _thinking_block(reasoning: Reasoning) -> dict[str, Any] | None:
    """A reasoning block as the API takes it back, or None when the API cannot take it.

    Only blocks in Anthropic's format (another provider's thinking means nothing here; the
    router already leaves out blocks of other models). A ``redacted_thinking`` block goes back
    with its encrypted ``data``; a ``thinking`` block with its text and ``signature``,
    unmodified. A thinking block without a signature (a summary from a client, or a stream
    cut before its ``signature_delta``) cannot be verified by the API, which refuses the
    request: it is left out.
    """
    if reasoning.source != AnthropicDialect.reasoning_source:
        return None
    if reasoning.redacted is not None:
        return {"type": "redacted_thinking", "data": reasoning.redacted}
    if reasoning.signature:
        return {"type": "thinking", "thinking": reasoning.text, "signature": reasoning.signature}
    return None


def _thinking(request: Request, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``thinking`` parameter for ``request.reasoning_effort``, or None for no thinking.

    Extended thinking takes a token budget (at least 1024, below max_tokens), not a level. It
    is left off, so the request is answered without thinking instead of refused with a 400,
    when the API would refuse it:

    - ``tool_choice`` forces tool use (``any`` / ``tool``): "Thinking may not be enabled when
      tool_choice forces tool use".
    - The last assistant turn calls tools and does not start with a thinking block: "Expected
      `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a
      final `assistant` message must start with a thinking block (preceeding the lastmost set
      of `tool_use` and `tool_result` blocks) ... To avoid this requirement, disable
      `thinking`." A tool loop is one assistant turn, which keeps one thinking setting: when
      that turn's thinking is gone (another provider or model wrote it and the router left it
      out, or the client sent no signed blocks), the loop goes on without thinking. The next
      turn, which starts after a text answer, thinks again.
    """
    if request.reasoning_effort is None:
        return None
    budget = min(_THINKING_BUDGET[request.reasoning_effort], int(body["max_tokens"]) - 1)
    if budget < 1024:
        return None
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return None
    last = next((m for m in reversed(body["messages"]) if m["role"] == "assistant"), None)
    if last is not None:
        content = last["content"]
        if any(b["type"] == "tool_use" for b in content) and content[0]["type"] not in _THINKING_TYPES:
            return None
    return {"type": "enabled", "budget_tokens": budget}


def _strip_final_thinking(messages: list[dict[str, Any]]) -> None:
    """Without thinking, "an `assistant` message in the final position cannot contain
    `thinking`": a prefilled last turn goes without its thinking blocks (earlier turns keep
    theirs; the API ignores them there)."""
    if messages and messages[-1]["role"] == "assistant":
        last = messages[-1]
        last["content"] = [b for b in last["content"] if b["type"] not in _THINKING_TYPES]


def _tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "tool" and choice.name:
        return {"type": "tool", "name": choice.name}
    if choice.mode in ("required", "tool"):
        return {"type": "any"}
    return {"type": choice.mode}  # "auto" | "none"


# -------------------------------------------------------------------- parse helpers
