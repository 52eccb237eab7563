"""AWS Bedrock in the fault kit: Converse bodies, AWS errors, ConverseStream as event-stream frames.

What each renderer sends follows botocore's service model of ``bedrock-runtime`` and the
Bedrock API reference, so boto3's own client parses it (the tests point one at the kit):

* ``POST /model/{modelId}/converse``: ``{"output": {"message": {role, content}}, "stopReason",
  "usage": {inputTokens, outputTokens, totalTokens[, cacheReadInputTokens, cacheWriteInputTokens]},
  "metrics": {latencyMs}}`` with an
  ``x-amzn-requestid`` header;
* errors: the status of the error type, ``x-amzn-errortype: <Type>:http://internal.amazon.com/...``
  and ``{"message": ...}`` (``ThrottlingException`` 429, ``ServiceUnavailableException`` 503,
  ``ValidationException`` 400, ``UnrecognizedClientException`` 403...);
* ``POST /model/{modelId}/converse-stream``: ``application/vnd.amazon.eventstream``, one binary
  frame per event (``messageStart``, ``contentBlockStart`` for tool use, ``contentBlockDelta``,
  ``contentBlockStop``, ``messageStop``, ``metadata``), each payload padded with a ``p`` field
  as Bedrock pads it; a mid-stream error is an exception frame (``throttlingException``...).

botocore ships an event-stream parser but no encoder: :func:`encode_frame` writes the framing
(prelude of total and header lengths, its CRC-32, string headers, payload, CRC-32 of the
whole), and the tests decode what it writes with botocore. Without botocore installed the
kit still speaks Bedrock; only :func:`verify_sigv4` needs it.

A request is checked as Bedrock checks it: with a FakeProvider ``api_key`` (the access key
id) it must carry a SigV4 ``authorization`` for that key, and with ``secret_key`` too the
signature is recomputed with botocore over the received method, URL, signed headers and body.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import unquote

from . import _wire
from ._exchange import Credentials, Endpoint, Exchange, Headers, Rendered
from ._kinds import ReplyKind
from ._parts import Answer as _Answer
from ._parts import pieces as _pieces
from ._parts import split_args as _split_args
from ._reply import Reply

# No __all__: this module is a FakeDialect (see ``_exchange``), whose members are its public
# names. The event-stream framing and the SigV4 check are public too, for the tests.

DEFAULT_MODEL: Final = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
CALL_PREFIX: Final = "tooluse_"
RESPONSE_ID: Final = "{name}-{serial}"  # str.format: the fake's name, the answer's serial

EVENTSTREAM = "application/vnd.amazon.eventstream"
_ERRORTYPE_NS = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_AUTH_NS = "http://internal.amazon.com/coral/com.amazon.coral.service/"

MISSING_TOKEN = "Missing Authentication Token"
BAD_KEY = "The security token included in the request is invalid."
BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
    "Access Key and signing method. Consult the service documentation for details."
)

_STOP = {
    "end": "end_turn",
    "tool": "tool_use",
    "length": "max_tokens",
    "refusal": "content_filtered",
    "filter": "guardrail_intervened",
    "malformed": "malformed_tool_use",
}
_GUARDRAIL_TEXT = "Sorry, the model cannot answer this question."


# -- requests ----------------------------------------------------------------------------------


def endpoint(path: str) -> Endpoint | None:
    """``.../model/{modelId}/converse`` or ``/converse-stream``; the model id is percent-decoded."""
    for suffix, stream in (("/converse", False), ("/converse-stream", True)):
        if path.endswith(suffix):
            head = path[: -len(suffix)]
            at = head.rfind("/model/")
            if at < 0 or at + 7 >= len(head):
                return None
            return Endpoint("generate", stream_path=stream, model=unquote(head[at + 7 :]))
    return None


def presented_key_id(headers: Mapping[str, str]) -> str | None:
    """The access key id a SigV4 ``authorization`` names (``Credential=<id>/<date>/...``)."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return None
    for part in auth[17:].split(","):
        name, _, value = part.strip().partition("=")
        if name == "Credential":
            return value.split("/", 1)[0] or None
    return None


def credentials(given: Credentials) -> Reply | None:
    """What AWS refuses (see :func:`check_signature`): ``api_key`` is the access key id (a
    FakeProvider of Bedrock insists on a string)."""
    key_id = None if callable(given.api_key) else given.api_key
    return check_signature(given.headers, api_key=key_id, secret_key=given.secret_key, wire=given.wire)


def check(endpoint: Endpoint, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> Reply | None:
    """What Converse refuses before any model runs: no ``messages``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return Reply.invalid(
            "1 validation error detected: Value null at 'messages' failed to satisfy constraint: "
            "Member must not be null"
        )
    if not messages:
        return Reply.invalid(
            "A conversation must start with a user message. "
            "Try again with a conversation that starts with a user message."
        )
    return None


def check_signature(
    headers: Mapping[str, str],
    *,
    api_key: str | None,
    secret_key: str | None = None,
    wire: tuple[str, str, bytes] | None = None,
) -> Reply | None:
    """What AWS refuses before any operation runs (only with ``api_key``): a missing or
    foreign signature, or (with ``secret_key`` and ``wire``) a wrong one."""
    if api_key is None:
        return None
    key = presented_key_id(headers)
    if key is None or "x-amz-date" not in headers:
        return Reply.unauthorized(message=MISSING_TOKEN)
    if key != api_key:
        return Reply.unauthorized(message=BAD_KEY)
    if secret_key is not None and wire is not None and not verify_sigv4(*wire, headers, api_key, secret_key):
        return Reply.unauthorized(message=BAD_SIGNATURE)
    return None


def verify_sigv4(
    method: str, url: str, body: bytes, headers: Mapping[str, str], access_key: str, secret_key: str
) -> bool:
    """Whether ``headers['authorization']`` is the SigV4 signature of this request, recomputed
    with botocore's signer from the headers it names, its ``x-amz-date`` and its scope."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = headers.get("authorization", "")
    fields = dict(p.strip().partition("=")[::2] for p in auth.removeprefix("AWS4-HMAC-SHA256 ").split(","))
    scope = fields.get("Credential", "").split("/")
    signed = [h for h in fields.get("SignedHeaders", "").split(";") if h]
    if len(scope) != 5 or not signed or "x-amz-date" not in headers:
        return False
    _, day, region, service, _ = scope
    kept = {name: headers[name] for name in signed if name in headers and name != "host"}
    request = AWSRequest(method=method, url=url, data=body, headers=kept)
    request.context["timestamp"] = headers["x-amz-date"]
    token = headers.get("x-amz-security-token")
    signer = SigV4Auth(Credentials(access_key, secret_key, token), service, region)
    if not headers["x-amz-date"].startswith(day):
        return False
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    return bool(
        fields.get("Signature") == expected
        and signer.signed_headers(signer.headers_to_sign(request)) == ";".join(signed)
    )


def tools(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    config = body.get("toolConfig")
    declared = _wire.listed(config.get("tools") if isinstance(config, Mapping) else None)
    specs = _wire.listed([tool.get("toolSpec") for tool in declared])
    return [(spec["name"], _input_schema(spec)) for spec in specs if isinstance(spec.get("name"), str)]


def _input_schema(spec: Mapping[str, Any]) -> Any:
    schema = spec.get("inputSchema")
    return schema.get("json") if isinstance(schema, Mapping) else None


def forced(body: Mapping[str, Any]) -> tuple[str | None, bool]:
    config = body.get("toolConfig")
    choice = config.get("toolChoice") if isinstance(config, Mapping) else None
    if isinstance(choice, Mapping):
        if isinstance(choice.get("tool"), Mapping):
            return choice["tool"].get("name"), False
        if "any" in choice:
            return None, True
    return None, False


def structured(body: Mapping[str, Any]) -> tuple[bool, Any]:
    return False, None  # structured output is a forced tool there


def max_tokens(body: Mapping[str, Any]) -> int | None:
    config = body.get("inferenceConfig")
    value = config.get("maxTokens") if isinstance(config, Mapping) else None
    return value if isinstance(value, int) and value > 0 else None


def prompt_chars(body: Mapping[str, Any]) -> int:
    return _wire.chars(body.get("system")) + _wire.chars(body.get("messages"))


# -- answers -----------------------------------------------------------------------------------


def _headers(ex: Exchange) -> Headers:
    return (("x-amzn-requestid", ex.request_id),)


def _usage(answer: _Answer) -> dict[str, Any]:
    usage: dict[str, Any] = {
        # Bedrock's inputTokens leaves out the cache reads (and writes): they are their own fields.
        "inputTokens": answer.input_tokens - answer.cached_tokens,
        "outputTokens": answer.output_tokens,
        "totalTokens": answer.input_tokens + answer.output_tokens,
    }
    if answer.cached_tokens:
        usage["cacheReadInputTokens"] = answer.cached_tokens
        usage["cacheWriteInputTokens"] = 0
    return usage


def _content(answer: _Answer) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if answer.reasoning is not None:
        content.append(
            {"reasoningContent": {"reasoningText": {"text": answer.reasoning, "signature": answer.signature}}}
        )
    if answer.redacted is not None:
        content.append({"reasoningContent": {"redactedContent": answer.redacted}})
    if answer.stop == "refusal":
        content.append({"text": answer.refusal or ""})
    elif answer.stop == "filter":
        content.append({"text": _GUARDRAIL_TEXT})
    elif answer.text is not None:
        content.append({"text": answer.text})
    for c in answer.calls:
        content.append({"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.args}})
    return content


def ok(answer: _Answer, ex: Exchange) -> Rendered:
    if ex.stream:
        return _stream(answer, ex)
    body = {
        "output": {"message": {"role": "assistant", "content": _content(answer)}},
        "stopReason": _STOP[answer.stop],
        "usage": _usage(answer),
        "metrics": {"latencyMs": 321},
    }
    return _wire.json_answer(200, body, _headers(ex))


def encode_frame(headers: Sequence[tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (total length, headers length), its CRC-32, the
    headers (each: name length, name, type 7 = string, value length, value), the payload, and
    the CRC-32 of everything before it."""
    raw = b"".join(
        bytes([len(n := name.encode())]) + n + b"\x07" + struct.pack(">H", len(v := value.encode())) + v
        for name, value in headers
    )
    prelude = struct.pack(">II", 12 + len(raw) + len(payload) + 4, len(raw))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event_frame(name: str, payload: Mapping[str, Any], pad: int = 0) -> bytes:
    """An event frame; ``pad``: characters of the ``p`` padding Bedrock adds to payloads."""
    body = dict(payload)
    if pad:
        body["p"] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"[: pad % 53 or 1]
    headers = ((":event-type", name), (":content-type", "application/json"), (":message-type", "event"))
    return encode_frame(headers, json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())


def exception_frame(name: str, payload: Mapping[str, Any]) -> bytes:
    headers = ((":exception-type", name), (":content-type", "application/json"), (":message-type", "exception"))
    return encode_frame(headers, json.dumps(payload, separators=(",", ":")).encode())


def _stream(answer: _Answer, ex: Exchange) -> Rendered:
    frames = [event_frame("messageStart", {"role": "assistant"}, pad=2)]
    index = 0

    def block(deltas: Sequence[dict[str, Any]], start: dict[str, Any] | None = None) -> None:
        nonlocal index
        if start is not None:
            frames.append(event_frame("contentBlockStart", {"contentBlockIndex": index, "start": start}, pad=index + 7))
        for i, delta in enumerate(deltas):
            frames.append(event_frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}, pad=i + 3))
        frames.append(event_frame("contentBlockStop", {"contentBlockIndex": index}, pad=index + 11))
        index += 1

    if answer.reasoning is not None:
        thinking = [{"reasoningContent": {"text": piece}} for piece in _pieces(answer.reasoning) if piece]
        block([*thinking, {"reasoningContent": {"signature": answer.signature}}])
    if answer.redacted is not None:
        block([{"reasoningContent": {"redactedContent": answer.redacted}}])
    text = answer.refusal if answer.stop == "refusal" else _GUARDRAIL_TEXT if answer.stop == "filter" else answer.text
    if text:
        block([{"text": piece} for piece in _pieces(text)])
    for c in answer.calls:
        start = {"toolUse": {"toolUseId": c.id, "name": c.name}}
        block([{"toolUse": {"input": piece}} for piece in _split_args(c.text)], start)
    frames.append(event_frame("messageStop", {"stopReason": _STOP[answer.stop]}, pad=5))
    frames.append(event_frame("metadata", {"usage": _usage(answer), "metrics": {"latencyMs": 321}}, pad=9))
    return _wire.stream_answer(frames, (("content-type", EVENTSTREAM), *_headers(ex)))


# -- errors ------------------------------------------------------------------------------------


def _error_answer(
    status: int,
    type_: str,
    message: str,
    ex: Exchange,
    extra: tuple[tuple[str, str], ...] = (),
    ns: str = _ERRORTYPE_NS,
) -> Rendered:
    headers = (*_headers(ex), ("x-amzn-errortype", f"{type_}:{ns}"), *extra)
    return _wire.json_answer(status, {"message": message}, headers)


WINDOW: Final = 200_000  # the context window a context_overflow reports by default


def error(reply: Reply, ex: Exchange) -> Rendered:
    kind = reply.kind
    if kind is ReplyKind.RATE_LIMIT:
        message = reply.message or "Too many requests, please wait before trying again."
        return _error_answer(429, "ThrottlingException", message, ex, _wire.retry_headers(reply))
    if kind is ReplyKind.QUOTA:
        message = reply.message or (
            "The request exceeds the service quota for your account. "
            "Request a quota increase or reduce the request's size."
        )
        return _error_answer(400, "ServiceQuotaExceededException", message, ex)
    if kind is ReplyKind.OVERLOADED:
        message = reply.message or "Bedrock is unable to process your request."
        return _error_answer(503, "ServiceUnavailableException", message, ex, _wire.retry_headers(reply))
    if kind is ReplyKind.SERVER_ERROR:
        message = (
            reply.message or "The system encountered an unexpected error during processing. Try your request again."
        )
        return _error_answer(500, "InternalServerException", message, ex)
    if kind is ReplyKind.UNAUTHORIZED:
        message = reply.message or BAD_KEY
        if message == MISSING_TOKEN:
            return _error_answer(403, "MissingAuthenticationTokenException", message, ex, ns=_AUTH_NS)
        if message == BAD_SIGNATURE:
            return _error_answer(403, "InvalidSignatureException", message, ex, ns=_AUTH_NS)
        return _error_answer(403, "UnrecognizedClientException", message, ex, ns=_AUTH_NS)
    if kind is ReplyKind.NOT_FOUND:
        message = reply.message or "Could not resolve the foundation model from the provided model identifier."
        return _error_answer(404, "ResourceNotFoundException", message, ex)
    if kind is ReplyKind.CONTEXT_OVERFLOW:
        tokens, limit = _wire.overflow_numbers(reply, ex, WINDOW)
        if reply.message:
            message = reply.message
        elif "anthropic" in ex.model:  # Claude's own words, passed through
            message = f"The model returned the following errors: prompt is too long: {tokens} tokens > {limit} maximum"
        else:
            message = "Input is too long for requested model."
        return _error_answer(400, "ValidationException", message, ex)
    # INVALID
    message = reply.message or (
        "1 validation error detected: Value '3.0' at 'inferenceConfig.temperature' failed to satisfy "
        "constraint: Member must have value less than or equal to 1"
    )
    return _error_answer(400, "ValidationException", message, ex)


def unknown_path(method: str, path: str, request_id: str) -> Rendered:
    del method, path
    headers = (("x-amzn-requestid", request_id), ("x-amzn-errortype", f"UnknownOperationException:{_AUTH_NS}"))
    return _wire.json_answer(404, {"message": None}, headers)


# Mid-stream errors, by cause: the exception events of ConverseStreamOutput.
_STREAM_ERRORS = {
    ReplyKind.OVERLOADED: ("serviceUnavailableException", "Bedrock is unable to process your request."),
    ReplyKind.RATE_LIMIT: ("throttlingException", "Too many tokens, please wait before trying again."),
    ReplyKind.SERVER_ERROR: (
        "internalServerException",
        "The system encountered an unexpected error during processing. Try your request again.",
    ),
}


def error_event(reply: Reply, ex: Exchange, *, first: bool, at: int) -> bytes:
    """The exception frame a ConverseStream sends mid-stream for the reply's ``cause``."""
    name, default = _STREAM_ERRORS[reply.cause or ReplyKind.OVERLOADED]
    return exception_frame(name, {"message": reply.message or default})


def malformed_frame(frame: bytes) -> bytes:
    """``frame`` with its JSON payload cut in half, re-framed with valid checksums: a parser
    that reads the frame gets an event whose data is not JSON."""
    total, header_length = struct.unpack(">II", frame[:8])
    raw_headers = frame[12 : 12 + header_length]
    payload = frame[12 + header_length : total - 4]
    headers: list[tuple[str, str]] = []
    at = 0
    while at < len(raw_headers):
        size = raw_headers[at]
        name = raw_headers[at + 1 : at + 1 + size].decode()
        at += 1 + size + 1  # the name, then its type byte (7: string)
        (length,) = struct.unpack(">H", raw_headers[at : at + 2])
        headers.append((name, raw_headers[at + 2 : at + 2 + length].decode()))
        at += 2 + length
    return encode_frame(headers, payload[: max(1, len(payload) // 2)])


def heartbeat(ex: Exchange, chunked: bool) -> bytes:
    """Nothing in an event stream (a byte between frames would break the framing); blank
    lines before a JSON answer."""
    return b"" if ex.stream else b"\n"


malformed = malformed_frame
