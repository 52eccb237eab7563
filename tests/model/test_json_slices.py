"""A large JSON text is decoded in slices: the same value as decoding it whole, the same
errors, and no single C call over more than a slice of a realistic answer."""

from __future__ import annotations

import json
import math
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import failover.model._json as mj
from failover.model._json import NonFiniteNumber, loads_strict

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=string.printable + '"\\[]{}é\u2028😀', max_size=12)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=6), inner, max_size=6),
    max_leaves=60,
)


@pytest.fixture
def tiny_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text is walked, and any container over 24 bytes is read member by member."""
    monkeypatch.setattr(mj, "SLICED_ABOVE", 0)
    monkeypatch.setattr(mj, "SLICE_BYTES", 24)


def _text(value: Any, indent: int | None) -> bytes:
    return json.dumps(value, indent=indent, ensure_ascii=False).encode()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_values, indent=st.sampled_from([None, 0, 2]))
def test_a_walked_text_is_the_value_decoded_whole(tiny_slices: None, value: Any, indent: int | None) -> None:
    raw = _text(value, indent)
    walked = mj._Slices(raw).document()  # the walk itself, not its fallback
    assert walked == mj._whole(raw) == json.loads(raw)
    assert loads_strict(raw) == walked


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_values, cut=st.integers(min_value=0), junk=st.sampled_from([b"", b"]", b"}", b",", b'"', b"x", b"NaN"]))
def test_a_broken_text_fails_as_it_would_whole(tiny_slices: None, value: Any, cut: int, junk: bytes) -> None:
    raw = _text(value, None)
    at = cut % (len(raw) + 1)
    broken = raw[:at] + junk + raw[at + 1 :]
    try:
        expected: Any = mj._whole(broken)
    except ValueError as exc:
        with pytest.raises(type(exc)):
            loads_strict(broken)
    else:
        assert loads_strict(broken) == expected


def test_non_finite_numbers_are_refused_in_a_walked_text(tiny_slices: None) -> None:
    for token in (b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-2E+400"):
        raw = b'{"data": [{"embedding": [0.5, 0.25, 0.125, %s, 1.0]}, {"embedding": [1, 2]}], "model": "m"}' % token
        with pytest.raises(NonFiniteNumber):
            loads_strict(raw)


def test_an_embeddings_answer_is_read_one_vector_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3 MB answer of 102 vectors of 3,072 floats: no decode call sees more than one vector's
    item (~40 KB), where decoding it whole was one 3 MB call."""
    vector = json.dumps([round(math.sin(i) / 40, 6) for i in range(3072)], separators=(",", ":"))
    items = ",".join(f'{{"object":"embedding","index":{i},"embedding":{vector}}}' for i in range(102))
    raw = b'{"object":"list","data":[' + items.encode() + b'],"model":"m","usage":{"prompt_tokens":3}}'
    assert len(raw) > mj.SLICED_ABOVE
    sizes: list[int] = []
    real = mj._whole

    def spy(text: bytes | str) -> Any:
        sizes.append(len(text))
        return real(text)

    monkeypatch.setattr(mj, "_whole", spy)
    value = loads_strict(raw)
    assert value == json.loads(raw)
    assert max(sizes) <= len(items) // 102 + 10, max(sizes)


def test_a_text_of_many_small_parts_is_decoded_whole_after_a_bounded_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = ("[" + ",".join(['{"a":[1,2,{"b":"c]"}]}'] * 60_000) + "]").encode()
    assert len(raw) > mj.SLICED_ABOVE
    walks: list[int] = []
    real = mj._Slices.document

    def spy(self: mj._Slices) -> Any:
        try:
            return real(self)
        finally:
            walks.append(self.steps)

    monkeypatch.setattr(mj._Slices, "document", spy)
    assert loads_strict(raw) == json.loads(raw)
    assert walks == [-1]  # the walk stopped at its budget; the text was then decoded whole
