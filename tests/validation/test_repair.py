"""repair_request: the one corrective request, for every failure validate() reports."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from failover import Contract, FailureKind, Message, Request, Response, ResponseFormat, Secret, Target, Tool, ToolCall
from failover.model import Dialect, Failure
from failover.providers import dialect_for
from failover.validation import REPAIR_PROMPT, repair_request, validate

WEATHER = Tool(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HISTORY = (Message.system("Be brief."), Message.user("Weather in Paris, in one word?"))


def target(dialect: Dialect = Dialect.OPENAI) -> Target:
    return Target(
        name="t",
        dialect=dialect,
        model="m",
        base_url="http://t.fake/v1",
        api_key=Secret("sk-x"),
        context_window=10_000,
        max_output_tokens=4_000,
    )


def failure_of(request: Request, response: Response, contract: Contract | None = None) -> Failure:
    out = validate(request, response, contract)
    assert isinstance(out, Failure)
    return out


def test_output_failures_replay_the_answer_then_send_the_error_as_a_user_message() -> None:
    req = Request(messages=HISTORY)
    f = failure_of(req, Response(text="It is sunny and warm today in Paris."), Contract(max_output_chars=10))
    fixed = repair_request(req, f, target(), 100)
    assert fixed is not None
    assert fixed.messages[:2] == HISTORY
    assert fixed.messages[2] == Message.assistant("It is sunny and warm today in Paris.")
    last = fixed.messages[3]
    assert last.role == "user"
    assert last.text == REPAIR_PROMPT.format(error=f.message.rstrip(". "))
    assert "over the limit of 10" in last.text and "Answer again" in last.text
    assert fixed.max_tokens == req.max_tokens and fixed.tools == req.tools


def test_schema_errors_go_back_verbatim() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    req = Request(messages=HISTORY, response_format=ResponseFormat.json_schema(schema))
    f = failure_of(req, Response(text='{"wrong": 1}'))
    fixed = repair_request(req, f, target(), 100)
    assert fixed is not None and "'answer' is a required property" in fixed.messages[-1].text
    assert fixed.response_format == req.response_format


def test_malformed_tool_call_is_described_in_a_user_message_not_paired_with_a_tool_result() -> None:
    req = Request(messages=HISTORY, tools=(WEATHER,))
    bad = Response(tool_calls=(ToolCall(id="call_9", name="get_weather", arguments='{"town": "Paris"}',
                                        parsed={"town": "Paris"}),))  # fmt: skip
    f = failure_of(req, bad)
    assert f.kind is FailureKind.TOOL_CALL_MALFORMED
    fixed = repair_request(req, f, target(), 100)
    assert fixed is not None
    added = fixed.messages[len(HISTORY) :]
    assert [m.role for m in added] == ["user"]  # no assistant tool_calls to pair, no tool result
    assert "'city' is a required property" in added[0].text and '{"town": "Paris"}' in added[0].text
    assert fixed.tool_choice is None


def test_a_tool_call_on_a_no_tools_route_switches_tool_choice_off() -> None:
    req = Request(messages=HISTORY, tools=(WEATHER,))
    bad = Response(tool_calls=(ToolCall(id="c", name="get_weather", arguments='{"city": "Paris"}',
                                        parsed={"city": "Paris"}),))  # fmt: skip
    f = failure_of(req, bad, Contract(no_tool_calls=True))
    fixed = repair_request(req, f, target(), 100)
    assert fixed is not None and fixed.tool_choice is not None and fixed.tool_choice.mode == "none"
    assert fixed.tools == req.tools  # still declared: history may refer to them
    assert "tools may not be called" in fixed.messages[-1].text


def test_truncation_still_doubles_max_tokens_within_the_window() -> None:
    req = Request(messages=HISTORY, max_tokens=1000)
    f = Failure(kind=FailureKind.TRUNCATED, message="cut")
    fixed = repair_request(req, f, target(), 100)
    assert fixed is not None and fixed.max_tokens == 2000 and fixed.messages == req.messages
    assert repair_request(replace(req, max_tokens=4000), f, target(), 100) is None


@pytest.mark.parametrize("kind", [FailureKind.CONTENT_FILTERED, FailureKind.RATE_LIMITED, FailureKind.CONTRACT_FAILURE])
def test_nothing_else_is_repaired(kind: FailureKind) -> None:
    assert repair_request(Request(messages=HISTORY), Failure(kind=kind, message="x"), target(), 100) is None


@pytest.mark.parametrize("dialect", [Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI])
def test_every_dialect_renders_the_repair_after_a_tool_turn(dialect: Dialect) -> None:
    # An agent loop: the model called a tool, got its result, then called a tool that does not exist.
    done = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}', parsed={"city": "Paris"})
    req = Request(
        messages=(*HISTORY, Message.assistant(tool_calls=(done,)), Message.tool("call_1", "sunny")),
        tools=(WEATHER,),
    )
    bad = Response(tool_calls=(ToolCall(id="call_2", name="get_forecast", arguments="{}", parsed={}),))
    fixed = repair_request(req, failure_of(req, bad), target(dialect), 100)
    assert fixed is not None
    body: Any = dialect_for(dialect).build(target(dialect), fixed).json
    turns = body["messages"] if dialect is not Dialect.GEMINI else body["contents"]
    rendered = str(turns[-1])
    assert "get_forecast" in rendered and "does not exist" in rendered
    # every tool call in the history is still answered by its result: nothing unpaired was added
    assert str(turns).count("call_1") >= 2 or dialect is Dialect.GEMINI
    assert "call_2" not in str(turns[:-1])


def test_truncation_with_an_unknown_window_grows_within_the_max_output() -> None:
    req = Request(messages=HISTORY, max_tokens=3000)
    f = Failure(kind=FailureKind.TRUNCATED, message="cut")
    fixed = repair_request(req, f, replace(target(), context_window=None), 9_000)
    assert fixed is not None and fixed.max_tokens == 4000  # the target's max output, not "window - input"
    assert repair_request(req, f, target(), 9_000) is None  # a known 10,000 window leaves 1,000
