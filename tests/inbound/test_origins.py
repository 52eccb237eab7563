"""The map of who wrote the reasoning handed out raw: bounded, least recently used forgotten first,
and only the blocks a client gets raw are remembered."""

from __future__ import annotations

from failover.inbound._origins import Origins
from failover.model import Completed, Message, Reasoning, Request, Response

A, B = "openai-responses:model-a", "openai-responses:model-b"
SOURCE = "openai-responses"


def _block(opaque: str, origin: str | None = A, source: str = SOURCE) -> Reasoning:
    return Reasoning(text="thought", signature=opaque, source=source, origin=origin)


def _history(*opaque: str) -> Request:
    """A request whose history holds each opaque part as a block of unknown origin (a client's)."""
    turns = [Message.assistant("ok", reasoning=(_block(o, origin=None),)) for o in opaque]
    return Request(messages=(Message.user("Hi"), *turns, Message.user("And now?")))


def _origins(req: Request) -> list[str | None]:
    return [r.origin for m in req.messages for r in m.reasoning]


def test_a_remembered_block_gets_its_origin_back_and_an_unknown_one_does_not() -> None:
    origins = Origins()
    origins.remember(Response(text="ok", reasoning=(_block("enc-1"), _block("enc-2", B))), SOURCE)
    assert _origins(origins.known(_history("enc-1", "enc-2", "enc-3"))) == [A, B, None]
    unknown = _history("enc-3")
    assert origins.known(unknown) is unknown  # nothing to fill in: the request itself


def test_the_map_holds_at_most_its_capacity_and_forgets_the_least_recently_used_first() -> None:
    origins = Origins(capacity=3)
    for i in range(3):
        origins.remember(Response(text="ok", reasoning=(_block(f"enc-{i}"),)), SOURCE)
    origins.known(_history("enc-0"))  # read back: now the most recently used
    origins.remember(Completed(response=Response(text="ok", reasoning=(_block("enc-3"),))), SOURCE)
    assert len(origins) == 3
    assert _origins(origins.known(_history("enc-0", "enc-1", "enc-2", "enc-3"))) == [A, None, A, A]
    for i in range(4, 1004):  # far past the bound: it stays there
        origins.remember(Response(text="ok", reasoning=(_block(f"enc-{i}"),)), SOURCE)
    assert len(origins) == 3
    assert _origins(origins.known(_history("enc-1000", "enc-1003"))) == [None, A]


def test_only_blocks_the_client_gets_raw_are_remembered() -> None:
    origins = Origins()
    answer = Response(
        text="ok",
        reasoning=(
            _block("claude-sig", source="anthropic"),  # a Responses client gets a failover token for it
            _block("no-origin", origin=None),
            Reasoning(text="plain", source=SOURCE, origin=A),  # nothing opaque
        ),
    )
    origins.remember(answer, SOURCE)
    origins.remember(Response(text="ok", reasoning=(_block("chat"),)), None)  # a dialect that hands none out
    assert len(origins) == 0
