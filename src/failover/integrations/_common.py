"""What the framework adapters share: a fresh envelope per call, the OpenAI-shaped request edge.

The adapters speak to the Router only; each framework's messages are turned into the
Chat Completions shape its own library already knows how to produce, and that shape into a
:class:`~failover.Request` by the validated converter the gateway uses (``failover.inbound``), so one set of
rules (and one set of error messages naming the field) covers every entry point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..model import (
    REASONING_SOURCES,
    Envelope,
    FailureKind,
    PartialOutput,
    Reasoning,
    Request,
    Response,
    Unavailable,
    new_id,
)


def fresh_envelope(template: Envelope | None) -> Envelope:
    """The adapter's envelope with a new request id: one framework call is one failover request.

    A template shared by every call would give them all the same id, which merges their
    telemetry (hooks key a request's spans by it) and their records.
    """
    rid = new_id("req_")
    return Envelope(request_id=rid) if template is None else replace(template, request_id=rid)


def answered_model(resp: Response) -> str | None:
    """The model that answered, as a framework's ``model_name`` reports it: the ``model`` of the
    target the router used (``RouteRecord.model_used``), else what the provider said it was; the
    route stays in the RouteRecord (``record.route``)."""
    if resp.record is not None and resp.record.model_used:
        return resp.record.model_used
    return resp.model


def openai_request(body: Mapping[str, Any]) -> Request:
    """A Request from a Chat Completions body; a bad field is a ValueError that names it."""
    from ..inbound import WireError
    from ..inbound.openai import parse_body, to_request

    try:
        return to_request(parse_body({"model": "failover", **body}))
    except WireError as exc:
        raise ValueError(exc.message) from None


def partial_unavailable(event: PartialOutput) -> Unavailable:
    """A stream cut after output reached the caller, as the one error type callers handle."""
    f = event.failure
    return Unavailable(
        FailureKind.PARTIAL_OUTPUT,
        f"the stream was cut after output began ({f.label}: {f.message}); nothing was spliced on",
        retryable=False,
        request_id=event.record.request_id,
        record=event.record,
    )


def block_data(block: Reasoning) -> dict[str, Any]:
    """A reasoning block as plain data a framework keeps on its message, to give back next turn."""
    return {
        "text": block.text,
        "signature": block.signature,
        "redacted": block.redacted,
        "source": block.source,
        "origin": block.origin,
    }


def reasoning_block(data: object) -> Reasoning | None:
    """The block :func:`block_data` kept, or None for data that is not one."""
    if not isinstance(data, Mapping):
        return None
    text, signature, redacted = data.get("text", ""), data.get("signature"), data.get("redacted")
    source, origin = data.get("source"), data.get("origin")
    if not (
        isinstance(text, str)
        and isinstance(signature, str | None)
        and isinstance(redacted, str | None)
        and source in REASONING_SOURCES
        and isinstance(origin, str | None)
    ):
        return None
    assert isinstance(source, str)
    return Reasoning(text=text, signature=signature, redacted=redacted, source=source, origin=origin)
