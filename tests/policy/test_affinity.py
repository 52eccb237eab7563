"""Prompt-cache affinity: the key of a request's cacheable prefix, and the rendezvous choice."""

from __future__ import annotations

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import Message, Request, Tool
from failover.policy._affinity import MIN_CACHED_TOKENS, affinity_key, rendezvous

LONG_SYSTEM = "You are a careful coding agent. Read the files before you change them. " * 80  # ~1,400 tokens
TOOLS = tuple(
    Tool(
        name=f"tool_{i}",
        description="Runs one step of the agent's work and returns what it found. " * 3,
        parameters={"type": "object", "properties": {f"arg{j}": {"type": "string"} for j in range(5)}},
    )
    for i in range(50)
)


def conversation(first: str, turns: int = 0, *, system: str = LONG_SYSTEM, tools: tuple[Tool, ...] = ()) -> Request:
    msgs = [Message.system(system), Message.user(first)]
    for t in range(turns):
        msgs += [Message.assistant(f"answer {t}"), Message.user(f"follow-up {t}")]
    return Request(messages=tuple(msgs), tools=tools)


def test_a_conversation_keeps_its_key_over_its_turns() -> None:
    keys = {affinity_key(conversation("Fix the failing test in main.py", turns=n)) for n in range(6)}
    assert len(keys) == 1 and None not in keys


def test_conversations_with_another_first_message_system_prompt_or_tools_get_other_keys() -> None:
    base = affinity_key(conversation("Fix the failing test"))
    assert affinity_key(conversation("Write the release notes")) != base
    assert affinity_key(conversation("Fix the failing test", system=LONG_SYSTEM + " Be brief.")) != base
    assert affinity_key(conversation("Fix the failing test", tools=TOOLS)) != base
    fewer = affinity_key(conversation("Fix the failing test", tools=TOOLS[:-1]))
    assert fewer not in {base, affinity_key(conversation("Fix the failing test", tools=TOOLS))}


def test_changed_tool_parameters_change_the_key() -> None:
    changed = (*TOOLS[:-1], Tool(name=TOOLS[-1].name, description=TOOLS[-1].description, parameters={"type": "object"}))
    assert affinity_key(conversation("Hi", tools=changed)) != affinity_key(conversation("Hi", tools=TOOLS))


def test_the_key_is_stable_across_new_but_equal_objects() -> None:
    """The gateway builds new Tool objects for every request: equal tools give the same key."""
    again = tuple(Tool(name=t.name, description=t.description, parameters=dict(t.parameters)) for t in TOOLS)
    assert affinity_key(conversation("Hi", tools=again)) == affinity_key(conversation("Hi", tools=TOOLS))


def test_a_prompt_no_provider_caches_has_no_key() -> None:
    assert affinity_key(Request.simple("What is 2 + 2?")) is None
    assert affinity_key(Request.simple("Hi", system="Be brief.")) is None
    just_under = "x" * (MIN_CACHED_TOKENS * 4 - 10)
    assert affinity_key(Request.simple(just_under)) is None
    assert affinity_key(Request.simple(just_under + "y" * 20)) is not None


def test_a_long_conversation_of_short_messages_gets_a_key_once_it_is_long_enough() -> None:
    short = conversation("Hi", turns=2, system="Be brief.")
    assert affinity_key(short) is None
    long = conversation("Hi", turns=200, system="Be brief.")
    assert affinity_key(long) == affinity_key(conversation("Hi", turns=300, system="Be brief."))
    assert affinity_key(long) is not None


def test_tools_alone_make_a_prompt_worth_caching() -> None:
    assert affinity_key(Request(messages=(Message.user("Hi"),), tools=TOOLS)) is not None


def test_an_explicit_key_wins() -> None:
    assert affinity_key(Request.simple("Hi"), "session-1") == "session-1"
    assert affinity_key(conversation("Hi"), "session-1") == "session-1"


def test_lone_surrogates_and_odd_parameters_do_not_break_the_key() -> None:
    from types import MappingProxyType

    odd = Tool(name="t", parameters=MappingProxyType({"type": "object", "description": "\ud800" * 5000}))
    assert affinity_key(Request(messages=(Message.user("\udfff"),), tools=(odd,))) is not None


def test_the_key_reads_a_bounded_sample_of_a_long_prompt() -> None:
    """The key is worked out on the loop for every balanced request: what it hashes must not grow
    with the prompt (an agent's prompt is 50-100 KB), yet it still tells prompts apart by length
    and by their ends."""
    from failover.policy import _affinity

    hashed: list[int] = []
    real = _affinity._dumps

    def counting(value: object) -> bytes:
        out = real(value)
        hashed.append(len(out))
        return out

    tools = tuple(Tool(name=f"t{i}", description="d" * 50_000, parameters=TOOLS[0].parameters) for i in range(5))
    big = conversation("q" * 1_000_000, system="s" * 1_000_000, tools=tools)
    _affinity._dumps = counting  # type: ignore[assignment]
    try:
        assert affinity_key(big, tokens=500_000) is not None
    finally:
        _affinity._dumps = real  # type: ignore[assignment]
    assert hashed and max(hashed) < 4_000, hashed
    assert affinity_key(conversation("q" * 1_000_001, system="s" * 1_000_000)) != affinity_key(
        conversation("q" * 1_000_000, system="s" * 1_000_000)
    )
    assert affinity_key(conversation("q" * 999_999 + "r", system="s" * 1_000_000)) != affinity_key(
        conversation("q" * 1_000_000, system="s" * 1_000_000)
    )


def test_counted_tokens_decide_whether_a_prompt_is_cached() -> None:
    """Given the request's counted tokens, the key follows them rather than the estimate."""
    assert affinity_key(Request.simple("Hi"), tokens=MIN_CACHED_TOKENS) is not None
    assert affinity_key(conversation("Hi"), tokens=MIN_CACHED_TOKENS - 1) is None


# -- rendezvous -----------------------------------------------------------------------------------

NAMES = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8, unique=True)


@given(key=st.text(max_size=20), names=NAMES, data=st.data())
def test_rendezvous_is_deterministic_and_a_permutation(key: str, names: list[str], data: st.DataObject) -> None:
    load = data.draw(st.lists(st.floats(0, 100), min_size=len(names), max_size=len(names)))
    order = rendezvous(key, names, load)
    assert sorted(order) == list(range(len(names)))
    assert rendezvous(key, names, load) == order
    assert rendezvous(key, list(names), tuple(load)) == order


@given(key=st.text(max_size=20), names=NAMES, data=st.data())
def test_the_chosen_candidate_is_within_the_bound(key: str, names: list[str], data: st.DataObject) -> None:
    load = data.draw(st.lists(st.integers(0, 100).map(float), min_size=len(names), max_size=len(names)))
    slack = data.draw(st.sampled_from([0.0, 0.1, 0.25, 1.0]))
    first = rendezvous(key, names, load, slack=slack)[0]
    assert load[first] <= (1 + slack) * (sum(load) + 1) / len(names)
    # and it is the highest-weight one that is: every candidate before it in weight order is over
    free = rendezvous(key, names, [0.0] * len(names))
    for i in free[: free.index(first)]:
        assert load[i] > (1 + slack) * (sum(load) + 1) / len(names)


@settings(max_examples=50)
@given(names=st.lists(st.text(min_size=1, max_size=6), min_size=2, max_size=6, unique=True), gone=st.data())
def test_removing_a_candidate_moves_only_the_keys_it_had(names: list[str], gone: st.DataObject) -> None:
    out = gone.draw(st.integers(0, len(names) - 1))
    rest = names[:out] + names[out + 1 :]
    for k in range(300):
        key = f"k{k}"
        before = names[rendezvous(key, names, [0.0] * len(names))[0]]
        after = rest[rendezvous(key, rest, [0.0] * len(rest))[0]]
        if before != names[out]:
            assert after == before


def test_adding_a_candidate_moves_about_one_key_in_n() -> None:
    names = ["eu-1", "us-1", "asia-1"]
    moved = sum(
        rendezvous(f"k{k}", names, [0.0] * 3)[0] != rendezvous(f"k{k}", [*names, "us-2"], [0.0] * 4)[0]
        for k in range(10_000)
    )
    assert 0.2 < moved / 10_000 < 0.3  # 1/4 of the keys move, all to the new one


def test_equal_loads_spread_keys_evenly() -> None:
    names = ["eu-1", "us-1", "asia-1"]
    firsts = collections.Counter(rendezvous(f"session-{k}", names, [5.0, 5.0, 5.0])[0] for k in range(10_000))
    assert set(firsts) == {0, 1, 2}
    assert all(abs(n - 10_000 / 3) < 300 for n in firsts.values()), firsts


def test_an_overloaded_first_choice_is_passed_over_and_comes_second() -> None:
    names = ["a", "b", "c"]
    key = next(f"k{k}" for k in range(100) if rendezvous(f"k{k}", names, [0.0] * 3)[0] == 0)
    free = rendezvous(key, names, [0.0] * 3)
    busy = rendezvous(key, names, [10.0, 1.0, 1.0])
    assert busy[0] != 0 and busy[1:] == [i for i in free if i != busy[0]]
    assert rendezvous(key, names, [1.0, 1.0, 1.0])[0] == 0  # at its share: kept


def test_rendezvous_refuses_mismatched_loads_and_negative_slack() -> None:
    import pytest

    with pytest.raises(ValueError, match="one load per name"):
        rendezvous("k", ["a", "b"], [0.0])
    with pytest.raises(ValueError, match="slack"):
        rendezvous("k", ["a"], [0.0], slack=-0.1)
    assert rendezvous("k", [], []) == []


def test_the_size_estimate_stops_reading_a_huge_schema_once_it_has_enough() -> None:
    """Without a key to hash (a short prompt), a request is still sized on every balanced call:
    a tool schema of a million properties is walked only until the prompt is worth caching."""
    from failover.policy import _affinity

    walked = 0
    real = _affinity._chars

    def counting(value: object, enough: int) -> int:
        nonlocal walked
        walked += 1
        return real(value, enough)

    huge = Tool(
        name="t", parameters={"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(10**6)}}
    )
    _affinity._chars = counting  # type: ignore[assignment]
    try:
        assert affinity_key(Request(messages=(Message.user("Hi"),), tools=(huge,))) is not None
    finally:
        _affinity._chars = real  # type: ignore[assignment]
    assert 0 < walked < 2_000, walked
