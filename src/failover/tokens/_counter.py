"""Count a request's input tokens before it is sent.

The router counts in preflight, for every candidate target: to check that input plus
``max_tokens`` fits the context window (the one failure that can be avoided before paying
for it), to estimate cost and to reserve rate-limit tokens. Counting is on every request's
hot path, so both counters are plain loops over the messages with no I/O.

Two counters:

* ``TiktokenCounter`` counts text exactly with OpenAI's tokenizer and adds the chat framing
  of OpenAI's cookbook (``How_to_count_tokens_with_tiktoken``): 3 tokens per message plus its
  role, 1 more when a message has a name, and 3 that prime the reply. The cookbook's example
  conversation counts 129 tokens with ``cl100k_base`` (gpt-4) and 124 with ``o200k_base``
  (gpt-4o), as the API reported. Tools, response schemas and images are approximations.
* ``EstimateCounter`` estimates by character class for dialects with no local tokenizer
  (Anthropic, Gemini, unknown OpenAI-compatible models) and errs on the high side.

Which counter a target gets, loaded once per process, is decided in ``_choose``
(``counter_for``).
"""

from __future__ import annotations

import json
import math
import string
import threading
from collections.abc import Callable, Mapping, Sized
from typing import Any, Protocol, runtime_checkable

import tiktoken

from ..model import ImagePart, Message, Request, TextPart, Tool

# OpenAI chat framing, from the cookbook: every message is <|start|>{role}<|message|>{content}<|end|>
# (3 tokens plus the role's own tokens), a name costs 1 more than its text, and every reply is
# primed with <|start|>assistant<|message|>.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

# OpenAI images: low detail costs a flat 85 tokens. High (and auto) detail fits the image in
# 2048x2048, scales its short side down to 768 and costs 85 + 170 per 512px tile. Without the
# image's size we assume the most tiles that can come out of that: a 2048x768 image (or any
# longer one, scaled to it) is 4 x 2 = 8 tiles, 85 + 8 * 170 = 1445 tokens. This is the bound
# for models priced 85 + 170 per tile (gpt-4o, gpt-4.1, gpt-4.5); models priced otherwise
# (gpt-4o-mini's 2833 + 5667 per tile, patch-priced gpt-4.1-mini/nano, gpt-5-mini) can charge
# more: pass ``image_tokens`` for them.
IMAGE_TOKENS_LOW = 85
IMAGE_TOKENS_HIGH = 85 + 170 * 4 * 2

# A tools or response-schema section adds a wrapper to the prompt; the cookbook measures 12
# tokens for the tools namespace (its ``func_end``). Each tool call in the history is counted
# as its name, its arguments and this much framing.
SECTION_OVERHEAD = 12
TOOL_CALL_OVERHEAD = 3

# Anthropic: tokens ~= width * height / 750, and images over ~1.15 megapixels are scaled down
# first, which caps one image near 1,600 tokens. Without the image's size we assume the cap.
ESTIMATE_IMAGE_TOKENS = 1_600
# Anthropic adds a tool-use system prompt when tools are present; 530 tokens is the largest
# count its documentation lists (Claude 3 Opus, tool_choice auto). Newer models use fewer.
ESTIMATE_TOOL_PROMPT = 530

# EstimateCounter weights, in tokens per character, measured against cl100k_base and o200k_base
# (see docs/tokens.md). ASCII letters and whitespace use ``chars_per_token``; ASCII digits and
# punctuation tokenize densely in code, JSON and numbers; every non-ASCII character counts as
# at least one token (CJK, Hangul, Thai, Devanagari, Cyrillic...), and characters outside the
# Basic Multilingual Plane (emoji, mostly, often joined into sequences) count three.
_PUNCT_WEIGHT = 0.6
_NON_ASCII_WEIGHT = 1.0
_ASTRAL_WEIGHT = 3.0
_LETTERS_AND_SPACE = (string.ascii_letters + string.whitespace).encode("ascii")

_ROLES = ("system", "user", "assistant", "tool")
# Shorter texts encode in a few microseconds: not worth a cache entry.
_CACHED_TEXT_MIN = 64


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the input tokens of a request: messages, tools, response schema and images.

    ``name`` identifies the counter in records and logs, e.g. ``tiktoken:o200k_base``.
    """

    @property
    def name(self) -> str: ...

    def count(self, request: Request) -> int: ...


def _json(value: Any) -> str:
    # Compact, and without \\u escapes: the provider renders the decoded text into the prompt.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _tool_json(name: str, description: str, parameters: Mapping[str, Any]) -> str:
    spec: dict[str, Any] = {"name": name}
    if description:
        spec["description"] = description
    spec["parameters"] = parameters
    return _json(spec)


class _EncodedCounter:
    """Exact text counts from an encoder, with OpenAI's chat framing (see ``TiktokenCounter``).

    Shared by ``TiktokenCounter`` and ``HFTokenizerCounter``: ``_encode(text)`` returns a sized
    sequence of tokens for ordinary text. The framing constants are per instance, because
    other chat formats wrap messages, tools and schemas differently.
    """

    __slots__ = (
        "_cache",
        "_cache_lock",
        "_cache_size",
        "_encode",
        "_image_high",
        "_image_low",
        "_roles",
        "_schema_overhead",
        "_tool_argument_overhead",
        "_tool_call_overhead",
        "_tools_overhead",
        "name",
    )

    _encode: Callable[[str], Sized]
    name: str

    def _setup(
        self,
        encode: Callable[[str], Sized],
        *,
        image_tokens: int,
        low_detail_image_tokens: int,
        cache_size: int,
        tools_overhead: int = SECTION_OVERHEAD,
        schema_overhead: int = SECTION_OVERHEAD,
        tool_call_overhead: int = TOOL_CALL_OVERHEAD,
        tool_argument_overhead: int = 0,
    ) -> None:
        self._encode = encode
        self._image_high = image_tokens
        self._image_low = low_detail_image_tokens
        self._tools_overhead = tools_overhead
        self._schema_overhead = schema_overhead
        self._tool_call_overhead = tool_call_overhead
        self._tool_argument_overhead = tool_argument_overhead
        self._roles = {role: len(encode(role)) for role in _ROLES}
        self._cache: dict[tuple[int, int], int] = {}
        self._cache_lock = threading.Lock()
        self._cache_size = cache_size

    def count_text(self, text: str) -> int:
        """Tokens of a text alone, without any framing."""
        if len(text) < _CACHED_TEXT_MIN or self._cache_size <= 0:
            return len(self._encode(text)) if text else 0
        key = (len(text), hash(text))
        n = self._cache.get(key)
        if n is None:
            n = len(self._encode(text))
            with self._cache_lock:
                if len(self._cache) >= self._cache_size:
                    del self._cache[next(iter(self._cache))]
                self._cache[key] = n
        return n

    def count_message(self, message: Message) -> int:
        """Tokens of one message with its framing (3 + role, +1 for a name)."""
        text = self.count_text
        role = self._roles.get(message.role)
        n = TOKENS_PER_MESSAGE + (role if role is not None else text(message.role))
        for part in message.content:
            if isinstance(part, TextPart):
                n += text(part.text)
            elif isinstance(part, ImagePart):
                n += self._image_low if part.detail == "low" else self._image_high
        if message.name:
            n += text(message.name) + TOKENS_PER_NAME
        for call in message.tool_calls:
            n += self._tool_call_overhead + text(call.name) + text(call.arguments)
            if self._tool_argument_overhead:
                # Formats that wrap each argument (DeepSeek's DSML): one wrapper per key. Nested
                # keys are counted too, which errs high.
                n += self._tool_argument_overhead * call.arguments.count('":')
        if message.tool_call_id:
            n += text(message.tool_call_id)
        return n

    def _tool_text(self, tool: Tool) -> str:
        return _tool_json(tool.name, tool.description, tool.parameters)

    def count(self, request: Request) -> int:
        n = REPLY_PRIMING
        for message in request.messages:
            n += self.count_message(message)
        if request.tools:
            n += self._tools_overhead
            for tool in request.tools:
                n += self.count_text(self._tool_text(tool))
        fmt = request.response_format
        if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
            n += self._schema_overhead + self.count_text(fmt.name) + self.count_text(_json(fmt.schema))
        return n


class TiktokenCounter(_EncodedCounter):
    """Counts with a tiktoken encoding and OpenAI's chat framing.

    Text is exact for the encoding. Tool definitions are counted as the compact JSON of each
    function (name, description, parameters) plus ``SECTION_OVERHEAD``: OpenAI renders them
    differently, and the JSON is the larger of the two (the cookbook's weather tool: 77 JSON
    tokens where the API charges 71 with cl100k_base, 78 for 68 with o200k_base). Images count
    ``IMAGE_TOKENS_LOW`` (85) at low detail and ``IMAGE_TOKENS_HIGH`` (1445) otherwise, the
    most a tile-priced model charges when the image's size is unknown.

    Counts of texts of ``_CACHED_TEXT_MIN`` characters or more are remembered (up to
    ``cache_size`` of them, oldest out first), so a conversation resent turn after turn is
    encoded once: encoding costs ~35 ns per character, a lookup well under a microsecond. The
    key is the text's length and hash, not the text, so the cache holds no prompt text; two
    different texts of one length sharing a 64-bit hash would share a count.

    Loading an encoding takes a while (0.1-0.3 s); ``counter_for`` keeps one per process.
    Raises whatever tiktoken raises when the encoding cannot be loaded.

    >>> TiktokenCounter("o200k_base").count(Request.simple("Hello"))  # 3 + (3 + 1 + 1) per the cookbook
    8
    """

    __slots__ = ("encoding_name",)

    def __init__(
        self,
        encoding_name: str,
        *,
        image_tokens: int = IMAGE_TOKENS_HIGH,
        low_detail_image_tokens: int = IMAGE_TOKENS_LOW,
        cache_size: int = 4_096,
    ) -> None:
        encoding = tiktoken.get_encoding(encoding_name)
        self.encoding_name = encoding_name
        # The name keys cached counts (the router keeps one count per name and request), so
        # counters that count differently must be named differently.
        self.name = f"tiktoken:{encoding_name}"
        if (image_tokens, low_detail_image_tokens) != (IMAGE_TOKENS_HIGH, IMAGE_TOKENS_LOW):
            self.name += f"(images={image_tokens}/{low_detail_image_tokens})"
        # encode_ordinary: user text that looks like a special token is plain text to the
        # provider too, and encode() would raise on it.
        self._setup(
            encoding.encode_ordinary,
            image_tokens=image_tokens,
            low_detail_image_tokens=low_detail_image_tokens,
            cache_size=cache_size,
        )

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"


class EstimateCounter:
    """A conservative estimate for targets without a local tokenizer.

    Text is weighed by character class: ASCII letters and whitespace at ``chars_per_token``
    characters per token; ASCII digits and punctuation at 0.6 tokens each; every other
    character at one token or more (CJK ~1 token per character in the tokenizers measured,
    some scripts more than one in older ones). The text total is multiplied by ``safety``.
    Framing follows ``TiktokenCounter`` (4 per message, 3 for the reply). Tools count their
    JSON plus ``tool_prompt`` (Anthropic's tool-use system prompt); each image counts
    ``image_tokens``, Anthropic's ~1,600-token cap for an image of unknown size.

    Measured against tiktoken, it counts 1.6-1.9x for English prose and code, 1.1x for JSON,
    1.1-1.7x for Chinese and Japanese; dense random text (base64, hex ids) can be undercounted
    by 20-30%. See docs/tokens.md.

    >>> EstimateCounter().count(Request.simple("Hello"))
    9
    """

    __slots__ = ("_image_tokens", "_inv_cpt", "_tool_prompt", "chars_per_token", "name", "safety")

    def __init__(
        self,
        chars_per_token: float = 3.0,
        safety: float = 1.1,
        *,
        image_tokens: int = ESTIMATE_IMAGE_TOKENS,
        tool_prompt: int = ESTIMATE_TOOL_PROMPT,
    ) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        if safety < 1.0:
            raise ValueError("safety must be at least 1.0: the estimate may only err high")
        self.chars_per_token = chars_per_token
        self.safety = safety
        # The name keys cached counts (see TiktokenCounter): non-default settings show in it.
        self.name = "estimate"
        settings = (chars_per_token, safety, image_tokens, tool_prompt)
        if settings != (3.0, 1.1, ESTIMATE_IMAGE_TOKENS, ESTIMATE_TOOL_PROMPT):
            self.name += "(cpt={},safety={},image={},tools={})".format(*settings)
        self._inv_cpt = 1.0 / chars_per_token
        self._image_tokens = image_tokens
        self._tool_prompt = tool_prompt

    def __repr__(self) -> str:
        return f"EstimateCounter(chars_per_token={self.chars_per_token}, safety={self.safety})"

    def _text(self, text: str) -> float:
        """Tokens of one text before the safety factor."""
        if not text:
            return 0.0
        if text.isascii():
            raw = text.encode("ascii")
            dense = len(raw.translate(None, _LETTERS_AND_SPACE))
            return (len(raw) - dense) * self._inv_cpt + dense * _PUNCT_WEIGHT
        raw = text.encode("ascii", "ignore")
        dense = len(raw.translate(None, _LETTERS_AND_SPACE))
        non_ascii = len(text) - len(raw)
        astral = len(text.encode("utf-16-le")) // 2 - len(text)  # each needs a surrogate pair
        return (
            (len(raw) - dense) * self._inv_cpt
            + dense * _PUNCT_WEIGHT
            + (non_ascii - astral) * _NON_ASCII_WEIGHT
            + astral * _ASTRAL_WEIGHT
        )

    def count_text(self, text: str) -> int:
        return math.ceil(self._text(text) * self.safety)

    def _message(self, message: Message) -> tuple[float, int]:
        """(text tokens before the safety factor, fixed tokens) of one message."""
        units = 0.0
        fixed = TOKENS_PER_MESSAGE + 1  # the role
        for part in message.content:
            if isinstance(part, TextPart):
                units += self._text(part.text)
            elif isinstance(part, ImagePart):
                fixed += self._image_tokens
        if message.name:
            units += self._text(message.name)
            fixed += TOKENS_PER_NAME
        for call in message.tool_calls:
            units += self._text(call.name) + self._text(call.arguments)
            fixed += TOOL_CALL_OVERHEAD
        if message.tool_call_id:
            units += self._text(message.tool_call_id)
        return units, fixed

    def count(self, request: Request) -> int:
        units = 0.0
        fixed = REPLY_PRIMING
        for message in request.messages:
            u, f = self._message(message)
            units += u
            fixed += f
        if request.tools:
            fixed += SECTION_OVERHEAD + self._tool_prompt
            for tool in request.tools:
                units += self._text(_tool_json(tool.name, tool.description, tool.parameters))
        fmt = request.response_format
        if fmt is not None and fmt.kind == "json_schema" and fmt.schema is not None:
            fixed += SECTION_OVERHEAD
            units += self._text(fmt.name) + self._text(_json(fmt.schema))
        return fixed + math.ceil(units * self.safety)
