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

Reasoning comes back as the SDK's own Chat Completions models give it: the SDK's converter and
stream handler read ``reasoning_content`` (failover's Chat Completions shape) into a ``reasoning``
output item whose summary is the text (``response.reasoning_summary_text.delta`` events when
streamed). The item's ``provider_data["failover_reasoning"]`` keeps failover's blocks as they came
(text, signature, redacted data, source and origin), so when the item is sent back in the next
turn's input the router gives each block only to a target that can read it (a Claude tool loop
gets its signed thinking back). A reasoning item from elsewhere is sent back as its text, which
only Chat Completions targets read.

Each call's RouteRecord is kept on the model: ``model.record_for(response.request_id)`` for any
``ModelResponse`` in ``result.raw_responses`` (``request_id`` is failover's request id), or
``model.last_record``. No answer within the envelope raises :class:`failover.Unavailable` out
of ``Runner.run``; ``get_retry_advice`` tells the SDK's retry policies not to retry it (the
router already spent the envelope's recovery).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from agents.agent_output import AgentOutputSchemaBase
from agents.exceptions import ModelBehaviorError, UserError
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
from openai.types.responses import Response as ResponsesResponse
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from ..inbound import RelayMismatch, streamed_by
from ..inbound import openai as oai
from ..model import (
    Completed,
    Envelope,
    PartialOutput,
    Reasoning,
    Request,
    Response,
    RouteRecord,
    Unavailable,
    Usage,
)
from ..router import Router, RouteStream
from ._common import block_data, fresh_envelope, openai_request, partial_unavailable, reasoning_block

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
        output = Converter.message_to_output_items(message)
        _keep_blocks(output, resp.reasoning)
        return ModelResponse(
            output=output,
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
        answer: list[Response] = []  # the Completed answer, once the stream has it
        async with self.router.stream(self.route, request, fresh_envelope(self.envelope)) as s:
            chunks = self._chunks(s, answer, shell)
            stream = cast(AsyncStream[ChatCompletionChunk], chunks)
            # no model= here: the handler then records each chunk's model, the one that answered
            async for event in ChatCmplStreamHandler.handle_stream(shell, stream):
                if event.type == "response.completed" and answer:
                    _keep_blocks(event.response.output, answer[0].reasoning)
                yield event

    async def _chunks(
        self, events: RouteStream, answer: list[Response], shell: ResponsesResponse
    ) -> AsyncIterator[ChatCompletionChunk]:
        """Our stream as the chunks the gateway would send (the same renderer: calls started in
        order, completed, and never different from the recorded answer). The chunks and the
        ``shell`` (the SDK's ``response.created`` and ``response.completed``) name the model
        that answered, known once the first event is out; the route is ``self.route``."""
        renderer = oai.ChunkRenderer("chatcmpl-failover", int(time.time()), self.route, include_usage=True)
        bodies: list[dict[str, Any]] = []
        started = False
        try:
            async for event in events:
                if not started:
                    started = True
                    renderer.model = shell.model = streamed_by(event, events.model, self.route)
                    bodies = renderer.start()
                if isinstance(event, PartialOutput):
                    self._keep(event.record)
                    raise partial_unavailable(event)
                if isinstance(event, Completed):
                    self._keep(event.response.record)
                    answer.append(event.response)
                    bodies += renderer.end(event)
                else:
                    bodies += renderer.render(event)
                for body in bodies:
                    yield ChatCompletionChunk.model_validate(body)
                bodies = []
        except Unavailable as exc:
            self._keep(exc.record)
            raise
        except RelayMismatch as exc:
            raise ModelBehaviorError(f"failover: {exc}") from exc


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
    items, kept = _marked(input)
    # every reasoning item goes back as reasoning_content (the router decides which target reads it)
    messages: list[Any] = list(
        Converter.items_to_messages(items, model="failover", should_replay_reasoning_content=lambda _: True)
    )
    if system_instructions:
        messages.insert(0, {"role": "system", "content": system_instructions})
    body: dict[str, Any] = {"messages": _plain(messages)}
    blocks = _unmark(body["messages"], kept)
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
        request = openai_request(body)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not blocks:
        return request
    messages_out = tuple(  # one Message per body message, in order
        dataclasses.replace(m, reasoning=blocks[i]) if i in blocks else m for i, m in enumerate(request.messages)
    )
    return dataclasses.replace(request, messages=messages_out)


# A reasoning item of ours goes through the SDK's converter as this mark (its summary), which the
# converter puts on the assistant message it belongs to; the mark is then swapped for the blocks.
_MARK = "\x00failover-reasoning:"
_BLOCKS = "failover_reasoning"


def _marked(input: str | list[TResponseInputItem]) -> tuple[Any, list[tuple[Reasoning, ...]]]:
    """``input`` with failover's reasoning items marked, and their blocks by mark number."""
    if isinstance(input, str):
        return input, []
    kept: list[tuple[Reasoning, ...]] = []
    items: list[Any] = []
    for item in input:
        raw: Any = item  # a TypedDict; the Runner may hand over a model object too
        if hasattr(raw, "model_dump"):
            raw = raw.model_dump(exclude_unset=True)
        data = raw.get("provider_data") if isinstance(raw, dict) and raw.get("type") == "reasoning" else None
        found = data.get(_BLOCKS) if isinstance(data, dict) else None
        blocks = tuple(b for b in map(reasoning_block, found) if b is not None) if isinstance(found, list) else ()
        if blocks:
            items.append({**raw, "summary": [{"type": "summary_text", "text": f"{_MARK}{len(kept)}"}]})
            kept.append(blocks)
        else:
            items.append(item)
    return items, kept


def _unmark(messages: list[dict[str, Any]], kept: Sequence[tuple[Reasoning, ...]]) -> dict[int, tuple[Reasoning, ...]]:
    """Take the marks off the converted messages: message index -> the blocks it carries."""
    out: dict[int, tuple[Reasoning, ...]] = {}
    for i, m in enumerate(messages):
        mark = m.get("reasoning_content") if m.get("role") == "assistant" else None
        if isinstance(mark, str) and mark.startswith(_MARK):
            del m["reasoning_content"]
            out[i] = kept[int(mark[len(_MARK) :])]
    return out


def _keep_blocks(output: list[Any], reasoning: tuple[Reasoning, ...]) -> None:
    """Keep failover's blocks on the answer's reasoning item (one is added for blocks without
    text, which the SDK's converter makes no item for)."""
    if not reasoning:
        return
    item: Any = next((i for i in output if getattr(i, "type", None) == "reasoning"), None)
    if item is None:
        item = ResponseReasoningItem(id=FAKE_RESPONSES_ID, summary=[], type="reasoning")
        output.insert(0, item)
    data = dict(getattr(item, "provider_data", None) or {})
    data[_BLOCKS] = [block_data(r) for r in reasoning]
    item.provider_data = data  # the SDK's own extra field for what a provider needs back


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


def _usage(usage: Usage) -> AgentsUsage:
    return AgentsUsage(
        requests=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        # cache_write_tokens is required by newer openai versions and unknown to older ones
        input_tokens_details=InputTokensDetails.model_validate(
            {"cached_tokens": usage.cached_input_tokens, "cache_write_tokens": 0}
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=usage.reasoning_tokens),
    )
