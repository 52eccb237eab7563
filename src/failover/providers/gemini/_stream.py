"""Gemini ``streamGenerateContent?alt=sse`` chunks to stream events; ``finish`` reuses the body
parse's rules (:mod:`._parse`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...model import Failure, Response, StopReason, StreamEvent, Target, Usage, UsageUpdate
from ...model import Stop as StopEvent
from .._base import SSEEvent, StreamFailed
from .._common import as_dict, as_str
from .._headers import HeaderMeta
from .._streaming import EMPTY, ParserBase, event_response, incomplete, load_event, with_partial
from ._parse import error, judge, no_candidates, result_of, stop_reason, usage_of
from ._parts import Parts


class ChunkStream(ParserBase):
    """``streamGenerateContent?alt=sse``: each event is a whole GenerateContentResponse chunk,
    as the google-genai SDK yields them (one response per SSE event; it has no accumulator).

    The parts of every chunk are read in order by ``Parts``, as a whole response's parts
    are: text parts become text deltas, thought parts reasoning deltas, a functionCall part
    a whole call (start, its arguments as one delta, done), a thoughtSignature a reasoning
    block. usageMetadata is cumulative (the latest wins); the terminal marker is a
    candidate's ``finishReason``, or a ``promptFeedback.blockReason`` (a blocked prompt has
    no candidates at all). An ``{"error": ...}`` chunk is the same error as the HTTP body
    would be, classified by its code and status.
    """

    __slots__ = (
        "_block",
        "_finish",
        "_finish_message",
        "_id",
        "_model",
        "_parts",
        "_usage",
        "_usage_raw",
    )

    def __init__(self, target: Target, headers: Mapping[str, str], meta: HeaderMeta) -> None:
        super().__init__(target, headers, meta)
        self._id: str | None = None
        self._model: str | None = None
        self._parts = Parts(target.key)
        self._finish: str | None = None
        self._finish_message: str | None = None
        self._block: str | None = None
        self._usage_raw: Any = None
        self._usage = Usage()

    def feed(self, event: SSEEvent) -> Sequence[StreamEvent]:
        chunk = load_event(event.data, "gemini", self._target, self._meta)
        if "error" in chunk and "candidates" not in chunk:
            # An error mid-stream: {"error": {"code": 503, "status": "UNAVAILABLE", ...}}.
            code = as_dict(chunk.get("error")).get("code")
            status = code if isinstance(code, int) and 400 <= code < 600 else 200
            response = event_response(event.data, self._headers, status)
            raise StreamFailed(with_partial(error(self._target, response, self._meta, chunk), self._response()))
        if self._id is None:
            self._id = as_str(chunk.get("responseId"))
        if self._model is None:
            self._model = as_str(chunk.get("modelVersion"))
        out: list[StreamEvent] = []
        candidates = chunk.get("candidates")
        if candidates and isinstance(candidates, list):
            candidate = candidates[0]
            if isinstance(candidate, dict) and candidate.get("index", 0) == 0:
                self._parts.read(candidate, self._id, out)
                finish = candidate.get("finishReason")
                if finish and isinstance(finish, str):
                    out.extend(self._parts.close())
                    self._finish = finish
                    self._finish_message = as_str(candidate.get("finishMessage"))
                    out.append(StopEvent(reason=stop_reason(finish, bool(self._parts.calls)), raw=finish))
        else:
            feedback = chunk.get("promptFeedback")
            block = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if block and isinstance(block, str):
                self._block = block
                out.append(StopEvent(reason=StopReason.CONTENT_FILTER, raw=block))
        usage = chunk.get("usageMetadata")
        if usage and isinstance(usage, dict) and usage != self._usage_raw:
            self._usage_raw = usage
            self._usage = usage_of(usage)
            out.append(UsageUpdate(usage=self._usage))
        return out or EMPTY

    def finish(self) -> Response | Failure:
        if self._block is not None:
            return no_candidates(self._block, self._usage, self._model, self._id, 200, self._meta)
        result = self._response()
        if self._finish is None:
            return incomplete("gemini", result, self._meta)
        return judge(result, self._finish_message, 200, self._meta)

    def _response(self) -> Response:
        return result_of(self._parts, self._finish, self._usage, self._model, self._id, self._meta)
