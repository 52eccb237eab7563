"""A pydantic-ai model over a failover Router (``pip install 'failover[pydantic-ai]'``).

    from pydantic_ai import Agent
    from failover.integrations.pydantic_ai import FailoverModel

    agent = Agent(FailoverModel(router, "support", envelope=Envelope(budget=10)), output_type=Answer)
    result = await agent.run("Where is my parcel?")
    result.response.provider_details["failover"]        # the RouteRecord, as a dict

Each model request is one ``router.complete`` (``request``) or ``router.stream``
(``request_stream``, used by ``Agent.run_stream`` and event stream handlers). Messages,
instructions, function and output tools, ``tool_choice``, native JSON-schema output
(``NativeOutput``) and the sampling settings (``max_tokens``, ``temperature``, ``top_p``,
``seed``, ``stop_sequences``) become a :class:`failover.Request`; the answer comes back as a
``ModelResponse`` with text and tool-call parts, usage, ``finish_reason``,
``provider_response_id`` and ``provider_details["failover"]`` (``RouteRecord.to_dict()``).

Reasoning is a ``ThinkingPart`` per block (``ThinkingPartDelta`` events when streamed), before the
text: ``content`` is the readable text, ``signature`` the provider's (for a redacted Anthropic
block, ``id="redacted_thinking"`` and its data, as pydantic-ai's own Anthropic model keeps it),
``provider_name="failover"`` and ``provider_details`` the block's ``source`` format and ``origin``
target. Sent back in the history, each block goes only to a target that can read it (a Claude
tool loop gets its signed thinking back); a thinking part of another model is sent as its
provider's format where pydantic-ai names it (``anthropic``, ``google-*``), else as text only Chat
Completions targets read.

No answer within the envelope raises a pydantic-ai ``ModelAPIError`` subclass picked from the
reason (``ModelRateLimitError``, ``ModelQuotaExceededError``, ``ModelTimeoutError``,
``ModelContextWindowExceededError``, ``ModelAuthenticationError``, ``ModelNotFoundError``,
``ModelRequestRejectedError``, otherwise ``ModelUnavailableError``), with the
:class:`failover.Unavailable` (and its RouteRecord) as ``__cause__``. Because it is a
``ModelAPIError``, a pydantic-ai ``FallbackModel`` around this model still works, but the router
has already spent the envelope's recovery: prefer routes over nesting fallbacks.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic_ai import exceptions as errors
from pydantic_ai.messages import (
    BaseToolReturnPart,
    BinaryContent,
    CachePoint,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.messages import FinishReason as PaiFinish

# Private helpers pydantic-ai's own adapters use (hence the pinned range): the canonical tool
# choice, and request parts with legacy retry prompts rendered as text.
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, _sendable_request_parts
from pydantic_ai.models._tool_choice import resolve_tool_choice
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from ..inbound import Relay, RelayMismatch, streamed_by
from ..model import REASONING_ANTHROPIC as ANTHROPIC
from ..model import REASONING_GEMINI as GEMINI
from ..model import REASONING_OPENAI as OPENAI
from ..model import (
    Completed,
    Envelope,
    FailureKind,
    ImagePart,
    Message,
    Part,
    PartialOutput,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    ResponseFormat,
    StopReason,
    StreamEvent,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    Unavailable,
    Usage,
)
from ..model import TextPart as OurText
from ..router import Router, RouteStream
from ._common import answered_model, fresh_envelope, partial_unavailable

__all__ = ["FailoverModel"]

_FINISH: dict[StopReason, PaiFinish] = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.TOOL_USE: "tool_call",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTENT_FILTER: "content_filter",
    StopReason.REFUSAL: "content_filter",
}

_ERRORS: dict[FailureKind, type[errors.ModelAPIError]] = {
    FailureKind.RATE_LIMITED: errors.ModelRateLimitError,
    FailureKind.QUOTA_EXHAUSTED: errors.ModelQuotaExceededError,
    FailureKind.PROVIDER_OVERLOADED: errors.ModelOverloadedError,
    FailureKind.PROVIDER_SERVER_ERROR: errors.ModelServerError,
    FailureKind.TIMEOUT: errors.ModelTimeoutError,
    FailureKind.DEADLINE_EXHAUSTED: errors.ModelTimeoutError,
    FailureKind.CONTEXT_OVERFLOW: errors.ModelContextWindowExceededError,
    FailureKind.AUTHENTICATION_OR_PERMISSION: errors.ModelAuthenticationError,
    FailureKind.MODEL_NOT_FOUND: errors.ModelNotFoundError,
    FailureKind.INVALID_REQUEST: errors.ModelRequestRejectedError,
    FailureKind.CONTENT_FILTERED: errors.ModelRequestRejectedError,
}


class FailoverModel(Model):
    """A pydantic-ai ``Model`` whose every request goes through ``router`` on ``route``.

    ``envelope`` bounds each model request (deadline, attempts, cost, fallback permission);
    each request gets a fresh request id. ``model_name`` defaults to ``failover:<route>``.
    """

    # Text and images only: the router's Request has no audio, video or document parts.
    _unsupported_file_inputs = frozenset({"document", "audio", "video"})
    unsupported_settings = frozenset(
        {
            "timeout",  # the envelope's budget is the deadline
            "max_retries",  # the router retries
            "parallel_tool_calls",
            "presence_penalty",
            "frequency_penalty",
            "logit_bias",
            "extra_headers",
            "extra_body",
            "service_tier",
        }
    )

    def __init__(
        self,
        router: Router,
        route: str,
        *,
        envelope: Envelope | None = None,
        model_name: str | None = None,
        settings: ModelSettings | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        self.router = router
        self.route = route
        self.envelope = envelope
        self._model_name = model_name or f"failover:{route}"
        default = ModelProfile(
            supports_tools=True,
            supports_json_schema_output=True,
            supports_json_object_output=True,
            supports_image_input=True,
            default_structured_output_mode="tool",
        )
        super().__init__(settings=settings, profile={**default, **(profile or {})})

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return "failover"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        request = self._request(messages, settings, params)
        try:
            resp = await self.router.complete(self.route, request, fresh_envelope(self.envelope))
        except Unavailable as exc:
            raise _api_error(self._model_name, exc) from exc
        return _model_response(resp, self._model_name)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        request = self._request(messages, settings, params)
        stream = self.router.stream(self.route, request, fresh_envelope(self.envelope))
        async with stream:
            try:  # up to the first event: a failure here is the request's, before any output
                first = await anext(stream)
            except Unavailable as exc:
                raise _api_error(self._model_name, exc) from exc
            # the stream's model_name is the model that answered, once the first event is out
            name = streamed_by(first, stream.model, self._model_name)
            yield _Streamed(model_request_parameters=params, _name=name, _first=first, _stream=stream)

    # -- pydantic-ai -> Request ----------------------------------------------------------------

    def _request(
        self, messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> Request:
        out: list[Message] = []
        for m in messages:
            if isinstance(m, ModelRequest):
                out.extend(_request_messages(m))
            else:
                out.extend(_response_message(m))
        instructions = [Message.system(p.content) for p in self._get_instruction_parts(messages, params) or ()]
        lead = next((i for i, m in enumerate(out) if m.role != "system"), len(out))
        out[lead:lead] = instructions
        s: dict[str, Any] = dict(settings or {})
        tools = tuple(
            Tool(
                name=t.name,
                description=t.description or "",
                parameters=t.parameters_json_schema,
                strict=bool(t.strict),
            )
            for t in params.declared_tool_defs.values()
        )
        fmt: ResponseFormat | None = None
        if params.output_mode == "native" and params.output_object is not None:
            o = params.output_object
            fmt = ResponseFormat(
                kind="json_schema", schema=o.json_schema, name=o.name or "final_result", strict=o.strict is not False
            )
        return Request(
            messages=tuple(out),
            tools=tools,
            tool_choice=_tool_choice(settings, params) if tools else None,
            response_format=fmt,
            max_tokens=s.get("max_tokens"),
            temperature=s.get("temperature"),
            top_p=s.get("top_p"),
            seed=s.get("seed"),
            stop=tuple(s.get("stop_sequences") or ()),
        )


def _tool_choice(settings: ModelSettings | None, params: ModelRequestParameters) -> ToolChoice:
    resolved = resolve_tool_choice(settings, params)
    if isinstance(resolved, tuple):
        mode, names = resolved
        if len(names) == 1:
            return ToolChoice(mode="tool", name=next(iter(names)))
        # the router has no "one of these" choice: offer all tools, still forcing a call if required
        return ToolChoice(mode=mode)
    return ToolChoice(mode=resolved)


def _request_messages(request: ModelRequest) -> list[Message]:
    out: list[Message] = []
    for part in _sendable_request_parts(request.parts):
        if isinstance(part, SystemPromptPart):
            out.append(Message.system(part.content))
        elif isinstance(part, UserPromptPart):
            out.append(Message(role="user", content=_user_parts(part.content)))
        elif isinstance(part, BaseToolReturnPart):
            out.append(Message.tool(part.tool_call_id, part.model_response_str()))
        else:
            raise ValueError(
                f"FailoverModel cannot send a {type(part).__name__} request part; "
                "call model.prepare_messages(messages) first (Agent does this) or drop the part"
            )
    return out


def _user_parts(content: str | Sequence[Any]) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (OurText(text=content),)
    parts: list[Part] = []
    for c in content:
        if isinstance(c, str):
            parts.append(OurText(text=c))
        elif isinstance(c, TextContent):
            parts.append(OurText(text=c.content))
        elif isinstance(c, ImageUrl):
            parts.append(ImagePart(url=c.url))
        elif isinstance(c, BinaryContent) and c.is_image:
            parts.append(ImagePart(url=f"data:{c.media_type};base64,{base64.b64encode(c.data).decode()}"))
        elif isinstance(c, CachePoint):
            continue  # a provider cache hint; the router picks the provider
        else:
            raise ValueError(
                f"FailoverModel sends text and images only, got a {type(c).__name__} in a user prompt; "
                "convert it to text or an image first"
            )
    return tuple(parts)


def _response_message(response: ModelResponse) -> list[Message]:
    texts = [p.content for p in response.parts if isinstance(p, TextPart)]
    calls = tuple(
        ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str(), parsed=p.args_as_dict())
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )
    text = "\n\n".join(texts)
    # native tool and file parts are the provider's own state: another model cannot read them
    reasoning = tuple(r for p in response.parts if isinstance(p, ThinkingPart) if (r := _reasoning(p)) is not None)
    return [Message.assistant(text, tool_calls=calls, reasoning=reasoning)] if text or calls else []


def _reasoning(part: ThinkingPart) -> Reasoning | None:
    """A thinking part of the history as a block the router sends only to a target that reads it."""
    redacted = part.id == "redacted_thinking"  # pydantic-ai's shape of a redacted Anthropic block
    details = part.provider_details or {}
    if part.provider_name == "failover" and details.get("source") in (ANTHROPIC, GEMINI, OPENAI):
        origin = details.get("origin")
        return Reasoning(
            text="" if redacted else part.content,
            signature=None if redacted else part.signature,
            redacted=part.signature if redacted else None,
            source=details["source"],
            origin=origin if isinstance(origin, str) else None,
        )
    if part.provider_name == "anthropic":
        if redacted:
            return Reasoning(redacted=part.signature or "", source=ANTHROPIC)
        return Reasoning(text=part.content, signature=part.signature, source=ANTHROPIC)
    if part.provider_name is not None and part.provider_name.startswith("google"):
        return Reasoning(text=part.content, signature=part.signature, source=GEMINI)
    return Reasoning(text=part.content, source=OPENAI) if part.content else None


def _thinking(block: Reasoning) -> ThinkingPart:
    """A block as a pydantic-ai thinking part (see the module docstring)."""
    details = {"source": block.source, "origin": block.origin}
    if block.redacted is not None:
        return ThinkingPart(
            "", id="redacted_thinking", signature=block.redacted, provider_name="failover", provider_details=details
        )
    return ThinkingPart(block.text, signature=block.signature, provider_name="failover", provider_details=details)


# -- Response -> pydantic-ai -----------------------------------------------------------------------


def _usage(usage: Usage) -> RequestUsage:
    return RequestUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        details={"reasoning_tokens": usage.reasoning_tokens} if usage.reasoning_tokens else {},
    )


def _details(resp: Response) -> dict[str, Any]:
    details: dict[str, Any] = {"finish_reason": resp.raw_stop_reason or resp.stop_reason.value}
    if resp.record is not None:
        details["failover"] = resp.record.to_dict()
    if resp.provider_request_id is not None:
        details["provider_request_id"] = resp.provider_request_id
    return details


def _model_response(resp: Response, name: str) -> ModelResponse:
    parts: list[ModelResponsePart] = [_thinking(b) for b in resp.reasoning]
    text = resp.text
    if not text and resp.parsed is not None and not resp.tool_calls:
        text = json.dumps(resp.parsed)
    if text:
        parts.append(TextPart(content=text))
    parts.extend(ToolCallPart(tool_name=c.name, args=c.arguments, tool_call_id=c.id) for c in resp.tool_calls)
    return ModelResponse(
        parts=parts,
        usage=_usage(resp.usage),
        model_name=answered_model(resp) or name,
        provider_name="failover",
        finish_reason=_FINISH.get(resp.stop_reason),
        provider_response_id=resp.response_id or resp.provider_request_id,
        provider_details=_details(resp),
    )


def _api_error(name: str, exc: Unavailable) -> errors.ModelAPIError:
    cls = _ERRORS.get(exc.reason, errors.ModelUnavailableError)
    retry_after = exc.retry_after_ms / 1000 if exc.retry_after_ms is not None else None
    return cls(name, str(exc), provider_error_code=exc.reason.value, retry_after=retry_after)


@dataclass
class _Streamed(StreamedResponse):
    """Our stream events as pydantic-ai's: thinking, text and tool-call deltas, then usage and finish.

    The events pass through a :class:`~failover.inbound._relay.Relay`, so the parts pydantic-ai
    assembles are the answer failover records (a call given whole or completed at its end, in
    order); an answer that changed under them is ``UnexpectedModelBehavior``."""

    _name: str = ""
    _first: object = None
    _stream: RouteStream | None = None
    _timestamp: datetime = field(default_factory=lambda: datetime.now(tz=UTC))
    _relay: Relay = field(default_factory=Relay)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        assert self._stream is not None
        pending: list[object] = [self._first]
        while True:
            if pending:
                event = pending.pop()
            else:
                try:
                    event = await anext(self._stream)
                except StopAsyncIteration:
                    return
                except Unavailable as exc:
                    raise _api_error(self._name, exc) from exc
            try:
                shown = self._end(event) if isinstance(event, Completed) else self._relay.feed(event)
            except RelayMismatch as exc:
                raise errors.UnexpectedModelBehavior(f"failover: {exc}") from exc
            if isinstance(event, PartialOutput):
                raise _api_error(self._name, partial_unavailable(event))
            for e in shown:
                for out in self._map(e):
                    yield out

    def _end(self, event: Completed) -> list[StreamEvent]:
        resp = event.response
        shown = self._relay.end(resp)
        if not self._relay.text_sent and resp.parsed is not None and not resp.tool_calls:
            shown.append(TextDelta(text=json.dumps(resp.parsed)))  # structured output without text
        self._usage = _usage(resp.usage)
        self.finish_reason = _FINISH.get(resp.stop_reason)
        self.provider_details = _details(resp)
        self.provider_response_id = resp.response_id or resp.provider_request_id
        return shown

    def _map(self, event: StreamEvent) -> list[ModelResponseStreamEvent]:
        pm = self._parts_manager
        if isinstance(event, TextDelta):
            return list(pm.handle_text_delta(vendor_part_id="content", content=event.text))
        if isinstance(event, ReasoningDelta):
            key = ("reasoning", event.index)
            return list(pm.handle_thinking_delta(vendor_part_id=key, content=event.text, provider_name="failover"))
        if isinstance(event, ReasoningDone):
            part = _thinking(event.block)  # the block's text already went out as deltas
            return list(
                pm.handle_thinking_delta(
                    vendor_part_id=("reasoning", event.index),
                    id=part.id,
                    signature=part.signature,
                    provider_name="failover",
                    provider_details=part.provider_details,
                )
            )
        if isinstance(event, ToolCallStart):
            e = pm.handle_tool_call_delta(
                vendor_part_id=("tool", event.index), tool_name=event.name, tool_call_id=event.id
            )
            return [e] if e is not None else []
        if isinstance(event, ToolCallDelta):
            e = pm.handle_tool_call_delta(vendor_part_id=("tool", event.index), args=event.arguments)
            return [e] if e is not None else []
        return []

    async def close_stream(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()  # cancels the request and closes the upstream exchange

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def provider_name(self) -> Literal["failover"]:
        return "failover"

    @property
    def provider_url(self) -> None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp
