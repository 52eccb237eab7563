"""Gemini ``generateContent``: ``POST {base_url}/models/{model}:generateContent``.

``base_url`` ends in ``/v1beta`` (generativelanguage.googleapis.com). A target with
``vertex`` is Gemini on Vertex AI: the same bodies at the publisher model's URL (``_vertex``),
with a google-auth token instead of an API key. Wire reference:
ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/troubleshooting,
the google.rpc error details (ErrorInfo, QuotaFailure, RetryInfo; ``_google``), and
google-genai's ``types.py``.
"""

from __future__ import annotations

import json
import mimetypes
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlsplit

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
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_json,
    outcome_failure,
    unreadable,
    with_query,
)
from ._google import google_error
from ._headers import HeaderMeta, read_meta
from ._streaming import EMPTY, event_response, incomplete, load_event, with_partial
from ._vertex import model_url

__all__ = ["GeminiDialect"]

_REQUEST_ID_HEADERS = ("x-goog-request-id", "x-request-id")

# The candidate's finishReason. Everything that means "withheld by a policy" is a content
# filter: safety, recitation (copyright), term blocklists, prohibited content, personal data.
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "LANGUAGE",  # "flagged for using an unsupported language"
    }
)
# The model produced a call that is not a valid call (or one to a tool it was not given).
_BAD_CALL = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})

# Gemini 3 models reject a replayed functionCall without its thoughtSignature (400
# "Function call is missing a thought_signature"). The signature travels in the turn's
# reasoning (see _model_parts); a turn without one (another provider wrote it, or a client's
# history) gets Google's documented sentinel that skips the check
# (ai.google.dev/gemini-api/docs/thought-signatures). Earlier models ignore signatures.
_SKIP_SIGNATURE = "skip_thought_signature_validator"
_GEMINI_MAJOR = re.compile(r"gemini-(\d+)")

# What Vertex AI's CountTokensRequest takes of a GenerateContentRequest.
_VERTEX_COUNT_FIELDS = frozenset({"contents", "systemInstruction", "tools", "generationConfig"})


class GeminiDialect:
    """Gemini API (AI Studio), and Gemini on Vertex AI (a target with ``vertex``): the same
    bodies, answers and errors under Vertex's URL scheme."""

    name: str = "gemini"
    reasoning_source: str = "gemini"

    # ---------------------------------------------------------------- build

    def build(self, target: Target, request: Request, *, stream: bool = False) -> HttpRequest:
        model = target.model.removeprefix("models/")
        method = "streamGenerateContent" if stream else "generateContent"
        query = ((("alt", "sse"),) if stream else ()) + target.query
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
        }
        if target.vertex is not None:
            # Vertex AI: the publisher model's resource; authorised by a google-auth token
            # (failover.auth), never an API key.
            url = model_url(target, "google", method)
        else:
            url = f"{target.base_url.rstrip('/')}/models/{quote(model, safe='')}:{method}"
            if target.api_key:
                headers["x-goog-api-key"] = target.api_key.reveal()  # a header keeps the key out of URLs and logs
        headers.update(target.headers)

        body: dict[str, Any] = {"contents": _contents(request.messages, _needs_signature(model))}
        system = request.system_text
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
            if request.tool_choice is not None:
                body["toolConfig"] = {"functionCallingConfig": _calling_config(request.tool_choice)}
        config = _generation_config(request)
        if config:
            body["generationConfig"] = config
        return HttpRequest(method="POST", url=with_query(url, query), headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS)
        data = decode_json(response.body)
        if isinstance(data, list) and data:  # streamGenerateContent without alt=sse answers a list
            data = data[0]
        body = as_dict(data)
        if 200 <= response.status < 300:
            if "candidates" in body or "promptFeedback" in body or "usageMetadata" in body:
                return _parse_generation(body, response.status, meta, target.key)
            if isinstance(body.get("error"), dict):
                return _error(target, response, meta, body)
            return unreadable(self.name, target, response, meta, "a GenerateContentResponse")
        return _error(target, response, meta, body)

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        """For ``streamGenerateContent?alt=sse`` (what ``build(stream=True)`` asks for)."""
        del request  # the chunks say everything
        return _ChunkStream(target, headers, read_meta(headers, request_id_headers=_REQUEST_ID_HEADERS))

    # ---------------------------------------------------------------- token counting

    def build_count(self, target: Target, request: Request) -> HttpRequest:
        """``POST {base_url}/models/{model}:countTokens``.

        A prompt of contents alone is sent as ``{"contents": [...]}``. One with a system
        instruction, tools or a generation config is sent whole as ``generateContentRequest``
        (which must name its model, ``models/{model}``): ``contents`` alone would not count them.
        Vertex AI's countTokens has no ``generateContentRequest``: it takes ``contents``,
        ``systemInstruction``, ``tools`` and ``generationConfig`` side by side.
        """
        full = self.build(target, request)
        model = target.model.removeprefix("models/")
        content = dict(full.json or {})
        body: dict[str, Any]
        if target.vertex is not None:
            url = model_url(target, "google", "countTokens")
            body = {k: v for k, v in content.items() if k in _VERTEX_COUNT_FIELDS}
            return HttpRequest(method="POST", url=with_query(url, target.query), headers=full.headers, json=body)
        url = f"{target.base_url.rstrip('/')}/models/{quote(model, safe='')}:countTokens"
        if content.keys() <= {"contents"}:
            body = {"contents": content.get("contents", [])}
        else:
            body = {"generateContentRequest": {"model": f"models/{model}", **content}}
        return HttpRequest(method="POST", url=with_query(url, target.query), headers=full.headers, json=body)

    def parse_count(self, target: Target, response: HttpResponse) -> int | Failure:
        """``totalTokens`` of a 200 CountTokensResponse; a classified Failure otherwise."""
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS)
        body = as_dict(decode_json(response.body))
        if 200 <= response.status < 300:
            tokens = body.get("totalTokens")
            # proto3 JSON leaves out a zero: a body without totalTokens is no count we can trust.
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
                return tokens
            if isinstance(body.get("error"), dict):
                return _error(target, response, meta, body)
            return unreadable(self.name, target, response, meta, "a CountTokensResponse")
        return _error(target, response, meta, body)


# -------------------------------------------------------------------- build helpers


def _needs_signature(model: str) -> bool:
    match = _GEMINI_MAJOR.search(model)
    return match is not None and int(match.group(1)) >= 3


def _contents(messages: tuple[Message, ...], signature: bool) -> list[dict[str, Any]]:
    # functionResponse is matched to its call by function name, so remember which call id
    # had which name; Gemini (unlike OpenAI and Anthropic) does not need our ids.
    names = {tc.id: tc.name for m in messages for tc in m.tool_calls}
    out: list[dict[str, Any]] = []
    pending_results = False
    for m in messages:
        if m.role == "system":
            continue  # systemInstruction
        if m.role == "tool":
            name = names.get(m.tool_call_id or "") or m.name or m.tool_call_id or ""
            part = {"functionResponse": {"name": name, "response": {"output": m.text}}}
            # All responses to one turn of parallel calls go in ONE content, in call order.
            if pending_results:
                out[-1]["parts"].append(part)
            else:
                out.append({"role": "user", "parts": [part]})
                pending_results = True
            continue
        pending_results = False
        if m.role == "assistant":
            parts = _model_parts(m, signature)
            if parts:
                out.append({"role": "model", "parts": parts})
            continue
        user_parts = [_part(p) for p in m.content if not (isinstance(p, TextPart) and not p.text)]
        if user_parts:  # the API rejects a content without parts
            out.append({"role": "user", "parts": user_parts})
    return out


def _model_parts(m: Message, sentinel: bool) -> list[dict[str, Any]]:
    """A model turn's parts, each with the thoughtSignature it came with.

    Gemini puts signatures on parts: a thought part, the first functionCall part of each step
    (parallel calls: only the first), or the last part of an answer without calls (a text
    part, or in a stream an empty text part at the end). The parse keeps them, in part order,
    in the turn's ``gemini`` reasoning blocks: a thought part is a block with its text (and
    its signature, if it had one); a signature on an answer part is a block with no text. Here
    they go back on the same parts: thought parts first; then the text; then the calls, the
    first signatures without text going to the calls in order (where Gemini puts them), any
    left over to the text part, and any further ones to empty text parts after the calls (as
    a stream ends). So an answer in the shapes the docs describe (thoughts, then text, then
    calls, signed on the first call or on the last text part) comes back part for part; a
    stream's text comes back as one part, and text interleaved with calls as text first (the
    Message keeps one text). A Gemini 3 turn whose first call has no signature gets the
    documented sentinel.
    """
    if not m.text and not m.tool_calls:
        return []  # the API rejects a content without parts; thinking alone answers nothing
    blocks = [r for r in m.reasoning if r.source == GeminiDialect.reasoning_source]
    parts: list[dict[str, Any]] = []
    for r in blocks:
        if r.text:
            thought: dict[str, Any] = {"text": r.text, "thought": True}
            if r.signature:
                thought["thoughtSignature"] = r.signature
            parts.append(thought)
    bare = [r.signature for r in blocks if not r.text and r.signature]
    calls: list[dict[str, Any]] = []
    for i, tc in enumerate(m.tool_calls):
        call: dict[str, Any] = {"functionCall": {"name": tc.name, "args": _args(tc)}}
        if i < len(bare):
            call["thoughtSignature"] = bare[i]
        elif sentinel and i == 0:
            call["thoughtSignature"] = _SKIP_SIGNATURE
        calls.append(call)
    rest = bare[len(calls) :]
    if m.text:
        text: dict[str, Any] = {"text": m.text}
        if rest:
            text["thoughtSignature"] = rest.pop(0)
        parts.append(text)
    parts.extend(calls)
    parts.extend({"text": "", "thoughtSignature": sig} for sig in rest)
    return parts


def _part(p: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"text": p.text}
    if p.is_data:
        media_type, data = p.data()
        return {"inlineData": {"mimeType": media_type, "data": data}}
    file_data: dict[str, Any] = {"fileUri": p.url}
    guessed, _ = mimetypes.guess_type(urlsplit(p.url).path)
    if guessed:  # optional in FileData; sent when the URL's extension says it
        file_data["mimeType"] = guessed
    return {"fileData": file_data}


def _args(tc: ToolCall) -> dict[str, Any]:
    if tc.parsed is not None:
        return dict(tc.parsed)
    try:
        parsed = json.loads(tc.arguments) if tc.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _declaration(t: Tool) -> dict[str, Any]:
    # parametersJsonSchema takes standard JSON Schema (additionalProperties, $defs, anyOf);
    # the older "parameters" takes an OpenAPI subset that rejects common schemas.
    out: dict[str, Any] = {"name": t.name, "parametersJsonSchema": dict(t.parameters)}
    if t.description:
        out["description"] = t.description
    return out


def _calling_config(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "tool" and choice.name:
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    if choice.mode in ("required", "tool"):
        return {"mode": "ANY"}
    return {"mode": choice.mode.upper()}  # AUTO | NONE


_THINKING_BUDGET = {"minimal": 128, "low": 1024, "medium": 8192, "high": 24576}


def _generation_config(request: Request) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.stop:
        config["stopSequences"] = list(request.stop)
    if request.seed is not None:
        config["seed"] = request.seed
    if request.reasoning_effort is not None:
        # includeThoughts: the model's thought summaries come back as thought parts (the
        # Response's reasoning), as Anthropic returns its thinking when thinking is on.
        config["thinkingConfig"] = {
            "thinkingBudget": _THINKING_BUDGET[request.reasoning_effort],
            "includeThoughts": True,
        }
    fmt = request.response_format
    if fmt is not None and fmt.kind in ("json_object", "json_schema"):
        config["responseMimeType"] = "application/json"
        if fmt.kind == "json_schema" and fmt.schema is not None:
            # responseJsonSchema takes JSON Schema as written; responseSchema would need the
            # OpenAPI subset (upper-case types, no additionalProperties).
            config["responseJsonSchema"] = dict(fmt.schema)
    return config


# -------------------------------------------------------------------- parse helpers


def _parse_generation(body: dict[str, Any], status: int, meta: HeaderMeta, origin: str) -> Response | Failure:
    response_id = as_str(body.get("responseId"))
    usage = _usage(as_dict(body.get("usageMetadata")))
    model = as_str(body.get("modelVersion"))
    candidates = as_list(body.get("candidates"))
    if not candidates:
        block = as_str(as_dict(body.get("promptFeedback")).get("blockReason"))
        return _no_candidates(block, usage, model, response_id, status, meta)
    candidate = as_dict(candidates[0])
    parts = _Parts(origin)
    parts.read(candidate, response_id, [])
    parts.close()
    raw_finish = as_str(candidate.get("finishReason"))
    result = _result(parts, raw_finish, usage, model, response_id, meta)
    return _judge(result, as_str(candidate.get("finishMessage")), status, meta)


class _Thought:
    """A reasoning block being read: thought parts' text, until a signature or an answer part."""

    __slots__ = ("block", "position", "signature", "texts")

    def __init__(self, position: int) -> None:
        self.position = position
        self.texts: list[str] = []
        self.signature: str | None = None
        self.block: Reasoning | None = None  # set when the block is closed


class _Parts:
    """The answer's parts, read in order: the same for a whole response and for a stream.

    A stream's chunks are pieces of one candidate: text parts are pieces of its text, and
    consecutive thought parts are pieces of one reasoning block (``thought: true``), which
    ends at a part that carries a ``thoughtSignature`` (the block's own), at the first answer
    part, or at the candidate's finishReason. A signature on an answer part (a functionCall,
    a text part, a stream's closing empty text part) is a reasoning block of its own, with no
    text, in part order; ``_model_parts`` puts it back on its part. A functionCall part is a
    whole call (the Gemini API does not stream call arguments), so it starts, delivers its
    arguments and completes at once; calls are numbered in the order they arrive.
    """

    __slots__ = ("_open", "calls", "origin", "reasoning", "texts")

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.reasoning: list[_Thought] = []
        self._open: _Thought | None = None

    def read(self, candidate: dict[str, Any], response_id: str | None, out: list[StreamEvent]) -> None:
        """Read one candidate's parts, appending their events to ``out``."""
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            return
        for raw in parts:
            if not isinstance(raw, dict):
                continue
            text = raw.get("text")
            signature = raw.get("thoughtSignature")
            if signature is not None and not (isinstance(signature, str) and signature):
                signature = None
            if raw.get("thought") is True:
                self._thought(text if isinstance(text, str) else "", signature, out)
                continue
            call = raw.get("functionCall")
            if not isinstance(text, str) and not isinstance(call, dict):
                continue  # inlineData, executableCode...: not carried (nor their signatures)
            if self._open is not None:
                out.extend(self.close())
            if text and isinstance(text, str):
                self.texts.append(text)
                out.append(TextDelta(text=text))
            if isinstance(call, dict):
                out.extend(self._call(call, response_id))
            if signature is not None:
                bare = _Thought(len(self.reasoning))
                bare.signature = signature
                self.reasoning.append(bare)
                out.extend(self._done(bare))

    def close(self) -> Sequence[StreamEvent]:
        """End the open reasoning block, if any (an answer part or the finish came)."""
        thought, self._open = self._open, None
        return self._done(thought) if thought is not None else EMPTY

    def response_reasoning(self) -> tuple[Reasoning, ...]:
        return tuple(t.block or self._block(t) for t in self.reasoning)

    def _thought(self, text: str, signature: str | None, out: list[StreamEvent]) -> None:
        thought = self._open
        if thought is None:
            thought = self._open = _Thought(len(self.reasoning))
            self.reasoning.append(thought)
        if text:
            thought.texts.append(text)
            out.append(ReasoningDelta(index=thought.position, text=text))
        if signature is not None:
            thought.signature = signature
            out.extend(self.close())

    def _call(self, call: dict[str, Any], response_id: str | None) -> list[StreamEvent]:
        args = call.get("args")
        if args is None:
            args = {}  # absent (or null) for a call without parameters
        # Vertex streams a call's arguments in pieces (partialArgs, willContinue) only when the
        # request sets streamFunctionCallArguments, which this dialect never does (the Gemini
        # API has no such option). Should one arrive anyway, its args are not the call's: the
        # call is malformed rather than silently called with {}.
        partial = call.get("willContinue") is True or "partialArgs" in call
        index = len(self.calls)
        tc = ToolCall(
            id=as_str(call.get("id")) or _call_id(response_id, index),
            name=as_str(call.get("name")) or "",
            arguments=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
            parsed=args if isinstance(args, dict) and not partial else None,
        )
        self.calls.append(tc)
        return [
            ToolCallStart(index=index, id=tc.id, name=tc.name),
            ToolCallDelta(index=index, arguments=tc.arguments),
            ToolCallDone(index=index, call=tc),
        ]

    def _done(self, thought: _Thought) -> Sequence[StreamEvent]:
        thought.block = self._block(thought)
        return (ReasoningDone(index=thought.position, block=thought.block),)

    def _block(self, thought: _Thought) -> Reasoning:
        return Reasoning(
            text="".join(thought.texts),
            signature=thought.signature,
            source=GeminiDialect.reasoning_source,
            origin=self.origin,
        )


def _stop_reason(raw_finish: str | None, has_calls: bool) -> StopReason:
    if raw_finish == "STOP":
        return StopReason.TOOL_USE if has_calls else StopReason.END_TURN
    if raw_finish == "MAX_TOKENS":
        return StopReason.MAX_TOKENS
    if raw_finish in _FILTERED:
        return StopReason.CONTENT_FILTER
    if raw_finish is None and has_calls:
        return StopReason.TOOL_USE
    return StopReason.OTHER if raw_finish else StopReason.END_TURN


def _result(
    parts: _Parts | None,
    raw_finish: str | None,
    usage: Usage,
    model: str | None,
    response_id: str | None,
    meta: HeaderMeta,
) -> Response:
    """The normalized answer, from a GenerateContentResponse or from an assembled stream."""
    calls = tuple(parts.calls) if parts is not None else ()
    return Response(
        text="".join(parts.texts) if parts is not None else "",
        tool_calls=calls,
        reasoning=parts.response_reasoning() if parts is not None else (),
        usage=usage,
        stop_reason=_stop_reason(raw_finish, bool(calls)),
        raw_stop_reason=raw_finish,
        model=model,
        provider_request_id=meta.request_id or response_id,
        rate_limits=meta.rate_limits,
        response_id=response_id,
    )


def _no_candidates(
    block: str | None, usage: Usage, model: str | None, response_id: str | None, status: int, meta: HeaderMeta
) -> Failure:
    """No candidate at all: a blocked prompt (promptFeedback.blockReason), else a broken answer."""
    if block:
        return outcome_failure(
            provider="gemini",
            kind=FailureKind.CONTENT_FILTERED,
            why=f"the prompt was blocked ({block})",
            result=replace(
                _result(None, block, usage, model, response_id, meta), stop_reason=StopReason.CONTENT_FILTER
            ),
            status=status,
            meta=meta,
            code=block,
        )
    return outcome_failure(
        provider="gemini",
        kind=FailureKind.PROVIDER_SERVER_ERROR,
        why="the response has no candidates",
        result=replace(_result(None, None, usage, model, response_id, meta), stop_reason=StopReason.OTHER),
        status=status,
        meta=meta,
        code=None,
    )


def _judge(result: Response, finish_message: str | None, status: int, meta: HeaderMeta) -> Response | Failure:
    """The 200-can-be-a-failure rules, shared by the body parse and the stream parser."""
    raw_finish = result.raw_stop_reason

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="gemini", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_finish
        )

    if result.stop_reason is StopReason.CONTENT_FILTER:
        return fail(FailureKind.CONTENT_FILTERED, f"the candidate was withheld ({raw_finish})")
    if raw_finish == "MAX_TOKENS":
        # Also when content has no parts at all: thinking spent the whole budget.
        return fail(FailureKind.TRUNCATED, "the output hit maxOutputTokens")
    if raw_finish in _BAD_CALL:
        message = finish_message or raw_finish
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"the model produced an invalid function call: {message}")
    if raw_finish == "MISSING_THOUGHT_SIGNATURE":
        return fail(FailureKind.INVALID_REQUEST, "a replayed function call lacks its thought signature")
    malformed = [c.name or "?" for c in result.tool_calls if c.parsed is None]
    if malformed:
        return fail(FailureKind.TOOL_CALL_MALFORMED, f"functionCall args are not a JSON object: {', '.join(malformed)}")
    return result


def _call_id(response_id: str | None, index: int) -> str:
    # The Gemini API rarely sends call ids; ours must be unique across turns because the
    # tool-execution ledger keys on them. responseId is unique per response.
    return f"call_{response_id}_{index}" if response_id else f"call_{uuid.uuid4().hex[:24]}"


def _usage(u: dict[str, Any]) -> Usage:
    thoughts = as_int(u.get("thoughtsTokenCount"))
    return Usage(
        # toolUsePromptTokenCount (results of built-in tools fed back in) is billed as input.
        input_tokens=as_int(u.get("promptTokenCount")) + as_int(u.get("toolUsePromptTokenCount")),
        # candidatesTokenCount excludes thinking, which is billed as output.
        output_tokens=as_int(u.get("candidatesTokenCount")) + thoughts,
        cached_input_tokens=as_int(u.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def _error(target: Target, response: HttpResponse, meta: HeaderMeta, body: dict[str, Any]) -> Failure:
    return google_error("gemini", target, response, meta, body)


# -------------------------------------------------------------------- stream


class _ChunkStream:
    """``streamGenerateContent?alt=sse``: each event is a whole GenerateContentResponse chunk,
    as the google-genai SDK yields them (one response per SSE event; it has no accumulator).

    The parts of every chunk are read in order by ``_Parts``, as a whole response's parts
    are: text parts become text deltas, thought parts reasoning deltas, a functionCall part
    a whole call (start, its arguments as one delta, done), a thoughtSignature a reasoning
    block. usageMetadata is cumulative (the latest wins); the terminal marker is a
    candidate's ``finishReason``, or a ``promptFeedback.blockReason`` (a blocked prompt has
    no candidates at all). An ``{"error": ...}`` chunk is the same error as the HTTP body
    would be, classified by its code and status.
    """

    __slots__ = (
        "_block",
        "_finish",
        "_finish_message",
        "_headers",
        "_id",
        "_meta",
        "_model",
        "_parts",
        "_target",
        "_usage",
        "_usage_raw",
    )

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        self._target = target
        self._headers = headers
        self._meta = meta
        self._id: str | None = None
        self._model: str | None = None
        self._parts = _Parts(target.key)
        self._finish: str | None = None
        self._finish_message: str | None = None
        self._block: str | None = None
        self._usage_raw: Any = None
        self._usage = Usage()

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        chunk = load_event(event.data, "gemini", self._target, self._meta)
        if "error" in chunk and "candidates" not in chunk:
            # An error mid-stream: {"error": {"code": 503, "status": "UNAVAILABLE", ...}}.
            code = as_dict(chunk.get("error")).get("code")
            status = code if isinstance(code, int) and 400 <= code < 600 else 200
            response = event_response(event.data, self._headers, status)
            raise StreamFailed(with_partial(_error(self._target, response, self._meta, chunk), self._response()))
        if self._id is None:
            self._id = as_str(chunk.get("responseId"))
        if self._model is None:
            self._model = as_str(chunk.get("modelVersion"))
        out: list[StreamEvent] = []
        candidates = chunk.get("candidates")
        if candidates and isinstance(candidates, list):
            candidate = candidates[0]
            if isinstance(candidate, dict) and candidate.get("index", 0) == 0:
                self._parts.read(candidate, self._id, out)
                finish = candidate.get("finishReason")
                if finish and isinstance(finish, str):
                    out.extend(self._parts.close())
                    self._finish = finish
                    self._finish_message = as_str(candidate.get("finishMessage"))
                    out.append(StopEvent(reason=_stop_reason(finish, bool(self._parts.calls)), raw=finish))
        else:
            feedback = chunk.get("promptFeedback")
            block = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if block and isinstance(block, str):
                self._block = block
                out.append(StopEvent(reason=StopReason.CONTENT_FILTER, raw=block))
        usage = chunk.get("usageMetadata")
        if usage and isinstance(usage, dict) and usage != self._usage_raw:
            self._usage_raw = usage
            self._usage = _usage(usage)
            out.append(UsageUpdate(usage=self._usage))
        return out or EMPTY

    def finish(self) -> Response | Failure:
        if self._block is not None:
            return _no_candidates(self._block, self._usage, self._model, self._id, 200, self._meta)
        result = self._response()
        if self._finish is None:
            return incomplete("gemini", result, self._meta)
        return _judge(result, self._finish_message, 200, self._meta)

    def _response(self) -> Response:
        return _result(self._parts, self._finish, self._usage, self._model, self._id, self._meta)
