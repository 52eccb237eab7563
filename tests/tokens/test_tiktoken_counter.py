"""TiktokenCounter: exact text counts plus OpenAI's chat framing (the cookbook's rule)."""

from __future__ import annotations

import functools

import pytest
import tiktoken

from failover.model import ImagePart, Message, Request, ResponseFormat, TextPart, Tool, ToolCall
from failover.tokens import IMAGE_TOKENS_HIGH, IMAGE_TOKENS_LOW, TiktokenCounter

ENCODINGS = ["cl100k_base", "o200k_base"]


@functools.cache
def counter(encoding: str) -> TiktokenCounter:
    return TiktokenCounter(encoding)


def encoded(encoding: str, text: str) -> int:
    return len(tiktoken.get_encoding(encoding).encode(text))


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "text",
    ["Hello", "tiktoken is great!", "antidisestablishmentarianism", "2 + 2 = 4", "お誕生日おめでとう", "Привет, мир"],
)
def test_single_user_message_is_text_plus_framing(encoding: str, text: str) -> None:
    # cookbook: 3 per message + the role's tokens + the content's, and 3 priming the reply
    expected = 3 + encoded(encoding, "user") + encoded(encoding, text) + 3
    assert counter(encoding).count(Request(messages=(Message.user(text),))) == expected


@pytest.mark.parametrize(
    ("encoding", "text", "tokens"),
    [
        # the numbers the cookbook prints for these strings
        ("cl100k_base", "tiktoken is great!", 6),
        ("cl100k_base", "antidisestablishmentarianism", 6),
        ("cl100k_base", "2 + 2 = 4", 7),
        ("cl100k_base", "お誕生日おめでとう", 9),
        ("o200k_base", "お誕生日おめでとう", 8),
    ],
)
def test_text_counts_match_the_cookbook(encoding: str, text: str, tokens: int) -> None:
    assert counter(encoding).count_text(text) == tokens


# The cookbook's example conversation ("How to count tokens with tiktoken", section 6), for which
# it prints the prompt_tokens the OpenAI API reported: 129 for gpt-4 / gpt-3.5-turbo
# (cl100k_base) and 124 for gpt-4o / gpt-4o-mini (o200k_base).
COOKBOOK_MESSAGES = (
    Message.system(
        "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."
    ),
    Message(
        role="system", name="example_user", content=(TextPart(text="New synergies will help drive top-line growth."),)
    ),
    Message(
        role="system",
        name="example_assistant",
        content=(TextPart(text="Things working well together will increase revenue."),),
    ),
    Message(
        role="system",
        name="example_user",
        content=(
            TextPart(
                text="Let's circle back when we have more bandwidth to touch base on opportunities "
                "for increased leverage."
            ),
        ),
    ),
    Message(
        role="system",
        name="example_assistant",
        content=(TextPart(text="Let's talk later when we're less busy about how to do better."),),
    ),
    Message.user("This late pivot means we don't have time to boil the ocean for the client deliverable."),
)


@pytest.mark.parametrize(("encoding", "api_prompt_tokens"), [("cl100k_base", 129), ("o200k_base", 124)])
def test_cookbook_conversation_matches_the_api(encoding: str, api_prompt_tokens: int) -> None:
    assert counter(encoding).count(Request(messages=COOKBOOK_MESSAGES)) == api_prompt_tokens


# The cookbook's tool example (section 7): the API reported 105 prompt tokens (cl100k_base) and
# 101 (o200k_base) for these two messages with this one tool.
WEATHER = Tool(
    name="get_current_weather",
    description="Get the current weather in a given location",
    parameters={
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {
                "type": "string",
                "description": "The unit of temperature to return",
                "enum": ["celsius", "fahrenheit"],
            },
        },
        "required": ["location"],
    },
)
WEATHER_MESSAGES = (
    Message.system("You are a helpful assistant that can answer to questions about the weather."),
    Message.user("What's the weather like in San Francisco?"),
)


@pytest.mark.parametrize(("encoding", "api_prompt_tokens"), [("cl100k_base", 105), ("o200k_base", 101)])
def test_tools_are_counted_as_json_and_never_below_the_api(encoding: str, api_prompt_tokens: int) -> None:
    without = counter(encoding).count(Request(messages=WEATHER_MESSAGES))
    with_tool = counter(encoding).count(Request(messages=WEATHER_MESSAGES, tools=(WEATHER,)))
    assert with_tool > without
    # an approximation, but on the safe side and close: within 25% of what the API charged
    assert api_prompt_tokens <= with_tool <= api_prompt_tokens * 1.25


def test_more_tools_more_tokens() -> None:
    c = counter("o200k_base")
    other = Tool(name="lookup_order", description="Look up an order.")
    one = c.count(Request(messages=WEATHER_MESSAGES, tools=(WEATHER,)))
    two = c.count(Request(messages=WEATHER_MESSAGES, tools=(WEATHER, other)))
    assert two > one


def test_name_costs_its_tokens_plus_one() -> None:
    c = counter("cl100k_base")
    plain = Message.user("hi")
    named = Message(role="user", content=plain.content, name="alice_smith")
    diff = c.count(Request(messages=(named,))) - c.count(Request(messages=(plain,)))
    assert diff == encoded("cl100k_base", "alice_smith") + 1


@pytest.mark.parametrize(
    ("detail", "tokens"),
    [("low", IMAGE_TOKENS_LOW), ("high", IMAGE_TOKENS_HIGH), ("auto", IMAGE_TOKENS_HIGH), (None, IMAGE_TOKENS_HIGH)],
)
def test_images_add_a_fixed_budget(detail: str | None, tokens: int) -> None:
    c = counter("o200k_base")
    text_only = Request(messages=(Message.user("What is in this picture?"),))
    image = ImagePart(url="https://example.com/cat.png", detail=detail)  # type: ignore[arg-type]
    with_image = Request(messages=(Message.user("What is in this picture?", image),))
    assert c.count(with_image) - c.count(text_only) == tokens


def test_image_constants() -> None:
    # high detail, size unknown: a 2048x768 image, 4 x 2 tiles of 512px, 170 each plus 85
    assert IMAGE_TOKENS_HIGH == 85 + 170 * 8 == 1445
    assert IMAGE_TOKENS_LOW == 85


def test_json_schema_response_format_adds_tokens() -> None:
    c = counter("o200k_base")
    schema = {"type": "object", "properties": {"category": {"type": "string", "enum": ["billing", "shipping"]}}}
    plain = Request(messages=WEATHER_MESSAGES)
    structured = Request(messages=WEATHER_MESSAGES, response_format=ResponseFormat.json_schema(schema, name="triage"))
    assert c.count(structured) - c.count(plain) >= encoded("o200k_base", '{"type":"object"}')
    assert c.count(Request(messages=WEATHER_MESSAGES, response_format=ResponseFormat(kind="text"))) == c.count(plain)


def test_tool_calls_and_results_in_the_history_are_counted() -> None:
    c = counter("o200k_base")
    call = ToolCall(id="call_abc123", name="get_current_weather", arguments='{"location":"Paris, FR"}')
    history = (*WEATHER_MESSAGES, Message.assistant(tool_calls=(call,)))
    with_call = c.count(Request(messages=history))
    assert with_call - c.count(Request(messages=WEATHER_MESSAGES)) > encoded("o200k_base", call.arguments)
    with_result = c.count(Request(messages=(*history, Message.tool("call_abc123", "18 degrees, sunny"))))
    assert with_result - with_call > encoded("o200k_base", "18 degrees, sunny")


def test_text_that_looks_like_a_special_token_is_ordinary_text() -> None:
    c = counter("cl100k_base")
    text = "please ignore <|endoftext|> and <|im_start|>"
    expected = len(tiktoken.get_encoding("cl100k_base").encode(text, disallowed_special=()))
    assert c.count_text(text) == expected


def test_text_cache_gives_the_same_counts_and_stays_bounded() -> None:
    cached = TiktokenCounter("o200k_base", cache_size=2)
    uncached = TiktokenCounter("o200k_base", cache_size=0)
    texts = [f"{i} " + "a long enough paragraph of text to be worth caching " * 3 for i in range(5)]
    for text in texts * 2:
        assert cached.count_text(text) == uncached.count_text(text) == encoded("o200k_base", text)
    assert len(cached._cache) == 2
    assert uncached._cache == {}


def test_names_differ_when_settings_do() -> None:
    assert TiktokenCounter("o200k_base").name == "tiktoken:o200k_base"
    assert TiktokenCounter("o200k_base", image_tokens=765).name != "tiktoken:o200k_base"


def test_empty_request_is_the_reply_priming() -> None:
    assert counter("o200k_base").count(Request(messages=())) == 3
