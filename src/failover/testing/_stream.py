"""Delivering an answer over time: when each byte of a scripted stream goes out.

A :class:`Timing` is pure data computed by the renderer: the gap before each event, the
keep-alive to send in long silences, how the body ends (cleanly, by a dropped connection,
or never). :func:`beats` turns it into the exact schedule, and :class:`Playback` plays that
schedule on the loop clock for one call, recording on the call what the client was sent.
``FakeNetwork`` hands the played pieces to the caller; ``FakeServer`` writes each one as an
HTTP chunk. Both therefore deliver the same bytes at the same loop times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from ._records import Outcome, _Slot

__all__ = ["Beat", "BeatKind", "Dropped", "Playback", "Timing", "beats"]

_EPSILON = 1e-9  # two beats closer than this are at the same time


@dataclass(frozen=True, slots=True)
class Timing:
    """When the events of a body go out, relative to the moment the headers are sent.

    ``gaps[i]`` is the silence before event ``i`` (``gaps[0]``: after the headers), counted
    from the previous event; None is a silence that never ends, so no later event is sent.
    ``tail`` is the silence after the last event before the body ends (None: never), and
    ``drop`` makes it end by closing the connection instead of completing the body. In every
    silence a ``heartbeat`` goes out each ``heartbeat_interval`` seconds (None: never).
    ``split_bytes`` cuts every write into pieces of at most that many bytes.
    """

    gaps: tuple[float | None, ...]
    tail: float | None = 0.0
    drop: bool = False
    heartbeat: bytes = b""
    heartbeat_interval: float | None = None
    split_bytes: int | None = None


class BeatKind(Enum):
    PIECE = "piece"  # part of an event, more of it follows at the same time
    EVENT = "event"  # the last (or only) piece of an event
    HEARTBEAT = "heartbeat"  # a keep-alive, or a piece of one
    END = "end"  # the body is complete
    DROP = "drop"  # the connection closes
    NEVER = "never"  # nothing more, ever: the client must go away


class Beat(NamedTuple):
    at: float  # seconds after the headers
    data: bytes
    kind: BeatKind


def beats(events: Sequence[bytes], timing: Timing) -> Iterator[Beat]:
    """The schedule of a body, in order. Infinite when a silence never ends with heartbeats."""
    if len(timing.gaps) != len(events):
        raise ValueError(f"Timing has {len(timing.gaps)} gaps for {len(events)} events")
    t = 0.0
    for event, gap in zip(events, timing.gaps, strict=True):
        yield from _silence(t, gap, timing)
        if gap is None:
            return
        t += gap
        yield from _pieces(t, event, BeatKind.EVENT, timing.split_bytes)
    yield from _silence(t, timing.tail, timing)
    if timing.tail is not None:
        yield Beat(t + timing.tail, b"", BeatKind.DROP if timing.drop else BeatKind.END)


def _silence(at: float, gap: float | None, timing: Timing) -> Iterator[Beat]:
    every = timing.heartbeat_interval
    if every is None or not timing.heartbeat:
        if gap is None:
            yield Beat(at, b"", BeatKind.NEVER)
        return
    k = 1
    while gap is None or k * every < gap - _EPSILON:
        yield from _pieces(at + k * every, timing.heartbeat, BeatKind.HEARTBEAT, timing.split_bytes)
        k += 1


def _pieces(at: float, data: bytes, kind: BeatKind, split: int | None) -> Iterator[Beat]:
    if split is None or len(data) <= split:
        yield Beat(at, data, kind)
        return
    last = (len(data) - 1) // split * split
    for i in range(0, len(data), split):
        piece_kind = kind if i == last or kind is BeatKind.HEARTBEAT else BeatKind.PIECE
        yield Beat(at, data[i : i + split], piece_kind)


class Dropped(Exception):
    """The scripted body ends by closing the connection."""


class Playback:
    """Plays one call's body on the loop clock, from ``start`` (the loop time of the headers).

    :meth:`next` waits until the next piece is due and returns it (None once the body is
    complete; :class:`Dropped` when the connection is scripted to close). It is safe to
    cancel: a cancelled wait loses nothing. The call's record follows along: ``events_sent``
    after every event, ``completed`` when the last piece is handed over, ``reset`` at a drop,
    and :meth:`abandon` (the client left) ``client_disconnected`` at the loop time.
    """

    __slots__ = ("_beats", "_loop", "_next", "_slot", "_start", "done", "events")

    def __init__(self, slot: _Slot, events: Sequence[bytes], timing: Timing, *, start: float) -> None:
        self._slot = slot
        self._loop = asyncio.get_running_loop()
        self._start = start
        self._beats = beats(events, timing)
        self._next: Beat | None = next(self._beats, None)
        self.events = 0
        self.done = False

    async def next(self) -> bytes | None:
        beat = self._next
        if beat is None or self.done:
            return None
        if beat.kind is BeatKind.NEVER:
            await self._loop.create_future()  # until the client goes away
        delay = self._start + beat.at - self._loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        following = self._next = next(self._beats, None)
        if beat.kind is BeatKind.END:
            self._end(Outcome.COMPLETED)
            return None
        if beat.kind is BeatKind.DROP:
            self._end(Outcome.RESET)
            raise Dropped()
        if beat.kind is BeatKind.EVENT:
            self.events += 1
            self._slot.update(events_sent=self.events)
        if following is not None and following.kind is BeatKind.END and following.at <= beat.at + _EPSILON:
            self._end(Outcome.COMPLETED)  # this is the last piece: handing it over completes the answer
        return beat.data

    async def read_all(self) -> bytes:
        """The whole body, on schedule (for a client that reads the answer at once)."""
        body = bytearray()
        try:
            while (piece := await self.next()) is not None:
                body += piece
        except asyncio.CancelledError:
            self.abandon()
            raise
        return bytes(body)

    def abandon(self, outcome: Outcome = Outcome.CLIENT_DISCONNECTED) -> None:
        """The client went away (or the server shut down): record it, unless the body had ended."""
        if not self.done:
            self._end(outcome)

    def _end(self, outcome: Outcome) -> None:
        self.done = True
        now = self._loop.time()
        if outcome is Outcome.COMPLETED:
            self._slot.update(outcome=outcome, answered_at=now)
        else:
            self._slot.update(outcome=outcome, disconnected_at=now)
