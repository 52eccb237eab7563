"""Properties that hold for every counter."""

from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import ImagePart, Message, Request, TextPart
from failover.tokens import EstimateCounter, TiktokenCounter, TokenCounter


@functools.cache
def counters() -> tuple[TokenCounter, ...]:
    return (TiktokenCounter("cl100k_base"), TiktokenCounter("o200k_base"), EstimateCounter())


parts = st.one_of(
    st.builds(TextPart, text=st.text(max_size=200)),
    st.builds(
        ImagePart, url=st.just("https://example.com/a.png"), detail=st.sampled_from([None, "low", "high", "auto"])
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(parts, max_size=3).map(tuple),
    name=st.none() | st.text(min_size=1, max_size=20),
)


@settings(max_examples=150, deadline=None)
@given(history=st.lists(messages, max_size=6), extra=messages)
def test_appending_a_message_never_lowers_the_count(history: list[Message], extra: Message) -> None:
    before = Request(messages=tuple(history))
    after = Request(messages=(*history, extra))
    for counter in counters():
        assert counter.count(after) > counter.count(before), counter.name


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300))
def test_estimate_counts_every_non_ascii_character(text: str) -> None:
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    assert EstimateCounter().count_text(text) >= non_ascii
