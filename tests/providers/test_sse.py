"""SSEDecoder: the WHATWG event-stream rules, chunk boundaries anywhere, and our two extras
(comments surfaced, a last event without its blank line dispatched by flush)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.providers import _sse
from failover.providers._base import SSEComment, SSEEvent
from failover.providers._sse import SSEDecoder

Item = SSEEvent | SSEComment


def decode(*chunks: bytes) -> list[Item]:
    d = SSEDecoder()
    out: list[Item] = []
    for chunk in chunks:
        out.extend(d.feed(chunk))
    out.extend(d.flush())
    return out


def decode_split(raw: bytes, cuts: Sequence[int]) -> list[Item]:
    bounds = [0, *sorted(set(cuts)), len(raw)]
    return decode(*(raw[a:b] for a, b in pairwise(bounds)))


def every_split(raw: bytes) -> list[list[Item]]:
    """Decoded one byte at a time, and cut once at every position."""
    results = [decode(*(raw[i : i + 1] for i in range(len(raw))))]
    results.extend(decode(raw[:i], raw[i:]) for i in range(len(raw) + 1))
    return results


def ev(data: str, event: str = "message", id: str | None = None, retry: int | None = None) -> SSEEvent:
    return SSEEvent(event=event, data=data, id=id, retry=retry)


# ----------------------------------------------------------------------- line ends


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
def test_each_line_end_style(end: bytes) -> None:
    raw = b"event: a" + end + b"data: 1" + end + b"data: 2" + end + end + b"data: 3" + end + end
    assert decode(raw) == [ev("1\n2", "a"), ev("3")]


def test_mixed_line_ends_in_one_stream() -> None:
    assert decode(b"data: a\rdata: b\r\ndata: c\n\r\n") == [ev("a\nb\nc")]


def test_cr_at_chunk_end_then_lf_is_one_line_end() -> None:
    # Were the split CRLF read as two line ends, the LF would be a blank line dispatching "a" alone.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [ev("a\nb")]


def test_cr_at_chunk_end_then_lf_blank_line_dispatches_once() -> None:
    assert decode(b"data: a\r\n\r", b"\n", b"data: b\r\n\r\n") == [ev("a"), ev("b")]


def test_cr_at_chunk_end_then_other_text_is_a_line_end() -> None:
    assert decode(b"data: a\r", b"data: b\r\r") == [ev("a\nb")]


def test_lone_cr_then_lf_in_a_later_chunk_after_an_empty_chunk() -> None:
    assert decode(b"data: a\r", b"", b"\ndata: b\n\n") == [ev("a\nb")]


def test_cr_then_lf_after_a_partial_character_is_still_one_line_end() -> None:
    # "é" is 2 bytes: the chunk "\xc3" decodes to nothing and must not clear the pending CR.
    assert decode(b"data: a\r", b"\ndata: \xc3", b"\xa9\n\n") == [ev("a\né")]


# ----------------------------------------------------------------------- comments


def test_comment_is_surfaced_with_one_leading_space_stripped() -> None:
    assert decode(b": keep-alive\n\n") == [SSEComment("keep-alive")]
    assert decode(b":no-space\n:  two\n:\n") == [SSEComment("no-space"), SSEComment(" two"), SSEComment("")]


def test_comment_inside_an_event_does_not_interrupt_it() -> None:
    assert decode(b"data: a\n: ping\ndata: b\n\n") == [SSEComment("ping"), ev("a\nb")]


def test_blank_lines_after_only_comments_dispatch_nothing_else() -> None:
    raw = b": keep-alive\n\n: keep-alive\n\n: keep-alive\n\ndata: x\n\n"
    assert decode(raw) == [SSEComment("keep-alive")] * 3 + [ev("x")]


def test_comment_is_returned_as_soon_as_its_line_ends() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n: kee") == []
    assert d.feed(b"p-alive\n") == [SSEComment("keep-alive")]
    assert d.feed(b"\n") == [ev("a")]


# ----------------------------------------------------------------------- fields


def test_data_lines_are_joined_with_newline() -> None:
    assert decode(b"data: one\ndata: two\ndata: three\n\n") == [ev("one\ntwo\nthree")]


def test_only_one_leading_space_is_stripped() -> None:
    assert decode(b"data:  two spaces\n\ndata:none\n\ndata:\ttab\n\n") == [ev(" two spaces"), ev("none"), ev("\ttab")]


def test_value_keeps_further_colons() -> None:
    assert decode(b'data: {"a": "b:c"}\n\n') == [ev('{"a": "b:c"}')]


def test_empty_data_line_dispatches_an_empty_event() -> None:
    assert decode(b"data:\n\n") == [ev("")]
    assert decode(b"data\n\n") == [ev("")]  # a line without a colon is a field with an empty value
    assert decode(b"data:\ndata:\n\n") == [ev("\n")]


def test_event_type_defaults_to_message_and_resets_after_dispatch() -> None:
    assert decode(b"event: ping\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n") == [ev("1", "ping"), ev("2"), ev("3")]


def test_field_name_without_colon_has_an_empty_value() -> None:
    assert decode(b"event\ndata: x\n\n") == [ev("x")]


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"foo: bar\nDATA: no\nEvent: no\ndata: x\nbaz\n\n") == [ev("x")]


def test_blank_line_without_data_dispatches_nothing_and_drops_the_event_type() -> None:
    assert decode(b"event: orphan\n\ndata: x\n\n") == [ev("x")]
    assert decode(b"\n\n\n") == []


def test_id_persists_across_events_and_can_be_cleared() -> None:
    raw = b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 8\ndata: d\n\n"
    assert decode(raw) == [ev("a", id="7"), ev("b", id="7"), ev("c", id=""), ev("d", id="8")]


def test_id_with_nul_is_ignored() -> None:
    assert decode(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n") == [ev("a", id="1"), ev("b", id="1")]


def test_id_alone_dispatches_nothing() -> None:
    assert decode(b"id: 5\n\ndata: x\n\n") == [ev("x", id="5")]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"3000", 3000),
        (b"0", 0),
        *[(v, None) for v in (b"3s", b"-1", b"+5", b"1_000", b" 5", "３".encode(), "²".encode(), b"")],
    ],
)
def test_retry_takes_ascii_digits_only(value: bytes, expected: int | None) -> None:
    assert decode(b"retry: " + value + b"\ndata: x\n\n") == [ev("x", retry=expected)]


def test_retry_belongs_to_the_event_that_set_it() -> None:
    assert decode(b"retry: 10\ndata: a\n\ndata: b\n\n") == [ev("a", retry=10), ev("b")]


def test_done_stays_a_plain_payload() -> None:
    assert decode(b"data: [DONE]\n\n") == [ev("[DONE]")]


# ----------------------------------------------------------------------- bytes and text


def test_multibyte_characters_split_at_every_byte() -> None:
    raw = "data: é 你好 😀\n\n".encode()
    for result in every_split(raw):
        assert result == [ev("é 你好 😀")]


def test_partial_character_is_not_decoded_early() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: \xf0\x9f") == []
    assert d.feed(b"\x98") == []
    assert d.feed(b"\x80\n\n") == [ev("😀")]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert decode(b"data: a\xffb\n\n") == [ev("a\ufffdb")]


def test_character_cut_by_the_end_of_the_body_becomes_a_replacement_character() -> None:
    assert decode(b"data: x\xe4\xbd") == [ev("x\ufffd")]


def test_bom_at_the_very_start_is_skipped() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [ev("x")]
    assert decode(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [ev("x")]  # split inside the BOM


def test_bom_elsewhere_is_kept() -> None:
    assert decode(b"data: \xef\xbb\xbfx\n\n") == [ev("\ufeffx")]
    assert decode(b"data: a\n\n", b"\xef\xbb\xbfdata: b\n\n") == [ev("a")]  # a field named "\ufeffdata" is unknown


def test_long_line_across_many_chunks() -> None:
    payload = "x" * 100_000
    raw = f"data: {payload}\n\n".encode()
    assert decode(*(raw[i : i + 7] for i in range(0, len(raw), 7))) == [ev(payload)]


def test_events_are_returned_as_soon_as_their_blank_line_arrives() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n") == []
    assert d.feed(b"\ndata: b\n\ndata: c") == [ev("a"), ev("b")]
    assert d.flush() == [ev("c")]


def test_events_are_ordinary_frozen_sse_events() -> None:
    (e,) = decode(b"id: 3\nretry: 5\nevent: x\ndata: y\n\n")
    assert type(e) is SSEEvent
    assert e == SSEEvent(event="x", data="y", id="3", retry=5)
    assert hash(e) == hash(SSEEvent(event="x", data="y", id="3", retry=5))
    assert repr(e) == "SSEEvent(event='x', data='y', id='3', retry=5)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.data = "z"  # type: ignore[misc]
    assert _sse._event("a", "b", None, None) == _sse._make_event("a", "b", None, None)


# ----------------------------------------------------------------------- end of body


def test_flush_dispatches_a_last_event_without_its_blank_line() -> None:
    assert decode(b"data: a\n\ndata: b\n") == [ev("a"), ev("b")]
    assert decode(b'event: message_stop\ndata: {"type":"message_stop"}') == [
        ev('{"type":"message_stop"}', "message_stop")
    ]


def test_flush_after_a_trailing_cr() -> None:
    assert decode(b"data: a\r") == [ev("a")]


def test_flush_with_nothing_pending() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n\n") == [ev("a")]
    assert d.flush() == []


def test_flush_surfaces_a_last_comment_and_ignores_a_dataless_event() -> None:
    assert decode(b"event: x\n: bye") == [SSEComment("bye")]


# ----------------------------------------------------------------------- property: splitting never matters

_LINE_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x00"), max_size=12
) | st.sampled_from(["é", "你好", "😀", "a😀b", '{"k": "ü"}', " lead", ""])
_ENDS = st.sampled_from(["\n", "\r", "\r\n"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[Item]]:
    """A random stream (with random line ends and comments) and the items it must decode to."""
    lines: list[str] = []
    expected: list[Item] = []
    last_id: str | None = None
    for _ in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(0, 2))):
            text = draw(_LINE_TEXT)
            lines.append(": " + text)
            expected.append(SSEComment(text))
        event = draw(st.none() | _LINE_TEXT.filter(bool))
        if event is not None:
            lines.append("event: " + event)
        new_id = draw(st.none() | _LINE_TEXT)
        if new_id is not None:
            lines.append("id: " + new_id)
            last_id = new_id
        data = draw(st.lists(_LINE_TEXT, min_size=1, max_size=3))
        lines.extend("data: " + d for d in data)
        if draw(st.booleans()):
            text = draw(_LINE_TEXT)
            lines.append(":" + text)  # a comment without the space: one leading space of text goes
            expected.append(SSEComment(text[1:] if text.startswith(" ") else text))
        lines.append("")
        expected.append(SSEEvent(event=event or "message", data="\n".join(data), id=last_id))
    trailing = bool(lines) and draw(st.booleans())
    if trailing:
        lines.pop()  # the last event loses its blank line: flush must still dispatch it
    out: list[str] = []
    previous = ""
    for line in lines:
        end = draw(_ENDS)
        if previous == "\r" and not line and end == "\n":
            end = "\r\n"  # "\r" then an empty "\n" line would read as one CRLF, by the rules
        out.append(line + end)
        previous = end
    if trailing and draw(st.booleans()):
        out[-1] = out[-1].rstrip("\r\n")  # and even its line end
    raw = "".join(out).encode()
    if draw(st.booleans()):
        raw = b"\xef\xbb\xbf" + raw
    return raw, expected


@settings(max_examples=300, deadline=None)
@given(stream=streams(), data=st.data())
def test_random_streams_decode_the_same_whole_or_split_anywhere(
    stream: tuple[bytes, list[Item]], data: st.DataObject
) -> None:
    raw, expected = stream
    whole = decode(raw)
    assert whole == expected
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=max(1, len(raw))))
    assert decode_split(raw, cuts) == whole


@settings(max_examples=50, deadline=None)
@given(stream=streams())
def test_random_streams_decode_the_same_byte_by_byte(stream: tuple[bytes, list[Item]]) -> None:
    raw, expected = stream
    assert decode(*(raw[i : i + 1] for i in range(len(raw)))) == expected
