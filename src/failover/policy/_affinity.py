"""Prompt-cache affinity: the key of a request's cacheable prefix, and the deployment it goes to.

A provider caches a prompt's prefix per deployment and bills a cached input token at down to a
tenth; spreading one conversation over equivalent deployments loses every cache hit. So requests
that share a prefix go to the same deployment while it is not over its share:
:func:`affinity_key` names the prefix, :func:`rendezvous` picks the deployment with
highest-random-weight hashing and bounded load. Both are pure and stable across processes (no
salted ``hash``), so every worker of a fleet places one prefix alike.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Mapping, Sequence

from ..model import Message, Request, TextPart, Tool

# Below this many tokens the providers do not cache a prompt, so it has no key and is spread freely.
# OpenAI: "Caching is enabled automatically for prompts that are 1024 tokens or longer"
# (https://developers.openai.com/docs/guides/prompt-caching). Anthropic's minimum cacheable prompt
# is 1024 tokens for Claude Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and Sonnet 3.7, more for some
# models (2048: Haiku 3.5, Haiku 3; 4096: Opus 4.5, Haiku 4.5)
# (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "minimum cacheable prompt length").
# 1024 is the smallest of these floors: a prompt under it is cached by neither.
MIN_CACHED_TOKENS = 1024
# A size estimate, not a count: about four characters a token for English and JSON (no
# tokenizer on this path, which runs on every request of a balanced route).
_CHARS_PER_TOKEN = 4
_MIN_CHARS = MIN_CACHED_TOKENS * _CHARS_PER_TOKEN
# An image counts as at least OpenAI's 85 tokens of a low-detail image.
_IMAGE_CHARS = 85 * _CHARS_PER_TOKEN

# A text longer than this is read as its length and its first and last _SAMPLE characters.
# The key is a placement hint, never part of an answer: two prefixes that share a key only go to
# the same deployment, as any two keys do with probability 1/n, and the bounded load still holds.
# So it need not read every character, and it must not: the key is worked out on the event loop
# for every request of a balanced route, and a coding agent's prompt is 50-100 KB. Reading
# everything cost ~29 instructions a byte under callgrind (sha256 without SHA-NI): +21% on a
# request with a 6 KB system prompt. Two long prompts that differ only in their middle share a key.
_SAMPLE = 128
# A tool's description is read as its length and its first and last _TOOL_SAMPLE characters;
# its parameters as their top-level keys and the names of their properties.
_TOOL_SAMPLE = 64


def affinity_key(request: Request, explicit: str | None = None, *, tokens: int | None = None) -> str | None:
    """The affinity key of ``request``: ``explicit`` when given (a session id the caller named,
    see ``Envelope.affinity_key``), else a 32-character hex digest of what providers cache as a
    prefix: the leading system message(s), the tools (name, description, parameters' keys,
    strict) and the first message after them. Later turns of one conversation keep its key; two
    conversations with the same system prompt and tools but another first message get different
    keys. A long text is read as a sample (its length, its first and last 128 characters), so
    the cost is bounded whatever the prompt's size.

    None when the request is under :data:`MIN_CACHED_TOKENS`: ``tokens``, the request's input
    tokens when the caller has counted them, else an estimate of about four characters a token.
    No provider would cache such a prompt, so nothing is lost by spreading it.
    """
    if explicit is not None:
        return explicit
    messages = request.messages
    count = len(messages)
    i = 0
    while i < count and messages[i].role == "system":
        i += 1
    head = messages[: i + 1]  # the leading system messages and the first message after them
    if (tokens if tokens is not None else _estimate(request)) < MIN_CACHED_TOKENS:
        return None
    tools = tuple(map(_tool_material, request.tools)) if request.tools else ()
    material = _dumps((tools, tuple(map(_material, head))))
    return hashlib.blake2b(material, digest_size=16).hexdigest()


def _estimate(request: Request) -> int:
    """Tokens, estimated from characters (no tokenizer here), read only until there are enough:
    the messages first (a length each), then the tools (their schemas walked, not serialized)."""
    size = 0
    for m in request.messages:
        if size >= _MIN_CHARS:
            return size // _CHARS_PER_TOKEN
        size += _size(m)
    for t in request.tools:
        if size >= _MIN_CHARS:
            break
        size += len(t.name) + len(t.description) + _chars(t.parameters, _MIN_CHARS - size)
    return size // _CHARS_PER_TOKEN


def _chars(value: object, enough: int) -> int:
    """About the characters of ``value`` as JSON, counted until there are ``enough``."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, Mapping):
        n = 2
        for k, v in value.items():
            if n >= enough:
                break
            n += len(str(k)) + 4 + _chars(v, enough - n)
        return n
    if isinstance(value, list | tuple):
        n = 2
        for v in value:
            if n >= enough:
                break
            n += 1 + _chars(v, enough - n)
        return n
    return 5  # a number, true, false or null


def _size(message: Message) -> int:
    """The characters of a message, an image counted as :data:`_IMAGE_CHARS`."""
    n = 0
    for p in message.content:
        n += len(p.text) if isinstance(p, TextPart) else _IMAGE_CHARS
    for c in message.tool_calls:
        n += len(c.name) + len(c.arguments)
    return n


def _sample(text: str, edge: int = _SAMPLE) -> str | tuple[int, str, str]:
    """``text``, or its length and its first and last ``edge`` characters when it is longer."""
    return text if len(text) <= 2 * edge else (len(text), text[:edge], text[-edge:])


def _material(message: Message) -> tuple[object, ...]:
    """What of a message a provider caches, sampled, as plain values (see :func:`_dumps`)."""
    parts: list[object] = []
    for p in message.content:  # a loop, not a generator: this runs for every balanced request
        parts.append(_sample(p.text) if isinstance(p, TextPart) else ("image", _sample(p.url)))
    calls = [(c.name, _sample(c.arguments)) for c in message.tool_calls] if message.tool_calls else None
    return (message.role, message.name, message.tool_call_id, parts, calls)


def _tool_material(tool: Tool) -> tuple[object, ...]:
    """A tool, sampled: its name, strict, its description's sample, its parameters' keys."""
    params = tool.parameters
    props = params.get("properties")
    names = tuple(str(k) for k in props) if isinstance(props, Mapping) else ()
    description = _sample(tool.description, _TOOL_SAMPLE) if tool.description else None
    return (tool.name, tool.strict, description, tuple(str(k) for k in params), names)


def _dumps(value: object) -> bytes:
    """``value`` as bytes that are equal exactly when the values are: marshal format 2, which
    has no back-references (later formats depend on which objects are shared, not only on
    their values) and is stable across processes and Python versions; ``repr`` for a value
    marshal cannot write (a mappingproxy or another Mapping of the parameters). blake2b of it:
    half the instructions of sha256 where the CPU has no SHA extensions, and the sample is
    small enough that either is a few microseconds where it has."""
    try:
        return marshal.dumps(value, 2)  # type: ignore[arg-type]  # ValueError below when not
    except ValueError:
        return repr(value).encode("utf-8", "surrogatepass")


# The weight order of recent (key, names): the turns of one conversation ask for it again.
_ORDERS_SIZE = 4096
_orders: dict[tuple[str, tuple[str, ...]], tuple[int, ...]] = {}


def _weight_order(key: str, names: tuple[str, ...]) -> tuple[int, ...]:
    """The indices of ``names`` by their rendezvous weight for ``key``, highest first."""
    got = _orders.get((key, names))
    if got is not None:
        return got
    prefix = key.encode("utf-8", "surrogatepass") + b"\0"
    weights = [
        int.from_bytes(hashlib.blake2b(prefix + name.encode("utf-8", "surrogatepass"), digest_size=8).digest())
        for name in names
    ]
    order = tuple(sorted(range(len(names)), key=weights.__getitem__, reverse=True))
    if len(_orders) >= _ORDERS_SIZE:  # full: start again (cheaper than an LRU; safe across threads)
        _orders.clear()
    _orders[key, names] = order
    return order


def rendezvous(
    key: str, names: Sequence[str], load: Sequence[float], *, slack: float = 0.25, floor: float = 0.0
) -> list[int]:
    """The indices of ``names`` in the order ``key`` should try them: highest-random-weight
    (rendezvous) hashing with bounded load.

    Each candidate's weight is a stable 64-bit hash of ``(key, name)``. The first index is the
    highest-weight candidate whose ``load`` is at most ``(1 + slack)`` times the mean load once
    this request is added (``(sum(load) + 1) / len(names)``; consistent hashing with bounded
    loads, Mirrokni, Thorup and Zadimoghaddam 2018); the rest follow in weight order. Removing a
    candidate moves only the keys whose first choice it was; adding one moves about 1/n of them;
    with equal loads, keys spread evenly. Some candidate is always within the bound (the least
    loaded is at most the mean). ``load`` is in any unit (requests in flight, tokens), one
    number per name; ``slack`` >= 0. ``floor``: a load no candidate is over its share at
    (a deployment with a few requests in flight is not overloaded). Names must be distinct.
    """
    n = len(names)
    if len(load) != n:
        raise ValueError(f"rendezvous: {n} names but {len(load)} loads; pass one load per name")
    if slack < 0:
        raise ValueError(f"rendezvous: slack must be >= 0, got {slack}")
    order = list(_weight_order(key, tuple(names)))
    bound = max(floor, (1.0 + slack) * (sum(load) + 1.0) / n) if n else 0.0
    for pos, i in enumerate(order):
        if load[i] <= bound:
            if pos:
                del order[pos]
                order.insert(0, i)
            break
    return order


__all__ = ["MIN_CACHED_TOKENS", "affinity_key", "rendezvous"]
