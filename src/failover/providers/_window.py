"""The provider's own numbers in a context-overflow error: its window and what it counted.

Every dialect's error classifier hands a context overflow's message to :func:`window_numbers`,
which reads the limit the provider states for the model and the tokens it counted for this
request. Each pattern is anchored on a wording a provider really sends; a wording not listed
gives None, never a number read from the wrong place. Numbers may carry thousands commas.

==========================  ====================================================================
who                         wording (limit L, count N, input A, completion B)
==========================  ====================================================================
OpenAI, Azure OpenAI        "This model's maximum context length is L tokens. However, your
                            messages resulted in N tokens." (input)
OpenAI (older), DeepSeek,   "... maximum context length is L tokens. However, you requested N
vLLM                        tokens (A in the messages, B in the completion)." (input + output;
                            OpenAI's older "(A in your prompt; B for the completion)")
vLLM                        "... maximum context length is L tokens. However, your request has
                            N input tokens." (input); "'max_tokens' or 'max_completion_tokens'
                            is too large: B. This model's maximum context length is L tokens
                            and your request has A input tokens (B > L - A)." (A + B)
vLLM                        "... for a total of at least N tokens" (input + output, a lower bound)
Anthropic (and on Bedrock,  "prompt is too long: N tokens > L maximum" (input);
Vertex)                     "input length and `max_tokens` exceed context limit: A + B > L"
Gemini, Vertex Gemini       "The input token count (N) exceeds the maximum number of tokens
                            allowed (L)." (input; the count is sometimes left out)
OpenAI Responses            "Your input exceeds the context window of this model." (no numbers)
Bedrock                     "Input is too long for requested model." (no numbers)
llama.cpp                   fields ``n_prompt_tokens`` (input) and ``n_ctx`` (limit) beside the
                            message (read by the OpenAI-compatible classifier)
==========================  ====================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["WindowNumbers", "window_numbers"]

_N = r"(\d{1,3}(?:,\d{3})+|\d+)"  # 4096, 1048576 or 1,048,576

_LIMITS: Final = (
    re.compile(rf"maximum context length is {_N} tokens", re.IGNORECASE),
    re.compile(rf"tokens? > {_N} maximum", re.IGNORECASE),  # Anthropic's "N tokens > L maximum"
    re.compile(rf"exceed context limit: {_N} \+ {_N} > {_N}", re.IGNORECASE),
    re.compile(rf"maximum number of tokens allowed \({_N}\)", re.IGNORECASE),
)
# (pattern, which groups add up to the count, whether the count includes the completion)
_COUNTS: Final[tuple[tuple[re.Pattern[str], tuple[int, ...], bool], ...]] = (
    (re.compile(rf"you requested {_N} tokens \({_N} in (?:the messages|your prompt)", re.IGNORECASE), (1,), True),
    (re.compile(rf"for a total of (?:at least )?{_N} tokens", re.IGNORECASE), (1,), True),
    (re.compile(rf"is too large: {_N}\.[^.]*?your request has {_N} input tokens", re.IGNORECASE), (1, 2), True),
    (re.compile(rf"exceed context limit: {_N} \+ {_N} >", re.IGNORECASE), (1, 2), True),
    (re.compile(rf"you requested {_N} tokens in the messages", re.IGNORECASE), (1,), False),
    (re.compile(rf"your messages resulted in {_N} tokens", re.IGNORECASE), (1,), False),
    (re.compile(rf"your request has {_N} input tokens", re.IGNORECASE), (1,), False),
    (re.compile(rf"prompt is too long: {_N} tokens", re.IGNORECASE), (1,), False),
    (re.compile(rf"input token count \({_N}\)", re.IGNORECASE), (1,), False),
)


@dataclass(frozen=True, slots=True)
class WindowNumbers:
    """What an overflow error says: ``limit`` (the model's window), ``used`` (this request's
    count) and whether ``used`` includes the completion (``max_tokens``); None: not said."""

    limit: int | None = None
    used: int | None = None
    includes_output: bool = False


NONE: Final = WindowNumbers()


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def window_numbers(message: str | None) -> WindowNumbers:
    """The limit and count a context-overflow ``message`` states (see the module docstring)."""
    if not message:
        return NONE
    limit = None
    for pattern in _LIMITS:
        m = pattern.search(message)
        if m is not None:
            limit = _int(m.group(m.lastindex or 1))
            break
    used, total = None, False
    for pattern, groups, includes_output in _COUNTS:
        m = pattern.search(message)
        if m is not None:
            used, total = sum(_int(m.group(g)) for g in groups), includes_output
            break
    if limit is not None and limit <= 0:
        limit = None
    if used is not None and used <= 0:
        used, total = None, False
    return WindowNumbers(limit, used, total)


def numbers_of(n_ctx: object, n_prompt: object) -> WindowNumbers:
    """llama.cpp's structured fields (``n_ctx``: the window, ``n_prompt_tokens``: the input)."""
    limit = n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0 else None
    used = n_prompt if isinstance(n_prompt, int) and not isinstance(n_prompt, bool) and n_prompt > 0 else None
    return WindowNumbers(limit, used, False)
