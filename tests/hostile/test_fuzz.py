"""Hypothesis fuzz of what a client controls: the JSON decoding, the three body parsers and their
translation to a Request, and whole requests through the gateway to fake upstreams.

Values are arbitrary JSON-ish data with what breaks naive code: lone surrogates, huge ints,
deep nesting, NaN / Infinity, wrong types, in every field of a valid body. The only exceptions
allowed are the gateway's own typed refusals (WireError, the gateway's ApiError among them, and
the Router's InvalidRequest), and no answer is a 5xx the gateway caused.

The budget is fixed and derandomized so the suite is repeatable and fast; a longer run:
``FAILOVER_FUZZ_EXAMPLES=5000 pytest -q tests/hostile/test_fuzz.py tests/gateway/test_openapi.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from failover import InvalidRequest
from failover.gateway._body import decode_json
from failover.gateway._gateway import Gateway
from failover.gateway._openai import parse_body as chat_parse
from failover.gateway._openai import to_request as chat_request
from failover.inbound import WireError
from failover.inbound import anthropic as messages_wire
from failover.inbound import openai as chat_wire
from failover.inbound import responses as responses_wire
from failover.router._router import check_text
from tests.gateway._kit import ACME_KEY, Kit

EXAMPLES = int(os.environ.get("FAILOVER_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
E2E = settings(
    max_examples=max(10, EXAMPLES // 4), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)

# -- values -----------------------------------------------------------------------------------------

_CHARS = st.one_of(
    st.characters(),
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\x00", "\u2028", "\ufeff", "\U0001f600"]),
)
TEXT = st.lists(_CHARS, max_size=12).map("".join)
NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)


def _nested(depth: int) -> Any:
    v: Any = "x"
    for i in range(depth):
        v = [v] if i % 2 else {"a": v}
    return v


VALUES = st.one_of(
    st.recursive(
        SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(TEXT, kids, max_size=4), max_leaves=12
    ),
    st.integers(min_value=20, max_value=200).map(_nested),
)

CHAT = {
    "model": "chat",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
    "max_tokens": 16,
    "temperature": 0.5,
    "stop": ["END"],
    "response_format": {"type": "json_object"},
}
MESSAGES = {
    "model": "chat",
    "max_tokens": 16,
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]},
    ],
    "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {}}}],
    "temperature": 0.5,
    "stop_sequences": ["END"],
}


RESPONSES = {
    "model": "chat",
    "instructions": "Be brief.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Call f."}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
    ],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}, "strict": False}],
    "max_output_tokens": 16,
    "temperature": 0.5,
    "text": {"format": {"type": "json_object"}},
    "reasoning": {"effort": "low"},
    "metadata": {"k": "v"},
}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], tuple(rest), new)}
    copy = list(value)
    copy[head] = _replace(copy[head], tuple(rest), new)
    return copy


def _like(old: Any) -> st.SearchStrategy[Any]:
    """A hostile value of the same JSON type (so the body often stays valid and is served)."""
    if isinstance(old, bool):
        return st.booleans()
    if isinstance(old, int | float):
        return NUMBERS
    if isinstance(old, str):
        return TEXT
    return VALUES


def mutated(base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid body with zero to three fields replaced by a hostile value of the same type or
    by anything at all, or a key added; sometimes no body object at all."""

    def one(body: Any, draw: st.DrawFn) -> Any:
        paths = _paths(body)
        how = draw(st.sampled_from(["like", "like", "any", "add"]))
        if paths and how != "add":
            path = draw(st.sampled_from(paths))
            old: Any = body
            for step in path:
                old = old[step]
            return _replace(body, path, draw(_like(old) if how == "like" else VALUES))
        return {**body, draw(TEXT): draw(VALUES)} if isinstance(body, dict) else body

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        body: Any = base
        for _ in range(draw(st.integers(0, 3))):
            body = one(body, draw)
        return body

    return st.one_of(build(), build(), build(), VALUES)


# -- the parsers ------------------------------------------------------------------------------------


def _through_chat(data: Any) -> None:
    with contextlib.suppress(WireError, InvalidRequest):
        check_text(chat_request(chat_parse(data)))


def _through_messages(data: Any) -> None:
    with contextlib.suppress(WireError, InvalidRequest):
        check_text(messages_wire.to_request(messages_wire.parse_body(data)))


@FUZZ
@given(mutated(CHAT))
def test_the_chat_parser_raises_only_its_typed_errors(data: Any) -> None:
    _through_chat(data)
    with contextlib.suppress(WireError):  # the wire module itself, without the gateway's mapping
        chat_wire.to_request(chat_wire.parse_body(data))


@FUZZ
@given(mutated(MESSAGES))
def test_the_messages_parser_raises_only_its_typed_errors(data: Any) -> None:
    _through_messages(data)


def _through_responses(data: Any) -> None:
    with contextlib.suppress(WireError, InvalidRequest):
        check_text(responses_wire.to_request(responses_wire.parse_body(data)))


@FUZZ
@given(mutated(RESPONSES))
def test_the_responses_parser_raises_only_its_typed_errors(data: Any) -> None:
    _through_responses(data)


_GATEWAY = Gateway(Kit().router, Kit().settings)


def _encoded(value: Any) -> st.SearchStrategy[bytes]:
    text = json.dumps(value, allow_nan=True, ensure_ascii=False)
    return st.sampled_from(
        [text.encode("utf-8", "surrogatepass"), json.dumps(value, allow_nan=True).encode(), text.encode()[:-1]]
        if not _has_surrogate(text)
        else [text.encode("utf-8", "surrogatepass"), json.dumps(value, allow_nan=True).encode()]
    )


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


@FUZZ
@given(st.one_of(mutated(CHAT), mutated(MESSAGES), mutated(RESPONSES)).flatmap(_encoded))
def test_decoding_a_body_raises_only_a_4xx(raw: bytes) -> None:
    try:
        data = decode_json(raw, _GATEWAY.settings.max_json_depth)
        body = _GATEWAY.chat_body(raw)  # the one-pass path (pydantic's JSON parser) and the general one
    except WireError as exc:
        status = exc.status
        assert 400 <= status < 500, (status, exc.code)  # noqa: PT017 - the fuzz cannot use pytest.raises
        return
    # what decodes holds no lone surrogate: the Router's own check never fires after it
    try:
        request = chat_request(body)
    except WireError:
        pass
    else:
        check_text(request)
    _through_messages(data)
    _through_responses(data)


# -- whole requests -------------------------------------------------------------------------------

_KIT = Kit()
_CLIENT = TestClient(_KIT.app, raise_server_exceptions=False)
_HEADERS = {"authorization": f"Bearer {ACME_KEY}", "content-type": "application/json"}
_UPSTREAM_CODES = {"deadline_exhausted", "timeout", "provider_overloaded", "provider_server_error", "rate_limited"}


ANSWERED: dict[str, int] = {}  # 200s per endpoint: the fuzz reached the router and the upstreams


def _post(path: str, data: Any) -> None:
    raw = json.dumps(data, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    r = _CLIENT.post(path, content=raw, headers=_HEADERS)
    assert r.status_code != 500, f"the gateway failed on {raw[:300]!r}: {r.text[:300]}"
    if r.status_code > 500:
        code = json.loads(r.text)["error"].get("code") or json.loads(r.text)["error"].get("type")
        assert code in _UPSTREAM_CODES, r.text[:300]
    if r.status_code == 200:
        ANSWERED[path] = ANSWERED.get(path, 0) + 1


@E2E
@given(mutated(CHAT))
@example(CHAT)
def test_no_chat_request_is_a_gateway_5xx(data: Any) -> None:
    _post("/v1/chat/completions", data)


@E2E
@given(mutated(MESSAGES))
@example(MESSAGES)
def test_no_messages_request_is_a_gateway_5xx(data: Any) -> None:
    _post("/v1/messages", data)


@E2E
@given(mutated(RESPONSES))
@example(RESPONSES)
@example({**RESPONSES, "stream": True})
def test_no_responses_request_is_a_gateway_5xx(data: Any) -> None:
    _post("/v1/responses", data)


def test_the_request_fuzz_reached_the_upstreams() -> None:
    """Runs after the three above (file order): many mutated bodies were still served."""
    paths = ("/v1/chat/completions", "/v1/messages", "/v1/responses")
    assert all(ANSWERED.get(path, 0) >= 3 for path in paths), ANSWERED
