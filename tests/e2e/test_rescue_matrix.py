"""The rescue fault matrix: 21 common provider faults on a route "faulty primary -> healthy
approved fallback", at DEFAULT settings, through the library and the gateway's SDKs.

The promise under test: an acceptable answer within the envelope, or a clear typed failure,
and a typed failure only when no rescue was possible. Each cell's expectation is written as
that promise demands, not as any version of the code behaves (see tests/e2e/_rescue.py for
the set-up, the cells and the checks; docs/testing.md for the table of cells).

Per cell: the caller got the complete answer (all 60 chunks of ONE model's text exactly once,
one response id, the answering model's name in ``model``) or, where no rescue is possible,
the right typed error; how many requests each upstream saw (and, for Retry-After, how far
apart); elapsed loop time within the 30 s deadline; what the RouteRecord says (target_used,
workflow, recovered, attempts, usage and cost).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import openai
import pytest

from failover.testing import FakeProvider, FakeServer, Reply

from ._rescue import (
    CHUNKS,
    FAULTS,
    MODELS,
    ROUTE,
    CellResult,
    cells,
    judge,
    run_cell,
    text_of,
    told,
)

pytestmark = [pytest.mark.looptime(noop_cycles=50), pytest.mark.e2e]


async def play(
    fault: str,
    client: str,
    fallback: dict[str, Any] | None = None,
    envelope: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    **overrides: Any,
) -> CellResult:
    """The cell: ``overrides`` are Route fields (an unknown one is a TypeError naming it)."""
    return await run_cell(fault, client, overrides, fallback=fallback, envelope=envelope, headers=headers)


@pytest.mark.parametrize(("fault", "client"), [pytest.param(f, c, id=f"{c}|{f}") for f, c in cells()])
async def test_rescue_cell(fault: str, client: str) -> None:
    result = await play(fault, client)
    problems = judge(result)
    assert not problems, "\n".join(problems)


async def test_missing_done_is_complete_to_the_openai_sdk() -> None:
    """The oracle for the "missing [DONE]" cell: the official openai SDK, straight at the fake,
    takes a stream that ends after its finish and usage chunks without ``data: [DONE]`` as
    the whole answer (no exception, every chunk, finish_reason stop)."""
    a = FakeProvider("a", "openai", [Reply.end_after(10**6, **told("a"))], model=MODELS["a"])
    async with FakeServer(a) as srv, openai.AsyncOpenAI(base_url=srv.base_url_for(a), api_key="sk-test") as oc:
        chunks = await oc.chat.completions.create(
            model=MODELS["a"],
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        got = [c async for c in chunks]
    assert a.calls[0].events_sent == CHUNKS + 3  # role, 60 words, finish, usage: no [DONE]
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == text_of("a")
    assert [c.choices[0].finish_reason for c in got if c.choices][-1] == "stop"
    assert got[-1].usage is not None


async def test_the_matrix_sees_each_fix_broken() -> None:
    """Each fix turned off on purpose, and the matrix must see it.

    * (a) the commit point that can wait: ``hold_tokens=0, hold_seconds=0`` commits at the first
      token, so a stream cut after 40 of 60 chunks can no longer be recovered invisibly;
    * (b) the next candidate's reserve: ``fallback_reserve=0`` lets the silent primary's
      first attempt use the whole deadline, so the fallback never answers;
    * (e) ``model`` = the answering model: an answer that names the route instead is flagged
      by the model check (the answer is re-labelled, as the route-as-model bug did);
    * (c) undeclared windows are unknown: a fallback that declares a window below the
      provider's numbers must end in the typed context_overflow, which a rescue cell flags.
    """
    # (e) first: it needs no knob, and must hold on every tree
    healthy = await play("503 persistent", "library stream")
    labelled = dataclasses.replace(healthy.seen[0], models={ROUTE})
    problems = judge(dataclasses.replace(healthy, seen=[labelled]))
    assert any("`model` says" in p for p in problems), problems

    # (c) the overflow rescue cell, with the fallback's window declared too small
    declared = await play("overflow, fallback window undeclared", "library stream", fallback={"context_window": 9000})
    assert judge(declared), "a fallback that cannot fit the request answered it"

    # (b) no reserve for the fallback: the silent primary eats the deadline
    no_reserve = await play("silent", "library stream", fallback_reserve=0)
    assert any("no complete answer" in p for p in judge(no_reserve)), judge(no_reserve)

    # (a) no hold window: the early cut is shown, then partial. As a gateway header first
    # (an unknown header is ignored on a tree without the fix: the cell then fails as it does
    # at defaults; with the fix, the header must turn the hold off), then as the Route's and
    # the Envelope's fields.
    off = {"x-failover-hold-tokens": "0", "x-failover-hold-ms": "0"}
    no_hold_gw = await play("cut after 40 of 60", "openai chat", headers=off)
    assert any("no complete answer" in p for p in judge(no_hold_gw)), judge(no_hold_gw)
    zero = {"hold_tokens": 0, "hold_seconds": 0}
    no_hold = await play("cut after 40 of 60", "library stream", **zero)
    assert any("partial_output" in p for p in judge(no_hold)), judge(no_hold)
    no_hold_env = await play("cut after 40 of 60", "library stream", envelope=zero)
    assert any("partial_output" in p for p in judge(no_hold_env)), judge(no_hold_env)


def test_every_fault_and_client_is_a_cell() -> None:
    """21 faults through the library (stream and complete) and the openai chat stream; a
    subset through the anthropic messages and openai responses streams."""
    got = cells()
    assert len(FAULTS) == 21
    for f in FAULTS:
        assert {(f, "library stream"), (f, "library complete"), (f, "openai chat")} <= set(got)
    assert len(got) == 21 * 3 + 2 * 6


async def test_the_checks_flag_a_splice_and_a_repeat() -> None:
    """The text check, on a real rescued cell whose text is altered: a splice of A's first 40
    chunks and B's answer, a chunk shown twice, and two response ids are each flagged."""
    r = await play("503 persistent", "library complete")
    s = r.seen[0]
    a40 = " ".join(text_of("a").split()[:40]) + " "
    for bad in (
        dataclasses.replace(s, text=a40 + text_of("b")),
        dataclasses.replace(s, text=text_of("b") + " b59"),
        dataclasses.replace(s, ids={"x", "y"}),
    ):
        assert judge(dataclasses.replace(r, seen=[bad])), bad
