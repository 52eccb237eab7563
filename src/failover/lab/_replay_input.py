"""Reading recorded requests for replay: JSONL Chat Completions bodies, or Batch API lines.

The conversion is the gateway's, so a request that replays is one the gateway serves; on top,
what a normalized Request cannot carry is refused with the file, the line and the field, since
every candidate would otherwise answer another request than the one recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..inbound import WireError
from ..inbound import openai as inbound_openai
from ..model import Request


class ReplayInputError(ValueError):
    """A recorded request that cannot be converted: names the file, the line and the field."""

    def __init__(self, source: str, line: int, field: str, problem: str) -> None:
        super().__init__(f"{source}:{line}: {field}: {problem}")
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem


class _Bad(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    line: int  # 1-based line in the JSONL file
    id: str  # the batch line's custom_id, or "line N"
    request: Request


_BATCH_KEYS = frozenset({"custom_id", "method", "url", "body"})

# The conversion is the gateway's (failover.inbound.openai). The gateway ignores a field that
# does not fit the normalized Request; a replay cannot: a candidate answering the request
# without it answers another request than the one recorded. These are the Chat Completions
# fields that change the answer and that the Request cannot carry, with what they do. A value
# that is the API's default (null, or the value below) changes nothing and is let through.
_NOT_REPLAYABLE: Mapping[str, str] = {
    "frequency_penalty": "a sampling penalty",
    "presence_penalty": "a sampling penalty",
    "logit_bias": "token biases",
    "top_logprobs": "log probabilities",
    "functions": "legacy function calling",
    "function_call": "legacy function calling",
    "audio": "audio output",
    "modalities": "output modalities",
    "prediction": "a predicted output",
    "web_search_options": "web search",
    "verbosity": "an answer length setting",
    "moderation": "output moderation",
}
_DEFAULTS: Mapping[str, object] = {
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logit_bias": {},
    "modalities": ["text"],
}
# The same inside an assistant message of the history (the gateway drops these keys).
_NOT_REPLAYABLE_TURN: Mapping[str, str] = {
    "refusal": "an assistant refusal in the history",
    "audio": "a reference to an earlier audio answer",
    "function_call": "a legacy function call in the history",
}
_NO_MODEL = "replay"  # a recording may leave out model: replay sends to its own targets


def read_requests(path: str | os.PathLike[str]) -> tuple[RecordedRequest, ...]:
    """Read a JSONL file of recorded requests; any problem raises :class:`ReplayInputError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReplayInputError(str(p), 0, "(file)", f"cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ReplayInputError(str(p), 0, "(file)", f"not UTF-8 text: {exc}") from None
    return parse_requests(text.splitlines(), source=str(p))


def parse_requests(lines: Iterable[str], *, source: str = "<input>") -> tuple[RecordedRequest, ...]:
    """Convert JSONL lines (blank lines skipped). Each line is a Chat Completions request body,
    or an OpenAI Batch API line ``{"custom_id", "method", "url", "body"}`` holding one."""
    out: list[RecordedRequest] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ReplayInputError(source, n, "(line)", f"not valid JSON: {exc}") from None
        rid = f"line {n}"
        prefix = ""
        try:
            if isinstance(data, Mapping) and "body" in data and "messages" not in data:
                extra = sorted(set(data) - _BATCH_KEYS)
                if extra:
                    raise _Bad(extra[0], f"unknown key in a batch line (expected {', '.join(sorted(_BATCH_KEYS))})")
                url = data.get("url", "/v1/chat/completions")
                if not isinstance(url, str) or not url.rstrip("/").endswith("/chat/completions"):
                    raise _Bad("url", f"only /v1/chat/completions requests can be replayed, got {url!r}")
                cid = data.get("custom_id")
                if cid is not None:
                    if not isinstance(cid, str) or not cid:
                        raise _Bad("custom_id", "must be a non-empty string")
                    rid = cid
                data, prefix = data["body"], "body."
            request = chat_request(data)
        except _Bad as bad:
            raise ReplayInputError(source, n, prefix + bad.field, bad.problem) from None
        out.append(RecordedRequest(line=n, id=rid, request=request))
    return tuple(out)


def chat_request(body: Any) -> Request:
    """Convert one recorded OpenAI Chat Completions request body into a :class:`Request`.

    The conversion is the gateway's (:mod:`failover.inbound.openai`): the same shapes are
    accepted and the same refusals name the field, so a request that replays is one the
    gateway serves. On top, replay refuses what it cannot reproduce (``_NOT_REPLAYABLE``);
    ``model`` may be left out.
    """
    if isinstance(body, dict) and "model" not in body:
        body = {**body, "model": _NO_MODEL}
    try:
        parsed = inbound_openai.parse_body(body)
        _refuse_unreplayable(body)
        # a replay sends every candidate the same Request: none of the recorded fields the
        # gateway passes through verbatim (they would leave the other dialects out)
        return replace(inbound_openai.to_request(parsed), passthrough=None)
    except WireError as exc:
        raise _Bad(exc.param or "(body)", _problem(exc)) from None


def _refuse_unreplayable(body: Mapping[str, Any]) -> None:
    """The fields the gateway would ignore that change what the recorded call asked for."""
    for key, what in _NOT_REPLAYABLE.items():
        value = body.get(key)
        if value is not None and (key not in _DEFAULTS or value != _DEFAULTS[key]):
            raise _Bad(
                key,
                f"not supported by replay ({what}): the normalized Request cannot carry it, so every "
                "candidate would answer another request than the one recorded; remove it from the recording",
            )
    for i, message in enumerate(body["messages"]):  # parse_body checked: a list of objects
        if message.get("role") != "assistant":
            continue
        for key, what in _NOT_REPLAYABLE_TURN.items():
            if message.get(key) is not None:
                raise _Bad(f"messages[{i}].{key}", f"{what} cannot be replayed; remove it from the recording")


def _problem(exc: WireError) -> str:
    """The WireError's message without what the replay error already says (the field)."""
    text = exc.message.removeprefix("invalid request body: ")
    return text.removeprefix(f"{exc.param}: ") if exc.param else text
