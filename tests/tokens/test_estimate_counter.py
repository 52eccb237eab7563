"""EstimateCounter: conservative counts for targets without a local tokenizer."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from failover.model import ImagePart, Message, Request, ResponseFormat, Tool
from failover.tokens import ESTIMATE_IMAGE_TOKENS, ESTIMATE_TOOL_PROMPT, EstimateCounter, TiktokenCounter

ENGLISH = (
    "Reliability engineering for LLM APIs means classifying failures, retrying with backoff, and failing "
    "over to equivalent capacity when a provider is overloaded. The request carries one deadline. "
) * 20
CHINESE = (
    "我们今天讨论一下机器学习模型的部署问题，以及如何在生产环境中保证可靠性。"
    "当服务商过载时，请求应该转移到等价的容量上，而不是静默降级。"
) * 10
JSON_TEXT = (
    json.dumps(
        {
            "order": "4417-2231",
            "items": [{"sku": "RUN-42", "qty": 1, "price": 129.99}],
            "events": [1712345678, 1712349999],
        }
    )
    * 10
)
CODE = (Path(__file__).resolve().parents[2] / "src" / "failover" / "model" / "_failure.py").read_text()
# each measured >= o200k_base's count; Korean, Hebrew and Hindi are not >= cl100k_base's
OTHER_SCRIPTS = {
    "ja": "お誕生日おめでとうございます。今日はとても良い天気ですね。東京の電車はいつも時間通りに来ます。" * 5,
    "ko": "안녕하세요. 오늘 날씨가 정말 좋네요. 점심 먹었어요? 서울의 지하철은 매우 편리합니다." * 5,
    "ru": "Привет, как дела? Сегодня отличная погода для прогулки в парке." * 5,
    "ar": "مرحبا، كيف حالك؟ الطقس جميل اليوم للتنزه في الحديقة." * 5,
    "hi": "नमस्ते, आप कैसे हैं? आज पार्क में टहलने के लिए मौसम बहुत अच्छा है।" * 5,
    "th": "สวัสดีครับ วันนี้อากาศดีมากสำหรับการเดินเล่นในสวน" * 5,
    "emoji": "😀🎉🚀👍🏽🧑‍💻 " * 10,
}


@functools.cache
def tiktoken_counter(encoding: str) -> TiktokenCounter:
    return TiktokenCounter(encoding)


def chat(text: str) -> Request:
    return Request(messages=(Message.system("Answer briefly."), Message.user(text)))


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("text", [ENGLISH, CHINESE, JSON_TEXT, CODE], ids=["english", "chinese", "json", "code"])
def test_estimate_is_at_least_tiktoken(encoding: str, text: str) -> None:
    request = chat(text)
    assert EstimateCounter().count(request) >= tiktoken_counter(encoding).count(request)


@pytest.mark.parametrize("script", sorted(OTHER_SCRIPTS))
def test_estimate_is_at_least_o200k_for_other_scripts(script: str) -> None:
    request = chat(OTHER_SCRIPTS[script])
    assert EstimateCounter().count(request) >= tiktoken_counter("o200k_base").count(request)


def test_every_cjk_character_counts_at_least_one_token() -> None:
    estimate = EstimateCounter()
    for text in ("中" * 1000, "日本語のテキスト" * 100, "한국어" * 300):
        assert estimate.count_text(text) >= len(text)


def test_english_prose_is_not_wildly_overcounted() -> None:
    request = chat(ENGLISH)
    assert EstimateCounter().count(request) <= 2.2 * tiktoken_counter("o200k_base").count(request)


def test_fewer_chars_per_token_means_more_tokens() -> None:
    request = chat(ENGLISH)
    assert EstimateCounter(chars_per_token=2.0).count(request) > EstimateCounter(chars_per_token=4.0).count(request)
    assert EstimateCounter(safety=1.5).count(request) > EstimateCounter(safety=1.0).count(request)


def test_each_image_counts_the_anthropic_cap() -> None:
    estimate = EstimateCounter()
    image = ImagePart(url="data:image/png;base64,iVBORw0KGgo=")
    base = estimate.count(Request(messages=(Message.user("Compare these."),)))
    one = estimate.count(Request(messages=(Message.user("Compare these.", image),)))
    two = estimate.count(Request(messages=(Message.user("Compare these.", image, image),)))
    assert one - base == ESTIMATE_IMAGE_TOKENS == 1_600
    assert two - one == ESTIMATE_IMAGE_TOKENS


def test_tools_add_their_json_and_the_tool_prompt() -> None:
    estimate = EstimateCounter()
    tool = Tool(
        name="lookup_order",
        description="Look up an order by number.",
        parameters={"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
    )
    plain = chat("Where is my order?")
    with_tool = Request(messages=plain.messages, tools=(tool,))
    assert estimate.count(with_tool) - estimate.count(plain) > ESTIMATE_TOOL_PROMPT


def test_json_schema_adds_tokens() -> None:
    estimate = EstimateCounter()
    schema = {"type": "object", "properties": {"category": {"type": "string"}}, "required": ["category"]}
    plain = chat("Classify: my parcel is late")
    structured = Request(messages=plain.messages, response_format=ResponseFormat.json_schema(schema))
    assert estimate.count(structured) > estimate.count(plain)


@pytest.mark.parametrize("kwargs", [{"chars_per_token": 0}, {"chars_per_token": -1.0}, {"safety": 0.9}])
def test_rejects_settings_that_would_undercount_by_design(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        EstimateCounter(**kwargs)


def test_names_differ_when_settings_do() -> None:
    assert EstimateCounter().name == "estimate"
    assert EstimateCounter(chars_per_token=4.0).name != "estimate"
