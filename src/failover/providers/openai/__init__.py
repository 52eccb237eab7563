"""OpenAI Chat Completions, and every server that speaks it (Azure OpenAI, DeepSeek, vLLM...).

Wire reference: platform.openai.com/docs/api-reference/chat and openai-python's
``types/chat``. Compatible servers differ in small ways this module tolerates: DeepSeek's
``prompt_cache_hit_tokens`` and octet-stream errors, arguments sent as objects, content
sent as a list of parts, tool-call indexes reused, missing or counted from 1, errors inside
a 200 with the status as their code. Reasoning is read from ``reasoning_content`` (DeepSeek
and most servers) or ``reasoning`` (vLLM >= 0.11, OpenRouter) and sent back as
``reasoning_content`` beside a turn's tool calls (see ``_message``).

Streams (``stream_parser``) are ``chat.completion.chunk`` events. The Responses API
(``/v1/responses``, ``response.output_text.delta`` events) is its own dialect
(``providers/responses/``); the two share OpenAI's error vocabulary (``_errors``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn
from urllib.parse import quote

from ...model import REASONING_OPENAI as _SOURCE
from ...model import (
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
from ...model import Stop as StopEvent
from ...transport import HttpRequest, HttpResponse
from .._base import SSEEvent, StreamFailed, StreamParser
from .._common import (
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_json,
    non_finite,
    outcome_failure,
    tool_arguments,
    unreadable,
    with_query,
)
from .._headers import HeaderMeta, openai_rate_limits, read_meta
from .._streaming import EMPTY, ParserBase, event_response, incomplete, load_event, with_partial
from ._errors import openai_error

__all__ = ["OpenAIDialect"]

# x-request-id: OpenAI and most compatible servers; apim-request-id: Azure API Management;
# x-ds-trace-id: DeepSeek, which sends no request id but asks for this one in support tickets.
_REQUEST_ID_HEADERS = ("x-request-id", "apim-request-id", "x-ds-trace-id")

_FINISH = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,  # the pre-tools name, still sent by some servers
    "content_filter": StopReason.CONTENT_FILTER,
}

_MAX_TOKENS_FIELDS = frozenset({"max_tokens", "max_completion_tokens"})


class OpenAIDialect:
    """Chat Completions: ``POST {base_url}/chat/completions`` (``base_url`` ends in ``/v1``).

    ``max_tokens`` is sent as ``max_tokens`` by default. OpenAI deprecated it in favour of
    ``max_completion_tokens`` (which o-series and gpt-5 models require), but many compatible
    servers (vLLM before 0.6, DeepSeek, older Azure API versions) only know ``max_tokens``.
    A target whose ``extra`` holds ``("max_tokens_field", "max_completion_tokens")`` gets the
    new name.
    """

    name: str = "openai"
    reasoning_source: str = "openai"

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        base = target.base_url.rstrip("/")
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        if target.azure_deployment:
            url = f"{base}/openai/deployments/{quote(target.model, safe='')}/chat/completions"
            if target.api_key:
                headers["api-key"] = target.api_key.reveal()
        else:
            url = f"{base}/chat/completions"
            if target.api_key:
                headers["authorization"] = f"Bearer {target.api_key.reveal()}"
        headers.update(target.headers)  # static extras (api-version, org, project) win

        body: dict[str, Any] = {"model": target.model, "messages": [_message(m) for m in request.messages]}
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
            if request.tool_choice is not None:
                body["tool_choice"] = _tool_choice(request.tool_choice)
        fmt = request.response_format
        if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": fmt.name, "schema": dict(fmt.schema), "strict": fmt.strict},
            }
        elif fmt is not None and fmt.kind == "json_object":
            body["response_format"] = {"type": "json_object"}
        if request.max_tokens is not None:
            body[_max_tokens_field(target)] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        if stream:
            # include_usage: the last chunk carries usage, so a streamed call is costed too.
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        passed = request.passthrough
        if passed is not None and passed.receives(self.name, takes=target.passthrough):  # the client's own fields
            for k, v in passed.fields.items():
                body.setdefault(k, v)  # never over failover's
        return HttpRequest(method="POST", url=with_query(url, target.query), headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=openai_rate_limits)
        data = decode_json(response.body)
        if (bad := non_finite("openai", target, response, meta, data)) is not None:
            return bad
        if 200 <= response.status < 300:
            body = as_dict(data)
            if "choices" in body:
                err = body.get("error") or as_dict(next(iter(as_list(body["choices"])), None)).get("error")
                if err:  # the answer failed after all: OpenRouter puts the error beside the choice
                    return openai_error("openai", target, response, meta, {"error": err})
                return _parse_completion(body, response.status, meta, target.key)
            # A 200 with an error envelope: proxies (OpenRouter, LiteLLM) report upstream
            # failures this way; its code is often the upstream HTTP status.
            if isinstance(body.get("error"), dict):
                return openai_error("openai", target, response, meta, body)
            return unreadable(self.name, target, response, meta, "a chat completion")
        return openai_error("openai", target, response, meta, data)

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        del request  # the chunks say everything
        meta = read_meta(headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=openai_rate_limits)
        return _ChunkStream(target, headers, meta)


# -------------------------------------------------------------------- build helpers


def _max_tokens_field(target: Target) -> str:
    for key, value in target.extra:
        if key == "max_tokens_field" and value in _MAX_TOKENS_FIELDS:
            return value
    return "max_tokens"


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text}
    out: dict[str, Any] = {"role": message.role}
    if message.role == "assistant":
        # content may be null when the turn is only tool calls (the API's own shape).
        out["content"] = message.text if (message.text or not message.tool_calls) else None
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": _arguments_text(tc)},
                }
                for tc in message.tool_calls
            ]
            # The turn's reasoning goes back only beside its tool calls: DeepSeek's thinking mode
            # (and Moonshot's) refuses a tool-call turn without it (400) and ignores it on any
            # other turn, while servers that do not know the field may refuse it anywhere. The
            # router has already left out what this target cannot read; of the rest, only this
            # format's text is sent (another format's signatures have no place here).
            thought = [r.text for r in message.reasoning if r.source == _SOURCE]
            if thought:
                out["reasoning_content"] = "".join(thought)
    elif len(message.content) == 1 and isinstance(message.content[0], TextPart):
        out["content"] = message.content[0].text  # the compact form every compatible server accepts
    elif message.role == "system":
        out["content"] = message.text  # system content parts are text only
    else:
        out["content"] = [_part(p) for p in message.content]
    if message.name:
        out["name"] = message.name
    return out


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    image: dict[str, Any] = {"url": part.url}
    if part.detail is not None:
        image["detail"] = part.detail
    return {"type": "image_url", "image_url": image}


def _arguments_text(tc: ToolCall) -> str:
    if tc.arguments.strip():
        return tc.arguments
    return json.dumps(dict(tc.parsed) if tc.parsed is not None else {}, separators=(",", ":"))


def _tool(tool: Tool) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": tool.name, "parameters": dict(tool.parameters)}
    if tool.description:
        fn["description"] = tool.description
    if tool.strict:
        # Sent only when asked for: some compatible servers reject the unknown key.
        fn["strict"] = True
    return {"type": "function", "function": fn}


def _tool_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool" and choice.name:
        return {"type": "function", "function": {"name": choice.name}}
    if choice.mode == "tool":  # a forced tool without a name: any tool will do
        return "required"
    return choice.mode


# -------------------------------------------------------------------- parse helpers


def _parse_completion(body: dict[str, Any], status: int, meta: HeaderMeta, origin: str) -> Response | Failure:
    choices = as_list(body.get("choices"))
    choice = as_dict(choices[0]) if choices else {}
    message = as_dict(choice.get("message"))
    calls: list[ToolCall] = []
    for raw in as_list(message.get("tool_calls")):
        call = as_dict(raw)
        fn = as_dict(call.get("function"))
        arguments, parsed = tool_arguments(fn.get("arguments"))
        calls.append(
            ToolCall(
                id=as_str(call.get("id")) or "", name=as_str(fn.get("name")) or "", arguments=arguments, parsed=parsed
            )
        )
    thought = _thought(message)
    result = _result(
        text=_content_text(message.get("content")),
        reasoning=(Reasoning(text=thought, source=_SOURCE, origin=origin),) if thought else (),
        refusal=as_str(message.get("refusal")) or None,
        calls=tuple(calls),
        raw_finish=as_str(choice.get("finish_reason")),
        usage=_usage(as_dict(body.get("usage"))),
        model=as_str(body.get("model")),
        response_id=as_str(body.get("id")),
        meta=meta,
    )
    if not choices:
        return _fail(result, status, meta, FailureKind.PROVIDER_SERVER_ERROR, "the completion has no choices")
    return _judge(result, status, meta)


def _stop_reason(raw_finish: str | None, has_calls: bool, refused: bool) -> StopReason:
    if refused:
        return StopReason.REFUSAL
    stop = _FINISH.get(raw_finish or "", StopReason.OTHER)
    if has_calls and stop in (StopReason.END_TURN, StopReason.OTHER):
        # A forced tool_choice ends with finish_reason "stop" although the turn is tool calls.
        return StopReason.TOOL_USE
    return stop


def _result(
    *,
    text: str,
    reasoning: tuple[Reasoning, ...],
    refusal: str | None,
    calls: tuple[ToolCall, ...],
    raw_finish: str | None,
    usage: Usage,
    model: str | None,
    response_id: str | None,
    meta: HeaderMeta,
) -> Response:
    """The normalized answer, from a completion body or from an assembled stream."""
    return Response(
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
        usage=usage,
        stop_reason=_stop_reason(raw_finish, bool(calls), refusal is not None),
        raw_stop_reason=raw_finish,
        refusal=refusal,
        model=model,
        provider_request_id=meta.request_id,
        rate_limits=meta.rate_limits,
        response_id=response_id,
    )


def _fail(result: Response, status: int, meta: HeaderMeta, kind: FailureKind, why: str) -> Failure:
    return outcome_failure(
        provider="openai", kind=kind, why=why, result=result, status=status, meta=meta, code=result.raw_stop_reason
    )


def _judge(result: Response, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    # Order matters: a refusal or filter explains a cut-off answer, and a cut-off answer
    # explains half-written tool arguments.
    if result.refusal is not None:
        return _fail(result, status, meta, FailureKind.CONTENT_FILTERED, f"the model refused: {result.refusal}")
    if result.stop_reason is StopReason.CONTENT_FILTER:
        return _fail(
            result, status, meta, FailureKind.CONTENT_FILTERED, "the output was withheld by the content filter"
        )
    if result.raw_stop_reason == "error":
        # OpenRouter ends a choice this way when the model's provider failed mid-answer
        return _fail(
            result, status, meta, FailureKind.PROVIDER_SERVER_ERROR, "the answer ended with finish_reason error"
        )
    if result.raw_stop_reason == "length":
        return _fail(result, status, meta, FailureKind.TRUNCATED, "the output hit max_tokens (finish_reason length)")
    malformed = [c.name or "?" for c in result.tool_calls if c.parsed is None]
    if malformed:
        return _fail(
            result,
            status,
            meta,
            FailureKind.TOOL_CALL_MALFORMED,
            f"tool call arguments are not a JSON object: {', '.join(malformed)}",
        )
    return result


def _thought(container: dict[str, Any]) -> str | None:
    """The readable reasoning in a message or a delta, if any.

    ``reasoning_content``: DeepSeek, vLLM before 0.11, SGLang, llama.cpp, Moonshot and most
    compatible servers; ``reasoning``: vLLM since (which may still send an empty
    ``reasoning_content`` beside it) and OpenRouter. OpenRouter's ``reasoning_details`` repeat
    the same text as typed blocks with opaque signatures and encrypted data; they are not read.
    """
    text = container.get("reasoning_content") or container.get("reasoning")
    return text if text and isinstance(text, str) else None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    # Some compatible servers (Mistral, some vLLM builds) send a list of typed parts.
    parts = [as_str(as_dict(p).get("text")) for p in as_list(content) if as_dict(p).get("type") == "text"]
    return "".join(p for p in parts if p)


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = as_dict(raw.get("prompt_tokens_details"))
    completion = as_dict(raw.get("completion_tokens_details"))
    cached = as_int(prompt.get("cached_tokens"))
    if not cached:
        cached = as_int(raw.get("prompt_cache_hit_tokens"))  # DeepSeek's name for it
    return Usage(
        input_tokens=as_int(raw.get("prompt_tokens")),
        output_tokens=as_int(raw.get("completion_tokens")),
        cached_input_tokens=cached,
        reasoning_tokens=as_int(completion.get("reasoning_tokens")),
    )


# -------------------------------------------------------------------- stream


class _Call:
    """One streamed tool call: where the server put it, its position once announced, and the
    fragments seen so far."""

    __slots__ = ("done", "id", "index", "name", "order", "parts", "started")

    def __init__(self, wire: int, seq: int) -> None:
        self.order = (wire, seq)  # the order the SDK lists it in: the wire index, then arrival
        self.index = -1  # the call's position in this response, once announced (see _ChunkStream)
        self.id = ""
        self.name = ""
        self.parts: list[str] = []
        self.started = False
        self.done: ToolCall | None = None  # the complete call, once its choice finished

    def call(self) -> ToolCall:
        if self.done is not None:
            return self.done
        arguments, parsed = tool_arguments("".join(self.parts))  # the body parse's rules: blank is {}
        return ToolCall(id=self.id, name=self.name, arguments=arguments, parsed=parsed)


class _ChunkStream(ParserBase):
    """``chat.completion.chunk`` events to stream events; ``finish`` reuses the body parse's rules.

    Only choice 0 is followed (as ``parse`` reads ``choices[0]``), up to its ``finish_reason``.
    Text deltas are passed on as they come; refusal deltas are held back and make the answer a
    CONTENT_FILTERED failure at the end, as a non-streamed refusal does. Reasoning deltas are
    block 0 (``ReasoningDelta``), complete (``ReasoningDone``) when the answer begins (text,
    refusal or a tool call) or the choice finishes; reasoning after that is the next block.
    An ``error`` in a chunk, or on the choice, fails the stream, classified by its code.

    Tool calls are assembled as the official SDK assembles them: one buffer per call, keyed by
    the fragment's ``index``, taking fragments in any interleaving. A call is announced
    (``ToolCallStart``) once its id or name is known, each argument fragment is passed on as
    it comes (``ToolCallDelta``), and every call is complete (``ToolCallDone``, arguments
    parsed once) only when the choice finishes: a later fragment may still belong to any call.
    The calls are listed in the order of their wire ``index``, as the SDK lists them (a
    chunk reader filing fragments by ``index``; its ``.stream()`` accumulator needs index 0's
    head first and fails otherwise), not in the order they arrived: some OpenAI-compatible
    servers (vLLM) open index 1 before index 0. The events' ``index`` numbers the calls 0, 1,
    ... in that order, gaps closed (indexes 0, 2 are calls 0, 1). A number once sent cannot
    change, so a call is announced only when the call before it in that order is (index 0
    first, then 1, ...); a call whose lower index has not come yet (index 1 before 0, a gap,
    indexes counted from 1) waits, its fragments kept, until that index comes or the choice
    finishes, when every waiting call is announced in index order. Servers that break the
    numbering are read too: a call without an ``index`` is found by its id (or is the last
    call) and goes after every call seen, and an ``index`` reused with a new id (Ollama, some
    proxies) opens a new call, after the calls of that index.
    The terminal marker is ``finish_reason``; ``[DONE]`` and the usage-only chunk after it
    are welcome but not required.
    """

    __slots__ = (
        "_blocks",
        "_calls",
        "_finish",
        "_id",
        "_last",
        "_model",
        "_next_wire",
        "_origin",
        "_placed",
        "_refusal",
        "_text",
        "_thinking",
        "_usage",
        "_wire",
    )

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        super().__init__(target, headers, meta)
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: list[_Call] = []  # every call, in the order the server opened them
        self._placed: list[_Call] = []  # the announced calls, by position (their events' index)
        self._next_wire = 0  # a call of a wire index up to this one may be announced next
        self._wire: dict[int, _Call] = {}  # wire index -> the call its fragments go to now
        self._last: _Call | None = None  # the call the last fragment went to
        self._finish: str | None = None
        self._usage = Usage()
        self._origin = target.key
        self._blocks: list[Reasoning] = []  # complete reasoning blocks
        self._thinking: list[str] | None = None  # the open block's text, while one is open

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        data = event.data
        if data[:6] == "[DONE]":
            return EMPTY
        chunk = load_event(data, "openai", self._target, self._meta)
        choices = chunk.get("choices")
        if chunk.get("error"):
            # {"error": {...}} mid-stream (OpenAI, vLLM, proxies; OpenRouter's beside a choice
            # that finishes with "error"): classified by its code and type, like an error body.
            self._fail(chunk, data)
        if self._id is None:
            # Azure's content-filter chunks carry an empty id and model before the real ones.
            self._id = chunk.get("id") or None
        if self._model is None:
            self._model = chunk.get("model") or None
        out: list[StreamEvent] = []
        if choices and isinstance(choices, list) and self._finish is None:
            choice = choices[0]
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                delta = choice.get("delta")
                if delta and isinstance(delta, dict):
                    if "reasoning_content" in delta or "reasoning" in delta:  # see _thought
                        thought = delta.get("reasoning_content") or delta.get("reasoning")
                        if thought and isinstance(thought, str):
                            if self._thinking is None:
                                self._thinking = []
                            self._thinking.append(thought)
                            out.append(ReasoningDelta(index=len(self._blocks), text=thought))
                    content = delta.get("content")
                    if content:
                        text = content if isinstance(content, str) else _content_text(content)
                        if text:
                            if self._thinking is not None:  # the answer begins: the thinking is done
                                self._close_thinking(out)
                            self._text.append(text)
                            out.append(TextDelta(text=text))
                    refusal = delta.get("refusal")
                    if refusal and isinstance(refusal, str):
                        if self._thinking is not None:
                            self._close_thinking(out)
                        self._refusal.append(refusal)
                    calls = delta.get("tool_calls")
                    if calls and isinstance(calls, list):
                        if self._thinking is not None:
                            self._close_thinking(out)
                        for raw in calls:
                            if isinstance(raw, dict):
                                self._tool_delta(raw, out)
                finish = choice.get("finish_reason")
                if finish and isinstance(finish, str):
                    if choice.get("error"):  # an error on the choice as it ends (OpenRouter)
                        self._fail({"error": choice["error"]}, data)
                    self._finish = finish
                    if self._thinking is not None:
                        self._close_thinking(out)
                    for call in self._waiting():  # no lower index can come any more
                        self._start(call, out)
                    for call in self._placed:  # the choice is complete, and so is every call
                        call.done = call.call()
                        out.append(ToolCallDone(index=call.index, call=call.done))
                    stop = _stop_reason(finish, bool(self._calls), bool(self._refusal))
                    out.append(StopEvent(reason=stop, raw=finish))
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            # The usage-only chunk after finish_reason (include_usage), or DeepSeek's on the finish chunk.
            self._usage = _usage(usage)
            out.append(UsageUpdate(usage=self._usage))
        return out or EMPTY

    def finish(self) -> Response | Failure:
        result = self._response()
        if self._finish is None:
            return incomplete("openai", result, self._meta)
        return _judge(result, 200, self._meta)

    # ------------------------------------------------------------------------------ internals

    def _tool_delta(self, raw: dict[str, Any], out: list[StreamEvent]) -> None:
        call_id = raw.get("id")
        if not (call_id and isinstance(call_id, str)):
            call_id = ""
        wire = raw.get("index")
        if type(wire) is int:
            call = self._wire.get(wire)
            if call is None or (call_id and call.id and call_id != call.id):
                # A new index, or an index reused for another call (a new id): a new call.
                call = self._wire[wire] = self._open(max(wire, 0))
        elif call_id:  # no index (some compatible servers): the call with this id, else a new one
            call = next((c for c in self._calls if c.id == call_id), None) or self._open_last()
        else:  # neither: the fragment continues the last call
            call = self._last or self._open_last()
        self._last = call
        if call_id and not call.id:
            call.id = call_id
        fn = raw.get("function")
        if not isinstance(fn, dict):
            fn = {}
        name = fn.get("name")
        if name and isinstance(name, str) and not call.name:
            call.name = name  # set once: some servers repeat the name on every fragment
        if not call.started and (call.id or call.name):
            self._announce(out)
        arguments = fn.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))  # an object, whole
        if arguments:
            call.parts.append(arguments)
            if call.started:
                out.append(ToolCallDelta(index=call.index, arguments=arguments))

    def _close_thinking(self, out: list[StreamEvent]) -> None:
        block = Reasoning(text="".join(self._thinking or ()), source=_SOURCE, origin=self._origin)
        out.append(ReasoningDone(index=len(self._blocks), block=block))
        self._blocks.append(block)
        self._thinking = None

    def _fail(self, body: dict[str, Any], data: str) -> NoReturn:
        failure = openai_error("openai", self._target, event_response(data, self._headers), self._meta, body)
        raise StreamFailed(with_partial(failure, self._response()))

    def _announce(self, out: list[StreamEvent]) -> None:
        """Start the calls that can be, in wire-index order: the first call waiting is
        announced once its id or name is known and its index is the next one (every lower
        index has been announced), so a client filing the events by index, as the SDK does
        with a list, never sees index 1 before index 0, and no number sent has to change."""
        for call in self._waiting():
            if not (call.id or call.name) or call.order[0] > self._next_wire:
                return
            self._start(call, out)

    def _waiting(self) -> list[_Call]:
        """The calls not announced yet, in the order they are listed: wire index, then arrival."""
        return sorted((c for c in self._calls if not c.started), key=lambda c: c.order)

    def _open(self, wire: int) -> _Call:
        call = _Call(wire, len(self._calls))
        self._calls.append(call)
        return call

    def _open_last(self) -> _Call:
        """A call without an index: after every call seen."""
        return self._open(max((c.order[0] + 1 for c in self._calls), default=0))

    def _start(self, call: _Call, out: list[StreamEvent]) -> None:
        call.started = True
        call.index = len(self._placed)
        self._placed.append(call)
        self._next_wire = max(self._next_wire, call.order[0] + 1)
        out.append(ToolCallStart(index=call.index, id=call.id, name=call.name))
        if call.parts:  # fragments that came before the id and name, or while it waited
            out.append(ToolCallDelta(index=call.index, arguments="".join(call.parts)))

    def _response(self) -> Response:
        refusal = "".join(self._refusal) or None
        reasoning = tuple(self._blocks)
        if self._thinking is not None:  # cut while thinking: what had arrived
            reasoning += (Reasoning(text="".join(self._thinking), source=_SOURCE, origin=self._origin),)
        return _result(
            text="".join(self._text),
            reasoning=reasoning,
            refusal=refusal,
            calls=tuple(c.call() for c in (*self._placed, *self._waiting())),
            raw_finish=self._finish,
            usage=self._usage,
            model=self._model,
            response_id=self._id,
            meta=self._meta,
        )
