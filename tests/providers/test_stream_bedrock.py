"""ConverseStream: event-stream frames (written by the fault kit, read by botocore's parser) to events.

The kit's frame encoder is checked against botocore's decoder; the dialect's decoder is fed
the same stream split at every byte boundary; mid-stream exceptions are classified.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.eventstream import EventStreamBuffer

from failover.model import (
    Dialect,
    Failure,
    FailureKind,
    Request,
    Response,
    StopReason,
    StreamEvent,
    Target,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStart,
    UsageUpdate,
)
from failover.model import Stop as StopEvent
from failover.providers import dialect_for
from failover.providers._base import SSEComment, SSEEvent, StreamFailed
from failover.providers._sse import EventTooLarge, SSEDecoder, stream_decoder
from failover.providers.bedrock import JSON_TOOL
from failover.providers.bedrock._eventstream import MALFORMED, EventStreamDecoder
from failover.testing._fake_bedrock import encode_frame, event_frame, exception_frame, malformed_frame

TARGET = Target(
    name="b", dialect=Dialect.BEDROCK, model="anthropic.claude-haiku-4-5-20251001-v1:0", base_url="http://b.fake"
)
DIALECT = dialect_for(Dialect.BEDROCK)


def test_the_kits_frames_are_what_botocores_parser_reads() -> None:
    headers = [(":event-type", "contentBlockDelta"), (":content-type", "application/json"), (":message-type", "event")]
    payload = json.dumps({"contentBlockIndex": 0, "delta": {"text": "héllo"}}).encode()
    buffer = EventStreamBuffer()
    buffer.add_data(encode_frame(headers, payload) + encode_frame(headers, b"{}"))
    first, second = list(buffer)
    assert first.headers == dict(headers) and first.payload == payload
    assert second.payload == b"{}"
    assert first.prelude.total_length == len(encode_frame(headers, payload))


def test_a_frame_with_a_bad_checksum_is_refused_by_botocore_and_ends_the_stream() -> None:
    frame = bytearray(event_frame("messageStart", {"role": "assistant"}))
    frame[-1] ^= 0xFF
    decoder = EventStreamDecoder()
    (item,) = decoder.feed(bytes(frame))
    assert isinstance(item, SSEEvent) and item.event == MALFORMED and "Checksum" in item.data
    assert decoder.feed(event_frame("messageStart", {"role": "assistant"})) == []  # nothing after it is trusted
    with pytest.raises(StreamFailed) as info:
        DIALECT.stream_parser(TARGET, Request.simple("hi"), {}).feed(item)
    assert info.value.failure.kind is FailureKind.PROVIDER_SERVER_ERROR


def _stream(*, tool: bool = True) -> list[bytes]:
    frames = [
        event_frame("messageStart", {"role": "assistant"}, pad=3),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Looking "}}, pad=5),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "it up."}}),
        event_frame("contentBlockStop", {"contentBlockIndex": 0}),
    ]
    if tool:
        frames += [
            event_frame(
                "contentBlockStart",
                {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}},
            ),
            event_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"city":'}}}),
            event_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '"Paris"}'}}}),
            event_frame("contentBlockStop", {"contentBlockIndex": 1}),
        ]
    frames += [
        event_frame("messageStop", {"stopReason": "tool_use" if tool else "end_turn"}),
        event_frame("metadata", {"usage": {"inputTokens": 7, "outputTokens": 9, "totalTokens": 16}, "metrics": {}}),
    ]
    return frames


def _run(body: bytes, split: int | None = None) -> tuple[list[StreamEvent], Response | Failure]:
    decoder = stream_decoder(DIALECT, 1 << 20)
    assert isinstance(decoder, EventStreamDecoder)
    parser = DIALECT.stream_parser(TARGET, Request.simple("hi"), {"x-amzn-requestid": "rid"})
    events: list[StreamEvent] = []
    step = split or len(body) or 1
    try:
        for at in range(0, len(body), step):
            for item in decoder.feed(body[at : at + step]):
                if isinstance(item, SSEEvent):
                    events.extend(parser.feed(item))
        for item in decoder.flush():
            if isinstance(item, SSEEvent):
                events.extend(parser.feed(item))
    except StreamFailed as exc:
        return events, exc.failure
    return events, parser.finish()


@pytest.mark.parametrize("split", [None, 1, 2, 3, 7, 12, 13, 64])
def test_a_stream_split_anywhere_reads_the_same(split: int | None) -> None:
    events, outcome = _run(b"".join(_stream()), split)
    assert isinstance(outcome, Response), outcome
    assert outcome.text == "Looking it up." and outcome.stop_reason is StopReason.TOOL_USE
    assert [(c.id, c.name, c.parsed) for c in outcome.tool_calls] == [("tooluse_1", "get_weather", {"city": "Paris"})]
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (7, 9)
    assert outcome.provider_request_id == "rid"
    kinds = [type(e) for e in events]
    assert kinds == [
        TextDelta,
        TextDelta,
        ToolCallStart,
        ToolCallDelta,
        ToolCallDelta,
        ToolCallDone,
        StopEvent,
        UsageUpdate,
    ]


def test_the_decoder_seam_leaves_other_dialects_on_sse() -> None:
    assert isinstance(stream_decoder(dialect_for(Dialect.ANTHROPIC)), SSEDecoder)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("throttlingException", FailureKind.RATE_LIMITED),
        ("serviceUnavailableException", FailureKind.PROVIDER_OVERLOADED),
        ("modelStreamErrorException", FailureKind.PROVIDER_SERVER_ERROR),
        ("internalServerException", FailureKind.PROVIDER_SERVER_ERROR),
        ("validationException", FailureKind.INVALID_REQUEST),
    ],
)
def test_a_mid_stream_exception_is_classified_and_keeps_what_came_before(name: str, kind: FailureKind) -> None:
    payload: dict[str, Any] = {"message": "something went wrong"}
    if name == "modelStreamErrorException":
        payload |= {"originalStatusCode": 500, "originalMessage": "model crashed"}
    body = b"".join(_stream(tool=False)[:3]) + exception_frame(name, payload)
    events, outcome = _run(body, 5)
    assert isinstance(outcome, Failure) and outcome.kind is kind, outcome
    assert outcome.provider_code == name[0].upper() + name[1:]
    assert outcome.response is not None and outcome.response.text == "Looking it up."
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Looking ", "it up."]


def test_a_prompt_too_long_mid_stream_is_a_context_overflow() -> None:
    frame = exception_frame("validationException", {"message": "Input is too long for requested model."})
    _, outcome = _run(frame)
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.CONTEXT_OVERFLOW


def test_a_stream_cut_before_message_stop_may_be_replayed() -> None:
    _, outcome = _run(b"".join(_stream()[:6]))
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.TRANSPORT_TRANSIENT
    assert outcome.response is not None and outcome.response.text == "Looking it up."


def test_a_frame_whose_payload_is_not_json() -> None:
    frames = _stream(tool=False)
    frames[2] = malformed_frame(frames[2])
    _, outcome = _run(b"".join(frames))
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.PROVIDER_SERVER_ERROR
    assert "malformed" in outcome.message


def test_max_tokens_mid_tool_call_is_truncated() -> None:
    frames = [*_stream()[:6], event_frame("messageStop", {"stopReason": "max_tokens"})]
    _, outcome = _run(b"".join(frames))
    assert isinstance(outcome, Failure) and outcome.kind is FailureKind.TRUNCATED


def test_the_structured_output_tool_streams_as_text() -> None:
    frames = [
        event_frame("messageStart", {"role": "assistant"}),
        event_frame(
            "contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name": JSON_TOOL}}}
        ),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"answer":'}}}),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '"42"}'}}}),
        event_frame("contentBlockStop", {"contentBlockIndex": 0}),
        event_frame("messageStop", {"stopReason": "tool_use"}),
    ]
    events, outcome = _run(b"".join(frames), 9)
    assert isinstance(outcome, Response)
    assert (outcome.text, outcome.tool_calls, outcome.stop_reason) == ('{"answer":"42"}', (), StopReason.END_TURN)
    assert [type(e) for e in events] == [TextDelta, TextDelta, StopEvent]


def test_reasoning_streams_with_its_signature() -> None:
    frames = [
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hmm, "}}}),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Paris."}}}),
        event_frame(
            "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2ln"}}}
        ),
        event_frame("contentBlockStop", {"contentBlockIndex": 0}),
        event_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Sunny."}}),
        event_frame("messageStop", {"stopReason": "end_turn"}),
    ]
    _, outcome = _run(b"".join(frames))
    assert isinstance(outcome, Response)
    assert [(r.text, r.signature) for r in outcome.reasoning] == [("Hmm, Paris.", "c2ln")]


def test_one_message_past_the_limit_is_refused_before_it_is_buffered_whole() -> None:
    big = event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 5000}})
    decoder = EventStreamDecoder(limit=1000)
    with pytest.raises(EventTooLarge):
        decoder.feed(big[:1500])


def test_a_json_body_is_left_to_the_plain_parse() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(b'{"message": "not a stream"}') == [] and decoder.feed(b"more") == []


def test_an_unknown_message_type_is_a_sign_of_life_only() -> None:
    frame = encode_frame([(":message-type", "keep-alive")], b"")
    assert EventStreamDecoder().feed(frame) == [SSEComment("keep-alive")]
