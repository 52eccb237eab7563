"""The OpenAI Responses stream as a server sends it: named events, each with ``sequence_number``.

Wire reference: openai-python ``types/responses/response_stream_event.py`` and the events it
names, and ``lib/streaming/responses/_responses.py`` (what ``responses.stream()`` checks: the
lifecycle id never changes, every content event follows its item's ``output_item.added``, and
every item added is done before ``response.completed``).

One answer streams as::

    response.created, response.in_progress
    per output item, one after another:
      reasoning      output_item.added, reasoning_summary_part.added,
                     reasoning_summary_text.delta..., reasoning_summary_text.done,
                     reasoning_summary_part.done, output_item.done
      message        output_item.added, content_part.added, output_text.delta...,
                     output_text.done, content_part.done, (a refusal part the same way,
                     with refusal.delta / refusal.done), output_item.done
      function_call  output_item.added, function_call_arguments.delta...,
                     function_call_arguments.done, output_item.done
    response.completed, or response.incomplete (cut by the output limit or a filter)

A failure after the stream began is an ``error`` event (``code``: failover's failure kind or
gateway code) followed by ``response.failed``.
"""

from __future__ import annotations

from typing import Any, Literal

from ..model import (
    Completed,
    FailureKind,
    PartialOutput,
    ReasoningDelta,
    ReasoningDone,
    Response,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    Usage,
    new_id,
)
from ._placing import OneOpenBlock
from ._relay import Relay
from ._responses_items import (
    NO_NAMES,
    Names,
    answer_text,
    call_item,
    envelope,
    has_message,
    message_item,
    reasoning_item,
    refusal_part,
    status_of,
    text_part,
)
from ._wire import record_summary

Event = tuple[str, dict[str, Any]]
Kind = Literal["message", "function_call", "reasoning", "hosted"]

# A stream cut after output began by one of these ends as response.incomplete, as OpenAI's does.
_INCOMPLETE = {FailureKind.TRUNCATED: "max_output_tokens", FailureKind.CONTENT_FILTERED: "content_filter"}


class _Item:
    """One output item: a message (``key`` -1), a function call (``key`` = the call's index) or a
    reasoning item (``key`` = the block's index). ``parts``: its text, arguments or summary so far;
    ``final``: the finished item as ``response.completed`` lists it."""

    __slots__ = ("call_id", "final", "has_text", "id", "index", "key", "kind", "name", "parts", "refusal", "text_done")

    def __init__(self, index: int, kind: Kind, item_id: str, key: int = -1) -> None:
        self.index = index
        self.kind = kind
        self.id = item_id
        self.key = key
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        self.refusal: str | None = None
        self.has_text = False  # a message's output_text part was added (a reasoning item's summary part)
        self.text_done = False  # ... and finished
        self.final: dict[str, Any] | None = None

    def snapshot(self, status: str = "incomplete", names: Names = NO_NAMES) -> dict[str, Any]:
        """The item as it stands when the stream ends before it finished."""
        so_far = "".join(self.parts)
        if self.kind == "function_call":
            return call_item(self.id, self.call_id, self.name, so_far, status, names=names)
        if self.kind == "reasoning":
            summary = [{"type": "summary_text", "text": so_far}] if so_far else []
            return {"id": self.id, "type": "reasoning", "summary": summary, "status": status}
        content = [text_part(so_far)] if self.has_text else []
        if self.refusal is not None:
            content.append(refusal_part(self.refusal))
        return message_item(self.id, content, status)


class EventRenderer(OneOpenBlock):
    """Server-sent events of one streamed response, as ``(event name, data)`` pairs.

    ``start()`` gives ``response.created`` and ``response.in_progress``; ``render(event)`` turns
    failover's stream events into output items (see the module docstring); ``end(completed)``
    finishes what is open and gives ``response.completed`` (or ``response.incomplete``), with
    an ``x_failover`` summary beside the response; ``failure(code, message)`` and
    ``partial(event, message)`` end a stream cut after output began.

    Items are sequential, as OpenAI's are: a function call or reasoning item that has not
    finished is never interrupted, and the events of other items wait until it is. The events
    pass through a :class:`~failover.inbound._relay.Relay` first, so what the client assembles
    always equals the answer failover records (:class:`~failover.inbound.RelayMismatch` if it
    no longer can).

    >>> r = EventRenderer("resp_1", 1700000000, "chat", {})
    >>> [name for name, _ in r.start() + r.render(TextDelta(text="Hi"))][-3:]
    ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta']
    """

    TEXT = "message"
    REASONING = "reasoning"
    TOOL = "function_call"

    def __init__(
        self,
        response_id: str,
        created: int,
        model: str,
        echo: dict[str, Any],
        *,
        request_id: str | None = None,
        names: Names = NO_NAMES,
    ) -> None:
        self.response_id = response_id
        self.created = created
        self.model = model
        self.echo = echo  # the request's settings the response repeats (responses.echo)
        self.request_id = request_id  # shown in x_failover when the response has no record
        self.names = names  # the client's (namespace, name) of each flattened tool name (responses.tool_names)
        self.relay = Relay()
        self._seq = 0
        self._items: list[_Item] = []
        self._open: _Item | None = None
        self._held: list[StreamEvent] = []  # events waiting for the open call / reasoning item
        self._usage = Usage()

    # -- the frame ----------------------------------------------------------------------------

    def _ev(self, name: str, **data: Any) -> Event:
        event = (name, {"type": name, **data, "sequence_number": self._seq})
        self._seq += 1
        return event

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        return envelope(
            self.echo,
            response_id=self.response_id,
            created=self.created,
            model=self.model,
            status=status,
            **fields,
        )

    def _output(self) -> list[dict[str, Any]]:
        return [item.final if item.final is not None else item.snapshot(names=self.names) for item in self._items]

    def start(self) -> list[Event]:
        snapshot = self._response("in_progress", output=[])
        return [self._ev("response.created", response=snapshot), self._ev("response.in_progress", response=snapshot)]

    def end(self, completed: Completed, *, now: int) -> list[Event]:
        """The rest of the answer and the terminal event; ``now``: when it completed (Unix s)."""
        resp = completed.response
        out: list[Event] = []
        for e in self.relay.end(resp):  # every call and block finished: nothing waits after this
            out += self._place(e)
        if not self.relay.text_sent and has_message(resp):  # structured output, a refusal, or nothing
            text = answer_text(resp)
            out += self._open_message(with_text=bool(text or not resp.refusal))
            if text:
                out.append(self._text_delta(text))
        if resp.refusal:
            out += self._refusal(resp.refusal)
        status, incomplete = status_of(resp.stop_reason)
        out += self._close(status)
        out += self._hosted(resp)
        final = self._response(
            status,
            output=self._output(),
            usage=resp.usage,
            incomplete=incomplete,
            completed_at=now if status == "completed" else None,
        )
        name = "response.completed" if status == "completed" else "response.incomplete"
        out.append(self._ev(name, response=final, x_failover=record_summary(resp, self.request_id)))
        return out

    def _hosted(self, resp: Response) -> list[Event]:
        """The hosted tools' items of the answer (web_search_call...), each added and done whole."""
        out: list[Event] = []
        for raw in resp.hosted_items:
            item = _Item(len(self._items), "hosted", str(raw.get("id") or new_id("ht_")))
            item.final = {**raw, "id": item.id}
            self._items.append(item)
            out.append(self._ev("response.output_item.added", output_index=item.index, item=item.final))
            out.append(self._ev("response.output_item.done", output_index=item.index, item=item.final))
        return out

    def failure(self, code: str, message: str) -> list[Event]:
        """The ``error`` event and ``response.failed`` that end a stream after output began
        (never a splice): the response lists the items as far as they came."""
        error = self._ev("error", code=code, message=message, param=None)
        final = self._response(
            "failed", output=self._output(), usage=self._usage, error={"code": "server_error", "message": message}
        )
        return [error, self._ev("response.failed", response=final)]

    def partial(self, event: PartialOutput, message: str) -> list[Event]:
        """The end of a stream cut after output began: ``response.incomplete`` (the open item
        finished as ``incomplete``) when the output limit or a filter cut it, as OpenAI ends
        such a stream; any other cause is a :meth:`failure` with code ``partial_output``."""
        why = _INCOMPLETE.get(event.failure.kind)
        if why is None:
            return self.failure("partial_output", message)
        out = self._close("incomplete")
        final = self._response(
            "incomplete", output=self._output(), usage=event.failure.usage or self._usage, incomplete=why
        )
        summary = record_summary(Response(record=event.record), self.request_id)
        return [*out, self._ev("response.incomplete", response=final, x_failover=summary)]

    # -- events -------------------------------------------------------------------------------

    def render(self, event: object) -> list[Event]:
        item = self._open
        if type(event) is TextDelta and item is not None and item.kind == "message":
            # the hot path: a text delta into the open message
            return [self._text_delta(event.text)] if self.relay.sent_text(event.text) else []
        return self._placed(event)

    def _event(self, event: StreamEvent) -> list[Event]:
        item = self._open
        if isinstance(event, TextDelta):
            out = [] if item is not None else self._open_message()
            return [*out, self._text_delta(event.text)]
        if isinstance(event, ReasoningDelta):
            out = [] if item is not None and item.kind == "reasoning" else self._open_reasoning(event.index)
            return [*out, self._summary_delta(event.text)]
        if isinstance(event, ReasoningDone):
            if item is None or item.kind != "reasoning":
                out = self._open_reasoning(event.index, with_part=False)  # a block with no text (redacted)
            else:
                out = self._summary_done()
            return [*out, *self._finish(reasoning_item(self._current().id, event.block)), *self._released()]
        if isinstance(event, ToolCallStart):
            return [*self._close(), *self._open_call(event)]
        if isinstance(event, ToolCallDelta):
            call = self._current()
            call.parts.append(event.arguments)
            return [self._item_ev("response.function_call_arguments.delta", call, delta=event.arguments)]
        if isinstance(event, ToolCallDone):
            call = self._current()
            c = event.call
            done = self._item_ev("response.function_call_arguments.done", call, arguments=c.arguments)
            final = call_item(call.id, c.id, c.name, c.arguments, names=self.names)
            return [done, *self._finish(final), *self._released()]
        return []

    # -- items --------------------------------------------------------------------------------

    def _current(self) -> _Item:
        assert self._open is not None
        return self._open

    def _item_ev(self, name: str, item: _Item, **data: Any) -> Event:
        return self._ev(name, item_id=item.id, output_index=item.index, **data)

    def _add(self, kind: Kind, prefix: str, shown: dict[str, Any], key: int = -1) -> tuple[_Item, Event]:
        item = _Item(len(self._items), kind, new_id(prefix), key)
        self._items.append(item)
        self._open = item
        added = self._ev("response.output_item.added", output_index=item.index, item={"id": item.id, **shown})
        return item, added

    def _open_message(self, *, with_text: bool = True) -> list[Event]:
        out = self._close()
        item, added = self._add(
            "message", "msg_", {"type": "message", "status": "in_progress", "content": [], "role": "assistant"}
        )
        out.append(added)
        if with_text:
            item.has_text = True
            out.append(self._item_ev("response.content_part.added", item, content_index=0, part=text_part("")))
        return out

    def _open_reasoning(self, index: int, *, with_part: bool = True) -> list[Event]:
        out = self._close()
        item, added = self._add("reasoning", "rs_", {"type": "reasoning", "summary": []}, index)
        out.append(added)
        if with_part:
            item.has_text = True
            part = {"type": "summary_text", "text": ""}
            out.append(self._item_ev("response.reasoning_summary_part.added", item, summary_index=0, part=part))
        return out

    def _open_call(self, event: ToolCallStart) -> list[Event]:
        shown = call_item("", event.id, event.name, "", "in_progress", names=self.names)
        del shown["id"]
        item, added = self._add("function_call", "fc_", shown, event.index)
        item.call_id, item.name = event.id, event.name
        return [added]

    def _text_delta(self, text: str) -> Event:
        item = self._current()
        item.parts.append(text)
        return self._item_ev("response.output_text.delta", item, content_index=0, delta=text, logprobs=[])

    def _summary_delta(self, text: str) -> Event:
        item = self._current()
        item.parts.append(text)
        return self._item_ev("response.reasoning_summary_text.delta", item, summary_index=0, delta=text)

    def _refusal(self, refusal: str) -> list[Event]:
        """A refusal part in the open message, after its text part (or in a new one, after a call)."""
        open_message = self._open is not None and self._open.kind == "message"
        out = self._text_done() if open_message else self._open_message(with_text=False)
        item = self._current()
        index = 1 if item.has_text else 0
        item.refusal = refusal
        return [
            *out,
            self._item_ev("response.content_part.added", item, content_index=index, part=refusal_part("")),
            self._item_ev("response.refusal.delta", item, content_index=index, delta=refusal),
            self._item_ev("response.refusal.done", item, content_index=index, refusal=refusal),
            self._item_ev("response.content_part.done", item, content_index=index, part=refusal_part(refusal)),
        ]

    def _text_done(self) -> list[Event]:
        """The open message's text part finished (once)."""
        item = self._current()
        if not item.has_text or item.text_done:
            return []
        item.text_done = True
        text = "".join(item.parts)
        return [
            self._item_ev("response.output_text.done", item, content_index=0, text=text, logprobs=[]),
            self._item_ev("response.content_part.done", item, content_index=0, part=text_part(text)),
        ]

    def _summary_done(self) -> list[Event]:
        """The open reasoning item's summary part finished (when it has one)."""
        item = self._current()
        if not item.has_text:
            return []
        text = "".join(item.parts)
        part = {"type": "summary_text", "text": text}
        return [
            self._item_ev("response.reasoning_summary_text.done", item, summary_index=0, text=text),
            self._item_ev("response.reasoning_summary_part.done", item, summary_index=0, part=part),
        ]

    def _finish(self, final: dict[str, Any]) -> list[Event]:
        item = self._current()
        item.final = final
        self._open = None
        return [self._ev("response.output_item.done", output_index=item.index, item=final)]

    def _close(self, status: str = "completed") -> list[Event]:
        """Finish the open item: its done events (a call or reasoning item is only left open here
        when the stream is cut, ``status`` then ``incomplete``)."""
        item = self._open
        if item is None:
            return []
        if item.kind == "message":
            out = self._text_done()
        elif item.kind == "function_call":
            out = [self._item_ev("response.function_call_arguments.done", item, arguments="".join(item.parts))]
        else:
            out = self._summary_done()
        return [*out, *self._finish(item.snapshot(status, self.names))]

    def _released(self) -> list[Event]:
        """The open call or reasoning item finished: the events that waited go out."""
        held, self._held = self._held, []
        out: list[Event] = []
        for waiting in held:
            out += self._place(waiting)
        return out


__all__ = ["Event", "EventRenderer"]
