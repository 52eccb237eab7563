"""A body of many JSON values is decoded off the loop by the pure-Python scanner (the C one
holds the GIL for its whole length): it must read every body exactly as ``json.loads`` does,
and refuse the same ones with the same errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.gateway import GatewaySettings, _body
from failover.gateway._body import decode_json, heavy_json
from failover.gateway._errors import ApiError
from failover.gateway._gateway import Gateway
from tests.gateway._kit import Kit

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=40,
)


def _gateway() -> Gateway:
    return Gateway(Kit().router, GatewaySettings(max_json_depth=8))


def test_what_counts_as_heavy() -> None:
    small = json.dumps([1] * 20_000, separators=(",", ":")).encode()  # many values, but small: quick in C
    assert len(small) < _body.HEAVY_JSON_BYTES and not heavy_json(small)
    text = json.dumps({"content": "x" * 200_000}).encode()  # big, but one value
    assert not heavy_json(text)
    many = json.dumps({f"p{i}": {"type": "string"} for i in range(25_000)}).encode()
    assert heavy_json(many)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(value=_json)
def test_the_slow_decoder_reads_what_json_loads_reads(value: Any) -> None:
    gw = _gateway()
    raw = json.dumps(value).encode()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_body, "HEAVY_JSON_BYTES", 0)
        mp.setattr(_body, "HEAVY_JSON_VALUES", -1)
        assert heavy_json(raw)
        try:
            heavy: Any = decode_json(raw, gw.settings.max_json_depth)
        except ApiError as exc:
            heavy = ("refused", exc.code)
    try:
        fast: Any = decode_json(raw, gw.settings.max_json_depth)
    except ApiError as exc:
        fast = ("refused", exc.code)
    assert heavy == fast


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"[" * 20 + b"]" * 20, "json_too_deep"),
        (b"[" * 5000 + b"]" * 5000, "json_too_deep"),  # past the recursion limit of the Python scanner
        (b'{"a": [1, 2,, 3]}', "invalid_json"),
        (b'{"a": "\\ud800"}', "invalid_unicode"),
        (b"\xff\xfe{", "invalid_json"),
    ],
)
def test_the_slow_decoder_refuses_what_json_loads_refuses(
    monkeypatch: pytest.MonkeyPatch, raw: bytes, code: str
) -> None:
    monkeypatch.setattr(_body, "HEAVY_JSON_BYTES", 0)
    monkeypatch.setattr(_body, "HEAVY_JSON_VALUES", -1)
    with pytest.raises(ApiError) as info:
        decode_json(raw, _gateway().settings.max_json_depth)
    assert info.value.code == code
