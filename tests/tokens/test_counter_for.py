"""counter_for: which counter a target gets, caching, and the offline fallback."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import tiktoken

from failover.model import ConfigError, Dialect, Request, Target
from failover.tokens import EstimateCounter, HFTokenizerCounter, TiktokenCounter, counter_for, encoding_for_model
from failover.tokens._calibrate import _clear_caches


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    _clear_caches()
    yield
    _clear_caches()


def target(model: str, dialect: Dialect = Dialect.OPENAI, tokenizer: str | None = None) -> Target:
    return Target(name="t1", dialect=dialect, model=model, base_url="https://api.example.com", tokenizer=tokenizer)


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "o200k_base"),
        ("openai/gpt-oss-120b", "o200k_base"),  # o200k_harmony: the same text tokens
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),  # Azure's spelling
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gemini-2.5-pro", "deepseek-chat", "meta-llama/Llama-3.1-70B"])
def test_encoding_for_model_rejects_other_models(model: str) -> None:
    with pytest.raises(KeyError):
        encoding_for_model(model)


@pytest.mark.parametrize(
    ("t", "kind", "name"),
    [
        (target("gpt-4o"), TiktokenCounter, "tiktoken:o200k_base"),
        (target("gpt-5-mini", Dialect.OPENAI_RESPONSES), TiktokenCounter, "tiktoken:o200k_base"),
        (target("gpt-4-0613"), TiktokenCounter, "tiktoken:cl100k_base"),
        (target("deepseek-chat"), HFTokenizerCounter, "deepseek"),  # OpenAI-compatible, DeepSeek's vocabulary
        (target("mistral-large"), EstimateCounter, "estimate"),  # OpenAI-compatible, no local tokenizer
        (target("claude-sonnet-4-5", Dialect.ANTHROPIC), EstimateCounter, "estimate"),
        (target("gemini-2.5-flash", Dialect.GEMINI), EstimateCounter, "estimate"),
        (target("gpt-4o", Dialect.ANTHROPIC), EstimateCounter, "estimate"),  # by dialect, not by name
        (target("gpt-4o", tokenizer="estimate"), EstimateCounter, "estimate"),
        (target("gpt-4o", tokenizer="tiktoken"), TiktokenCounter, "tiktoken:o200k_base"),
        (target("my-finetune", tokenizer="tiktoken:cl100k_base"), TiktokenCounter, "tiktoken:cl100k_base"),
        (target("claude-x", Dialect.ANTHROPIC, "tiktoken:o200k_base"), TiktokenCounter, "tiktoken:o200k_base"),
    ],
)
def test_counter_for_picks_by_tokenizer_then_dialect(t: Target, kind: type, name: str) -> None:
    counter = counter_for(t)
    assert isinstance(counter, kind)
    assert counter.name == name
    assert counter.count(Request.simple("Hello")) > 0


def test_counters_are_shared_across_targets() -> None:
    assert counter_for(target("gpt-4o")) is counter_for(target("gpt-4.1", tokenizer="tiktoken:o200k_base"))
    assert counter_for(target("claude", Dialect.ANTHROPIC)) is counter_for(target("gemini", Dialect.GEMINI))


def test_a_reloaded_target_gets_the_counter_of_its_new_setting() -> None:
    # counters are kept per tokenizer setting, dialect and model: a target of the same name
    # loaded again with another setting gets that setting's counter at once
    before = counter_for(target("gpt-4o"))
    assert before.name == "tiktoken:o200k_base"
    assert counter_for(target("gpt-4o", tokenizer="estimate")).name == "estimate"
    assert counter_for(target("gpt-4o", Dialect.ANTHROPIC)).name == "estimate"
    assert counter_for(target("gpt-4", tokenizer="tiktoken")).name == "tiktoken:cl100k_base"
    assert counter_for(target("gpt-4o")) is before


@pytest.mark.parametrize("spec", ["sentencepiece", "tiktoken:", "", "tiktoken"])
def test_unknown_tokenizer_setting_is_a_config_error(spec: str) -> None:
    # "tiktoken" alone needs an OpenAI model name to find the encoding
    with pytest.raises(ConfigError) as info:
        counter_for(target("mistral-large", tokenizer=spec))
    assert info.value.field == "targets.t1.tokenizer"


def test_encoding_is_loaded_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tiktoken.get_encoding
    calls: list[str] = []

    def slow(name: str) -> Any:
        calls.append(name)
        time.sleep(0.05)
        return real(name)

    monkeypatch.setattr(tiktoken, "get_encoding", slow)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(counter_for(target("gpt-4o")))) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert calls == ["o200k_base"]
    assert len({id(c) for c in got}) == 1


def test_unloadable_encoding_falls_back_to_estimate_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def offline(name: str) -> Any:
        raise OSError(f"cannot download {name}: network is unreachable")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    caplog.set_level(logging.WARNING, logger="failover.tokens")
    first = counter_for(target("gpt-4o"))
    second = counter_for(target("gpt-4o-mini"))
    assert isinstance(first, EstimateCounter)
    assert second is first
    assert first.count(Request.simple("Hello")) > 0
    warnings = [r for r in caplog.records if r.name == "failover.tokens" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "o200k_base" in warnings[0].getMessage()


def test_unknown_encoding_name_falls_back_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="failover.tokens")
    counter = counter_for(target("x", tokenizer="tiktoken:no_such_base"))
    assert isinstance(counter, EstimateCounter)
    assert len([r for r in caplog.records if r.name == "failover.tokens"]) == 1
