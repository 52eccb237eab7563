"""The four readers of the differential tests, each reduced to what they must agree on.

(a) the official SDK reading the provider's bytes directly: openai (the chunk objects of
``chat.completions.create(stream=True)``, and the ``chat.completions.stream()``
accumulator), anthropic (``messages.stream()``), google-genai (``generate_content_stream``);
(b) failover's ``Router.stream`` (whose events must also agree with its own record);
(c) the gateway with an official SDK as its client; (d) the SDK through the in-process
drop-in ``failover.httpx_client``. Each becomes a :class:`Seen`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
from google import genai
from google.genai import errors as genai_errors

from failover import Unavailable
from failover.model import (
    Completed,
    FailureKind,
    Message,
    PartialOutput,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    StopReason,
    TextDelta,
    Tool,
    ToolCallDone,
)
from failover.router import Router

from ._wire_streams import TOOL_NAMES

PROMPT = "What is the weather in Paris, and what time is it there?"
OPENAI_TOOLS: Any = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in TOOL_NAMES
]
ANTHROPIC_TOOLS: Any = [{"name": n, "input_schema": {"type": "object"}} for n in TOOL_NAMES]
REQUEST = Request(
    messages=(Message.user(PROMPT),),
    tools=tuple(Tool(name=n, parameters={"type": "object"}) for n in TOOL_NAMES),
    max_tokens=1024,
)


@dataclass(frozen=True, slots=True)
class Seen:
    """What one reader made of a stream.

    ``outcome``: ``end_turn`` / ``tool_use`` (finished), ``refused`` (the model declined),
    ``error:<cause>`` (a mid-stream error of a known cause: overloaded, rate_limit,
    server_error) or ``error`` (an error this reader cannot name). ``text``: the answer (for
    an error, what had arrived before it). ``reasoning``: the readable reasoning, joined.
    ``blocks``: the reasoning blocks' opaque parts where this reader can show them
    (Anthropic: ``("thinking", text, signature)`` / ``("redacted", data)``; Gemini: the
    thought signatures, base64), else None. ``calls``: (name, arguments) in order.
    """

    outcome: str
    text: str = ""
    reasoning: str = ""
    calls: tuple[tuple[str, Any], ...] = ()
    blocks: tuple[Any, ...] | None = None
    usage: tuple[int, int] | None = None
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome.startswith("error")


_OPENAI_CODES = {
    "server_is_overloaded": "overloaded",
    "rate_limit_exceeded": "rate_limit",
    "server_error": "server_error",
}
_ANTHROPIC_TYPES = {"overloaded_error": "overloaded", "rate_limit_error": "rate_limit", "api_error": "server_error"}
_GEMINI_CODES = {503: "overloaded", 429: "rate_limit", 500: "server_error"}
_KINDS = {
    FailureKind.PROVIDER_OVERLOADED: "error:overloaded",
    FailureKind.RATE_LIMITED: "error:rate_limit",
    FailureKind.PROVIDER_SERVER_ERROR: "error:server_error",
    FailureKind.CONTENT_FILTERED: "refused",
}
_STOPS = {StopReason.END_TURN: "end_turn", StopReason.TOOL_USE: "tool_use"}


def _finish(raw: str | None, calls: bool) -> str:
    """A dialect's finish reason, in the readers' common words."""
    if raw in ("stop", "end_turn", "STOP", "FinishReason.STOP"):
        return "tool_use" if calls and raw in ("STOP", "FinishReason.STOP") else "end_turn"
    if raw in ("tool_calls", "tool_use"):
        return "tool_use"
    if raw in ("refusal", "content_filter", "SAFETY", "FinishReason.SAFETY"):
        return "refused"
    return f"other:{raw}"


def _args(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON: kept as the text, so a comparison shows it


def _openai_error(exc: openai.APIError) -> str:
    code = exc.code if isinstance(exc.code, str) else None
    cause = _OPENAI_CODES.get(code or "")
    return f"error:{cause}" if cause else "error"


def _anthropic_error(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, Mapping) else {}
    error = body.get("error") if isinstance(body.get("error"), Mapping) else {}
    cause = _ANTHROPIC_TYPES.get(str(error.get("type")))
    return f"error:{cause}" if cause and exc.status_code == 200 else "error"


def _extra_reasoning(obj: Any) -> str:
    """The OpenAI-compatible reasoning field a delta or message carries (DeepSeek's
    ``reasoning_content``, else vLLM's ``reasoning``): extra fields the SDK keeps."""
    extra = getattr(obj, "model_extra", None) or {}
    value = extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) else ""


# -- openai ----------------------------------------------------------------------------------------


async def openai_chunks(client: openai.AsyncOpenAI, model: str, **extra: Any) -> Seen:
    """``chat.completions.create(stream=True)``: the SDK's chunk objects, read as a client
    would (text and reasoning deltas joined, tool-call deltas put together by ``index``)."""
    text, reasoning, refusal = [], [], []
    calls: dict[int, list[Any]] = {}
    finish: str | None = None
    usage: tuple[int, int] | None = None
    outcome = ""
    try:
        stream = await client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            stream_options={"include_usage": True},
            **extra,
        )
        async for chunk in stream:
            if chunk.usage is not None:
                usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            for choice in chunk.choices:
                delta = choice.delta
                text.append(delta.content or "")
                reasoning.append(_extra_reasoning(delta))
                refusal.append(delta.refusal or "")
                for tc in delta.tool_calls or ():
                    slot = calls.setdefault(tc.index, ["", ""])
                    if tc.function is not None:
                        slot[0] += tc.function.name or ""
                        slot[1] += tc.function.arguments or ""
                finish = choice.finish_reason or finish
    except openai.APIError as exc:
        outcome = _openai_error(exc)
    named = tuple((calls[i][0], _args(calls[i][1])) for i in sorted(calls))
    if not outcome:
        outcome = "refused" if "".join(refusal) else _finish(finish, bool(named))
    return Seen(outcome, "".join(text), "".join(reasoning), named, usage=usage)


async def openai_accumulated(client: openai.AsyncOpenAI, model: str, **extra: Any) -> Seen:
    """``chat.completions.stream()``: the SDK's own accumulator (``get_final_completion``);
    on an error, its snapshot so far."""
    try:
        async with client.chat.completions.stream(
            model=model, messages=[{"role": "user", "content": PROMPT}], stream_options={"include_usage": True}, **extra
        ) as stream:
            try:
                async for _ in stream:
                    pass
            except openai.APIError as exc:
                try:
                    snapshot = stream.current_completion_snapshot.choices[0].message
                except (AssertionError, AttributeError, IndexError):
                    return Seen(_openai_error(exc), detail=repr(exc))
                return Seen(_openai_error(exc), snapshot.content or "", detail=repr(exc))
            final = await stream.get_final_completion()
    except openai.APIError as exc:  # before the stream began (an HTTP error status)
        return Seen(_openai_error(exc), detail=repr(exc))
    choice = final.choices[0]
    message = choice.message
    named = tuple(
        (c.function.name, _args(c.function.arguments)) for c in message.tool_calls or () if c.type == "function"
    )
    outcome = "refused" if message.refusal else _finish(choice.finish_reason, bool(named))
    usage = (final.usage.prompt_tokens, final.usage.completion_tokens) if final.usage else None
    return Seen(outcome, message.content or "", _extra_reasoning(message), named, usage=usage)


# -- anthropic -------------------------------------------------------------------------------------


async def anthropic_stream(client: anthropic.AsyncAnthropic, model: str, **extra: Any) -> Seen:
    """``messages.stream()``: the SDK's accumulator (``get_final_message``); on an error,
    the text it had passed on."""
    text: list[str] = []
    try:
        async with client.messages.stream(
            model=model, max_tokens=1024, messages=[{"role": "user", "content": PROMPT}], **extra
        ) as stream:
            async for event in stream:
                if event.type == "text":
                    text.append(event.text)
            final = await stream.get_final_message()
    except anthropic.APIStatusError as exc:
        return Seen(_anthropic_error(exc), "".join(text), detail=repr(exc))
    blocks: list[Any] = []
    answer, reasoning, calls = [], [], []
    for b in final.content:
        if b.type == "thinking":
            blocks.append(("thinking", b.thinking, b.signature))
            reasoning.append(b.thinking)
        elif b.type == "redacted_thinking":
            blocks.append(("redacted", b.data))
        elif b.type == "text":
            answer.append(b.text)
        elif b.type == "tool_use":
            calls.append((b.name, b.input))
    outcome = _finish(final.stop_reason, bool(calls))
    usage = (final.usage.input_tokens, final.usage.output_tokens)
    return Seen(outcome, "".join(answer), "".join(reasoning), tuple(calls), tuple(blocks), usage)


# -- google-genai ----------------------------------------------------------------------------------


async def gemini_stream(client: genai.Client, model: str) -> Seen:
    """``aio.models.generate_content_stream``: the thought parts, text parts, function calls
    and thought signatures of every chunk, in order; the last finish reason and usage."""
    text, reasoning, calls, signatures = [], [], [], []
    finish: str | None = None
    usage: tuple[int, int] | None = None
    try:
        async for chunk in await client.aio.models.generate_content_stream(model=model, contents=PROMPT):
            if chunk.usage_metadata is not None and chunk.usage_metadata.prompt_token_count is not None:
                u = chunk.usage_metadata
                usage = (u.prompt_token_count or 0, (u.candidates_token_count or 0) + (u.thoughts_token_count or 0))
            for candidate in chunk.candidates or ():
                if candidate.finish_reason is not None:
                    finish = candidate.finish_reason.value
                for part in candidate.content.parts or () if candidate.content else ():
                    if part.thought_signature:
                        signatures.append(base64.b64encode(part.thought_signature).decode())
                    if part.function_call is not None:
                        calls.append((part.function_call.name, dict(part.function_call.args or {})))
                    elif part.thought:
                        reasoning.append(part.text or "")
                    else:
                        text.append(part.text or "")
    except genai_errors.APIError as exc:
        cause = _GEMINI_CODES.get(exc.code)
        return Seen(f"error:{cause}" if cause else "error", "".join(text), detail=repr(exc))
    outcome = _finish(finish, bool(calls))
    return Seen(outcome, "".join(text), "".join(reasoning), tuple(calls), tuple(signatures), usage)


# -- failover's Router -----------------------------------------------------------------------------


def _blocks(dialect: str, reasoning: tuple[Reasoning, ...]) -> tuple[Any, ...] | None:
    if dialect == "anthropic":
        return tuple(
            ("redacted", b.redacted) if b.redacted is not None else ("thinking", b.text, b.signature) for b in reasoning
        )
    if dialect == "gemini":
        return tuple(b.signature for b in reasoning if b.signature)
    return None


async def router_stream(router: Router, route: str, dialect: str) -> Seen:
    """``Router.stream``: the Completed response (after checking that the events agree with
    it: the text deltas, the tool calls done, the reasoning deltas and blocks), or the
    failure's kind (PartialOutput, Unavailable)."""
    events: list[Any] = []
    try:
        async with router.stream(route, REQUEST) as s:
            events = [e async for e in s]
    except Unavailable as exc:
        return Seen(_KINDS.get(exc.reason, f"error:{exc.reason}"), detail=exc.message)
    terminal = events[-1]
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    if isinstance(terminal, PartialOutput):
        kind = terminal.failure.kind
        assert terminal.text == streamed, f"(b) PartialOutput.text {terminal.text!r} != the text streamed {streamed!r}"
        return Seen(_KINDS.get(kind, f"error:{kind}"), terminal.text, detail=terminal.failure.message)
    assert isinstance(terminal, Completed), terminal
    resp = terminal.response
    done = tuple(e.call for e in events if isinstance(e, ToolCallDone))
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    finished = tuple(e.block for e in events if isinstance(e, ReasoningDone))
    disagree = []
    if streamed != resp.text:
        disagree.append(f"text: streamed {streamed!r}, recorded {resp.text!r}")
    if done != resp.tool_calls:
        disagree.append(f"tool calls: streamed {done!r}, recorded {resp.tool_calls!r}")
    if thought != resp.reasoning_text or finished != resp.reasoning:
        disagree.append(f"reasoning: streamed {thought!r} / {finished!r}, recorded {resp.reasoning!r}")
    assert not disagree, "(b) the Router's events and its own record disagree: " + "; ".join(disagree)
    calls = tuple((c.name, c.parsed if c.parsed is not None else _args(c.arguments)) for c in resp.tool_calls)
    outcome = _STOPS.get(resp.stop_reason, f"other:{resp.stop_reason}")
    usage = (resp.usage.input_tokens, resp.usage.output_tokens)
    return Seen(outcome, resp.text, resp.reasoning_text, calls, _blocks(dialect, resp.reasoning), usage)
