"""The OpenAI Agents SDK (PyPI openai-agents, pinned in pyproject) at its DEFAULT settings, through
a real ``failover serve`` over fault-kit Responses upstreams.

The SDK's default model interface is the Responses API (``OpenAIProvider`` ->
``OpenAIResponsesModel``); it is given an ``AsyncOpenAI`` client at the client's defaults
(``max_retries`` 2) pointed at the gateway, per run, with tracing off (see _openai_side). No
``ModelSettings`` are set, so the runner's own retries stay off, except in the one test that
asks for ``reasoning.encrypted_content`` (the SDK does not ask for it by default; Codex does).

What each test proves, from what the SDK returned or streamed, how many requests reached each
fake upstream, and the gateway's access record of each request (target, attempts, workflow):

* a plain prompt is answered by the primary in one request;
* a tool loop: the model calls a ``@function_tool``, the SDK runs it and the second request
  carries its output;
* 429 / 503 / 500 from the primary: the gateway falls back, the SDK gets one clean answer;
* a stream cut before the commit point is replaced unseen (the application sees only the
  fallback's words); one cut after it ends the run with the SDK's error, after the words
  that were already shown and nothing spliced on: the SDK retries no stream;
* reasoning: at the defaults the SDK sends a reasoning item back by id only, which the
  gateway (it stores nothing) cannot resolve and leaves out upstream; asked for
  ``encrypted_content``, the item goes back upstream with it intact;
* when no rescue is possible, the SDK's client obeys ``x-should-retry: false`` and does not
  retry the gateway's 503, although its ``max_retries`` is 2.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, ModelSettings, Runner, function_tool
from agents.exceptions import ModelBehaviorError

from failover.testing import Reply, Script

from ._openai_side import ROUTE, after_words, agents_run_config, gateway, stream_agent, words

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@function_tool
def read_note(name: str) -> str:
    """Read one of the user's notes."""
    return f"note {name} says 7"


def helper(**kw: Any) -> Agent[Any]:
    return Agent(name="helper", instructions="Be brief.", model=ROUTE, **kw)


def after_prompt(body: dict[str, Any]) -> list[dict[str, Any]]:
    """What a request carries after the user's prompt (the first input item)."""
    items: list[dict[str, Any]] = body["input"]
    return items[1:]


async def test_a_plain_prompt_is_answered_by_the_primary(tmp_path: Path) -> None:
    answer = "Hello from model a, the answer is 42."
    with gateway(tmp_path, [Reply.ok(answer)]) as gw:
        async with agents_run_config(gw) as run_config:
            result = await Runner.run(helper(), "Say hello", run_config=run_config)
        assert result.final_output == answer
        assert len(result.raw_responses) == 1
        assert (gw.count(gw.a), gw.count(gw.b)) == (1, 0)
        assert gw.summary(1) == [(200, "a", 1, "direct")]
        (body,) = gw.sent(gw.a)
        assert body["model"] == "model-a" and body["instructions"] == "Be brief."
        assert body["input"][0]["content"][0]["text"] == "Say hello"


async def test_a_tool_loop_sends_the_function_tools_output_back(tmp_path: Path) -> None:
    script = [Reply.ok(tool_calls=[("read_note", {"name": "n1"})]), Reply.ok("The note says 7.")]
    with gateway(tmp_path, script) as gw:
        async with agents_run_config(gw) as run_config:
            result = await Runner.run(helper(tools=[read_note]), "What does note n1 say?", run_config=run_config)
        assert result.final_output == "The note says 7."
        assert len(result.raw_responses) == 2
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)
        assert gw.summary(2) == [(200, "a", 1, "direct")] * 2

        first, second = gw.sent(gw.a)
        assert [t["name"] for t in first["tools"]] == ["read_note"]
        call, output = after_prompt(second)
        assert (call["type"], call["name"], json.loads(call["arguments"])) == (
            "function_call",
            "read_note",
            {"name": "n1"},
        )
        assert output == {"type": "function_call_output", "call_id": call["call_id"], "output": "note n1 says 7"}


@pytest.mark.parametrize(
    "failure",
    [Reply.rate_limit(), Reply.overloaded(), Reply.server_error()],
    ids=["429", "503", "500"],
)
async def test_an_unavailable_primary_is_replaced_by_the_fallback(tmp_path: Path, failure: Reply) -> None:
    with gateway(tmp_path, Script.always(failure), [Reply.ok("Hello from model b.")]) as gw:
        async with agents_run_config(gw) as run_config:
            result = await Runner.run(helper(), "Say hello", run_config=run_config)
        assert result.final_output == "Hello from model b."
        assert gw.a.kinds == [failure.kind.value] * 2  # a first try and one replay on a
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 1)
        assert gw.summary(1) == [(200, "b", 3, "fallback")]  # one request from the SDK


async def test_a_primary_rate_limited_for_20_s_is_not_waited_for(tmp_path: Path) -> None:
    """429 with ``retry-after: 20``: the fallback answers at once, a is not asked again."""
    with gateway(tmp_path, Script.always(Reply.rate_limit(retry_after=20)), [Reply.ok("Hello from model b.")]) as gw:
        async with agents_run_config(gw) as run_config:
            result = await Runner.run(helper(), "Say hello", run_config=run_config)
        assert result.final_output == "Hello from model b."
        assert gw.a.kinds == ["rate_limit"]
        assert (gw.count(gw.a), gw.count(gw.b)) == (1, 1)
        assert gw.summary(1) == [(200, "b", 2, "fallback")]


async def test_a_stream_cut_before_the_commit_point_is_replaced_unseen(tmp_path: Path) -> None:
    cut = Reply.drop_after(after_words(3, web_search=False), text=words("a", 200))  # 3 words in
    with gateway(tmp_path, Script.always(cut), [Reply.ok(words("b", 200))]) as gw:
        async with agents_run_config(gw) as run_config:
            seen = await stream_agent(helper(), "Say many words", run_config)
        assert seen.raised is None and seen.errors == []
        assert seen.text == seen.final_output == words("b", 200)  # b's words only, each once
        assert [c.events_sent for c in gw.a.calls] == [after_words(3, web_search=False)] * 2
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 1)
        assert gw.summary(1) == [(200, "b", 3, "fallback")]


async def test_a_stream_cut_after_the_commit_point_ends_the_run_with_an_error_and_no_splice(tmp_path: Path) -> None:
    """150 words (about 190 tokens) were shown when a's stream drops: the gateway cannot
    replace them without a splice, so it ends the stream with an ``error`` event
    (``partial_output``). The SDK raises ModelBehaviorError; the application has the 150 words
    it already showed, nothing after them, and the SDK sent no second request."""
    late = after_words(150, web_search=False)
    with gateway(tmp_path, Script.always(Reply.drop_after(late, text=words("a", 200))), [Reply.ok("b")]) as gw:
        async with agents_run_config(gw) as run_config:
            seen = await stream_agent(helper(), "Say many words", run_config)
        assert isinstance(seen.raised, ModelBehaviorError), seen.raised
        assert "partial_output" in str(seen.raised)
        (error,) = seen.errors
        assert error.startswith("partial_output: ")
        assert seen.text == words("a", 150) + " "  # exactly what a sent before the cut: no splice, no repeat
        assert seen.final_output is None
        assert (gw.count(gw.a), gw.count(gw.b)) == (1, 0)
        assert gw.a.calls[0].events_sent == late
        assert gw.summary(1) == [(200, None, 1, "stop")]
        assert gw.access()[0]["note"].startswith("partial_output")


async def test_at_the_defaults_a_reasoning_item_sent_back_by_id_is_left_out_upstream(tmp_path: Path) -> None:
    """The SDK does not ask for ``encrypted_content``: it sends the reasoning item back with
    its id and summary only. The gateway keeps no stored responses, so nothing can resolve the
    id upstream: the item is left out, and the turn goes on with the call and its output."""
    thought = Reply.ok(reasoning="Read the note first.", tool_calls=[("read_note", {"name": "n1"})])
    with gateway(tmp_path, [thought, Reply.ok("The note says 7.")]) as gw:
        async with agents_run_config(gw) as run_config:
            result = await Runner.run(helper(tools=[read_note]), "What does note n1 say?", run_config=run_config)
        assert result.final_output == "The note says 7."
        (reasoning,) = [i for i in result.raw_responses[0].output if i.type == "reasoning"]
        assert reasoning.encrypted_content is None
        assert [s.text for s in reasoning.summary] == ["Read the note first."]

        first, second = gw.sent(gw.a)
        assert "include" not in first
        assert [i["type"] for i in after_prompt(second)] == ["function_call", "function_call_output"]
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)


async def test_a_reasoning_items_encrypted_content_goes_back_upstream_intact(tmp_path: Path) -> None:
    thought = Reply.ok(reasoning="Read the note first.", tool_calls=[("read_note", {"name": "n1"})])
    settings = ModelSettings(response_include=["reasoning.encrypted_content"])
    with gateway(tmp_path, [thought, Reply.ok("The note says 7.")]) as gw:
        async with agents_run_config(gw) as run_config:
            agent = helper(tools=[read_note], model_settings=settings)
            result = await Runner.run(agent, "What does note n1 say?", run_config=run_config)
        assert result.final_output == "The note says 7."
        (reasoning,) = [i for i in result.raw_responses[0].output if i.type == "reasoning"]
        given = base64.b64encode(b"failover-fake-thinking:a:resp_a_1").decode()  # the fake's token for a's answer
        assert reasoning.encrypted_content == given  # a's token reached the SDK as a sent it

        first, second = gw.sent(gw.a)
        assert first["include"] == ["reasoning.encrypted_content"]
        item, call, output = after_prompt(second)
        assert item["type"] == "reasoning"
        assert item["encrypted_content"] == given  # and went back to a intact
        assert item["summary"] == [{"type": "summary_text", "text": "Read the note first."}]
        assert (call["type"], output["type"]) == ("function_call", "function_call_output")
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)
        assert gw.summary(2) == [(200, "a", 1, "direct")] * 2


async def test_with_no_rescue_the_sdk_obeys_x_should_retry_and_asks_once(tmp_path: Path) -> None:
    """The route without its fallback and a always 503: the gateway answers 503 with
    ``x-should-retry: false``; the openai client under the SDK (``max_retries`` 2 by default)
    does not retry it and the run raises at once."""
    with gateway(tmp_path, Script.always(Reply.overloaded()), with_fallback=False) as gw:
        async with agents_run_config(gw) as run_config:
            with pytest.raises(openai.InternalServerError) as info:
                await Runner.run(helper(), "Say hello", run_config=run_config)
        assert info.value.status_code == 503
        assert info.value.response.headers["x-should-retry"] == "false"
        assert "provider_overloaded" in info.value.message
        assert (gw.count(gw.a), gw.count(gw.b)) == (2, 0)  # the gateway's own try and replay
        records = gw.access(1)
        assert [(r["status"], r["code"], r["attempts"]) for r in records] == [(503, "provider_overloaded", 2)]
