"""A client's mid-conversation system message (Anthropic's ``role: "system"`` inside
``messages``, what Claude Code and the Agent SDK's CLI send): the ``/v1/messages`` parser keeps it
in place with the client's JSON object; the Anthropic dialect sends that object back where it
was, byte for byte; Claude on Vertex AI and the other dialects read it as a system message."""

from __future__ import annotations

import json
from typing import Any

from failover.inbound import anthropic as inbound
from failover.model import Dialect, Message, Request, Target, TextPart, Vertex
from failover.providers import AnthropicDialect, GeminiDialect, OpenAIDialect
from failover.providers.bedrock import converse_body

from ._wire import target

EPHEMERAL = {"type": "ephemeral", "ttl": "1h"}
TOP = [
    {"type": "text", "text": "You are a coding agent."},
    {"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL},
]
# the Agent SDK's form: blocks with a marker, and a per-turn field failover does not read; keys
# in an order a re-encoding would change
PLACED: dict[str, Any] = {
    "content": [
        {"text": "# Environment\nwd: /proj \u00e9", "type": "text"},
        {"type": "text", "text": "Today is 2026-01-01.", "cache_control": EPHEMERAL},
    ],
    "role": "system",
    "output_config": {"effort": "medium"},
}
BODY: dict[str, Any] = {
    "model": "claude",
    "max_tokens": 256,
    "system": TOP,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Say hello."}, {"type": "text", "text": "Now."}]},
        PLACED,
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": "Answer in French from now on."},  # Claude Code's form: a string
        {"role": "user", "content": "Again."},
    ],
}
BEDROCK = Target(
    name="b",
    dialect=Dialect.BEDROCK,
    model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
    region="us-east-1",
)


def _request() -> Request:
    return inbound.to_request(inbound.parse_body(json.loads(json.dumps(BODY))))


def _sent(dialect: Any, dialect_name: Dialect, **kw: Any) -> dict[str, Any]:
    http = dialect.build(target(dialect_name, **kw), _request())
    assert http.json is not None
    return dict(http.json)


def test_the_parser_keeps_each_in_place_as_one_system_message_with_the_clients_object() -> None:
    req = _request()
    assert [m.role for m in req.messages] == ["system", "system", "user", "system", "assistant", "system", "user"]
    placed, french = req.messages[3], req.messages[5]
    assert placed.inline == PLACED and french.inline == BODY["messages"][3]
    assert placed.content == (
        TextPart(text="# Environment\nwd: /proj \u00e9"),
        TextPart(text="Today is 2026-01-01.", cache_control=EPHEMERAL),
    )
    assert french.content == (TextPart(text="Answer in French from now on."),)
    assert all(m.inline is None for m in req.messages[:2])  # the top-level system: the prompt's start


def test_an_anthropic_target_gets_them_where_the_client_put_them_byte_for_byte() -> None:
    sent = _sent(AnthropicDialect(), Dialect.ANTHROPIC)
    assert json.dumps(sent["system"]) == json.dumps(TOP)
    assert json.dumps(sent["messages"][1]) == json.dumps(PLACED)
    assert json.dumps(sent["messages"][3]) == json.dumps(BODY["messages"][3])
    assert [m["role"] for m in sent["messages"]] == ["user", "system", "assistant", "system", "user"]
    # and counted as sent
    count = AnthropicDialect().build_count(target(Dialect.ANTHROPIC), _request())
    assert count.json is not None and count.json["messages"] == sent["messages"]


def test_a_system_message_built_without_the_clients_object_is_hoisted_as_before() -> None:
    req = Request(messages=(Message.user("Hi"), Message.system("Late rule."), Message.user("Go")), max_tokens=8)
    http = AnthropicDialect().build(target(Dialect.ANTHROPIC), req)
    assert http.json is not None
    assert http.json["system"] == "Late rule."
    assert [m["role"] for m in http.json["messages"]] == ["user", "user"]


def test_claude_on_vertex_takes_them_into_the_top_level_system_with_their_markers() -> None:
    vertex = Vertex(project="p", location="us-east5")
    sent = _sent(AnthropicDialect(), Dialect.ANTHROPIC, vertex=vertex, base_url="")
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["system"] == [
        *TOP,
        {"type": "text", "text": "# Environment\nwd: /proj \u00e9"},
        {"type": "text", "text": "Today is 2026-01-01.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "Answer in French from now on."},
    ]


def test_chat_completions_gets_a_system_message_in_the_same_place() -> None:
    sent = _sent(OpenAIDialect(), Dialect.OPENAI)
    assert [(m["role"], m["content"]) for m in sent["messages"]] == [
        ("system", "You are a coding agent."),
        ("system", "Be brief."),
        ("user", [{"type": "text", "text": "Say hello."}, {"type": "text", "text": "Now."}]),
        ("system", "# Environment\nwd: /proj \u00e9Today is 2026-01-01."),
        ("assistant", "Hello."),
        ("system", "Answer in French from now on."),
        ("user", "Again."),
    ]
    assert "cache_control" not in json.dumps(sent) and "output_config" not in json.dumps(sent)


def test_gemini_and_bedrock_read_them_into_their_system_prompt() -> None:
    gemini = _sent(GeminiDialect(), Dialect.GEMINI)
    text = gemini["systemInstruction"]["parts"][0]["text"]
    assert "Today is 2026-01-01." in text and text.endswith("Answer in French from now on.")
    assert [c["role"] for c in gemini["contents"]] == ["user", "model", "user"]
    bedrock = converse_body(BEDROCK, _request())
    assert bedrock["system"][-1] == {"text": "Answer in French from now on."}
    assert [m["role"] for m in bedrock["messages"]] == ["user", "assistant", "user"]
