"""An OpenAI Agents SDK model and model provider over a failover Router (``pip install 'failover[agents]'``).

    from agents import Agent, RunConfig, Runner
    from failover.integrations.agents import FailoverModel, FailoverProvider

    agent = Agent(name="support", model=FailoverModel(router, "support", envelope=Envelope(budget=10)))
    result = await Runner.run(agent, "Where is my parcel?")

    # or every agent of a run, by route name (Agent(model="support")):
    result = await Runner.run(agent, "...", run_config=RunConfig(model_provider=FailoverProvider(router)))

The model speaks Chat Completions semantics, like the SDK's ``OpenAIChatCompletionsModel``: the
SDK's own converter turns Responses input items, function tools, handoffs, ``tool_choice`` and
the output schema into a Chat Completions body, the validated converter the gateway uses
(``failover.inbound.openai``) turns that into a :class:`failover.Request`, and the answer goes
back through the SDK's converter into
output items (assistant message, function calls) with ``Usage``. Hosted tools (web search, file
search, computer use), ``previous_response_id``, conversations and prompt templates are
Responses-API server state and raise ``agents.exceptions.UserError``.

Each call's RouteRecord is kept on the model: ``model.record_for(response.request_id)`` for any
``ModelResponse`` in ``result.raw_responses`` (``request_id`` is failover's request id), or
``model.last_record``. No answer within the envelope raises :class:`failover.Unavailable` out
of ``Runner.run``; ``get_retry_advice`` tells the SDK's retry policies not to retry it (the
router already spent the envelope's recovery).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any, cast

from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import UserError
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.chatcmpl_converter import Converter
from agents.models.chatcmpl_stream_handler import ChatCmplStreamHandler
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
from agents.tool import Tool
from agents.usage import Usage as AgentsUsage
from openai import AsyncStream
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessage
from openai.types.completion_usage import CompletionUsage
from openai.types.responses import Response as ResponsesResponse
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from ..inbound import openai as oai
from ..model import (
    Completed,
    Envelope,
    PartialOutput,
    Request,
    Response,
    RouteRecord,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Unavailable,
    Usage,
)
from ..router import Router
from ._common import fresh_envelope, openai_request, partial_unavailable

__all__ = ["FailoverModel", "FailoverProvider"]

_KEPT_RECORDS = 256


class FailoverModel(Model):
    """An Agents SDK ``Model`` whose every call is one ``router.complete`` / ``router.stream`` on ``route``.

    ``envelope`` bounds each model call (deadline, attempts, cost, fallback permission); each
    call gets a fresh request id. The last 256 RouteRecords are kept by request id.
    """

    def __init__(self, router: Router, route: str, *, envelope: Envelope | None = None) -> None:
        self.router = router
        self.route = route
        self.envelope = envelope
        self._records: OrderedDict[str, RouteRecord] = OrderedDict()

    @property
    def last_record(self) -> RouteRecord | None:
        return next(reversed(self._records.values()), None)

    def record_for(self, request_id: str | None) -> RouteRecord | None:
        """The RouteRecord of the call whose ``ModelResponse.request_id`` this is."""
        return self._records.get(request_id) if request_id is not None else None

    def _keep(self, record: RouteRecord | None) -> None:
        if record is None:
            return
        self._records[record.request_id] = record
        while len(self._records) > _KEPT_RECORDS:
            self._records.popitem(last=False)

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        if isinstance(request.error, Unavailable):
            return ModelRetryAdvice(
                suggested=False,
                retry_after=(request.error.retry_after_ms or 0) / 1000 or None,
                reason="failover already retried, failed over and fell back within the envelope",
            )
        return None

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> ModelResponse:
        _no_server_state(previous_response_id, conversation_id, prompt)
        request = _request(system_instructions, input, model_settings, tools, output_schema, handoffs)
        try:
            resp = await self.router.complete(self.route, request, fresh_envelope(self.envelope))
        except Unavailable as exc:
            self._keep(exc.record)
            raise
        self._keep(resp.record)
        message = ChatCompletionMessage.model_validate(_message(resp))
        return ModelResponse(
            output=Converter.message_to_output_items(message),
            usage=_usage(resp.usage),
            response_id=None,  # no Responses-API server state behind it
            request_id=resp.record.request_id if resp.record is not None else None,
        )

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: ResponsePromptParam | None = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Our stream as Chat Completions chunks, turned into Responses events by the SDK's own handler."""
        _no_server_state(previous_response_id, conversation_id, prompt)
        request = _request(system_instructions, input, model_settings, tools, output_schema, handoffs)
        shell = ResponsesResponse(
            id=FAKE_RESPONSES_ID,
            created_at=time.time(),
            model=self.route,
            object="response",
            output=[],
            tool_choice="auto",
            top_p=model_settings.top_p,
            temperature=model_settings.temperature,
            tools=[],
            parallel_tool_calls=False,
            reasoning=model_settings.reasoning,
        )
        async with self.router.stream(self.route, request, fresh_envelope(self.envelope)) as s:
            chunks = self._chunks(s)
            stream = cast(AsyncStream[ChatCompletionChunk], chunks)
            async for event in ChatCmplStreamHandler.handle_stream(shell, stream, model=self.route):
                yield event

    async def _chunks(self, events: AsyncIterator[object]) -> AsyncIterator[ChatCompletionChunk]:
        created = int(time.time())
        try:
            async for event in events:
                body = _chunk_body(event)
                if isinstance(event, Completed):
                    self._keep(event.response.record)
                if isinstance(event, PartialOutput):
                    self._keep(event.record)
                    raise partial_unavailable(event)
                if body is not None:
                    body.update(
                        id="chatcmpl-failover", object="chat.completion.chunk", created=created, model=self.route
                    )
                    yield ChatCompletionChunk.model_validate(body)
        except Unavailable as exc:
            self._keep(exc.record)
            raise


class FailoverProvider(ModelProvider):
    """Model names are route names: ``Agent(model="support")`` runs on the route ``support``.

    ``default_route`` serves agents that name no model. ``envelope`` is every model's template.
    """

    def __init__(self, router: Router, *, default_route: str | None = None, envelope: Envelope | None = None) -> None:
        self.router = router
        self.default_route = default_route
        self.envelope = envelope
        self._models: dict[str, FailoverModel] = {}

    def get_model(self, model_name: str | None) -> Model:
        name = model_name or self.default_route
        if name is None:
            raise UserError("the agent names no model and FailoverProvider has no default_route; set one of them")
        if name not in self.router.routes:
            known = ", ".join(sorted(self.router.routes)) or "(none)"
            raise UserError(f"model {name!r} is not a failover route; configured routes: {known}")
        model = self._models.get(name)
        if model is None:
            model = self._models[name] = FailoverModel(self.router, name, envelope=self.envelope)
        return model


# -- SDK input -> Request ------------------------------------------------------------------------


def _no_server_state(previous_response_id: str | None, conversation_id: str | None, prompt: object) -> None:
    if previous_response_id or conversation_id:
        raise UserError(
            "FailoverModel keeps no server-side conversation: pass the whole input instead of "
            "previous_response_id / conversation_id"
        )
    if prompt is not None:
        raise UserError("FailoverModel does not support Responses-API prompt templates; pass instructions instead")


def _request(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    settings: ModelSettings,
    tools: list[Tool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff],
) -> Request:
    messages: list[Any] = list(Converter.items_to_messages(input))
    if system_instructions:
        messages.insert(0, {"role": "system", "content": system_instructions})
    body: dict[str, Any] = {"messages": _plain(messages)}
    converted = [Converter.tool_to_openai(t) for t in tools] + [Converter.convert_handoff_tool(h) for h in handoffs]
    if converted:
        body["tools"] = _plain(converted)
        choice = Converter.convert_tool_choice(settings.tool_choice)
        if isinstance(choice, str | dict):
            body["tool_choice"] = choice
    fmt = Converter.convert_response_format(output_schema)
    if isinstance(fmt, dict):
        body["response_format"] = fmt
    for name in ("temperature", "top_p", "max_tokens"):
        value = getattr(settings, name)
        if value is not None:
            body[name] = value
    if settings.reasoning is not None and settings.reasoning.effort in ("minimal", "low", "medium", "high"):
        body["reasoning_effort"] = settings.reasoning.effort
    try:
        return openai_request(body)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _plain(value: Any) -> Any:
    """The SDK builds TypedDicts that may hold pydantic objects; the request edge wants plain JSON."""
    return json.loads(json.dumps(value, default=lambda o: o.model_dump(exclude_none=True)))


# -- Response -> SDK -------------------------------------------------------------------------------


def _content(resp: Response) -> str | None:
    if resp.text:
        return resp.text
    if resp.parsed is not None and not resp.tool_calls:
        return json.dumps(resp.parsed)
    return None


def _message(resp: Response) -> dict[str, Any]:
    return oai.assistant_message(resp, _content(resp))


def _usage(u: Usage) -> AgentsUsage:
    return AgentsUsage(
        requests=1,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        # cache_write_tokens is required by newer openai versions and unknown to older ones
        input_tokens_details=InputTokensDetails.model_validate(
            {"cached_tokens": u.cached_input_tokens, "cache_write_tokens": 0}
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=u.reasoning_tokens),
    )


def _completion_usage(u: Usage) -> CompletionUsage:
    return CompletionUsage.model_validate(oai.usage_body(u))  # the gateway's usage object, typed


def _chunk_body(event: object) -> dict[str, Any] | None:
    """One stream event as the ``choices``/``usage`` of a Chat Completions chunk (None: nothing to send)."""
    delta: dict[str, Any]
    if isinstance(event, TextDelta):
        delta = {"content": event.text}
    elif isinstance(event, ToolCallStart):
        fn = {"name": event.name, "arguments": ""}
        delta = {"tool_calls": [{"index": event.index, "id": event.id, "type": "function", "function": fn}]}
    elif isinstance(event, ToolCallDelta):
        delta = {"tool_calls": [{"index": event.index, "function": {"arguments": event.arguments}}]}
    elif isinstance(event, Completed):
        resp = event.response
        finish = oai.finish_reason(resp.stop_reason)
        if resp.text == "" and resp.parsed is not None and not resp.tool_calls:
            choice = {"index": 0, "delta": {"content": json.dumps(resp.parsed)}, "finish_reason": finish}
        else:
            choice = {"index": 0, "delta": {}, "finish_reason": finish}
        return {"choices": [choice], "usage": _completion_usage(resp.usage).model_dump()}
    else:
        return None
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
