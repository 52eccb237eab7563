"""OpenAI Chat Completions, and every server that speaks it (Azure OpenAI, DeepSeek, vLLM...).

Wire reference: platform.openai.com/docs/api-reference/chat and openai-python's
``types/chat``. Compatible servers differ in small ways this module tolerates: DeepSeek's
``prompt_cache_hit_tokens`` and octet-stream errors, arguments sent as objects, content
sent as a list of parts.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from ..model import (
    Failure,
    FailureKind,
    ImagePart,
    Message,
    Request,
    Response,
    StopReason,
    Target,
    TextPart,
    Tool,
    ToolCall,
    ToolChoice,
    Usage,
)
from ..transport._types import HttpRequest, HttpResponse
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
    with_query,
)
from ._headers import HeaderMeta, openai_rate_limits, read_meta

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

# Money, not flow: waiting will not help (error-codes guide: "You exceeded your current quota").
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"})
# The prompt itself was refused: Azure's prompt filter ("content_filter"), image policy
# ("content_policy_violation") and o-series "invalid_prompt" ("flagged as potentially violating").
_FILTER_CODES = frozenset({"content_filter", "content_policy_violation", "invalid_prompt"})
_AUTH_CODES = frozenset({"invalid_api_key", "invalid_organization", "unsupported_country_region_territory"})

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
        if stream:
            # include_usage: the last chunk carries usage, so a streamed call is costed too.
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return HttpRequest(method="POST", url=with_query(url, target.query), headers=headers, json=body)

    # ---------------------------------------------------------------- parse

    def parse(self, target: Target, response: HttpResponse) -> Response | Failure:
        meta = read_meta(response.headers, request_id_headers=_REQUEST_ID_HEADERS, rate_limits=openai_rate_limits)
        data = decode_json(response.body)
        if 200 <= response.status < 300:
            body = as_dict(data)
            if "choices" in body:
                return _parse_completion(body, response.status, meta)
            # A 200 with an error envelope: proxies (OpenRouter, LiteLLM) report upstream
            # failures this way; its code is often the upstream HTTP status.
            if isinstance(body.get("error"), dict):
                return _error(target, response, meta, body)
            return error_failure(
                provider=self.name,
                kind=FailureKind.PROVIDER_SERVER_ERROR,
                target=target,
                response=response,
                meta=meta,
                code=None,
                message="the body is not a chat completion",
            )
        return _error(target, response, meta, data)


# -------------------------------------------------------------------- build helpers


def _max_tokens_field(target: Target) -> str:
    for key, value in target.extra:
        if key == "max_tokens_field" and value in _MAX_TOKENS_FIELDS:
            return value
    return "max_tokens"


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text}
    out: dict[str, Any] = {"role": m.role}
    if m.role == "assistant":
        # content may be null when the turn is only tool calls (the API's own shape).
        out["content"] = m.text if (m.text or not m.tool_calls) else None
        if m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": _arguments_text(tc)},
                }
                for tc in m.tool_calls
            ]
    elif len(m.content) == 1 and isinstance(m.content[0], TextPart):
        out["content"] = m.content[0].text  # the compact form every compatible server accepts
    elif m.role == "system":
        out["content"] = m.text  # system content parts are text only
    else:
        out["content"] = [_part(p) for p in m.content]
    if m.name:
        out["name"] = m.name
    return out


def _part(p: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    image: dict[str, Any] = {"url": p.url}
    if p.detail is not None:
        image["detail"] = p.detail
    return {"type": "image_url", "image_url": image}


def _arguments_text(tc: ToolCall) -> str:
    if tc.arguments.strip():
        return tc.arguments
    return json.dumps(dict(tc.parsed) if tc.parsed is not None else {}, separators=(",", ":"))


def _tool(t: Tool) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": t.name, "parameters": dict(t.parameters)}
    if t.description:
        fn["description"] = t.description
    if t.strict:
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


def _parse_completion(body: dict[str, Any], status: int, meta: HeaderMeta) -> Response | Failure:
    choices = as_list(body.get("choices"))
    choice = as_dict(choices[0]) if choices else {}
    message = as_dict(choice.get("message"))
    usage = _usage(as_dict(body.get("usage")))

    text = _content_text(message.get("content"))
    refusal = as_str(message.get("refusal")) or None
    calls: list[ToolCall] = []
    malformed: list[str] = []
    for raw in as_list(message.get("tool_calls")):
        call = as_dict(raw)
        fn = as_dict(call.get("function"))
        name = as_str(fn.get("name")) or ""
        arguments, parsed = tool_arguments(fn.get("arguments"))
        calls.append(ToolCall(id=as_str(call.get("id")) or "", name=name, arguments=arguments, parsed=parsed))
        if parsed is None:
            malformed.append(name or "?")

    raw_finish = as_str(choice.get("finish_reason"))
    stop = _FINISH.get(raw_finish or "", StopReason.OTHER)
    if calls and stop in (StopReason.END_TURN, StopReason.OTHER):
        # A forced tool_choice ends with finish_reason "stop" although the turn is tool calls.
        stop = StopReason.TOOL_USE
    if refusal is not None:
        stop = StopReason.REFUSAL

    result = Response(
        text=text,
        tool_calls=tuple(calls),
        usage=usage,
        stop_reason=stop,
        raw_stop_reason=raw_finish,
        refusal=refusal,
        model=as_str(body.get("model")),
        provider_request_id=meta.request_id,
        response_id=as_str(body.get("id")),
    )

    def fail(kind: FailureKind, why: str) -> Failure:
        return outcome_failure(
            provider="openai", kind=kind, why=why, result=result, status=status, meta=meta, code=raw_finish
        )

    if not choices:
        return fail(FailureKind.PROVIDER_SERVER_ERROR, "the completion has no choices")
    # Order matters: a refusal or filter explains a cut-off answer, and a cut-off answer
    # explains half-written tool arguments.
    if refusal is not None:
        return fail(FailureKind.CONTENT_FILTERED, f"the model refused: {refusal}")
    if stop is StopReason.CONTENT_FILTER:
        return fail(FailureKind.CONTENT_FILTERED, "the output was withheld by the content filter")
    if raw_finish == "length":
        return fail(FailureKind.TRUNCATED, "the output hit max_tokens (finish_reason length)")
    if malformed:
        return fail(
            FailureKind.TOOL_CALL_MALFORMED,
            f"tool call arguments are not a JSON object: {', '.join(malformed)}",
        )
    return result


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    # Some compatible servers (Mistral, some vLLM builds) send a list of typed parts.
    parts = [as_str(as_dict(p).get("text")) for p in as_list(content) if as_dict(p).get("type") == "text"]
    return "".join(p for p in parts if p)


def _usage(u: dict[str, Any]) -> Usage:
    prompt = as_dict(u.get("prompt_tokens_details"))
    completion = as_dict(u.get("completion_tokens_details"))
    cached = as_int(prompt.get("cached_tokens"))
    if not cached:
        cached = as_int(u.get("prompt_cache_hit_tokens"))  # DeepSeek's name for it
    return Usage(
        input_tokens=as_int(u.get("prompt_tokens")),
        output_tokens=as_int(u.get("completion_tokens")),
        cached_input_tokens=cached,
        reasoning_tokens=as_int(completion.get("reasoning_tokens")),
    )


def _error(target: Target, response: HttpResponse, meta: HeaderMeta, data: Any) -> Failure:
    body = as_dict(data)
    err = body.get("error")
    if isinstance(err, str):  # {"error": "message"}: vLLM and llama.cpp variants
        err = {"message": err}
    err = as_dict(err)
    if not err and "message" in body:  # a bare {"message": ..., "type": ...} envelope
        err = body
    message = as_str(err.get("message")) or as_str(body.get("detail"))
    err_type = as_str(err.get("type"))
    raw_code = err.get("code")
    code = raw_code if isinstance(raw_code, str) else None
    status = response.status
    if not 400 <= status < 600 and isinstance(raw_code, int) and 400 <= raw_code < 600:
        status = raw_code  # a 200 error envelope that carries the upstream status
    kind = _classify(status, code, err_type, message)
    return error_failure(
        provider="openai",
        kind=kind,
        target=target,
        response=response,
        meta=meta,
        code=code or err_type or (str(raw_code) if isinstance(raw_code, int) else None),
        message=message,
    )


def _classify(status: int, code: str | None, err_type: str | None, message: str | None) -> FailureKind:
    codes = {c for c in (code, err_type) if c}
    if codes & _QUOTA_CODES:
        return FailureKind.QUOTA_EXHAUSTED  # arrives as a 429: must not be replayed as a rate limit
    if codes & _FILTER_CODES and status < 500:
        return FailureKind.CONTENT_FILTERED
    if "context_length_exceeded" in codes:
        return FailureKind.CONTEXT_OVERFLOW
    if codes & _AUTH_CODES:
        return FailureKind.AUTHENTICATION_OR_PERMISSION
    if "model_not_found" in codes:
        return FailureKind.MODEL_NOT_FOUND
    text = f"{code or ''} {err_type or ''} {message or ''}"
    if status in (400, 413, 422) and CONTEXT_OVERFLOW.search(text):
        return FailureKind.CONTEXT_OVERFLOW
    if (status == 429 or status >= 500) and "overloaded" in text.lower():
        # "server_is_overloaded" (503), and the older "The engine is currently overloaded"
        # that came as a 429 or 500: capacity, not this key's rate.
        return FailureKind.PROVIDER_OVERLOADED
    return kind_from_status(status)
