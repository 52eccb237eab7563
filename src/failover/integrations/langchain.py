"""A LangChain chat model over a failover Router (``pip install 'failover[langchain]'``).

    from failover.integrations.langchain import FailoverChatModel

    model = FailoverChatModel(router=router, route="support", envelope=Envelope(budget=10, max_attempts=4))
    msg = await model.ainvoke("Where is my parcel?")
    msg.response_metadata["failover"]["target_used"]        # the RouteRecord, as a dict

    agent_model = model.bind_tools([lookup_order])         # tools, tool_choice
    answer = await model.with_structured_output(Answer).ainvoke("...")   # json_schema by default

Messages go through LangChain's own ``convert_to_openai_messages`` and then the validated
Chat Completions converter the gateway uses (``failover.inbound.openai``), so images, tool
calls and tool results map the same way everywhere. The answer comes back as an
``AIMessage``: text, ``tool_calls``, ``usage_metadata``, ``response_metadata``
(``finish_reason``, ``model_name``, ``failover`` = ``RouteRecord.to_dict()``).

Reasoning is in ``additional_kwargs``, where LangChain's chat models for reasoning APIs put it:
``reasoning_content`` (the text of every block, joined; ``AIMessage.content_blocks`` shows it as a
standard ``reasoning`` block), and ``failover_reasoning``, failover's blocks as they came (text,
signature, redacted data, source and origin). Streamed chunks carry the same keys, so the chunks
added up equal the plain answer. Sent back in the history, ``failover_reasoning`` goes to each
target that can read it (a Claude tool loop gets its signed thinking back); a message with only
``reasoning_content`` (another model's) is sent as text only Chat Completions targets read.

No answer within the envelope raises :class:`failover.Unavailable` (LangChain passes it through
``ainvoke`` and reports it to ``on_llm_error`` callbacks); a stream cut after text reached the
caller raises ``Unavailable`` with reason ``partial_output``. The Router is async: ``invoke`` /
``stream`` need a :class:`failover.SyncRouter` as ``router``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, convert_to_openai_messages
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict

from ..inbound import Relay
from ..model import REASONING_OPENAI as OPENAI
from ..model import (
    Completed,
    Envelope,
    PartialOutput,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from ..router import Router, SyncRouter
from ._common import answered_model, block_data, fresh_envelope, openai_request, partial_unavailable, reasoning_block

__all__ = ["FailoverChatModel"]

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class FailoverChatModel(BaseChatModel):
    """A ``BaseChatModel`` whose every call is one ``router.complete`` (or ``router.stream``).

    ``envelope`` bounds each call (deadline, attempts, cost, fallback permission); every call
    gets a fresh request id. The sampling fields are sent unless a call overrides them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    router: Router | SyncRouter
    route: str
    envelope: Envelope | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None

    @property
    def _llm_type(self) -> str:
        return "failover"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"route": self.route, "max_tokens": self.max_tokens, "temperature": self.temperature}

    # -- request -------------------------------------------------------------------------------

    def _request(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> Request:
        """The framework's messages and call options as one failover Request."""
        body: dict[str, Any] = {"messages": convert_to_openai_messages(messages)}
        for name in ("max_tokens", "temperature", "top_p", "seed"):
            value = kwargs.get(name, getattr(self, name))
            if value is not None:
                body[name] = value
        for name in ("tools", "tool_choice", "response_format"):
            if kwargs.get(name) is not None:
                body[name] = kwargs[name]
        if stop:
            body["stop"] = stop
        request = openai_request(body)
        # the reasoning of each AI message goes on the assistant message it became (in order)
        kept = iter([_history_reasoning(m) for m in messages if isinstance(m, AIMessage)])
        out = [
            dataclasses.replace(m, reasoning=next(kept, ())) if m.role == "assistant" else m for m in request.messages
        ]
        return dataclasses.replace(request, messages=tuple(out))

    def _envelope(self, kwargs: dict[str, Any]) -> Envelope:
        given = kwargs.get("envelope")
        return given if isinstance(given, Envelope) else fresh_envelope(self.envelope)

    # -- calls ---------------------------------------------------------------------------------

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request = self._request(messages, stop, kwargs)
        envelope = self._envelope(kwargs)
        if isinstance(self.router, SyncRouter):  # run on its loop; this loop keeps serving meanwhile
            work = self.router.submit(self.router.router.complete(self.route, request, envelope))
            return _result(await asyncio.wrap_future(work))
        return _result(await self.router.complete(self.route, request, envelope))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if not isinstance(self.router, SyncRouter):
            raise NotImplementedError(
                "FailoverChatModel over an async Router: use ainvoke/astream, or pass "
                "router=SyncRouter(lambda: Router(...)) for invoke/stream"
            )
        request = self._request(messages, stop, kwargs)
        return _result(self.router.complete(self.route, request, self._envelope(kwargs)))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        if isinstance(self.router, SyncRouter):
            raise NotImplementedError("streaming needs the async Router: pass router=Router(...) and use astream")
        request = self._request(messages, stop, kwargs)
        relay = Relay()  # the chunks add up to the recorded answer, or RelayMismatch is raised
        async with self.router.stream(self.route, request, self._envelope(kwargs)) as s:
            async for event in s:
                if isinstance(event, PartialOutput):
                    raise partial_unavailable(event)
                shown = relay.end(event.response) if isinstance(event, Completed) else relay.feed(event)
                for e in shown:
                    chunk = _chunk(e)
                    if chunk is not None:
                        if run_manager is not None and isinstance(e, TextDelta):
                            await run_manager.on_llm_new_token(e.text, chunk=chunk)
                        yield chunk
                if isinstance(event, Completed):
                    yield _last_chunk(event.response, relay.text_sent)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # The sync facade has no stream; one whole answer is a (one-chunk) stream.
        result = self._generate(messages, stop, run_manager, **kwargs)
        message = result.generations[0].message
        assert isinstance(message, AIMessage)
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=message.content,
                tool_call_chunks=[
                    {
                        "name": c["name"],
                        "args": json.dumps(c["args"]),
                        "id": c["id"],
                        "index": i,
                        "type": "tool_call_chunk",
                    }
                    for i, c in enumerate(message.tool_calls)
                ],
                additional_kwargs=message.additional_kwargs,
                usage_metadata=message.usage_metadata,
                response_metadata=message.response_metadata,
                chunk_position="last",
            )
        )

    # -- tools and structured output -----------------------------------------------------------

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Tools in any form LangChain accepts; ``tool_choice`` is a tool name, "auto", "none",
        "required" or "any" (the same as "required")."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = _tool_choice(tool_choice, {t["function"]["name"] for t in formatted})
        return self.bind(tools=formatted, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: Literal["json_schema", "function_calling"] = "json_schema",
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """``json_schema`` (default): the route's structured output, validated by the router against
        the schema before it counts as an answer (a schema_invalid answer is repaired or failed over).
        ``function_calling``: LangChain's forced-tool method."""
        if method == "function_calling":
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        if kwargs:
            raise ValueError(f"with_structured_output got unsupported arguments {sorted(kwargs)}")
        tool = convert_to_openai_tool(schema)["function"]
        fmt = {
            "type": "json_schema",
            "json_schema": {"name": tool["name"], "schema": tool["parameters"], "strict": True},
        }
        llm = self.bind(response_format=fmt)
        parse = RunnableLambda(_parser(schema))
        if not include_raw:
            return llm | parse
        parsed = RunnablePassthrough.assign(parsed=itemgetter("raw") | parse, parsing_error=lambda _: None)
        failed = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parsed.with_fallbacks([failed], exception_key="parsing_error")


def _tool_choice(choice: str, names: set[str]) -> str | dict[str, Any]:
    if choice == "any":
        return "required"
    if choice in ("auto", "none", "required"):
        return choice
    if choice not in names:
        raise ValueError(f"tool_choice {choice!r} is not one of the bound tools {sorted(names)}")
    return {"type": "function", "function": {"name": choice}}


def _parser(schema: dict[str, Any] | type) -> Callable[[AIMessage], Any]:
    def parse(message: AIMessage) -> Any:
        data = json.loads(message.text)
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_validate(data)
        return data

    return parse


# -- our Response -> LangChain -------------------------------------------------------------------


def _usage(usage: Usage) -> UsageMetadata:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "input_token_details": {"cache_read": usage.cached_input_tokens},
        "output_token_details": {"reasoning": usage.reasoning_tokens},
    }


def _metadata(resp: Response) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "finish_reason": _FINISH.get(resp.stop_reason.value, resp.stop_reason.value),
        "model_name": answered_model(resp),
        "model_provider": "failover",
        "provider_request_id": resp.provider_request_id,
    }
    if resp.record is not None:
        meta["failover"] = resp.record.to_dict()
    return meta


def _text(resp: Response) -> str:
    if resp.text or resp.parsed is None:
        return resp.text
    return json.dumps(resp.parsed, separators=(",", ":"))


def _reasoning_kwargs(reasoning: tuple[Reasoning, ...]) -> dict[str, Any]:
    if not reasoning:
        return {}
    out: dict[str, Any] = {"failover_reasoning": [block_data(b) for b in reasoning]}
    text = "".join(b.text for b in reasoning)
    if text:
        out["reasoning_content"] = text
    return out


def _history_reasoning(message: AIMessage) -> tuple[Reasoning, ...]:
    """The reasoning an AI message of the history carries (see the module docstring)."""
    kept = message.additional_kwargs.get("failover_reasoning")
    if isinstance(kept, list):
        blocks = tuple(b for b in map(reasoning_block, kept) if b is not None)
        if blocks:
            return blocks
    text = message.additional_kwargs.get("reasoning_content")
    return (Reasoning(text=text, source=OPENAI),) if isinstance(text, str) and text else ()


def _message(resp: Response) -> AIMessage:
    return AIMessage(
        content=_text(resp),
        additional_kwargs=_reasoning_kwargs(resp.reasoning),
        tool_calls=[
            {"name": c.name, "args": dict(c.parsed or {}), "id": c.id, "type": "tool_call"} for c in resp.tool_calls
        ],
        usage_metadata=_usage(resp.usage),
        response_metadata=_metadata(resp),
        id=resp.response_id,
    )


def _result(resp: Response) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=_message(resp))])


def _chunk(event: StreamEvent) -> ChatGenerationChunk | None:
    """One (relayed) stream event as a LangChain chunk."""
    if isinstance(event, TextDelta):
        return ChatGenerationChunk(message=AIMessageChunk(content=event.text))
    if isinstance(event, ReasoningDelta):
        return ChatGenerationChunk(
            message=AIMessageChunk(content="", additional_kwargs={"reasoning_content": event.text})
        )
    if isinstance(event, ReasoningDone):
        kept = {"failover_reasoning": [block_data(event.block)]}  # lists add up block by block
        return ChatGenerationChunk(message=AIMessageChunk(content="", additional_kwargs=kept))
    if isinstance(event, ToolCallStart):
        chunks = [{"name": event.name, "args": "", "id": event.id, "index": event.index, "type": "tool_call_chunk"}]
        return ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))
    if isinstance(event, ToolCallDelta):
        chunks = [{"name": None, "args": event.arguments, "id": None, "index": event.index, "type": "tool_call_chunk"}]
        return ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))
    return None


def _last_chunk(resp: Response, text_sent: bool) -> ChatGenerationChunk:
    """The Completed event's chunk: usage and metadata (and structured output sent without text)."""
    content = "" if text_sent or resp.text else _text(resp)
    return ChatGenerationChunk(
        message=AIMessageChunk(
            content=content,
            usage_metadata=_usage(resp.usage),
            response_metadata=_metadata(resp),
            chunk_position="last",
        )
    )
