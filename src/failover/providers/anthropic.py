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

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..model import (
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    StopReason,
    StreamEvent,
    Target,
    TextDelta,
    TextPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    ToolChoice,
    Usage,
    UsageUpdate,
)
from ..model import Stop as StopEvent
from ..transport._types import HttpRequest, HttpResponse
from ._base import SSEEvent, StreamFailed, StreamParser
from ._common import (
    CONTEXT_OVERFLOW,
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_json,
    error_failure,
    kind_from_status,
    outcome_failure,
    tool_arguments,
    unreadable,
    with_query,
)
from ._google import google_envelope, google_error
from ._headers import HeaderMeta, anthropic_rate_limits, read_meta
from ._streaming import EMPTY, event_response, incomplete, load_event, malformed, with_partial
from ._vertex import ANTHROPIC_VERTEX_VERSION, anthropic_count_url, model_url

__all__ = ["AnthropicDialect"]

ANTHROPIC_VERSION = "2023-06-01"  # the only Messages API version; features are opt-in per field
_REQUEST_ID_HEADERS = ("request-id", "x-request-id")

_STOP = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
    "pause_turn": StopReason.OTHER,  # a server tool paused a long turn; the caller may continue it
}

_TYPE_KIND = {
    "authentication_error": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "permission_error": FailureKind.AUTHENTICATION_OR_PERMISSION,
    "billing_error": FailureKind.QUOTA_EXHAUSTED,
    "not_found_error": FailureKind.MODEL_NOT_FOUND,
    "rate_limit_error": FailureKind.RATE_LIMITED,
    "overloaded_error": FailureKind.PROVIDER_OVERLOADED,
    "api_error": FailureKind.PROVIDER_SERVER_ERROR,
    "timeout_error": FailureKind.PROVIDER_SERVER_ERROR,  # the server's own deadline (504)
    "request_too_large": FailureKind.INVALID_REQUEST,  # 413 from Cloudflare: bytes, not tokens
}

# What /v1/messages/count_tokens takes of a Messages body (MessageCountTokensParams). With
# ``thinking`` the count treats the history's thinking blocks as the request will.
_COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "output_config", "thinking"})

# Out of credit or over the workspace spend limit: Anthropic says so with a 400
# invalid_request_error ("Your credit balance is too low to access the Anthropic API",
# "You have reached your specified API usage limits"), which must not read as our bad request.
_QUOTA_MESSAGES = ("credit balance", "usage limits", "spend limit")


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
    reasoning_source: str = "anthropic"

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

        body["max_tokens"] = request.max_tokens if request.max_tokens is not None else target.max_output_tokens
        body["messages"] = _messages(request.messages)
        system = request.system_text
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
        return HttpRequest(method="POST", url=url, headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        data = as_dict(decode_json(response.body))
        if 200 <= response.status < 300:
            if data.get("type") == "message" or isinstance(data.get("content"), list):
                return _parse_message(data, response.status, meta, target.key)
            if data.get("type") == "error":
                return _error(target, response, meta, data)
            return unreadable(self.name, target, response, meta, "a message")
        return _error(target, response, meta, data)

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        del request  # the events say everything
        meta = read_meta(headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        return _MessageStream(target, headers, meta)

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
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=anthropic_rate_limits)
        data = as_dict(decode_json(response.body))
        if 200 <= response.status < 300:
            tokens = data.get("input_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
                return tokens
            return unreadable(self.name, target, response, meta, "a token count")
        return _error(target, response, meta, data)


# -------------------------------------------------------------------- build helpers


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue  # hoisted to the top-level "system"
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.text}
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
            if m.text:
                blocks.append({"type": "text", "text": m.text})
            blocks.extend(
                {"type": "tool_use", "id": tc.id, "name": tc.name, "input": _tool_input(tc)} for tc in m.tool_calls
            )
            out.append({"role": "assistant", "content": blocks})
            continue
        if len(m.content) == 1 and isinstance(m.content[0], TextPart):
            out.append({"role": "user", "content": m.content[0].text})
        else:
            out.append({"role": "user", "content": [_part(p) for p in m.content]})
    for item in out:
        item.pop("_tool_results", None)
    return out


def _part(p: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if p.is_data:
        media_type, data = p.data()
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": p.url}}


def _tool_input(tc: ToolCall) -> Mapping[str, Any]:
    """tool_use.input must be an object; replay what the model sent when it was one."""
    if tc.parsed is not None:
        return dict(tc.parsed)
    try:
        parsed = json.loads(tc.arguments) if tc.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool(t: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": t.name, "input_schema": dict(t.parameters)}
    if t.description:
        out["description"] = t.description
    if t.strict:
        out["strict"] = True  # strict tool use (structured outputs); older models reject the key
    return out


_THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def _thinking_block(r: Reasoning) -> dict[str, Any] | None:
    """A reasoning block as the API takes it back, or None when the API cannot take it.

    Only blocks in Anthropic's format (another provider's thinking means nothing here; the
    router already leaves out blocks of other models). A ``redacted_thinking`` block goes back
    with its encrypted ``data``; a ``thinking`` block with its text and ``signature``,
    unmodified. A thinking block without a signature (a summary from a client, or a stream
    cut before its ``signature_delta``) cannot be verified by the API, which refuses the
    request: it is left out.
    """
    if r.source != AnthropicDialect.reasoning_source:
        return None
    if r.redacted is not None:
        return {"type": "redacted_thinking", "data": r.redacted}
    if r.signature:
        return {"type": "thinking", "thinking": r.text, "signature": r.signature}
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


def _parse_message(data: dict[str, Any], status: int, meta: HeaderMeta, origin: str) -> Response | Failure:
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for raw in as_list(data.get("content")):
        block = as_dict(raw)
        kind = block.get("type")
        if kind == "text":
            texts.append(as_str(block.get("text")) or "")
        elif kind == "thinking":
            reasoning.append(
                Reasoning(
                    text=as_str(block.get("thinking")) or "",
                    signature=as_str(block.get("signature")) or None,
                    source=AnthropicDialect.reasoning_source,
                    origin=origin,
                )
            )
        elif kind == "redacted_thinking":
            reasoning.append(_redacted(block.get("data"), origin))
        elif kind == "tool_use":
            value = block.get("input")
            calls.append(
                ToolCall(
                    id=as_str(block.get("id")) or "",
                    name=as_str(block.get("name")) or "",
                    arguments=json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                    parsed=value if isinstance(value, dict) else None,
                )
            )
        # server tool blocks (server_tool_use, web_search_tool_result...) are not carried
    result = _result(
        text="".join(texts),
        calls=tuple(calls),
        reasoning=tuple(reasoning),
        raw_stop=as_str(data.get("stop_reason")),
        stop_details=as_dict(data.get("stop_details")),
        usage=_usage(as_dict(data.get("usage"))),
        model=as_str(data.get("model")),
        response_id=as_str(data.get("id")),
        meta=meta,
    )
    return _judge(result, status, meta)


def _redacted(data: Any, origin: str) -> Reasoning:
    """A ``redacted_thinking`` block: its encrypted ``data`` whole, no readable text."""
    return Reasoning(redacted=as_str(data) or "", source=AnthropicDialect.reasoning_source, origin=origin)


def _result(
    *,
    text: str,
    calls: tuple[ToolCall, ...],
    reasoning: tuple[Reasoning, ...],
    raw_stop: str | None,
    stop_details: dict[str, Any],
    usage: Usage,
    model: str | None,
    response_id: str | None,
    meta: HeaderMeta,
) -> Response:
    """The normalized answer, from a message body or from an assembled stream."""
    refusal: str | None = None
    if raw_stop == "refusal":
        refusal = as_str(stop_details.get("explanation")) or text or "the model declined to answer"
    return Response(
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
        usage=usage,
        stop_reason=_STOP.get(raw_stop or "", StopReason.OTHER),
        raw_stop_reason=raw_stop,
        refusal=refusal,
        model=model,
        provider_request_id=meta.request_id,
        rate_limits=meta.rate_limits,
        response_id=response_id,
    )


def _judge(result: Response, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    raw_stop = result.raw_stop_reason

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="anthropic", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_stop
        )

    if result.refusal is not None:
        return fail(FailureKind.CONTENT_FILTERED, f"the model refused: {result.refusal}")
    if raw_stop == "max_tokens":
        return fail(FailureKind.TRUNCATED, "the output hit max_tokens")
    if raw_stop == "model_context_window_exceeded":
        # Output ran into the context window, not into max_tokens: raising max_tokens
        # cannot help, only a larger window can.
        return fail(FailureKind.CONTEXT_OVERFLOW, "the output filled the model's context window")
    malformed = [c.name or "?" for c in result.tool_calls if c.parsed is None]
    if malformed:
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"tool_use input is not a JSON object: {', '.join(malformed)}")
    return result


def _usage(u: dict[str, Any]) -> Usage:
    # input_tokens counts only the uncached part; cache reads and writes are billed input too.
    cache_read = as_int(u.get("cache_read_input_tokens"))
    return Usage(
        input_tokens=as_int(u.get("input_tokens")) + cache_read + as_int(u.get("cache_creation_input_tokens")),
        output_tokens=as_int(u.get("output_tokens")),
        cached_input_tokens=cache_read,
        # thinking_tokens is newer than the samples; it is part of output_tokens.
        reasoning_tokens=as_int(as_dict(u.get("output_tokens_details")).get("thinking_tokens")),
    )


def _error(target: Target, response: HttpResponse, meta: HeaderMeta, data: dict[str, Any]) -> Failure:
    google = google_envelope(data if data else decode_json(response.body))
    if google is not None:  # Vertex AI's front end refused it (auth, IAM, quota) before Claude saw it
        return google_error("anthropic", target, response, meta, google)
    err = as_dict(data.get("error"))
    err_type = as_str(err.get("type"))
    message = as_str(err.get("message"))
    return error_failure(
        provider="anthropic",
        kind=_classify(response.status, err_type, message),
        target=target,
        response=response,
        meta=meta,
        code=err_type,
        message=message,
        request_id=as_str(data.get("request_id")),
    )


def _classify(status: int, err_type: str | None, message: str | None) -> FailureKind:
    lowered = (message or "").lower()
    # Not on a 429: rate-limit messages talk about "usage" too, and are the rate limit's.
    if status in (400, 402, 403) and any(m in lowered for m in _QUOTA_MESSAGES):
        return FailureKind.QUOTA_EXHAUSTED
    if err_type in _TYPE_KIND:
        return _TYPE_KIND[err_type]
    if status in (400, 413, 422) and CONTEXT_OVERFLOW.search(lowered):
        return FailureKind.CONTEXT_OVERFLOW
    return kind_from_status(status)


# -------------------------------------------------------------------- stream


class _ToolBlock:
    """A streamed ``tool_use`` block: its ``input_json_delta`` fragments, until its stop."""

    __slots__ = ("call", "id", "name", "parts", "position")

    def __init__(self, position: int, call_id: str, name: str) -> None:
        self.position = position  # the tool call's position among this message's calls
        self.id = call_id
        self.name = name
        self.parts: list[str] = []  # partial_json fragments
        self.call: ToolCall | None = None  # set by content_block_stop: the call is final

    def tool_call(self) -> ToolCall:
        if self.call is not None:
            return self.call
        # Joined fragments; blank (a tool without parameters streams only "") is {}.
        arguments, parsed = tool_arguments("".join(self.parts))
        return ToolCall(id=self.id, name=self.name, arguments=arguments, parsed=parsed)


class _ThinkingBlock:
    """A streamed ``thinking`` (``thinking_delta`` text, then ``signature_delta``) or
    ``redacted_thinking`` block (its ``data`` whole at block start), until its stop."""

    __slots__ = ("block", "origin", "parts", "position", "redacted", "signature")

    def __init__(self, position: int, origin: str, redacted: str | None = None) -> None:
        self.position = position  # the block's position among this message's reasoning blocks
        self.origin = origin
        self.redacted = redacted
        self.parts: list[str] = []
        self.signature = ""
        self.block: Reasoning | None = None  # set by content_block_stop: the block is final

    def reasoning(self) -> Reasoning:
        if self.block is not None:
            return self.block
        if self.redacted is not None:
            return _redacted(self.redacted, self.origin)
        return Reasoning(
            text="".join(self.parts),
            signature=self.signature or None,
            source=AnthropicDialect.reasoning_source,
            origin=self.origin,
        )


_TEXT: Final = "text"  # a text block: its deltas go straight to the answer's text

_Block = _ToolBlock | _ThinkingBlock | str


class _MessageStream:
    """Messages stream events to stream events; ``finish`` reuses the body parse's rules.

    The event's ``type`` field decides (the SSE ``event:`` name repeats it). Content blocks
    are kept by their ``index``, as the SDK's accumulator keeps them, so fragments of several
    open blocks may interleave in any order (Anthropic sends blocks one after another; a
    proxy may not): each ``input_json_delta`` goes to its own call, each ``thinking_delta``
    and ``signature_delta`` to its own reasoning block. A block is final at its own
    ``content_block_stop`` (``ToolCallDone`` / ``ReasoningDone``); a fragment for a block
    that has stopped is not part of it (dropped). Calls and reasoning blocks are numbered,
    and listed in the Response, in the order their blocks start, which is the order of their
    indexes: a start whose index goes back is a malformed stream, as the SDK refuses it.
    Interleaved thinking (thinking blocks between tool_use blocks) keeps that order within
    the reasoning and within the calls.

    Usage is the message_start usage overwritten by each message_delta's cumulative counts,
    as the SDK accumulates it. The terminal marker is message_delta's ``stop_reason``: after
    it only message_stop can come, which adds nothing. A tool_use block without its
    content_block_stop (max_tokens hit mid-input) is kept in the Response with whatever
    arguments arrived, but no ``ToolCallDone`` is emitted for it; likewise a thinking block
    cut before its stop is kept with what arrived (no ``ReasoningDone``).
    """

    __slots__ = (
        "_blocks",
        "_calls",
        "_details",
        "_headers",
        "_id",
        "_last_index",
        "_meta",
        "_model",
        "_reasoning",
        "_stop",
        "_target",
        "_text",
        "_usage",
        "_usage_raw",
    )

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        self._target = target
        self._headers = headers
        self._meta = meta
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._blocks: dict[Any, _Block] = {}
        self._last_index = -1
        self._calls: list[_ToolBlock] = []
        self._reasoning: list[_ThinkingBlock] = []
        self._stop: str | None = None
        self._details: dict[str, Any] = {}
        self._usage_raw: dict[str, Any] = {}
        self._usage = Usage()

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        if event.event == "ping":
            return EMPTY
        data = load_event(event.data, "anthropic", self._target, self._meta)
        kind = data.get("type") or event.event
        if kind == "content_block_delta":
            return self._delta(self._blocks.get(data.get("index")), data.get("delta"))
        if kind == "content_block_start":
            index = data.get("index")
            if isinstance(index, int):
                # Indexes are positions in the message's content, started in order; the SDK
                # refuses a start that goes back (an index already started, or a lower one),
                # and so does this parser: which block a later fragment means is unknowable.
                if index <= self._last_index:
                    why = f"content_block_start index {index} after index {self._last_index}"
                    raise malformed(event.data, "anthropic", self._target, self._meta, why)
                self._last_index = index
            return self._block_start(data)
        if kind == "content_block_stop":
            block = self._blocks.get(data.get("index"))
            if isinstance(block, _ToolBlock) and block.call is None:
                block.call = block.tool_call()
                return (ToolCallDone(index=block.position, call=block.call),)
            if isinstance(block, _ThinkingBlock) and block.block is None:
                block.block = block.reasoning()
                return (ReasoningDone(index=block.position, block=block.block),)
            return EMPTY
        if kind == "message_start":
            message = as_dict(data.get("message"))
            self._id = as_str(message.get("id")) or self._id
            self._model = as_str(message.get("model")) or self._model
            return self._merge_usage(message.get("usage"))
        if kind == "message_delta":
            out: list[StreamEvent] = []
            delta = as_dict(data.get("delta"))
            stop = as_str(delta.get("stop_reason"))
            if stop:
                self._stop = stop
                self._details = as_dict(delta.get("stop_details"))
                out.append(StopEvent(reason=_STOP.get(stop, StopReason.OTHER), raw=stop))
            out.extend(self._merge_usage(data.get("usage")))
            return out
        if kind == "error":
            failure = _error(self._target, event_response(event.data, self._headers), self._meta, data)
            raise StreamFailed(with_partial(failure, self._response()))
        return EMPTY  # message_stop, and event types newer than this parser

    def finish(self) -> Response | Failure:
        result = self._response()
        if self._stop is None:
            return incomplete("anthropic", result, self._meta)
        return _judge(result, 200, self._meta)

    # ------------------------------------------------------------------------------ internals

    def _delta(self, block: _Block | None, delta: Any) -> Sequence[StreamEvent]:
        if block is None or not isinstance(delta, dict):
            return EMPTY
        dtype = delta.get("type")
        if block is _TEXT:
            text = delta.get("text") if dtype == "text_delta" else None
            if text and isinstance(text, str):
                self._text.append(text)
                return (TextDelta(text=text),)
        elif isinstance(block, _ToolBlock):
            partial = delta.get("partial_json") if dtype == "input_json_delta" else None
            if partial and isinstance(partial, str) and block.call is None:
                block.parts.append(partial)
                return (ToolCallDelta(index=block.position, arguments=partial),)
        elif isinstance(block, _ThinkingBlock) and block.block is None and block.redacted is None:
            if dtype == "thinking_delta":
                text = delta.get("thinking")
                if text and isinstance(text, str):
                    block.parts.append(text)
                    return (ReasoningDelta(index=block.position, text=text),)
            elif dtype == "signature_delta":
                signature = delta.get("signature")
                if isinstance(signature, str):
                    block.signature = signature  # it replaces, as the SDK's accumulator does
        return EMPTY  # citations_delta, and delta types newer than this parser

    def _block_start(self, data: dict[str, Any]) -> Sequence[StreamEvent]:
        content = as_dict(data.get("content_block"))
        btype = content.get("type")
        index = data.get("index")
        if btype == "text":
            self._blocks[index] = _TEXT
            text = as_str(content.get("text"))
            if text:
                self._text.append(text)
                return (TextDelta(text=text),)
            return EMPTY
        if btype == "thinking" or btype == "redacted_thinking":
            redacted = (as_str(content.get("data")) or "") if btype == "redacted_thinking" else None
            thinking = _ThinkingBlock(len(self._reasoning), self._target.key, redacted)
            self._blocks[index] = thinking
            self._reasoning.append(thinking)
            if redacted is not None:
                return EMPTY
            thinking.signature = as_str(content.get("signature")) or ""
            text = as_str(content.get("thinking"))
            if text:
                thinking.parts.append(text)
                return (ReasoningDelta(index=thinking.position, text=text),)
            return EMPTY
        if btype != "tool_use":
            return EMPTY  # server tool blocks and block types newer than this parser: not carried
        block = _ToolBlock(len(self._calls), as_str(content.get("id")) or "", as_str(content.get("name")) or "")
        self._blocks[index] = block
        self._calls.append(block)
        out: list[StreamEvent] = [ToolCallStart(index=block.position, id=block.id, name=block.name)]
        initial = content.get("input")
        if isinstance(initial, dict) and initial:  # a proxy that sends the whole input up front
            text = json.dumps(initial, ensure_ascii=False, separators=(",", ":"))
            block.parts.append(text)
            out.append(ToolCallDelta(index=block.position, arguments=text))
        return out

    def _merge_usage(self, usage: Any) -> Sequence[StreamEvent]:
        if not isinstance(usage, dict):
            return EMPTY
        # Counts are cumulative; one a message_delta omits (or sends as null) keeps its earlier value.
        self._usage_raw.update((k, v) for k, v in usage.items() if v is not None)
        self._usage = _usage(self._usage_raw)
        return (UsageUpdate(usage=self._usage),)

    def _response(self) -> Response:
        return _result(
            text="".join(self._text),
            calls=tuple(b.tool_call() for b in self._calls),
            reasoning=tuple(b.reasoning() for b in self._reasoning),
            raw_stop=self._stop,
            stop_details=self._details,
            usage=self._usage,
            model=self._model,
            response_id=self._id,
            meta=self._meta,
        )
