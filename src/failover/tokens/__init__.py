"""Token counting: how many input tokens a request will use on a given target.

Used in preflight, per candidate target::

    counter = counter_for(target)  # shared per process: tiktoken, DeepSeek, or an estimate
    result = preflight(target, request, counter)
    if not result.fits:
        ...  # this candidate would answer with a context-overflow 400: skip it (result.reason)

Near the window, the provider's own count decides where it offers one (Anthropic, Gemini):
``await count_exactly(target, request, transport, timeout=0.5)``, None on any failure.
Counters are per target and can be recalibrated: ``recalibrate(target, factor)`` from
samples (:func:`calibrate`), and ``observe_usage(target, estimated, actual)`` after each call.

See docs/tokens.md for what is exact, what is approximated, and by how much.
"""

from ._calibrate import (
    CalibratedCounter,
    Calibration,
    calibrate,
    calibration_of,
    observe_usage,
    recalibrate,
)
from ._choose import base_counter_for, counter_for, encoding_for_model
from ._counter import (
    ESTIMATE_IMAGE_TOKENS,
    ESTIMATE_TOOL_PROMPT,
    IMAGE_TOKENS_HIGH,
    IMAGE_TOKENS_LOW,
    EstimateCounter,
    TiktokenCounter,
    TokenCounter,
)
from ._hf import HFTokenizerCounter, deepseek_counter, deepseek_installed
from ._preflight import CompactionHook, PreflightResult, measure, preflight, reserved_output
from ._remote import CountingDialect, count_exactly, counts_remotely, near_window

__all__ = [
    "ESTIMATE_IMAGE_TOKENS",
    "ESTIMATE_TOOL_PROMPT",
    "IMAGE_TOKENS_HIGH",
    "IMAGE_TOKENS_LOW",
    "CalibratedCounter",
    "Calibration",
    "CompactionHook",
    "CountingDialect",
    "EstimateCounter",
    "HFTokenizerCounter",
    "PreflightResult",
    "TiktokenCounter",
    "TokenCounter",
    "base_counter_for",
    "calibrate",
    "calibration_of",
    "count_exactly",
    "counter_for",
    "counts_remotely",
    "deepseek_counter",
    "deepseek_installed",
    "encoding_for_model",
    "measure",
    "near_window",
    "observe_usage",
    "preflight",
    "recalibrate",
    "reserved_output",
]
