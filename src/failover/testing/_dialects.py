"""Render scripted replies as the bytes each real provider sends.

Every body, status and header here follows a real capture or the vendor's documentation
(see ``shared/wire/README.md`` for the corpus these shapes were checked against):

* OpenAI Chat Completions: ``chat.completion`` objects, ``chat.completion.chunk`` SSE with
  ``data: [DONE]``, the ``{"error": {message, type, param, code}}`` envelope, ``x-request-id``,
  ``retry-after`` / ``retry-after-ms`` and ``x-ratelimit-*`` headers.
* Anthropic Messages: ``message`` objects, the ``message_start ... message_stop`` event stream,
  the ``{"type": "error", "error": {type, message}, "request_id"}`` envelope, ``request-id``,
  ``x-should-retry``, ``retry-after`` and ``anthropic-ratelimit-*`` headers.
* AWS Bedrock Converse: in :mod:`._fake_bedrock` (bodies, AWS errors, and ConverseStream
  in the binary event-stream framing).
* Gemini generateContent: ``candidates`` / ``usageMetadata`` / ``modelVersion`` /
  ``responseId``, ``streamGenerateContent`` as SSE (``alt=sse``, CRLF framing, ``": "``
  spacing) or a JSON array, and the ``google.rpc.Status`` envelope with ``details``
  (``RetryInfo``, ``QuotaFailure``, ``ErrorInfo``).

Streams keep the real byte quirks: Anthropic pads its event JSON with spaces before the final
``}`` and sends ``{"type": "ping"}``; OpenAI's usage chunk has ``choices: []``; keep-alives
are ``: keep-alive`` comments (as DeepSeek sends while a request is queued), Anthropic's
are ``event: ping``. A reply delivered over time gets a :class:`~._stream.Timing`, and the
stream faults their extra events (an ``event: error``, a cut ``data:`` line) here.

This module is pure: no I/O, no clock other than the wall-clock ``created`` stamp OpenAI
bodies carry.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from typing import Any

from ..model import Dialect
from . import _fake_responses as _responses
from ._fake_embeddings import embed_answer, embed_model, embed_problem
from ._fake_vertex import check_vertex, vertex_error, vertex_route
from ._kinds import STREAM_FAULT_KINDS, ReplyKind
from ._parts import Answer as _Answer
from ._parts import Call as _Call
from ._parts import dumps as _dumps
from ._parts import in_turn as _in_turn
from ._parts import interleaved as _interleaved
from ._parts import pieces as _pieces
from ._parts import split_args as _split_args
from ._reply import Reply
from ._stream import Timing

__all__ = [
    "SPOKEN",
    "Endpoint",
    "Exchange",
    "Rendered",
    "check_request",
    "endpoint_for",
    "render",
    "render_unknown_path",
]

_JSON = "application/json"
_GEMINI_JSON = "application/json; charset=UTF-8"
_SSE = "text/event-stream; charset=utf-8"

# The dialects the fault kit speaks (answers, streams and errors in each one's own shape).
SPOKEN = frozenset({Dialect.OPENAI, Dialect.OPENAI_RESPONSES, Dialect.ANTHROPIC, Dialect.GEMINI, Dialect.BEDROCK})

_DEFAULT_WINDOW = {
    Dialect.OPENAI: 128_000,
    Dialect.OPENAI_RESPONSES: 400_000,
    Dialect.ANTHROPIC: 200_000,
    Dialect.GEMINI: 1_048_576,
    Dialect.BEDROCK: 200_000,
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What a request path asks for: ``generate`` (stream or not) or ``count_tokens``."""

    operation: str  # "generate" | "count_tokens" | "embed"
    stream_path: bool = False  # Gemini :streamGenerateContent, Bedrock /converse-stream, Vertex :streamRawPredict
    model: str | None = None  # Gemini, Bedrock and Vertex: the model named in the path
    vertex: bool = False  # a Vertex AI path (projects/.../publishers/.../models/...)


@dataclass(frozen=True, slots=True)
class Rendered:
    """A complete HTTP answer. ``chunks`` are the pieces a streaming answer is written in
    (one per event). With a ``timing``, the chunks are the events to deliver over time, by
    that schedule (``body`` is then their concatenation, without keep-alives)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    chunks: tuple[bytes, ...] = ()
    timing: Timing | None = None

    @property
    def streaming(self) -> bool:
        return bool(self.chunks)


@dataclass(slots=True, kw_only=True)
class Exchange:
    """What the renderer knows about the request being answered."""

    provider: str
    dialect: Dialect
    endpoint: Endpoint
    path: str
    method: str
    body: Mapping[str, Any]
    model: str  # the model to report
    request_id: str
    response_id: str
    sse: bool = False  # Gemini stream with alt=sse
    plain: bool = False  # answer with the JSON body even if a stream was asked for (Reply.plain)
    _input_tokens: int | None = field(default=None, repr=False)

    @property
    def stream(self) -> bool:
        if self.plain:
            return False
        if self.dialect in (Dialect.GEMINI, Dialect.BEDROCK):
            return self.endpoint.stream_path
        return self.body.get("stream") is True

    @property
    def input_tokens(self) -> int:
        """A rough count of the prompt: characters / 4, at least 1."""
        if self._input_tokens is None:
            self._input_tokens = max(1, math.ceil(_input_chars(self.dialect, self.body) / 4))
        return self._input_tokens


# -- routing -----------------------------------------------------------------------------------


def endpoint_for(dialect: Dialect, path: str) -> Endpoint | None:
    """The operation a path asks of a provider of ``dialect``; None when it is not an API path.

    Only the END of the path matters, so any prefix works (``/v1``, ``/openai/deployments/x``,
    ``/<provider>/v1``...). Gemini and Anthropic fakes also serve their Vertex AI paths.
    """
    embeds = embed_model(dialect, path)  # embeddings: testing/_fake_embeddings.py
    if embeds is not None:
        return Endpoint("embed", model=embeds or None, vertex=dialect is Dialect.GEMINI and path.endswith(":predict"))
    route = vertex_route(dialect, path) if dialect in (Dialect.GEMINI, Dialect.ANTHROPIC) else None
    if route is not None:
        return Endpoint(route[0], stream_path=route[1], model=route[2], vertex=True)
    if dialect is Dialect.OPENAI:
        return Endpoint("generate") if path.endswith("/chat/completions") else None
    if dialect is Dialect.OPENAI_RESPONSES:
        return Endpoint("generate") if path.endswith(_responses.PATH) else None
    if dialect is Dialect.BEDROCK:
        from ._fake_bedrock import bedrock_endpoint

        return bedrock_endpoint(path)
    if dialect is Dialect.ANTHROPIC:
        if path.endswith("/messages"):
            return Endpoint("generate")
        if path.endswith("/messages/count_tokens"):
            return Endpoint("count_tokens")
        return None
    slash = path.rfind("/models/")
    if slash < 0:
        return None
    model, sep, method = path[slash + 8 :].partition(":")
    if not sep or not model or "/" in model:
        return None
    if method == "generateContent":
        return Endpoint("generate", model=model)
    if method == "streamGenerateContent":
        return Endpoint("generate", stream_path=True, model=model)
    if method == "countTokens":
        return Endpoint("count_tokens", model=model)
    return None


def requested_model(dialect: Dialect, endpoint: Endpoint | None, body: Mapping[str, Any]) -> str | None:
    if dialect in (Dialect.GEMINI, Dialect.BEDROCK) or (endpoint is not None and endpoint.model is not None):
        return endpoint.model if endpoint is not None else None
    model = body.get("model")
    return model if isinstance(model, str) else None


def presented_key(dialect: Dialect, headers: Mapping[str, str], query: str) -> str | None:
    """The credential a request carries, where the dialect's clients put it."""
    bearer = headers.get("authorization", "")
    token = bearer[7:].strip() if bearer[:7].lower() == "bearer " else None
    if dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES):
        return token or headers.get("api-key")
    if dialect is Dialect.ANTHROPIC:
        return headers.get("x-api-key") or token
    if dialect is Dialect.BEDROCK:
        from ._fake_bedrock import presented_key_id

        return presented_key_id(headers)  # the access key id of the SigV4 signature
    if headers.get("x-goog-api-key"):
        return headers["x-goog-api-key"]
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "key" and value:
            return value
    return token


_NO_KEY = {
    Dialect.OPENAI: "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if "
    "you're accessing the API from your browser and are prompted for a username and password. You can obtain an "
    "API key from https://platform.openai.com/account/api-keys.",
    Dialect.ANTHROPIC: "x-api-key header is required",
    Dialect.GEMINI: "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API.",
}
_NO_KEY[Dialect.OPENAI_RESPONSES] = _NO_KEY[Dialect.OPENAI]  # the same API, the same words


def check_request(
    dialect: Dialect,
    endpoint: Endpoint,
    path: str,
    headers: Mapping[str, str],
    query: str,
    body: Mapping[str, Any],
    *,
    api_key: str | Callable[[str], bool] | None = None,
    secret_key: str | None = None,
    wire: tuple[str, str, bytes] | None = None,
) -> Reply | None:
    """The error the real API would send for a request it rejects before any model runs:
    a wrong or missing credential (only checked when ``api_key``, the key or a test of it, is
    given), or a required field missing. None when the request is acceptable. Bedrock:
    ``api_key`` is the access key id of the SigV4 signature; with ``secret_key`` and the
    request as received (``wire``: method, URL, body bytes) the signature itself is checked."""
    if endpoint.vertex:
        refused = check_vertex(dialect, endpoint.operation, headers, body, api_key=api_key)
        if refused is not None or endpoint.operation != "embed":
            return refused
    elif dialect is Dialect.BEDROCK:
        from ._fake_bedrock import check_bedrock, check_signature

        key_id = None if callable(api_key) else api_key  # SigV4 names a key id (FakeProvider insists on a string)
        if endpoint.operation != "embed":
            return check_bedrock(headers, body, api_key=key_id, secret_key=secret_key, wire=wire)
        refused = check_signature(headers, api_key=key_id, secret_key=secret_key, wire=wire)
        if refused is not None:
            return refused
    elif api_key is not None:
        key = presented_key(dialect, headers, query)
        if not key:
            return Reply.unauthorized(message=_NO_KEY[dialect])
        if not (api_key(key) if callable(api_key) else key == api_key):
            return Reply.unauthorized()
    if endpoint.operation == "embed":  # testing/_fake_embeddings.py
        problem = embed_problem(dialect, path, body)
        return Reply.invalid(problem) if problem is not None else None
    if dialect is Dialect.OPENAI:
        if not isinstance(body.get("model"), str) and "/deployments/" not in path:
            return Reply.invalid("you must provide a model parameter")
        messages = body.get("messages")
        if not isinstance(messages, list):
            return Reply.invalid("Missing required parameter: 'messages'.")
        if not messages:
            return Reply.invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead."
            )
        return None
    if dialect is Dialect.OPENAI_RESPONSES:
        return _responses.check(body)
    if dialect is Dialect.ANTHROPIC:
        if not headers.get("anthropic-version"):
            return Reply.invalid("anthropic-version: header is required")
        for name in ("model", "messages") + (("max_tokens",) if endpoint.operation == "generate" else ()):
            if name not in body:
                return Reply.invalid(f"{name}: Field required")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return Reply.invalid("messages: at least one message is required")
        return None
    if endpoint.operation == "generate" and not body.get("contents"):
        return Reply.invalid("* GenerateContentRequest.contents: contents is not specified\n")
    return None


# -- the entry point ---------------------------------------------------------------------------


def render(reply: Reply, ex: Exchange) -> Rendered:
    """The HTTP answer for ``reply`` in ``ex.dialect``. Only for replies that send one."""
    if ex.endpoint.operation == "count_tokens":
        return _count_tokens(ex)
    kind = reply.kind
    if kind is ReplyKind.ERROR_EVENT_AFTER and not ex.stream:
        # No event to put the error in: the plain error a non-streaming client would get.
        reply = Reply(kind=reply.cause or ReplyKind.OVERLOADED, message=reply.message)
        kind = reply.kind
    if ex.endpoint.operation == "embed" and reply.has_ok_body:  # errors: each dialect's own, below
        return _embeddings(reply, ex)
    if reply.has_ok_body:
        if reply.plain and ex.stream:
            ex = replace(ex, plain=True)
        answer = _answer(reply, ex)
        if ex.dialect is Dialect.OPENAI:
            rendered = _openai_ok(answer, ex)
        elif ex.dialect is Dialect.OPENAI_RESPONSES:
            rendered = _responses_ok(answer, ex)
        elif ex.dialect is Dialect.ANTHROPIC:
            rendered = _anthropic_ok(answer, ex)
        elif ex.dialect is Dialect.BEDROCK:
            from ._fake_bedrock import render_bedrock_ok

            rendered = render_bedrock_ok(answer, ex)
        else:
            rendered = _gemini_ok(answer, ex)
        return _timed(reply, rendered, ex) if reply.timed else rendered
    if not reply.is_http_answer:
        raise ValueError(f"a {kind.value} reply has no HTTP answer to render")
    if ex.endpoint.vertex and (google := vertex_error(reply, ex.path, ex.model, _wait_hint(reply))) is not None:
        return _json_answer(google[0], google[1], (), content_type=_GEMINI_JSON)
    if ex.dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES):  # one error envelope for both
        return _openai_error(reply, ex)
    if ex.dialect is Dialect.ANTHROPIC:
        return _anthropic_error(reply, ex)
    if ex.dialect is Dialect.BEDROCK:
        from ._fake_bedrock import render_bedrock_error

        return render_bedrock_error(reply, ex)
    return _gemini_error(reply, ex)


def _embeddings(reply: Reply, ex: Exchange) -> Rendered:
    """The 200 of an embeddings request (testing/_fake_embeddings.py)."""
    status, headers, body = embed_answer(
        ex.dialect, ex.path, ex.body, model=ex.model, request_id=ex.request_id, response_id=ex.response_id
    )
    rendered = Rendered(status, headers, body)
    return _timed(reply, rendered, ex) if reply.timed else rendered


def render_unknown_path(dialect: Dialect, method: str, path: str, request_id: str) -> Rendered:
    """The 404 each provider sends for a path it does not serve (Vertex's, Google's envelope)."""
    if dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES):
        body = _openai_envelope(f"Invalid URL ({method} {path})", "invalid_request_error", None, None)
        return _json_answer(404, body, (("x-request-id", request_id),))
    if dialect is Dialect.ANTHROPIC and "/publishers/" not in path:
        body = _anthropic_envelope("not_found_error", "Not Found", request_id)
        return _json_answer(404, body, (("request-id", request_id), ("x-should-retry", "false")))
    if dialect is Dialect.BEDROCK:
        from ._fake_bedrock import unknown_path

        return unknown_path(method, path, request_id)
    body = {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}
    return _json_answer(404, body, (), content_type=_GEMINI_JSON)


# -- what a 200 says, before it is put into a dialect ------------------------------------------


_MALFORMED_ARGS = '{"query": "weather in Par'


def _answer(reply: Reply, ex: Exchange) -> _Answer:
    kind = reply.kind
    name = ex.provider
    calls: list[_Call] = []
    text: str | None = None
    refusal: str | None = None
    stop = "end"
    forced = _forced_tool(ex.dialect, ex.body)

    if kind in (ReplyKind.OK, ReplyKind.DELAY, ReplyKind.SCHEMA_INVALID) or kind in STREAM_FAULT_KINDS:
        obj: Any = reply.json
        if kind is ReplyKind.SCHEMA_INVALID and obj is None:
            obj = {"wrong": 1}
        for i, tc in enumerate(reply.tool_calls):
            calls.append(_call(ex, i, tc.name, dict(tc.args)))
        if obj is not None:
            if forced is not None and not calls:
                calls.append(_call(ex, 0, forced[0], obj))
            else:
                text = json.dumps(obj, separators=(",", ":"))
        elif not calls:
            wants, schema = _structured(ex.dialect, ex.body)
            if forced is not None:
                calls.append(_call(ex, 0, forced[0], _example(forced[1], forced[1], f"ok from {name}")))
            elif wants:
                example = _example(schema, schema, f"ok from {name}") if schema else {"text": f"ok from {name}"}
                text = json.dumps(example, separators=(",", ":"))
        if reply.text is not None:
            text = reply.text
        elif text is None and not calls:
            text = f"ok from {name}"
        stop = "tool" if calls else "end"
    elif kind is ReplyKind.TRUNCATE:
        wants, _ = _structured(ex.dialect, ex.body)
        text = reply.text if reply.text is not None else ('{"' if wants else f"partial answer from {name}, cut")
        stop = "length"
    elif kind is ReplyKind.REFUSE:
        refusal = reply.text if reply.text is not None else "I'm sorry, but I can't assist with that."
        stop = "refusal"
    elif kind is ReplyKind.CONTENT_FILTER:
        stop = "filter"
    elif kind is ReplyKind.MALFORMED_TOOL_ARGS:
        tool = reply.tool_calls[0].name if reply.tool_calls else (forced[0] if forced else _first_tool(ex))
        raw = reply.arguments if reply.arguments is not None else _MALFORMED_ARGS
        calls.append(_Call(id=_call_id(ex, 0), name=tool, args=raw, text=raw, valid=False))
        stop = "malformed"

    reasoning = reply.reasoning if kind in _REASONING_KINDS else None
    thought = math.ceil(len(reasoning) / 4) if reasoning else 0
    if reply.usage is not None:
        input_tokens, output_tokens = reply.usage
    else:
        input_tokens = ex.input_tokens
        produced = len(text or "") + len(refusal or "") + sum(len(c.text) + len(c.name) for c in calls)
        output_tokens = max(1, math.ceil(produced / 4)) + thought
        if stop == "length":
            output_tokens = _max_tokens(ex.dialect, ex.body) or output_tokens
    answer = _Answer(text, calls, stop, refusal, input_tokens, output_tokens)
    if reasoning is not None:
        answer.reasoning = reasoning
        answer.reasoning_tokens = min(thought, output_tokens)
        answer.signature = _fake_signature(ex, "thinking")
    if reply.redacted_thinking and kind in _REASONING_KINDS:
        answer.redacted = _fake_signature(ex, "redacted")
    answer.interleave = reply.interleave
    return answer


# The replies whose answer may carry reasoning: those that answer like ``ok``, and ``truncate``
# (a reasoning model that spent its output budget thinking).
_REASONING_KINDS = frozenset({ReplyKind.OK, ReplyKind.DELAY, ReplyKind.TRUNCATE, *STREAM_FAULT_KINDS})


def _fake_signature(ex: Exchange, what: str) -> str:
    """An opaque token in the shape real ones have (base64), the same for the same response:
    what a model would need back to read its own reasoning in the next turn."""
    return base64.b64encode(f"failover-fake-{what}:{ex.provider}:{ex.response_id}".encode()).decode()


def _call(ex: Exchange, index: int, name: str, args: Any) -> _Call:
    return _Call(id=_call_id(ex, index), name=name, args=args, text=json.dumps(args, separators=(",", ":")))


def _call_id(ex: Exchange, index: int) -> str:
    prefix = {Dialect.ANTHROPIC: "toolu_", Dialect.BEDROCK: "tooluse_"}.get(ex.dialect, "call_")
    return f"{prefix}{ex.response_id.rsplit('_', 1)[-1].rsplit('-', 1)[-1]}{index}"


def _first_tool(ex: Exchange) -> str:
    tools = _tools(ex.dialect, ex.body)
    return tools[0][0] if tools else "lookup"


def _tools(dialect: Dialect, body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(name, parameter schema) of each declared tool."""
    out: list[tuple[str, Any]] = []
    tools = body.get("tools")
    if dialect is Dialect.BEDROCK:
        config = body.get("toolConfig")
        tools = config.get("tools") if isinstance(config, Mapping) else None
    if not isinstance(tools, list):
        return out
    if dialect is Dialect.OPENAI_RESPONSES:
        return _responses.tools(body)
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        if dialect is Dialect.OPENAI:
            fn = tool.get("function")
            if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                out.append((fn["name"], fn.get("parameters")))
        elif dialect is Dialect.ANTHROPIC:
            if isinstance(tool.get("name"), str):
                out.append((tool["name"], tool.get("input_schema")))
        elif dialect is Dialect.BEDROCK:
            spec = tool.get("toolSpec")
            if isinstance(spec, Mapping) and isinstance(spec.get("name"), str):
                schema = spec.get("inputSchema")
                out.append((spec["name"], schema.get("json") if isinstance(schema, Mapping) else None))
        else:
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or ():
                if isinstance(decl, Mapping) and isinstance(decl.get("name"), str):
                    out.append((decl["name"], decl.get("parametersJsonSchema") or decl.get("parameters")))
    return out


def _forced_tool(dialect: Dialect, body: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The tool the request forces the model to call (name, schema), if any."""
    if "tools" not in body and "toolConfig" not in body:
        return None
    tools = _tools(dialect, body)
    if not tools:
        return None
    wanted: str | None = None
    anyone = False
    if dialect is Dialect.OPENAI_RESPONSES:
        wanted, anyone = _responses.forced(body)
    elif dialect is Dialect.OPENAI:
        choice = body.get("tool_choice")
        if choice == "required":
            anyone = True
        elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
            wanted = choice["function"].get("name")
    elif dialect is Dialect.ANTHROPIC:
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping):
            if choice.get("type") == "tool":
                wanted = choice.get("name")
            elif choice.get("type") == "any":
                anyone = True
    elif dialect is Dialect.BEDROCK:
        config = body.get("toolConfig")
        choice = config.get("toolChoice") if isinstance(config, Mapping) else None
        if isinstance(choice, Mapping):
            if isinstance(choice.get("tool"), Mapping):
                wanted = choice["tool"].get("name")
            elif "any" in choice:
                anyone = True
    else:
        config = body.get("toolConfig") or body.get("tool_config")
        fcc = config.get("functionCallingConfig") if isinstance(config, Mapping) else None
        if isinstance(fcc, Mapping) and str(fcc.get("mode", "")).upper() == "ANY":
            allowed = fcc.get("allowedFunctionNames")
            if isinstance(allowed, list) and allowed:
                wanted = allowed[0]
            else:
                anyone = True
    if wanted is not None:
        for tool in tools:
            if tool[0] == wanted:
                return tool
        return (wanted, None)
    return tools[0] if anyone else None


def _structured(dialect: Dialect, body: Mapping[str, Any]) -> tuple[bool, Any]:
    """(wants JSON, the schema if one was given)."""
    if dialect is Dialect.OPENAI_RESPONSES:
        return _responses.structured(body)
    if dialect is Dialect.OPENAI:
        rf = body.get("response_format")
        if isinstance(rf, Mapping):
            if rf.get("type") == "json_schema":
                js = rf.get("json_schema")
                return True, js.get("schema") if isinstance(js, Mapping) else None
            if rf.get("type") == "json_object":
                return True, None
        return False, None
    if dialect is Dialect.ANTHROPIC:
        fmt = body.get("output_format")
        config = body.get("output_config")
        if fmt is None and isinstance(config, Mapping):
            fmt = config.get("format")
        if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
            return True, fmt.get("schema")
        return False, None
    if dialect is Dialect.BEDROCK:
        return False, None  # structured output is a forced tool there (see _forced_tool)
    gc = body.get("generationConfig") or body.get("generation_config")
    if not isinstance(gc, Mapping):
        return False, None
    schema = gc.get("responseJsonSchema") or gc.get("response_json_schema") or gc.get("responseSchema")
    wants = schema is not None or gc.get("responseMimeType") == "application/json"
    return wants, schema


def _max_tokens(dialect: Dialect, body: Mapping[str, Any]) -> int | None:
    if dialect is Dialect.GEMINI:
        gc = body.get("generationConfig")
        value = gc.get("maxOutputTokens") if isinstance(gc, Mapping) else None
    elif dialect is Dialect.OPENAI_RESPONSES:
        value = _responses.max_tokens(body)
    elif dialect is Dialect.OPENAI:
        value = body.get("max_completion_tokens", body.get("max_tokens"))
    elif dialect is Dialect.BEDROCK:
        config = body.get("inferenceConfig")
        value = config.get("maxTokens") if isinstance(config, Mapping) else None
    else:
        value = body.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


EXAMPLE_MAX_DEPTH = 12  # nesting (and $ref hops) followed before a plain string stands in
EXAMPLE_MAX_ITEMS = 100  # minItems / minProperties / minLength honoured up to this
EXAMPLE_MAX_VALUES = 2000  # values in one example in all: a hostile schema cannot make it large


def _example(schema: Any, root: Any, text: str, depth: int = 0, budget: list[int] | None = None) -> Any:
    """A small value that satisfies ``schema`` (JSON Schema, or Gemini's OpenAPI subset).

    Bounded whatever the schema asks: at most :data:`EXAMPLE_MAX_VALUES` values, nesting
    :data:`EXAMPLE_MAX_DEPTH`, and ``minItems`` / ``minProperties`` / ``minLength`` honoured up to
    :data:`EXAMPLE_MAX_ITEMS` (beyond that the example is too short: still an answer)."""
    left = budget if budget is not None else [EXAMPLE_MAX_VALUES]
    left[0] -= 1
    if depth > EXAMPLE_MAX_DEPTH or left[0] <= 0 or not isinstance(schema, Mapping):
        return text
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        return _example(target, root, text, depth + 1, left)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            chosen = next((o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")), options[0])
            return _example(chosen, root, text, depth + 1, left)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = kind.lower() if isinstance(kind, str) else ("object" if "properties" in schema else "string")
    if kind == "object":
        props = schema.get("properties")
        out: dict[str, Any] = {}
        for k, v in props.items() if isinstance(props, Mapping) else ():
            if left[0] <= 0:
                break
            out[k] = _example(v, root, text, depth + 1, left)
        extra = min(_count(schema.get("minProperties")), EXAMPLE_MAX_ITEMS)
        i = 0
        while len(out) < extra and left[0] > 0:
            left[0] -= 1
            out.setdefault(f"p{i}", text)
            i += 1
        return out
    if kind == "array":
        count = min(_count(schema.get("minItems")), EXAMPLE_MAX_ITEMS)
        items: list[Any] = []
        while len(items) < count and left[0] > 0:
            items.append(_example(schema.get("items"), root, text, depth + 1, left))
        return items
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        low = low if isinstance(low, int | float) and not isinstance(low, bool) else 0
        value = low + (1 if "exclusiveMinimum" in schema else 0)
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    short = min(_count(schema.get("minLength")), EXAMPLE_MAX_ITEMS)
    return text if len(text) >= short else text + "." * (short - len(text))


def _count(value: Any) -> int:
    """A schema's minimum count (minItems, ...) as a non-negative int (JSON may say 1e8)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return int(min(max(value, 0), 1 << 30))


def _input_chars(dialect: Dialect, body: Mapping[str, Any]) -> int:
    if dialect is Dialect.OPENAI:
        return _chars(body.get("messages"))
    if dialect is Dialect.OPENAI_RESPONSES:
        return _chars(_responses.input_text(body))
    if dialect in (Dialect.ANTHROPIC, Dialect.BEDROCK):
        return _chars(body.get("system")) + _chars(body.get("messages"))
    inner = body.get("generateContentRequest")  # countTokens may wrap the whole request
    if isinstance(inner, Mapping):
        body = inner
    return _chars(body.get("contents")) + _chars(body.get("systemInstruction") or body.get("system_instruction"))


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_chars(v) for k, v in value.items() if k not in ("role", "type"))
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 0


def _num(value: float) -> str:
    """``2`` for 2.0, ``0.5`` for 0.5: how the header value is written."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _json_answer(
    status: int, body: Any, headers: tuple[tuple[str, str], ...], *, content_type: str = _JSON
) -> Rendered:
    return Rendered(status, (("content-type", content_type), *headers), _dumps(body))


def _retry_headers(reply: Reply) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    if reply.retry_after is not None:
        out.append(("retry-after", _num(reply.retry_after)))
    if reply.retry_after_ms is not None:
        out.append(("retry-after-ms", _num(reply.retry_after_ms)))
    if reply.retry_after_date is not None:
        # an absolute time, read against the response's own date (RFC 9110 10.2.3): both whole
        # seconds of the same wall clock, so the wait survives clock skew and virtual time
        now = math.floor(time.time())
        out.append(("date", formatdate(now, usegmt=True)))
        out.append(("retry-after", formatdate(now + math.ceil(reply.retry_after_date), usegmt=True)))
    return tuple(out)


def _wait_hint(reply: Reply) -> float | None:
    if reply.retry_after_ms is not None:
        return reply.retry_after_ms / 1000
    if reply.retry_after is None and reply.retry_after_date is not None:
        return reply.retry_after_date
    return reply.retry_after


def _overflow_numbers(reply: Reply, ex: Exchange) -> tuple[int, int]:
    limit = reply.limit if reply.limit is not None else _DEFAULT_WINDOW[ex.dialect]
    tokens = reply.prompt_tokens if reply.prompt_tokens is not None else max(ex.input_tokens, limit + 1)
    return tokens, limit


# -- OpenAI Chat Completions -------------------------------------------------------------------

_OPENAI_FINISH = {
    "end": "stop",
    "tool": "tool_calls",
    "length": "length",
    "refusal": "stop",
    "filter": "content_filter",
    "malformed": "tool_calls",
}


def _openai_usage(a: _Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": a.input_tokens,
        "completion_tokens": a.output_tokens,
        "total_tokens": a.input_tokens + a.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": a.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _openai_headers(ex: Exchange) -> tuple[tuple[str, str], ...]:
    return (
        ("x-request-id", ex.request_id),
        ("openai-version", "2020-10-01"),
        ("openai-processing-ms", "1"),
    )


def _openai_ok(a: _Answer, ex: Exchange) -> Rendered:
    created = int(time.time())
    finish = _OPENAI_FINISH[a.stop]
    choice = ex.body.get("tool_choice")
    if a.stop == "tool" and isinstance(choice, Mapping) and choice.get("type") == "function":
        finish = "stop"  # a named tool_choice ends with "stop", as the real API does
    if ex.stream:
        return _openai_stream(a, ex, created, finish)
    message: dict[str, Any] = {"role": "assistant", "content": a.text, "refusal": a.refusal, "annotations": []}
    if a.reasoning is not None:
        message["reasoning_content"] = a.reasoning  # DeepSeek's field, beside the answer
    if a.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.text}} for c in a.calls
        ]
    body = {
        "id": ex.response_id,
        "object": "chat.completion",
        "created": created,
        "model": ex.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": _openai_usage(a),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    return _json_answer(200, body, _openai_headers(ex))


def _openai_stream(a: _Answer, ex: Exchange, created: int, finish: str) -> Rendered:
    options = ex.body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    head = {"id": ex.response_id, "object": "chat.completion.chunk", "created": created, "model": ex.model}
    head["system_fingerprint"] = "fp_fake"

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        obj: dict[str, Any] = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            obj["usage"] = None
        return b"data: " + _dumps(obj) + b"\n\n"

    first: dict[str, Any] = {"role": "assistant", "content": "" if a.refusal is None else None, "refusal": None}
    if a.refusal is not None:
        first["refusal"] = ""
    chunks = [chunk(first)]
    for piece in _pieces(a.reasoning) if a.reasoning else ():
        # DeepSeek's shape: the reasoning deltas come first, with a null content
        chunks.append(chunk({"content": None, "reasoning_content": piece}))
    for piece in _pieces(a.text) if a.text else ():
        chunks.append(chunk({"content": piece}))
    for piece in _pieces(a.refusal) if a.refusal else ():
        chunks.append(chunk({"refusal": piece}))
    calls: list[list[dict[str, Any]]] = []
    for i, c in enumerate(a.calls):
        start = {"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        calls.append([start, *({"index": i, "function": {"arguments": p}} for p in _split_args(c.text))])
    chunks.extend(chunk({"tool_calls": [d]}) for d in (_interleaved(calls) if a.interleave else _in_turn(calls)))
    chunks.append(chunk({}, finish))
    if include_usage:
        chunks.append(b"data: " + _dumps({**head, "choices": [], "usage": _openai_usage(a)}) + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return _stream_answer(chunks, (("content-type", _SSE), *_openai_headers(ex)))


def _openai_envelope(message: str, type_: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _openai_error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    headers = _openai_headers(ex)
    model = ex.model
    if kind is ReplyKind.RATE_LIMIT:
        wait = _wait_hint(reply)
        again = f" Please try again in {_num(wait)}s." if wait is not None else ""
        message = reply.message or (
            f"Rate limit reached for {model} in organization org-fake on requests per min (RPM): "
            f"Limit 60, Used 60, Requested 1.{again} "
            "Visit https://platform.openai.com/account/rate-limits to learn more."
        )
        reset = f"{_num(wait)}s" if wait is not None else "1s"
        headers = (
            *headers,
            *_retry_headers(reply),
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", reset),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "149000"),
            ("x-ratelimit-reset-tokens", "400ms"),
        )
        return _json_answer(429, _openai_envelope(message, "requests", None, "rate_limit_exceeded"), headers)
    if kind is ReplyKind.QUOTA:
        message = reply.message or (
            "You exceeded your current quota, please check your plan and billing details. For more information "
            "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
        )
        return _json_answer(429, _openai_envelope(message, "insufficient_quota", None, "insufficient_quota"), headers)
    if kind is ReplyKind.OVERLOADED:
        message = reply.message or "The requested model is temporarily overloaded."
        body = _openai_envelope(message, "service_unavailable_error", None, "server_is_overloaded")
        return _json_answer(503, body, (*headers, *_retry_headers(reply)))
    if kind is ReplyKind.SERVER_ERROR:
        message = reply.message or (
            "The server had an error processing your request. Sorry about that! You can retry your request, "
            "or contact us through our help center at help.openai.com if you keep seeing this error. "
            f"(Please include the request ID {ex.request_id} in your email.)"
        )
        return _json_answer(500, _openai_envelope(message, "server_error", None, None), headers)
    if kind is ReplyKind.UNAUTHORIZED:
        message = reply.message or (
            "Incorrect API key provided: sk-fake****. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        code = None if reply.message == _NO_KEY[Dialect.OPENAI] else "invalid_api_key"
        body = _openai_envelope(message, "invalid_request_error", None, code)
        return _json_answer(401, body, (*headers, ("www-authenticate", 'Bearer realm="OpenAI API"')))
    if kind is ReplyKind.NOT_FOUND:
        message = reply.message or f"The model `{model}` does not exist or you do not have access to it."
        return _json_answer(404, _openai_envelope(message, "invalid_request_error", None, "model_not_found"), headers)
    if kind is ReplyKind.CONTEXT_OVERFLOW and ex.dialect is Dialect.OPENAI_RESPONSES:
        message = reply.message or _responses.overflow_message()
        body = _openai_envelope(message, "invalid_request_error", "input", "context_length_exceeded")
        return _json_answer(400, body, headers)
    if kind is ReplyKind.CONTEXT_OVERFLOW:
        tokens, limit = _overflow_numbers(reply, ex)
        message = reply.message or (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
            f"{tokens} tokens. Please reduce the length of the messages."
        )
        body = _openai_envelope(message, "invalid_request_error", "messages", "context_length_exceeded")
        return _json_answer(400, body, headers)
    # INVALID
    message = reply.message or "Invalid value for 'temperature': expected a number between 0 and 2."
    return _json_answer(400, _openai_envelope(message, "invalid_request_error", None, None), headers)


# -- OpenAI Responses (its shapes: _fake_responses) ---------------------------------------------


def _responses_ok(a: _Answer, ex: Exchange) -> Rendered:
    stamp = _responses.Stamp(ex.model, ex.response_id, int(time.time()))
    if ex.stream:
        chunks = _responses.stream_events(a, ex.body, stamp)
        return _stream_answer(chunks, (("content-type", _SSE), *_openai_headers(ex)))
    return _json_answer(200, _responses.response_body(a, ex.body, stamp), _openai_headers(ex))


# -- Anthropic Messages ------------------------------------------------------------------------

_ANTHROPIC_STOP = {
    "end": "end_turn",
    "tool": "tool_use",
    "length": "max_tokens",
    "refusal": "refusal",
    "filter": "refusal",
    "malformed": "tool_use",
}


def _anthropic_headers(ex: Exchange) -> tuple[tuple[str, str], ...]:
    return (("request-id", ex.request_id),)


def _anthropic_content(a: _Answer) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if a.reasoning is not None:
        content.append({"type": "thinking", "thinking": a.reasoning, "signature": a.signature})
    if a.redacted is not None:
        content.append({"type": "redacted_thinking", "data": a.redacted})
    if a.text is not None:
        content.append({"type": "text", "text": a.text})
    for c in a.calls:
        content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args})
    return content


def _anthropic_stop_details(a: _Answer) -> dict[str, Any] | None:
    if a.stop == "refusal":
        return {
            "type": "refusal",
            "category": "cyber",
            "explanation": a.refusal or "This request was refused due to policy.",
        }
    if a.stop == "filter":
        return {"type": "refusal", "category": "cyber", "explanation": "This request triggered content filtering."}
    return None


def _anthropic_ok(a: _Answer, ex: Exchange) -> Rendered:
    if ex.stream:
        return _anthropic_stream(a, ex)
    body: dict[str, Any] = {
        "model": ex.model,
        "id": ex.response_id,
        "type": "message",
        "role": "assistant",
        "content": _anthropic_content(a),
        "stop_reason": _ANTHROPIC_STOP[a.stop],
        "stop_sequence": None,
        "usage": {
            "input_tokens": a.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": a.output_tokens,
            "service_tier": "standard",
        },
    }
    details = _anthropic_stop_details(a)
    if details is not None:
        body["stop_details"] = details
    return _json_answer(200, body, _anthropic_headers(ex))


# Real Anthropic streams pad the JSON of most events with spaces before the final "}"; these
# are the widths of a 2026 capture (shared/wire anthropic/02). Pings read {"type": "ping"}.
_ANTHROPIC_PAD = {
    "message_start": 5,
    "content_block_start": 2,
    "content_block_delta": 4,
    "content_block_stop": 4,
    "message_delta": 11,
}
_ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def _anthropic_stream(a: _Answer, ex: Exchange) -> Rendered:
    def event(name: str, data: Mapping[str, Any]) -> bytes:
        if name == "ping":
            return _ANTHROPIC_PING
        body = _dumps(data)
        pad = _ANTHROPIC_PAD.get(name, 0)
        if pad:
            body = body[:-1] + b" " * pad + b"}"
        return b"event: " + name.encode() + b"\ndata: " + body + b"\n\n"

    start = {
        "type": "message_start",
        "message": {
            "model": ex.model,
            "id": ex.response_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": a.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 1,
                "service_tier": "standard",
            },
        },
    }
    chunks = [event("message_start", start)]
    index = 0

    def block(content_block: dict[str, Any], deltas: Sequence[dict[str, Any]]) -> None:
        nonlocal index
        start = {"type": "content_block_start", "index": index, "content_block": content_block}
        chunks.append(event("content_block_start", start))
        if index == 0 and content_block["type"] != "tool_use":
            chunks.append(event("ping", {"type": "ping"}))  # where the real API sends it: after the first start
        for delta in deltas:
            body = {"type": "content_block_delta", "index": index, "delta": delta}
            chunks.append(event("content_block_delta", body))
        chunks.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if a.reasoning is not None:
        thinking = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(a.reasoning) if piece]
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [*thinking, {"type": "signature_delta", "signature": a.signature}],
        )
    if a.redacted is not None:
        block({"type": "redacted_thinking", "data": a.redacted}, ())  # arrives whole, no deltas
    if a.text is not None or a.stop in ("refusal", "filter"):
        text = [{"type": "text_delta", "text": piece} for piece in _pieces(a.text)] if a.text else []
        block({"type": "text", "text": ""}, text)
    for c in a.calls:
        block(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": piece} for piece in ["", *_split_args(c.text)]],
        )
    delta_body: dict[str, Any] = {"stop_reason": _ANTHROPIC_STOP[a.stop], "stop_sequence": None}
    details = _anthropic_stop_details(a)
    if details is not None:
        delta_body["stop_details"] = details
    chunks.append(
        event(
            "message_delta", {"type": "message_delta", "delta": delta_body, "usage": {"output_tokens": a.output_tokens}}
        )
    )
    chunks.append(event("message_stop", {"type": "message_stop"}))
    return _stream_answer(chunks, (("content-type", _SSE), *_anthropic_headers(ex)))


def _anthropic_envelope(type_: str, message: str, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": request_id}


def _anthropic_error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    retry = "true"
    extra: tuple[tuple[str, str], ...] = ()
    if kind is ReplyKind.RATE_LIMIT:
        status, type_ = 429, "rate_limit_error"
        message = reply.message or (
            "This request would exceed the rate limit for your organization (org-fake) of 50 requests per "
            "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response "
            "headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try "
            "again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your "
            "options for a rate limit increase."
        )
        extra = (
            *_retry_headers(reply),
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-input-tokens-limit", "30000"),
            ("anthropic-ratelimit-input-tokens-remaining", "30000"),
            ("anthropic-ratelimit-output-tokens-limit", "8000"),
            ("anthropic-ratelimit-output-tokens-remaining", "8000"),
        )
    elif kind is ReplyKind.QUOTA:
        status, type_, retry = 400, "invalid_request_error", "false"
        message = reply.message or (
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits."
        )
    elif kind is ReplyKind.OVERLOADED:
        status, type_ = 529, "overloaded_error"
        message = reply.message or "Overloaded"
        extra = _retry_headers(reply)
    elif kind is ReplyKind.SERVER_ERROR:
        status, type_ = 500, "api_error"
        message = reply.message or "Internal server error"
    elif kind is ReplyKind.UNAUTHORIZED:
        status, type_, retry = 401, "authentication_error", "false"
        message = reply.message or "invalid x-api-key"
    elif kind is ReplyKind.NOT_FOUND:
        status, type_, retry = 404, "not_found_error", "false"
        message = reply.message or f"model: {ex.model}"
    elif kind is ReplyKind.CONTEXT_OVERFLOW:
        status, type_, retry = 400, "invalid_request_error", "false"
        tokens, limit = _overflow_numbers(reply, ex)
        message = reply.message or f"prompt is too long: {tokens} tokens > {limit} maximum"
    else:  # INVALID
        status, type_, retry = 400, "invalid_request_error", "false"
        message = reply.message or "messages.0.content: text content blocks must be non-empty"
    headers = (*_anthropic_headers(ex), ("x-should-retry", retry), *extra)
    return _json_answer(status, _anthropic_envelope(type_, message, ex.request_id), headers)


# -- Gemini generateContent --------------------------------------------------------------------

_GEMINI_FINISH = {
    "end": "STOP",
    "tool": "STOP",
    "length": "MAX_TOKENS",
    "refusal": "SAFETY",
    "malformed": "MALFORMED_FUNCTION_CALL",
}

_SAFETY_RATINGS = [
    {"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True},
]


def _gemini_usage(a: _Answer, *, output: bool = True) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": a.input_tokens}
    if output:
        usage["candidatesTokenCount"] = a.output_tokens - a.reasoning_tokens  # thoughts are counted apart
    usage["totalTokenCount"] = a.input_tokens + (a.output_tokens if output else 0)
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": a.input_tokens}]
    if output and a.reasoning_tokens:
        usage["thoughtsTokenCount"] = a.reasoning_tokens
    return usage


def _gemini_parts(a: _Answer, text: str | None, calls: Sequence[_Call], *, signed: bool) -> list[dict[str, Any]]:
    """The answer's parts: ``text``, then ``calls``. ``signed``: these are the last parts of
    the answer, so the thought signature goes on the first function call, else on the text
    (an empty text part when there is neither), as Gemini sends it."""
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    parts.extend({"functionCall": {"name": c.name, "args": c.args}} for c in calls)
    if signed and a.reasoning is not None:
        if not parts:
            parts.append({"text": ""})
        carrier = next((part for part in parts if "functionCall" in part), parts[-1])
        carrier["thoughtSignature"] = a.signature
    return parts


def _gemini_thought(text: str) -> dict[str, Any]:
    return {"text": text, "thought": True}


def _gemini_candidate(a: _Answer, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    if a.stop == "refusal":
        return {"finishReason": "SAFETY", "index": 0, "safetyRatings": _SAFETY_RATINGS}
    if a.stop == "malformed":
        call = a.calls[0]
        return {
            "content": {},
            "finishReason": "MALFORMED_FUNCTION_CALL",
            "index": 0,
            "finishMessage": f"Malformed function call: print(default_api.{call.name}({call.text}",
        }
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    return candidate


def _gemini_ok(a: _Answer, ex: Exchange) -> Rendered:
    if a.stop == "filter":
        body: dict[str, Any] = {
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": _gemini_usage(a, output=False),
            "modelVersion": ex.model,
            "responseId": ex.response_id,
        }
        chunks = [body]
    elif ex.stream and a.stop not in ("refusal", "malformed"):
        pieces = _pieces(a.text) if a.text else []
        chunks = [
            {"candidates": [_gemini_candidate(a, [_gemini_thought(piece)], None)]}
            for piece in (_pieces(a.reasoning) if a.reasoning else ())
        ]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1 and not a.calls
            parts = _gemini_parts(a, piece, (), signed=last)
            chunk: dict[str, Any] = {
                "candidates": [_gemini_candidate(a, parts, _GEMINI_FINISH[a.stop] if last else None)]
            }
            chunks.append(chunk)
        if a.calls or not pieces:
            parts = _gemini_parts(a, None, a.calls, signed=True)
            chunks.append({"candidates": [_gemini_candidate(a, parts, _GEMINI_FINISH[a.stop])]})
        for chunk in chunks:
            chunk["modelVersion"] = ex.model
            chunk["responseId"] = ex.response_id
        chunks[-1]["usageMetadata"] = _gemini_usage(a)
    else:
        thought = [_gemini_thought(a.reasoning)] if a.reasoning else []
        parts = [*thought, *_gemini_parts(a, a.text, a.calls, signed=True)]
        body = {
            "candidates": [_gemini_candidate(a, parts, _GEMINI_FINISH[a.stop])],
            "usageMetadata": _gemini_usage(a),
            "modelVersion": ex.model,
            "responseId": ex.response_id,
        }
        chunks = [body]
    if not ex.stream:
        return _json_answer(200, chunks[0], (), content_type=_GEMINI_JSON)
    if ex.sse:
        return _stream_answer([_gemini_sse(c) for c in chunks], (("content-type", _SSE),))
    # Without alt=sse the stream is one JSON array, written an element at a time.
    elements = [(b"[" if i == 0 else b",\r\n") + _gemini_dumps(c) for i, c in enumerate(chunks)]
    elements[-1] += b"]"
    return _stream_answer(elements, (("content-type", _GEMINI_JSON),))


def _gemini_dumps(obj: Any) -> bytes:
    """Gemini's stream spacing: ``{"candidates": [{"content": ...},"index": 0}]}``."""
    return json.dumps(obj, separators=(",", ": "), ensure_ascii=False).encode()


def _gemini_sse(obj: Any) -> bytes:
    return b"data: " + _gemini_dumps(obj) + b"\r\n\r\n"


def _gemini_error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    details: list[dict[str, Any]] = []
    model = ex.model
    if kind in (ReplyKind.RATE_LIMIT, ReplyKind.QUOTA):
        status, code = 429, "RESOURCE_EXHAUSTED"
        wait = _wait_hint(reply) if kind is ReplyKind.RATE_LIMIT else None
        if kind is ReplyKind.RATE_LIMIT:
            metric, quota_id, limit = (
                "generate_content_paid_tier_requests",
                "GenerateRequestsPerMinutePerProjectPerModel",
                1000,
            )
        else:
            metric, quota_id, limit = (
                "generate_content_free_tier_requests",
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                250,
            )
        again = f"\nPlease retry in {_num(wait)}s." if wait is not None else ""
        message = reply.message or (
            "You exceeded your current quota, please check your plan and billing details. For more information "
            "on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current "
            f"usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: "
            f"generativelanguage.googleapis.com/{metric}, limit: {limit}, model: {model}{again}"
        )
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [
                    {
                        "description": "Learn more about Gemini API quotas",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                    }
                ],
            },
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": f"generativelanguage.googleapis.com/{metric}",
                        "quotaId": quota_id,
                        "quotaDimensions": {"model": model, "location": "global"},
                        "quotaValue": str(limit),
                    }
                ],
            },
        ]
        if wait is not None:
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{_num(wait)}s"})
    elif kind is ReplyKind.OVERLOADED:
        status, code = 503, "UNAVAILABLE"
        message = reply.message or "The model is overloaded. Please try again later."
    elif kind is ReplyKind.SERVER_ERROR:
        status, code = 500, "INTERNAL"
        message = reply.message or (
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting"
        )
    elif kind is ReplyKind.UNAUTHORIZED:
        status, code = 400, "INVALID_ARGUMENT"
        message = reply.message or "API key not valid. Please pass a valid API key."
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": message},
        ]
    elif kind is ReplyKind.NOT_FOUND:
        status, code = 404, "NOT_FOUND"
        message = reply.message or (
            f"models/{model} is not found for API version v1beta, or is not supported for generateContent. "
            "Call ListModels to see the list of available models and their supported methods."
        )
    elif kind is ReplyKind.CONTEXT_OVERFLOW:
        status, code = 400, "INVALID_ARGUMENT"
        tokens, limit = _overflow_numbers(reply, ex)
        message = reply.message or (
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit})."
        )
    else:  # INVALID
        status, code = 400, "INVALID_ARGUMENT"
        message = reply.message or "* GenerationConfig.temperature: must be between 0 and 2\n"
    error: dict[str, Any] = {"code": status, "message": message, "status": code}
    if details:
        error["details"] = details
    return _json_answer(status, {"error": error}, (), content_type=_GEMINI_JSON)


# -- token counting endpoints ------------------------------------------------------------------


def _count_tokens(ex: Exchange) -> Rendered:
    if ex.dialect is Dialect.ANTHROPIC:
        return _json_answer(200, {"input_tokens": ex.input_tokens}, _anthropic_headers(ex))
    body = {
        "totalTokens": ex.input_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": ex.input_tokens}],
    }
    return _json_answer(200, body, (), content_type=_GEMINI_JSON)


def _stream_answer(chunks: Sequence[bytes], headers: tuple[tuple[str, str], ...]) -> Rendered:
    return Rendered(200, headers, b"".join(chunks), tuple(chunks))


# -- answers delivered over time, and stream faults ---------------------------------------------


def _timed(reply: Reply, rendered: Rendered, ex: Exchange) -> Rendered:
    """``rendered`` with the Timing (and the extra or altered events) ``reply`` scripts.

    The events are the stream's chunks, or the whole body as one event when the request did
    not ask for a stream. The first event goes out with the headers, each later one
    ``chunk_interval`` after the previous. A fault's ``after`` is capped at the number of
    events before the last, so the fault always comes before the stream's end.
    """
    events = list(rendered.chunks) if rendered.chunks else [rendered.body]
    sse = rendered.chunks != () and _is_sse(ex)
    gaps: list[float | None] = [0.0]
    gaps.extend([reply.chunk_interval] * (len(events) - 1))
    tail: float | None = 0.0
    drop = False
    kind = reply.kind
    n = min(reply.after or 0, len(events) - 1)
    if kind in (ReplyKind.STALL_BEFORE_FIRST, ReplyKind.HEARTBEATS_ONLY):
        gaps[0] = reply.seconds
    elif kind is ReplyKind.STALL_AFTER:
        gaps[n] = reply.seconds
    elif kind is ReplyKind.DROP_AFTER:
        tail = gaps[n]  # the connection closes when event n was due
        events, gaps, drop = events[:n], gaps[:n], True
    elif kind is ReplyKind.MALFORMED_AFTER:
        i = n
        while i < len(events) - 1 and events[i] == _ANTHROPIC_PING:
            i += 1  # clients drop pings unread: corrupt an event they parse
        if rendered.chunks and ex.dialect is Dialect.BEDROCK:
            from ._fake_bedrock import malformed_frame

            events[i] = malformed_frame(events[i])
        else:
            events[i] = _malformed(events[i])
    elif kind is ReplyKind.ERROR_EVENT_AFTER:
        events, gaps = [*events[:n], _error_event(reply, ex, first=n == 0, at=n)], gaps[: n + 1]
    timing = Timing(
        gaps=tuple(gaps),
        tail=tail,
        drop=drop,
        # Bedrock's event stream has no keep-alive: a byte between frames would break the framing
        heartbeat=_heartbeat(ex.dialect) if sse else b"" if ex.dialect is Dialect.BEDROCK and ex.stream else b"\n",
        heartbeat_interval=reply.heartbeat_interval,
        split_bytes=reply.split_bytes,
    )
    return replace(rendered, body=b"".join(events), chunks=tuple(events), timing=timing)


def _is_sse(ex: Exchange) -> bool:
    if ex.dialect is Dialect.BEDROCK:
        return False  # application/vnd.amazon.eventstream
    return ex.stream and (ex.dialect is not Dialect.GEMINI or ex.sse)


def _heartbeat(dialect: Dialect) -> bytes:
    """A keep-alive: Anthropic's ``ping`` event, else the ``: keep-alive`` comment DeepSeek
    sends while a request waits (Gemini framing: CRLF). A body that is not SSE (a JSON answer,
    Gemini's JSON array) gets blank lines instead, as DeepSeek sends before a JSON answer."""
    if dialect is Dialect.ANTHROPIC:
        return _ANTHROPIC_PING
    if dialect is Dialect.GEMINI:
        return b": keep-alive\r\n\r\n"
    return b": keep-alive\n\n"


def _malformed(event: bytes) -> bytes:
    """``event`` with its JSON cut in half: the ``data:`` line of an SSE event, else the text."""
    text = event.decode()
    start = text.find("data: ")
    if start < 0:
        return text[: max(1, len(text) // 2)].encode()
    start += 6
    newline = text.find("\n", start)
    end = len(text) if newline < 0 else newline
    if end > start and text[end - 1] == "\r":
        end -= 1
    payload = text[start:end]
    return (text[:start] + payload[: max(1, len(payload) // 2)] + text[end:]).encode()


# A mid-stream error per cause, as each dialect documents it: OpenAI's error codes
# (platform docs, "Error codes"), Anthropic's error types ("Errors"; in a stream an
# ``event: error``), Gemini's google.rpc codes ("Troubleshooting": 429, 500, 503).
_OPENAI_STREAM_ERRORS = {
    ReplyKind.OVERLOADED: ("service_unavailable_error", "server_is_overloaded"),
    ReplyKind.RATE_LIMIT: ("tokens", "rate_limit_exceeded"),
    ReplyKind.SERVER_ERROR: ("server_error", "server_error"),
}
_ANTHROPIC_STREAM_ERRORS = {
    ReplyKind.OVERLOADED: ("overloaded_error", "Overloaded"),
    ReplyKind.RATE_LIMIT: (
        "rate_limit_error",
        "This request would exceed your organization's rate limit of 8,000 output tokens per minute.",
    ),
    ReplyKind.SERVER_ERROR: ("api_error", "Internal server error"),
}
_GEMINI_STREAM_ERRORS = {
    ReplyKind.OVERLOADED: (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    ReplyKind.RATE_LIMIT: (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    ReplyKind.SERVER_ERROR: (
        500,
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
}


def _error_event(reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
    """The error a provider sends inside a 200 stream, for the reply's ``cause``."""
    cause = reply.cause or ReplyKind.OVERLOADED
    if ex.dialect is Dialect.BEDROCK:
        from ._fake_bedrock import error_frame

        return error_frame(reply)
    if ex.dialect is Dialect.ANTHROPIC:
        # The documented form (streaming docs, "Error events"), with its spacing.
        type_, default = _ANTHROPIC_STREAM_ERRORS[cause]
        data = {"type": "error", "error": {"type": type_, "message": reply.message or default}}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    if ex.dialect is Dialect.OPENAI:
        type_, code = _OPENAI_STREAM_ERRORS[cause]
        message = reply.message or _OPENAI_STREAM_MESSAGES[cause].format(model=ex.model)
        return b"data: " + _dumps(_openai_envelope(message, type_, None, code)) + b"\n\n"
    if ex.dialect is Dialect.OPENAI_RESPONSES:
        type_, code = _OPENAI_STREAM_ERRORS[cause]
        message = reply.message or _OPENAI_STREAM_MESSAGES[cause].format(model=ex.model)
        stamp = _responses.Stamp(ex.model, ex.response_id, int(time.time()))
        return _responses.error_event(type_, code, message, stamp, sequence=at)
    status, code, default = _GEMINI_STREAM_ERRORS[cause]
    error = {"error": {"code": status, "message": reply.message or default, "status": code}}
    if ex.sse:
        return _gemini_sse(error)
    return (b"[" if first else b",\r\n") + _gemini_dumps(error) + b"]"


_OPENAI_STREAM_MESSAGES = {
    ReplyKind.OVERLOADED: "The requested model is temporarily overloaded.",
    ReplyKind.RATE_LIMIT: "Rate limit reached for {model} in organization org-fake on tokens per min (TPM): "
    "Limit 30000, Used 30000, Requested 500. Please try again in 1s.",
    ReplyKind.SERVER_ERROR: "The server had an error while processing your request. Sorry about that!",
}
