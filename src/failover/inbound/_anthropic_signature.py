"""The signatures of thinking blocks that an Anthropic client is given and sends back: an
Anthropic block keeps its own; a block of another provider gets one failover issues, which
names its source, origin and that provider's signature, and is read back out of a client's
history (see :mod:`failover.inbound.anthropic`)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Final

from ..model import REASONING_ANTHROPIC as _ANTHROPIC_SOURCE
from ..model import REASONING_SOURCES, Reasoning
from ._anthropic_body import RedactedThinkingBlock, ThinkingBlock
from ._wire import WireError

# The mark of a signature failover issued for a block of another provider (see the module
# docstring). Anthropic signatures are base64: never a ".", so never this prefix.
SIGNATURE_MARK: Final = "failover.v1."


def client_signature(block: Reasoning) -> str:
    """The ``signature`` an Anthropic client is given for ``block``: its own for a block of an
    Anthropic model, else one failover issues that names the block's source, origin and
    signature (see the module docstring)."""
    if block.source == _ANTHROPIC_SOURCE:
        return block.signature or ""
    payload = {"source": block.source, "origin": block.origin, "signature": block.signature}
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return SIGNATURE_MARK + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _issued(signature: str, text: str, at: str) -> Reasoning:
    """A block whose signature failover issued, as it was before it went to the client."""
    token = signature[len(SIGNATURE_MARK) :]
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        payload = None
    source = payload.get("source") if isinstance(payload, dict) else None
    origin = payload.get("origin") if isinstance(payload, dict) else None
    theirs = payload.get("signature") if isinstance(payload, dict) else None
    if (
        source not in REASONING_SOURCES
        or source == _ANTHROPIC_SOURCE  # never issued for an Anthropic block: it keeps its own
        or not isinstance(origin, str | None)
        or not isinstance(theirs, str | None)
    ):
        raise WireError(
            400,
            f"{at}.signature: starts with {SIGNATURE_MARK!r} but is not a signature failover issued; send the "
            "thinking block back exactly as it was received, or leave the block out",
            param=f"{at}.signature",
        )
    assert isinstance(source, str)
    return Reasoning(text=text, signature=theirs, source=source, origin=origin)


def history_reasoning(block: ThinkingBlock | RedactedThinkingBlock, at: str) -> Reasoning:
    """A thinking block of a client's history as failover's Reasoning (origin unknown unless
    failover issued its signature)."""
    if isinstance(block, RedactedThinkingBlock):
        return Reasoning(redacted=block.data, source=_ANTHROPIC_SOURCE)
    if block.signature.startswith(SIGNATURE_MARK):
        return _issued(block.signature, block.thinking, at)
    return Reasoning(text=block.thinking, signature=block.signature or None, source=_ANTHROPIC_SOURCE)
