"""The gateway's OpenAI edge: :mod:`failover.inbound.openai` as the chat endpoint reads it.

The wire format itself lives in ``failover.inbound.openai`` (no starlette there); a refusal is
its :class:`~failover.inbound.WireError`, which the endpoint answers like any other.
"""

from __future__ import annotations

from typing import Any

from ..inbound import openai as _wire
from ..inbound.openai import ChatCompletionBody, completion_body
from ..model import Request
from ..validation import DEFAULT_LIMITS, SchemaLimits


def parse_body(data: Any) -> ChatCompletionBody:
    """:func:`failover.inbound.openai.parse_body`; a refusal is a WireError (400 naming the field)."""
    return _wire.parse_body(data)


def to_request(body: ChatCompletionBody, *, limits: SchemaLimits = DEFAULT_LIMITS) -> Request:
    """:func:`failover.inbound.openai.to_request` without the schema checks (the gateway runs
    them after admission, off the loop); a refusal is a WireError (400 naming the field)."""
    return _wire.to_request(body, limits=limits, schemas=False)


__all__ = ["ChatCompletionBody", "completion_body", "parse_body", "to_request"]
