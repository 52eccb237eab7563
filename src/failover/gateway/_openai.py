"""The gateway's OpenAI edge: :mod:`failover.inbound.openai` with its refusals as ApiErrors.

The wire format itself lives in ``failover.inbound.openai`` (no starlette there); this module
only maps its :class:`~failover.inbound.WireError` to the gateway's :class:`ApiError`, so the
chat endpoint (and callers that expect ApiError) keep their 400 bodies.
"""

from __future__ import annotations

from typing import Any

from ..inbound import WireError
from ..inbound import openai as _wire
from ..inbound.openai import ChatCompletionBody, completion_body
from ..model import Request
from ..validation import DEFAULT_LIMITS, SchemaLimits
from ._errors import from_wire


def parse_body(data: Any) -> ChatCompletionBody:
    """:func:`failover.inbound.openai.parse_body`; a refusal is an ApiError (400 naming the field)."""
    try:
        return _wire.parse_body(data)
    except WireError as exc:
        raise from_wire(exc) from None


def to_request(body: ChatCompletionBody, *, limits: SchemaLimits = DEFAULT_LIMITS) -> Request:
    """:func:`failover.inbound.openai.to_request` without the schema checks (the gateway runs
    them after admission, off the loop); a refusal is an ApiError (400 naming the field)."""
    try:
        return _wire.to_request(body, limits=limits, schemas=False)
    except WireError as exc:
        raise from_wire(exc) from None


__all__ = ["ChatCompletionBody", "completion_body", "parse_body", "to_request"]
