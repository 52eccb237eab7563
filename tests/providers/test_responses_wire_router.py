"""Every OpenAI Responses sample through a real Router, over real HTTP on loopback.

A loopback server answers the Router's ``POST /v1/responses`` with the sample (status, recorded
headers, the body written in small chunked pieces); the caller of ``Router.stream`` gets the
answer, or Unavailable with the sample's kind, and the request the server received is the
dialect's (``store: false``, ``stream: true``). A plain JSON response answering a stream request
is read as the plain answer, and the reasoning of a tool turn goes back to the same target in
the next request of the loop.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from failover import Capability, Route, Router, Target, Timeouts
from failover.model import (
    Dialect,
    FailureKind,
    Message,
    ReasoningDone,
    Request,
    TextDelta,
    Tool,
    ToolCallDone,
    Unavailable,
)
from failover.policy import NoBreakers, Unlimited

from .test_openai_wire_router import Answer, Upstream, answer_for, complete, stream
from .test_stream_common import WIRE

TOOLS = (Tool(name="calculator", parameters={"type": "object"}),)
REQUEST = Request(messages=(Message.user("What is (12 + 7) * 3 * 10?"),), tools=TOOLS, max_tokens=200)


def responses_target(up: Upstream, **kw: Any) -> Target:
    return Target(
        name="r",
        dialect=Dialect.OPENAI_RESPONSES,
        model="gpt-5-mini",
        base_url=f"http://127.0.0.1:{up.port}/v1",
        capabilities=frozenset({Capability.CHAT, Capability.TOOLS, Capability.STREAMING}),
        timeouts=Timeouts(connect=2, first_event=5, idle=5, total=10),
        max_attempts=1,  # the sample is the answer, not a schedule: no replays
        tokenizer="estimate",
        **kw,
    )


OK = None
K = FailureKind
CASES: list[tuple[str, FailureKind | None]] = [
    ("openai-responses/01-stream-text-completed-usage.http", OK),
    ("openai-responses/02-stream-reasoning-function-call-args.jsonl", OK),
    ("openai-responses/03-stream-error-event-insufficient-quota.jsonl", K.QUOTA_EXHAUSTED),
]


def test_every_responses_sample_is_covered() -> None:
    assert {name for name, _ in CASES} == {f"openai-responses/{p.name}" for p in (WIRE / "openai-responses").iterdir()}


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[c[0] for c in CASES])
async def test_sample_through_the_router(name: str, kind: FailureKind | None) -> None:
    async with Upstream(answer_for(WIRE / name), piece=41).running() as up:
        got = await stream(responses_target(up), REQUEST)
        sent = up.bodies[-1]
    assert (got.kind, got.partial) == (kind, False), name
    assert sent["stream"] is True and sent["store"] is False
    assert sent["tools"][0] == {
        "type": "function",
        "name": "calculator",
        "parameters": {"type": "object"},
        "strict": False,
    }
    if kind is None:  # what the caller was shown adds up to what it got
        assert "".join(e.text for e in got.events if isinstance(e, TextDelta)) == got.text
        assert tuple(e.call for e in got.events if isinstance(e, ToolCallDone)) == got.calls
    if name.startswith("openai-responses/01"):
        assert got.text == "1, 2, 3"
    if name.startswith("openai-responses/02"):
        assert [(c.name, c.parsed) for c in got.calls] == [("calculator", {"a": 12, "b": 7, "op": "add"})]
        assert [len(e.block.text) > 0 for e in got.events if isinstance(e, ReasoningDone)] == [True]


async def test_the_error_sample_fails_the_attempt_before_any_output() -> None:
    async with Upstream(answer_for(WIRE / CASES[2][0])).running() as up:
        router = Router(
            [Route(name="r", primary=(responses_target(up),))], retry_budget=Unlimited(), breakers=NoBreakers()
        )
        with pytest.raises(Unavailable) as info:
            async with router.stream("r", REQUEST) as s:
                _ = [e async for e in s]
        await router.aclose()
    failure = info.value.record.attempts[-1].failure
    assert failure is not None and failure.kind is FailureKind.QUOTA_EXHAUSTED
    assert failure.provider_code == "insufficient_quota"


def _plain_body() -> dict[str, Any]:
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Add first."}],
        "encrypted_content": "gAAAA-opaque",
    }
    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "calculator",
        "arguments": '{"a":12,"b":7,"op":"add"}',
    }
    usage = {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 29,
    }
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5-mini",
        "output": [reasoning, call],
        "usage": usage,
    }


@pytest.mark.parametrize("ctype", ["application/json", "text/event-stream", None], ids=["json", "sse-label", "none"])
async def test_a_plain_response_answering_a_stream_request(ctype: str | None) -> None:
    answer = Answer(200, {} if ctype is None else {"content-type": ctype}, json.dumps(_plain_body(), indent=1).encode())
    async with Upstream(answer).running() as up:
        got = await stream(responses_target(up), REQUEST)
        plain = await complete(responses_target(up), REQUEST)
    assert got.kind is None and plain.kind is None
    assert (
        [(c.id, c.parsed) for c in got.calls]
        == [("call_1", {"a": 12, "b": 7, "op": "add"})]
        == [(c.id, c.parsed) for c in plain.calls]
    )
    assert [e.block.signature for e in got.events if isinstance(e, ReasoningDone)] == ["gAAAA-opaque"]


async def test_the_reasoning_of_a_tool_turn_goes_back_to_the_same_target() -> None:
    answer = Answer(200, {"content-type": "application/json"}, json.dumps(_plain_body()).encode())
    async with Upstream(answer).running() as up:
        target = responses_target(up)
        router = Router([Route(name="r", primary=(target,))], retry_budget=Unlimited(), breakers=NoBreakers())
        first = await router.complete("r", Request(messages=REQUEST.messages, tools=TOOLS, reasoning_effort="low"))
        follow = Request(
            messages=(*REQUEST.messages, first.message(), Message.tool("call_1", "19")),
            tools=TOOLS,
            reasoning_effort="low",
        )
        await router.complete("r", follow)
        await router.aclose()
    assert up.bodies[0]["include"] == ["reasoning.encrypted_content"]
    assert up.bodies[0]["reasoning"] == {"effort": "low"}
    assert up.bodies[-1]["input"][1:] == [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Add first."}],
            "encrypted_content": "gAAAA-opaque",
        },
        {"type": "function_call", "call_id": "call_1", "name": "calculator", "arguments": '{"a":12,"b":7,"op":"add"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "19"},
    ]
    assert first.reasoning[0].origin == target.key  # written by this target: readable by it
