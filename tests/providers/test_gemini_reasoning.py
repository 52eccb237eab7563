"""Gemini thought parts and thought signatures: parsed, streamed, and sent back on their parts.

The thinking streams in ``wire/gemini/`` are constructed from the docs' examples (see
``wire/README.md``); the captured samples in the shared corpus carry real signatures on a
text part (01) and on functionCall parts (02, 04). The google-genai SDK has no stream
accumulator: it yields one GenerateContentResponse per SSE event, and its types are the
oracle for what each chunk says.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest
from google.genai import types as genai
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.model import (
    Dialect,
    FailureKind,
    Message,
    Reasoning,
    ReasoningDelta,
    ReasoningDone,
    Request,
    Response,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
)
from failover.providers import GeminiDialect
from failover.providers._base import SSEEvent
from failover.router._history import readable_history

from ._wire import load, response, target
from .test_stream_common import REQUEST, WIRE, check_tool_invariants, run, sample

GE = Dialect.GEMINI
D = GeminiDialect()
T = target(GE)  # gemini-2.5-flash
G3 = target(GE, model="gemini-3-pro-preview")
SAMPLES = Path(__file__).parent / "wire" / "gemini"


def crlf(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def chunk(parts: list[dict[str, Any]], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-3-pro-preview", "responseId": "resp_1", **extra}


def block(text: str = "", signature: str | None = None, key: str = T.key) -> Reasoning:
    return Reasoning(text=text, signature=signature, source="gemini", origin=key)


def model_parts(request: Request, t: Any = T) -> list[list[dict[str, Any]]]:
    http = D.build(t, request)
    assert http.json is not None
    return [c["parts"] for c in http.json["contents"] if c["role"] == "model"]


def again(resp: Response, t: Any = T) -> list[dict[str, Any]]:
    """The parts of ``resp`` as the next request sends them back (after the router's filter)."""
    results = tuple(Message.tool(c.id, "ok") for c in resp.tool_calls)
    request = Request(messages=(Message.user("q"), resp.message(), *results))
    # The target that answered reads it all (run() parses as T; a Gemini 3 target builds it).
    readable, stripped = readable_history(request, T.key if t is G3 else t.key, D.reasoning_source)
    assert stripped == 0
    contents = model_parts(readable, t)
    return contents[0] if contents else []


# ----------------------------------------------------------------------- samples


def test_docs_thought_summary_stream_then_the_signature_on_an_empty_text_part() -> None:
    r = run(GE, (SAMPLES / "01-stream-thought-summary-signature-docs.sse").read_bytes())
    first = "**Counting the letters**\n\nI'm counting the occurrences of 'r' in 'strawberry'. "
    second = "I see an 'r' after 'st' and two more in 'berry'."
    key = target(GE).key
    assert r.events[:5] == [
        ReasoningDelta(index=0, text=first),
        ReasoningDelta(index=0, text=second),  # the next chunk's thought part: the same block
        ReasoningDone(index=0, block=block(first + second, key=key)),  # the answer began: done
        TextDelta(text="There are **3** r's"),
        TextDelta(text=" in strawberry."),
    ]
    assert r.events[5] == ReasoningDone(index=1, block=block("", "<Signature_C>", key=key))
    assert isinstance(r.events[6], Stop)
    resp = r.response()
    assert resp.text == "There are **3** r's in strawberry."
    assert resp.reasoning_text == first + second
    assert resp.reasoning == (block(first + second), block("", "<Signature_C>"))
    # Sent back: the thought, then the text carrying the stream's closing signature.
    assert again(resp) == [
        {"text": first + second, "thought": True},
        {"text": "There are **3** r's in strawberry.", "thoughtSignature": "<Signature_C>"},
    ]


def test_docs_parallel_calls_only_the_first_carries_the_signature() -> None:
    r = run(GE, (SAMPLES / "02-stream-parallel-calls-signature-docs.sse").read_bytes())
    check_tool_invariants(r)
    resp = r.response()
    assert [(c.name, c.parsed) for c in resp.tool_calls] == [
        ("get_current_temperature", {"location": "Paris"}),
        ("get_current_temperature", {"location": "London"}),
    ]
    assert resp.reasoning == (block("", "<Signature_A>"),)
    assert resp.stop_reason is StopReason.TOOL_USE
    parts = again(resp, G3)
    assert parts == [
        {
            "functionCall": {"name": "get_current_temperature", "args": {"location": "Paris"}},
            "thoughtSignature": "<Signature_A>",
        },
        {"functionCall": {"name": "get_current_temperature", "args": {"location": "London"}}},
    ]


@pytest.mark.parametrize(
    ("name", "part"),
    [
        ("gemini/01-generate-content-stop-usage.json", 0),
        ("gemini/02-generate-content-function-call.json", 0),
    ],
)
def test_captured_bodies_go_back_with_their_signatures_on_their_parts(name: str, part: int) -> None:
    original = json.loads((WIRE / name).read_text())["candidates"][0]["content"]["parts"]
    resp = D.parse(T, load(WIRE, name))
    assert isinstance(resp, Response)
    assert resp.reasoning == (block("", original[part]["thoughtSignature"]),)
    assert again(resp, G3) == original  # the parts as Gemini sent them, signature included


def test_captured_stream_function_call_goes_back_with_its_signature() -> None:
    headers, body = sample(WIRE, "gemini/04-stream-function-call.http")
    r = run(GE, body, headers)
    resp = r.response()
    (sig,) = [b.signature for b in resp.reasoning]
    assert sig is not None and sig.startswith("CmIBEU0yD5YE")
    assert r.events[3] == ReasoningDone(index=0, block=block("", sig))  # after the call's start, delta and done
    assert again(resp, G3) == [
        {"functionCall": {"name": "best_language_to_learn", "args": {}}, "thoughtSignature": sig}
    ]


# ----------------------------------------------------------------------- parsing


def test_a_signed_thought_part_ends_its_block_and_thoughts_merge_until_then() -> None:
    body = crlf(
        chunk([{"text": "a", "thought": True}]),
        chunk([{"text": "b", "thought": True, "thoughtSignature": "s1"}, {"text": "c", "thought": True}]),
        chunk([{"text": "d", "thought": True}, {"text": "Answer"}], "STOP"),
    )
    r = run(GE, body)
    assert r.events == [
        ReasoningDelta(index=0, text="a"),
        ReasoningDelta(index=0, text="b"),
        ReasoningDone(index=0, block=block("ab", "s1")),
        ReasoningDelta(index=1, text="c"),
        ReasoningDelta(index=1, text="d"),
        ReasoningDone(index=1, block=block("cd")),
        TextDelta(text="Answer"),
        Stop(reason=StopReason.END_TURN, raw="STOP"),
    ]
    assert r.response().reasoning == (block("ab", "s1"), block("cd"))


def test_the_finish_ends_an_open_thought_before_the_stop() -> None:
    body = crlf(chunk([{"text": "thinking hard", "thought": True}], "MAX_TOKENS"))
    r = run(GE, body)
    assert r.events == [
        ReasoningDelta(index=0, text="thinking hard"),
        ReasoningDone(index=0, block=block("thinking hard")),
        Stop(reason=StopReason.MAX_TOKENS, raw="MAX_TOKENS"),
    ]
    f = r.failure()
    assert f.kind is FailureKind.TRUNCATED
    assert f.response is not None and f.response.reasoning == (block("thinking hard"),)


def test_body_and_stream_read_the_same_parts_alike() -> None:
    parts: list[dict[str, Any]] = [
        {"text": "plan ", "thought": True},
        {"text": "more", "thought": True},
        {"text": "Calling."},
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "sf"},
        {"functionCall": {"name": "g"}},
    ]
    whole = D.parse(T, response(200, json.dumps(chunk(parts, "STOP"))))
    streamed = run(GE, crlf(*(chunk([p]) for p in parts), chunk([], "STOP"))).response()
    assert isinstance(whole, Response)
    assert (whole.text, whole.tool_calls, whole.reasoning) == (streamed.text, streamed.tool_calls, streamed.reasoning)
    assert whole.reasoning == (block("plan more"), block("", "sf"))
    assert whole.tool_calls[1].parsed == {}  # a call without args


def test_several_calls_in_one_chunk_and_across_chunks_keep_their_order() -> None:
    body = crlf(
        chunk([{"functionCall": {"name": "a", "args": {"n": 1}}}, {"functionCall": {"name": "b", "args": None}}]),
        chunk([{"functionCall": {"name": "c", "args": {}, "id": "given"}}], "STOP"),
    )
    r = run(GE, body)
    check_tool_invariants(r)
    assert [(d.index, d.call.name, d.call.parsed) for d in r.done] == [(0, "a", {"n": 1}), (1, "b", {}), (2, "c", {})]
    assert [c.id for c in r.response().tool_calls] == ["call_resp_1_0", "call_resp_1_1", "given"]


def test_signatures_on_parts_failover_does_not_carry_are_not_kept() -> None:
    body = crlf(chunk([{"executableCode": {"code": "1+1"}, "thoughtSignature": "x"}, {"text": "2"}], "STOP"))
    assert run(GE, body).response().reasoning == ()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"},
            FailureKind.PROVIDER_OVERLOADED,
        ),
        (
            {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"},
            FailureKind.PROVIDER_SERVER_ERROR,
        ),
        (
            {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"},
            FailureKind.RATE_LIMITED,
        ),
        (
            {"code": 504, "message": "Deadline expired", "status": "DEADLINE_EXCEEDED"},
            FailureKind.PROVIDER_SERVER_ERROR,
        ),
        ({"code": 503, "message": "unavailable"}, FailureKind.PROVIDER_OVERLOADED),  # the code alone
    ],
)
def test_an_error_chunk_while_thinking_is_classified_by_its_code_and_status(
    error: dict[str, Any], kind: FailureKind
) -> None:
    r = run(GE, crlf(chunk([{"text": "hmm", "thought": True}]), {"error": error}))
    assert r.raised is not None
    assert r.raised.kind is kind
    assert r.raised.status == error["code"]
    assert r.raised.response is not None and r.raised.response.reasoning == (block("hmm"),)


# ----------------------------------------------------------------------- the SDK's reading of each chunk


def _sig(draw: st.DrawFn) -> str:
    return base64.b64encode(draw(st.binary(min_size=1, max_size=12))).decode()


@st.composite
def _stream(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """A Gemini answer as the docs describe it, cut into chunks: thought parts (the last may
    be signed), then text, or function calls of which the first is signed; the signature of
    a text answer on its last part or on an empty text part at the end."""
    words = st.text(alphabet="abé €\n", min_size=1, max_size=8)
    parts: list[dict[str, Any]] = [{"text": t, "thought": True} for t in draw(st.lists(words, max_size=3))]
    if parts and draw(st.booleans()):
        parts[-1]["thoughtSignature"] = _sig(draw)
    texts = [{"text": t} for t in draw(st.lists(words, max_size=3))]
    calls = [
        {
            "functionCall": {
                "name": f"fn{i}",
                "args": draw(st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2)),
            }
        }
        for i in range(draw(st.integers(0, 3)))
    ]
    signed = draw(st.booleans())
    if calls and signed:
        calls[0]["thoughtSignature"] = _sig(draw)
    elif texts and signed:
        if draw(st.booleans()):
            texts[-1]["thoughtSignature"] = _sig(draw)
        else:
            texts.append({"text": "", "thoughtSignature": _sig(draw)})
    parts += texts + calls
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(parts))), max_size=4))))
    return [parts[a:b] for a, b in zip([0, *cuts], [*cuts, len(parts)], strict=True) if parts[a:b]] or [[]]


def _feed(chunks: list[dict[str, Any]]) -> tuple[list[list[StreamEvent]], Response]:
    parser = D.stream_parser(T, REQUEST, {})
    per_chunk = [list(parser.feed(SSEEvent(data=json.dumps(c)))) for c in chunks]
    result = parser.finish()
    assert isinstance(result, Response), result
    return per_chunk, result


@settings(max_examples=80, deadline=None)
@given(parts=_stream())
def test_each_chunk_reads_as_the_sdk_reads_it_and_the_turn_goes_back_on_its_parts(
    parts: list[list[dict[str, Any]]],
) -> None:
    chunks = [chunk(p) for p in parts]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    per_chunk, resp = _feed(chunks)
    sdk_signatures: list[bytes] = []
    for raw, events in zip(chunks, per_chunk, strict=True):
        sdk = genai.GenerateContentResponse.model_validate(raw)
        sdk_parts = sdk.parts or []
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (sdk.text or "")
        thoughts = "".join(p.text or "" for p in sdk_parts if p.thought)
        assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == thoughts
        calls = [(fc.name, fc.args or {}) for fc in sdk.function_calls or []]
        starts = [e for e in events if isinstance(e, ToolCallStart)]
        args = [json.loads(e.arguments) for e in events if isinstance(e, ToolCallDelta)]
        assert [(s.name, a) for s, a in zip(starts, args, strict=True)] == calls
        sdk_signatures += [p.thought_signature for p in sdk_parts if p.thought_signature]
    ours = [base64.b64decode(b.signature) for b in resp.reasoning if b.signature]
    assert ours == sdk_signatures  # every signature, in part order
    events = [e for es in per_chunk for e in es]
    done = [e for e in events if isinstance(e, ReasoningDone)]
    assert tuple(d.block for d in done) == resp.reasoning  # one done per block, in order

    # Sent back: thoughts first, then the text, then the calls; each signature on the part it came with.
    flat = [p for c in parts for p in c]
    sent = again(resp)
    thought_parts = [p for p in flat if p.get("thought")]
    merged: list[dict[str, Any]] = []
    for p in thought_parts:  # consecutive thought parts are one block until a signed one ends it
        if merged and "thoughtSignature" not in merged[-1]:
            merged[-1] = {
                **merged[-1],
                "text": merged[-1]["text"] + p["text"],
                **({k: v for k, v in p.items() if k == "thoughtSignature"}),
            }
        else:
            merged.append(dict(p))
    text = "".join(p["text"] for p in flat if "text" in p and not p.get("thought"))
    text_sig = [p["thoughtSignature"] for p in flat if "text" in p and not p.get("thought") and "thoughtSignature" in p]
    expected = merged + ([{"text": text, **({"thoughtSignature": text_sig[0]} if text_sig else {})}] if text else [])
    expected += [
        {
            "functionCall": {"name": p["functionCall"]["name"], "args": p["functionCall"]["args"]},
            **({"thoughtSignature": p["thoughtSignature"]} if "thoughtSignature" in p else {}),
        }
        for p in flat
        if "functionCall" in p
    ]
    if not text and text_sig:
        expected.append({"text": "", "thoughtSignature": text_sig[0]})
    if not resp.text and not resp.tool_calls:
        expected = []  # nothing answered: the turn is not sent
    assert sent == expected


# ----------------------------------------------------------------------- build


def _turn(reasoning: tuple[Reasoning, ...], *, text: str = "", n_calls: int = 2) -> Request:
    calls = tuple(ToolCall(id=f"c{i}", name=f"f{i}", arguments="{}", parsed={}) for i in range(n_calls))
    results = tuple(Message.tool(c.id, "ok") for c in calls)
    return Request(
        messages=(Message.user("x"), Message.assistant(text, tool_calls=calls, reasoning=reasoning), *results)
    )


def test_gemini_3_gets_the_real_signature_and_the_sentinel_only_without_one() -> None:
    (parts,) = model_parts(_turn((block("", "REAL", key=G3.key),)), G3)
    assert [p.get("thoughtSignature") for p in parts] == ["REAL", None]
    (parts,) = model_parts(_turn(()), G3)
    assert [p.get("thoughtSignature") for p in parts] == ["skip_thought_signature_validator", None]
    (parts,) = model_parts(_turn(()), T)  # Gemini 2.5 does not check signatures
    assert [p.get("thoughtSignature") for p in parts] == [None, None]


def test_signatures_of_another_format_are_not_sent() -> None:
    foreign = (
        Reasoning(text="claude", signature="anthropic-sig", source="anthropic"),
        Reasoning(text="", signature="oai", source="openai"),
    )
    (parts,) = model_parts(_turn(foreign, text="Hi"), G3)
    assert parts == [
        {"text": "Hi"},
        {"functionCall": {"name": "f0", "args": {}}, "thoughtSignature": "skip_thought_signature_validator"},
        {"functionCall": {"name": "f1", "args": {}}},
    ]


def test_a_fallback_from_another_provider_sends_the_sentinel() -> None:
    # Claude wrote the turn; the router leaves its thinking out for Gemini 3, which then needs the sentinel.
    claude = Reasoning(text="t", signature="s", source="anthropic", origin="anthropic:claude-x")
    request, stripped = readable_history(_turn((claude,), n_calls=1), G3.key, D.reasoning_source)
    assert stripped == 1
    (parts,) = model_parts(request, G3)
    assert parts == [
        {"functionCall": {"name": "f0", "args": {}}, "thoughtSignature": "skip_thought_signature_validator"}
    ]


def test_extra_signatures_go_on_the_text_then_on_empty_text_parts() -> None:
    sigs = tuple(block("", s) for s in ("s0", "s1", "s2", "s3"))
    (parts,) = model_parts(_turn(sigs, text="Hi", n_calls=2))
    assert parts == [
        {"text": "Hi", "thoughtSignature": "s2"},
        {"functionCall": {"name": "f0", "args": {}}, "thoughtSignature": "s0"},
        {"functionCall": {"name": "f1", "args": {}}, "thoughtSignature": "s1"},
        {"text": "", "thoughtSignature": "s3"},
    ]


def test_a_turn_with_only_reasoning_is_not_sent() -> None:
    request = Request(messages=(Message.user("a"), Message.assistant("", reasoning=(block("t"),)), Message.user("b")))
    assert model_parts(request) == []


def test_reasoning_effort_asks_for_thought_summaries() -> None:
    http = D.build(T, Request(messages=(Message.user("x"),), reasoning_effort="low"))
    assert http.json is not None
    assert http.json["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024, "includeThoughts": True}
    plain = D.build(T, Request.simple("x")).json
    assert plain is not None and "generationConfig" not in plain


def test_partial_function_call_arguments_are_a_malformed_call_not_an_empty_one() -> None:
    """Vertex can stream a call's arguments (``streamFunctionCallArguments``: ``partialArgs``,
    ``willContinue``); the Gemini API cannot, and the dialect never asks for it. A partial
    call that arrives anyway is malformed, never a call with ``{}``."""
    partial = {"name": "f", "partialArgs": [{"jsonPath": "$.city", "stringValue": "Par", "willContinue": True}]}
    body = crlf(
        chunk([{"functionCall": {**partial, "willContinue": True}}]),
        chunk([{"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "is"}]}}], "STOP"),
    )
    r = run(GE, body)
    assert r.done[0].call.parsed is None
    f = r.failure()
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    http = D.build(T, Request(messages=(Message.user("x"),)))
    assert "streamFunctionCallArguments" not in json.dumps(http.json)


def test_random_stream_cut_anywhere_reads_the_same() -> None:
    rng = random.Random(7)
    body = (SAMPLES / "01-stream-thought-summary-signature-docs.sse").read_bytes()
    whole = run(GE, body)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(body)), 6))
        split = run(GE, body, cuts=cuts)
        assert (split.events, split.result) == (whole.events, whole.result)
