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
import threading
from collections import OrderedDict
from collections.abc import Sequence

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

# The tools of a request, by identity: a library caller usually builds its tools once and sends
# the same tuple with every request. The entry holds the tuple itself, so its id is not reused
# while it is cached. Tools are frozen; a caller mutating a parameters dict in place after
# building the Tool would only misplace requests (a key is a placement hint, never an answer).
_TOOLS_CACHE_SIZE = 64
_tools_cache: OrderedDict[int, tuple[tuple[Tool, ...], bytes, int]] = OrderedDict()
_tools_lock = threading.Lock()


def affinity_key(request: Request, explicit: str | None = None) -> str | None:
    """The affinity key of ``request``: ``explicit`` when given (a session id the caller named,
    see ``Envelope.affinity_key``), else a 32-character hex digest of what providers cache as a
    prefix: the leading system message(s), the tools (name, description, parameters, strict) and
    the first message after them. Later turns of one conversation keep its key; two conversations
    with the same system prompt and tools but another first message get different keys.

    None when the whole request is estimated under :data:`MIN_CACHED_TOKENS` (about four
    characters a token): no provider would cache it, so nothing is lost by spreading it.
    """
    if explicit is not None:
        return explicit
    messages = request.messages
    count = len(messages)
    i = 0
    while i < count and messages[i].role == "system":
        i += 1
    head = messages[: i + 1]  # the leading system messages and the first message after them
    size = sum(_size(m) for m in head)
    tools_digest = b""
    if request.tools:
        tools_digest, tools_size = _tools(request.tools)
        size += tools_size
    i += 1
    while size < _MIN_CHARS and i < count:  # the rest counts toward the size only
        size += _size(messages[i])
        i += 1
    if size < _MIN_CHARS:
        return None
    return hashlib.sha256(_dumps((tools_digest, tuple(_material(m) for m in head)))).hexdigest()[:32]


def _size(m: Message) -> int:
    """The characters of a message, an image counted as :data:`_IMAGE_CHARS`."""
    n = 0
    for p in m.content:
        n += len(p.text) if isinstance(p, TextPart) else _IMAGE_CHARS
    for c in m.tool_calls:
        n += len(c.name) + len(c.arguments)
    return n


def _material(m: Message) -> tuple[object, ...]:
    """What of a message a provider caches, as plain values (see :func:`_dumps`)."""
    parts = tuple(p.text if isinstance(p, TextPart) else ("image", p.url) for p in m.content)
    calls = tuple((c.name, c.arguments) for c in m.tool_calls)
    return (m.role, m.name, m.tool_call_id, parts, calls)


def _tools(tools: tuple[Tool, ...]) -> tuple[bytes, int]:
    """(digest, size in characters) of ``tools``, cached by the identity of the tuple."""
    ident = id(tools)
    got = _tools_cache.get(ident)
    if got is not None and got[0] is tools:
        return got[1], got[2]
    # Key order counts, as it does for the provider's cache (the bytes sent); a sorted json.dumps
    # took ~300 us for 50 tools of 40 KB, this ~100 us.
    data = _dumps(tuple((t.name, t.description, t.parameters, t.strict) for t in tools))
    digest = hashlib.sha256(data).digest()[:16]
    with _tools_lock:
        _tools_cache[ident] = (tools, digest, len(data))
        while len(_tools_cache) > _TOOLS_CACHE_SIZE:
            _tools_cache.popitem(last=False)
    return digest, len(data)


def _dumps(value: object) -> bytes:
    """``value`` as bytes that are equal exactly when the values are: marshal format 2, which
    has no back-references (later formats depend on which objects are shared, not only on
    their values) and is stable across processes and Python versions; ``repr`` for a value
    marshal cannot write (a mappingproxy or another Mapping of the parameters). sha256 of it:
    hardware-accelerated on current CPUs, twice as fast as blake2b here."""
    try:
        return marshal.dumps(value, 2)  # type: ignore[arg-type]  # ValueError below when not
    except ValueError:
        return repr(value).encode("utf-8", "surrogatepass")


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
    prefix = key.encode("utf-8", "surrogatepass") + b"\0"
    weights = [
        int.from_bytes(hashlib.blake2b(prefix + name.encode("utf-8", "surrogatepass"), digest_size=8).digest())
        for name in names
    ]
    order = sorted(range(n), key=weights.__getitem__, reverse=True)
    bound = max(floor, (1.0 + slack) * (sum(load) + 1.0) / n) if n else 0.0
    for pos, i in enumerate(order):
        if load[i] <= bound:
            if pos:
                del order[pos]
                order.insert(0, i)
            break
    return order


__all__ = ["MIN_CACHED_TOKENS", "affinity_key", "rendezvous"]
