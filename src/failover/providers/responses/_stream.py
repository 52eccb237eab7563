"""The Responses API's stream: ``response.*`` events to stream events, then the Response.

The events (openai-python ``types/responses``, ``ResponseStreamEvent``) name the output item
they belong to by ``output_index`` and ``item_id``; items are assembled per item, whatever the
interleaving of their events, and an event that comes before its item's
``response.output_item.added`` opens the item. The ``data`` JSON's ``type`` names the event
(some recorders and proxies drop the ``event:`` line).

* ``response.output_text.delta`` -> ``TextDelta`` (text in arrival order); ``.done`` sends the
  rest of a part whose final text extends what was sent.
* ``response.refusal.delta`` is held back: a refusal ends the answer as CONTENT_FILTERED, as a
  refusal in a body does.
* ``function_call`` items -> ``ToolCallStart`` (``call_id``, ``name``) when the item is added,
  ``ToolCallDelta`` per ``response.function_call_arguments.delta``, ``ToolCallDone`` when the
  item is done (its final arguments are the call's). Calls are numbered 0, 1, ... in the order
  they appear; they are announced, and done, in that order (a call finished before an earlier
  one waits for it).
* ``reasoning`` items -> ``ReasoningDelta`` per ``response.reasoning_summary_text.delta`` (a
  blank line between summary parts) or ``response.reasoning_text.delta`` (open models), and
  ``ReasoningDone`` when the item is done, carrying its ``encrypted_content`` as the signature.
* ``response.completed`` / ``response.incomplete`` end the answer (usage, status: incomplete
  for ``max_output_tokens`` is truncated, for ``content_filter`` content_filtered); a stream
  that ends before one of them is incomplete. An answer whose items came only in the terminal
  event is read from it.
* ``response.failed`` and ``error`` events fail the stream, classified by their ``code`` with
  OpenAI's table (``insufficient_quota``, ``rate_limit_exceeded``, ``server_is_overloaded``...).
  The error event comes as ``{code, message, param}`` (the API reference) or with them under
  ``error`` (as recorded); both are read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from ...model import (
    Failure,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Response,
    StreamEvent,
    Target,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from ...model import Stop as StopEvent
from .._base import SSEEvent, StreamFailed
from .._common import as_dict, as_str, tool_arguments
from .._headers import HeaderMeta
from .._streaming import EMPTY, ParserBase, event_response, incomplete, load_event, with_partial
from ..openai._errors import openai_error
from ._read import (
    PROVIDER,
    SOURCE,
    SUMMARY_JOIN,
    Answer,
    block_text,
    is_hosted,
    judge,
    raw_stop,
    read_output,
    result,
    stop_reason,
    usage,
)

__all__ = ["ResponsesStream"]

_TERMINAL = frozenset({"response.completed", "response.incomplete"})


class _Item:
    """One output item as its events arrive: a message, a function call or a reasoning item."""

    __slots__ = (
        "args",
        "block",
        "call",
        "done",
        "id",
        "index",
        "key",
        "kind",
        "lock",
        "name",
        "part",
        "sent",
        "started",
        "texts",
    )

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.key = ""  # the item's id
        self.id = ""  # function_call: the call_id
        self.name = ""
        self.index = -1  # the call's or block's number (-1: not numbered yet)
        self.done = False
        self.args: list[str] = []  # function_call: argument fragments
        self.started = False  # function_call: announced (ToolCallStart sent)
        self.call: ToolCall | None = None  # function_call: complete
        self.texts: dict[int, list[str]] = {}  # message / reasoning: the parts' text sent, by part index
        self.lock: str | None = None  # reasoning: "summary" or "content", whichever was shown
        self.part = -1  # reasoning: the part shown last
        self.sent = False  # reasoning: some text was shown
        self.block: Reasoning | None = None  # reasoning: complete


class ResponsesStream(ParserBase):
    """One streamed response (see the module docstring); ``finish`` reuses the body's rules."""

    __slots__ = (
        "_blocks",
        "_by_id",
        "_by_index",
        "_calls",
        "_done",
        "_final",
        "_hosted",
        "_id",
        "_model",
        "_origin",
        "_refusal",
        "_text",
        "_usage",
    )

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        super().__init__(target, headers, meta)
        self._origin = target.key
        self._by_index: dict[int, _Item] = {}
        self._by_id: dict[str, _Item] = {}
        self._calls: list[_Item] = []  # by call number
        self._done = 0  # calls[:done] have had their ToolCallDone
        self._blocks: list[_Item] = []  # reasoning items, by block number
        self._text: list[str] = []  # every text delta sent, in order
        self._refusal: list[str] = []
        self._final: dict[str, Any] | None = None  # the terminal event's response
        self._hosted: dict[str, dict[str, Any]] = {}  # hosted tools' finished items, by item id (in order)
        self._usage = Usage()
        self._id: str | None = None
        self._model: str | None = None

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        data = event.data
        if data[:6] == "[DONE]":  # some proxies end the stream as Chat Completions does
            return EMPTY
        ev = load_event(data, PROVIDER, self._target, self._meta)
        kind = ev.get("type")
        if not isinstance(kind, str):
            kind = event.event
        out: list[StreamEvent] = []
        if kind == "response.output_text.delta":
            delta = ev.get("delta")
            if isinstance(delta, str) and delta:
                item = self._item(ev, "message")
                item.texts.setdefault(_int(ev.get("content_index")), []).append(delta)
                self._text.append(delta)
                out.append(TextDelta(text=delta))
        elif kind == "response.function_call_arguments.delta":
            delta = ev.get("delta")
            if isinstance(delta, str) and delta:
                item = self._item(ev, "function_call")
                item.args.append(delta)
                if item.started:
                    out.append(ToolCallDelta(index=item.index, arguments=delta))
        elif kind == "response.reasoning_summary_text.delta":
            self._thought(ev, "summary", _int(ev.get("summary_index")), out)
        elif kind == "response.reasoning_text.delta":
            self._thought(ev, "content", _int(ev.get("content_index")), out)
        elif kind == "response.output_item.added":
            self._added(ev, out)
        elif kind == "response.output_item.done":
            self._item_done(ev, out)
        elif kind == "response.output_text.done":
            self._text_done(ev, out)
        elif kind == "response.function_call_arguments.done":
            self._arguments_done(ev, out)
        elif kind == "response.refusal.delta":
            delta = ev.get("delta")
            if isinstance(delta, str):
                self._item(ev, "message")
                self._refusal.append(delta)
        elif kind == "response.refusal.done":
            refusal = ev.get("refusal")
            if isinstance(refusal, str) and refusal.startswith("".join(self._refusal)):
                self._refusal = [refusal]
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            self._head(as_dict(ev.get("response")))
        elif kind in _TERMINAL:
            self._end(as_dict(ev.get("response")), out)
        elif kind == "response.failed":
            response = as_dict(ev.get("response"))
            self._head(response)
            err = as_dict(response.get("error")) or {"message": "the response failed"}
            self._fail({"error": err}, data)
        elif kind == "error":
            inner = ev.get("error")
            err = dict(inner) if isinstance(inner, dict) else {k: v for k, v in ev.items() if k != "type"}
            self._fail({"error": err}, data)
        return out or EMPTY

    def finish(self) -> Response | Failure:
        res = self._response()
        if self._final is None:
            return incomplete(PROVIDER, res, self._meta)
        return judge(res, 200, self._meta)

    # ------------------------------------------------------------------------------ items

    def _item(self, ev: Mapping[str, Any], kind: str) -> _Item:
        """The item an event belongs to (by output_index, else item_id), opened if new."""
        at = ev.get("output_index")
        item_id = ev.get("item_id")
        item = self._by_index.get(at) if type(at) is int else None
        if item is None and isinstance(item_id, str):
            item = self._by_id.get(item_id)
        if item is None:
            item = _Item(kind)
            if kind == "function_call":
                item.index = len(self._calls)
                self._calls.append(item)
        if type(at) is int:
            self._by_index.setdefault(at, item)
        if isinstance(item_id, str) and item_id:
            self._by_id.setdefault(item_id, item)
            item.key = item.key or item_id
        return item

    def _added(self, ev: Mapping[str, Any], out: list[StreamEvent]) -> None:
        raw = as_dict(ev.get("item"))
        kind = as_str(raw.get("type")) or ""
        item = self._item({"output_index": ev.get("output_index"), "item_id": raw.get("id")}, kind)
        if kind == "function_call":
            item.id = item.id or as_str(raw.get("call_id")) or ""
            item.name = item.name or as_str(raw.get("name")) or ""
            first = as_str(raw.get("arguments"))
            if first and not item.args:
                item.args.append(first)
            self._announce(out)

    def _thought(self, ev: Mapping[str, Any], lock: str, part: int, out: list[StreamEvent]) -> None:
        delta = ev.get("delta")
        if not (isinstance(delta, str) and delta):
            return
        item = self._item(ev, "reasoning")
        if item.lock is None:
            item.lock = lock
        elif item.lock != lock:  # both a summary and raw text: the one shown first is the block's
            return
        texts = item.texts.setdefault(part, [])
        if item.index < 0:
            item.index = len(self._blocks)
            self._blocks.append(item)
        if item.sent and item.part != part:
            out.append(ReasoningDelta(index=item.index, text=SUMMARY_JOIN))
        item.part, item.sent = part, True
        texts.append(delta)
        out.append(ReasoningDelta(index=item.index, text=delta))

    def _text_done(self, ev: Mapping[str, Any], out: list[StreamEvent]) -> None:
        final = ev.get("text")
        if not isinstance(final, str):
            return
        item = self._item(ev, "message")
        parts = item.texts.setdefault(_int(ev.get("content_index")), [])
        sent = "".join(parts)
        if len(final) > len(sent) and final.startswith(sent):  # the rest the deltas did not bring
            rest = final[len(sent) :]
            parts.append(rest)
            self._text.append(rest)
            out.append(TextDelta(text=rest))

    def _arguments_done(self, ev: Mapping[str, Any], out: list[StreamEvent]) -> None:
        final = ev.get("arguments")
        item = self._item(ev, "function_call")
        name = ev.get("name")
        if isinstance(name, str) and name and not item.name:
            item.name = name
            self._announce(out)
        if isinstance(final, str):
            self._settle_args(item, final, out)

    def _settle_args(self, item: _Item, final: str, out: list[StreamEvent]) -> None:
        """The call's final arguments: the rest is sent when they extend the fragments."""
        sent = "".join(item.args)
        if final != sent:
            if final.startswith(sent) and item.started:
                out.append(ToolCallDelta(index=item.index, arguments=final[len(sent) :]))
            item.args = [final]

    def _item_done(self, ev: Mapping[str, Any], out: list[StreamEvent]) -> None:
        raw = as_dict(ev.get("item"))
        kind = as_str(raw.get("type")) or ""
        item = self._item({"output_index": ev.get("output_index"), "item_id": raw.get("id")}, kind)
        if item.done:
            return
        if kind == "message":
            item.done = True
            if not self._refusal:  # a refusal given whole, without deltas
                parts = [as_dict(p) for p in raw.get("content") or () if isinstance(p, dict)]
                self._refusal = [as_str(p.get("refusal")) or "" for p in parts if p.get("type") == "refusal"]
            return
        if is_hosted(kind):
            self._hosted[as_str(raw.get("id")) or f"#{len(self._hosted)}"] = raw
        if kind not in ("function_call", "reasoning"):
            return
        if kind == "function_call":
            item.id = item.id or as_str(raw.get("call_id")) or ""
            item.name = item.name or as_str(raw.get("name")) or ""
            self._announce(out)
            final = raw.get("arguments")
            if isinstance(final, str):
                self._settle_args(item, final, out)
            self._close_call(item, out)
        else:
            self._close_block(item, raw, out)

    def _close_call(self, item: _Item, out: list[StreamEvent]) -> None:
        if not item.started:  # neither id nor name ever came: announce it as it is
            self._announce(out, force=True)
        item.done = True
        arguments, parsed = tool_arguments("".join(item.args))
        item.call = ToolCall(id=item.id, name=item.name, arguments=arguments, parsed=parsed)
        # done in call order: a call finished before an earlier one waits for it
        while self._done < len(self._calls) and (ready := self._calls[self._done].call) is not None:
            out.append(ToolCallDone(index=self._done, call=ready))
            self._done += 1

    def _close_block(self, item: _Item, raw: Mapping[str, Any], out: list[StreamEvent]) -> None:
        item.done = True
        sent = SUMMARY_JOIN.join("".join(item.texts[k]) for k in sorted(item.texts))
        text = block_text(raw, item.lock) if raw else sent
        signature = as_str(raw.get("encrypted_content")) or None
        if not (text or signature):
            return
        if item.index < 0:
            item.index = len(self._blocks)
            self._blocks.append(item)
        if len(text) > len(sent) and text.startswith(sent):
            out.append(ReasoningDelta(index=item.index, text=text[len(sent) :]))
        item.block = Reasoning(text=text, signature=signature, source=SOURCE, origin=self._origin)
        out.append(ReasoningDone(index=item.index, block=item.block))

    # ------------------------------------------------------------------------------ calls

    def _announce(self, out: list[StreamEvent], *, force: bool = False) -> None:
        """Start the calls that can be, in order: a call once its id or name is known and every
        call before it has started (a client filing calls by index never sees 1 before 0)."""
        for item in self._calls:
            if item.started:
                continue
            if not (item.id or item.name or force):
                return
            item.started = True
            out.append(ToolCallStart(index=item.index, id=item.id, name=item.name))
            if item.args:  # fragments that came before the id and name
                out.append(ToolCallDelta(index=item.index, arguments="".join(item.args)))

    # ------------------------------------------------------------------------------ the end

    def _head(self, response: Mapping[str, Any]) -> None:
        if self._id is None:
            self._id = as_str(response.get("id")) or None
        if self._model is None:
            self._model = as_str(response.get("model")) or None

    def _end(self, response: dict[str, Any], out: list[StreamEvent]) -> None:
        self._head(response)
        self._final = response
        output = response.get("output")
        if not self._by_index and not self._by_id and not self._calls:  # the items came in this event only
            self._whole(read_output(output, self._origin), out)
        # items whose output_item.done never came: finished as the response lists them
        final = {as_str(i.get("id")): i for i in output if isinstance(i, dict)} if isinstance(output, list) else {}
        for key, listed in final.items():  # as the response lists them: the last word on each
            if is_hosted(listed.get("type")):
                self._hosted[key or f"#{len(self._hosted)}"] = listed
        for item in list(self._calls):
            if not item.done:
                listed = final.get(item.key) or {}
                if isinstance(listed.get("arguments"), str):
                    self._settle_args(item, listed["arguments"], out)
                self._close_call(item, out)
        for item in list(self._blocks):
            if not item.done:
                self._close_block(item, final.get(item.key) or {}, out)
        self._usage = usage(as_dict(response.get("usage")))
        out.append(UsageUpdate(usage=self._usage))
        raw = raw_stop(response)
        refused = bool(self._refusal)
        out.append(StopEvent(reason=stop_reason(raw, bool(self._calls), refused), raw=raw))

    def _whole(self, answer: Answer, out: list[StreamEvent]) -> None:
        """An answer given whole, as the events a stream of it would have carried."""
        for block in answer.reasoning:
            item = _Item("reasoning")
            item.index, item.done, item.block = len(self._blocks), True, block
            self._blocks.append(item)
            if block.text:
                out.append(ReasoningDelta(index=item.index, text=block.text))
            out.append(ReasoningDone(index=item.index, block=block))
        if answer.text:
            text = "".join(answer.text)
            self._text.append(text)
            out.append(TextDelta(text=text))
        self._refusal.extend(answer.refusal)
        for c in answer.calls:
            item = _Item("function_call")
            item.index, item.id, item.name = len(self._calls), c.id, c.name
            item.args = [c.arguments]
            self._calls.append(item)
            self._announce(out)

    def _fail(self, body: dict[str, Any], data: str) -> NoReturn:
        failure = openai_error(PROVIDER, self._target, event_response(data, self._headers), self._meta, body)
        raise StreamFailed(with_partial(failure, self._response()))

    def _response(self) -> Response:
        answer = Answer()
        answer.text = self._text
        answer.refusal = self._refusal
        answer.calls = [item.call or _pending(item) for item in self._calls]
        answer.hosted = list(self._hosted.values())
        for item in self._blocks:
            if item.block is not None:
                answer.reasoning.append(item.block)
            elif item.texts:  # cut while thinking: what had arrived
                text = SUMMARY_JOIN.join("".join(item.texts[k]) for k in sorted(item.texts))
                answer.reasoning.append(Reasoning(text=text, source=SOURCE, origin=self._origin))
        final = self._final or {}
        return result(
            answer,
            raw=raw_stop(final) if final else None,
            use=self._usage,
            model=self._model,
            response_id=self._id,
            meta=self._meta,
        )


def _pending(item: _Item) -> ToolCall:
    arguments, parsed = tool_arguments("".join(item.args))
    return ToolCall(id=item.id, name=item.name, arguments=arguments, parsed=parsed)


def _int(value: Any) -> int:
    return value if type(value) is int else 0
