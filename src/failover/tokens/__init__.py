"""Token counting: how many input tokens a request will use on a given target.

Used in preflight, per candidate target::

    counter = counter_for(target)  # shared per process; tiktoken or an estimate
    if not target.fits(counter.count(request), request.max_tokens):
        ...  # this candidate would answer with a context-overflow 400: skip it

See docs/tokens.md for what is exact, what is approximated, and by how much.
"""

from ._counter import (
    ESTIMATE_IMAGE_TOKENS,
    ESTIMATE_TOOL_PROMPT,
    IMAGE_TOKENS_HIGH,
    IMAGE_TOKENS_LOW,
    EstimateCounter,
    TiktokenCounter,
    TokenCounter,
    counter_for,
    encoding_for_model,
)

__all__ = [
    "ESTIMATE_IMAGE_TOKENS",
    "ESTIMATE_TOOL_PROMPT",
    "IMAGE_TOKENS_HIGH",
    "IMAGE_TOKENS_LOW",
    "EstimateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counter_for",
    "encoding_for_model",
]
