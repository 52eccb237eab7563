"""Gemini ``generateContent``: ``POST {base_url}/models/{model}:generateContent``.

``base_url`` ends in ``/v1beta`` (generativelanguage.googleapis.com). A target with
``vertex`` is Gemini on Vertex AI: the same bodies at the publisher model's URL (``_vertex``),
with a google-auth token instead of an API key. Wire reference:
ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/troubleshooting,
the google.rpc error details (ErrorInfo, QuotaFailure, RetryInfo; ``_google``), and
google-genai's ``types.py``.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from ...model import REASONING_GEMINI as REASONING_SOURCE
from ...model import (
    Failure,
    ImagePart,
    Message,
    Request,
    Response,
    Target,
    TextPart,
    Tool,
    ToolChoice,
)
from ...transport import HttpRequest, HttpResponse
from .._base import StreamParser
from .._common import as_dict, decode_json, non_finite, tool_input, unreadable, with_query
from .._headers import read_meta
from .._vertex import model_url
from ._parse import REQUEST_ID_HEADERS, error, parse_generation
from ._stream import ChunkStream

__all__ = ["GeminiDialect"]

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
    reasoning_source: str = REASONING_SOURCE

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
        meta = read_meta(response.headers, request_id_headers=REQUEST_ID_HEADERS)
        data = decode_json(response.body)
        if (bad := non_finite(self.name, target, response, meta, data)) is not None:
            return bad
        if isinstance(data, list) and data:  # streamGenerateContent without alt=sse answers a list
            data = data[0]
        body = as_dict(data)
        if 200 <= response.status < 300:
            if "candidates" in body or "promptFeedback" in body or "usageMetadata" in body:
                return parse_generation(body, response.status, meta, target.key)
            if isinstance(body.get("error"), dict):
                return error(target, response, meta, body)
            return unreadable(self.name, target, response, meta, "a GenerateContentResponse")
        return error(target, response, meta, body)

    # ---------------------------------------------------------------- stream

    def stream_parser(self, target: Target, request: Request, headers: Mapping[str, str]) -> StreamParser:
        """For ``streamGenerateContent?alt=sse`` (what ``build(stream=True)`` asks for)."""
        del request  # the chunks say everything
        return ChunkStream(target, headers, read_meta(headers, request_id_headers=REQUEST_ID_HEADERS))

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
        meta = read_meta(response.headers, request_id_headers=REQUEST_ID_HEADERS)
        raw = decode_json(response.body)
        if (bad := non_finite(self.name, target, response, meta, raw)) is not None:
            return bad
        body = as_dict(raw)
        if 200 <= response.status < 300:
            tokens = body.get("totalTokens")
            # proto3 JSON leaves out a zero: a body without totalTokens is no count we can trust.
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
                return tokens
            if isinstance(body.get("error"), dict):
                return error(target, response, meta, body)
            return unreadable(self.name, target, response, meta, "a CountTokensResponse")
        return error(target, response, meta, body)


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


def _model_parts(message: Message, sentinel: bool) -> list[dict[str, Any]]:
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
    if not message.text and not message.tool_calls:
        return []  # the API rejects a content without parts; thinking alone answers nothing
    blocks = [r for r in message.reasoning if r.source == GeminiDialect.reasoning_source]
    parts: list[dict[str, Any]] = []
    for r in blocks:
        if r.text:
            thought: dict[str, Any] = {"text": r.text, "thought": True}
            if r.signature:
                thought["thoughtSignature"] = r.signature
            parts.append(thought)
    bare = [r.signature for r in blocks if not r.text and r.signature]
    calls: list[dict[str, Any]] = []
    for i, tc in enumerate(message.tool_calls):
        call: dict[str, Any] = {"functionCall": {"name": tc.name, "args": tool_input(tc)}}
        if i < len(bare):
            call["thoughtSignature"] = bare[i]
        elif sentinel and i == 0:
            call["thoughtSignature"] = _SKIP_SIGNATURE
        calls.append(call)
    rest = bare[len(calls) :]
    if message.text:
        text: dict[str, Any] = {"text": message.text}
        if rest:
            text["thoughtSignature"] = rest.pop(0)
        parts.append(text)
    parts.extend(calls)
    parts.extend({"text": "", "thoughtSignature": sig} for sig in rest)
    return parts


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"text": part.text}
    if part.is_data:
        media_type, data = part.data()
        return {"inlineData": {"mimeType": media_type, "data": data}}
    file_data: dict[str, Any] = {"fileUri": part.url}
    guessed, _ = mimetypes.guess_type(urlsplit(part.url).path)
    if guessed:  # optional in FileData; sent when the URL's extension says it
        file_data["mimeType"] = guessed
    return {"fileData": file_data}


def _declaration(tool: Tool) -> dict[str, Any]:
    # parametersJsonSchema takes standard JSON Schema (additionalProperties, $defs, anyOf);
    # the older "parameters" takes an OpenAPI subset that rejects common schemas.
    out: dict[str, Any] = {"name": tool.name, "parametersJsonSchema": dict(tool.parameters)}
    if tool.description:
        out["description"] = tool.description
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
