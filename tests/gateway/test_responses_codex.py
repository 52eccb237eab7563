"""``POST /v1/responses`` with the body Codex sends at its default settings: a ``namespace`` tool
(a group of function tools), a hosted ``web_search`` tool, ``include`` and ``reasoning.summary``.

The official openai SDK at its defaults against one real uvicorn server, with fake providers
that record each request they receive: an OpenAI Chat Completions one (``o``) and an OpenAI
Responses one (``r``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest

from failover import Route
from failover.gateway import GatewaySettings, Tenant, create_app, hash_key
from failover.model import Response
from failover.testing import FakeNetwork, FakeProvider, Reply
from tests._sdk import fake_target, quiet_router

from ._kit import ACME_KEY, PROVIDER_KEY, ServerThread

pytestmark = pytest.mark.e2e

SPAWN: Any = {
    "type": "function",
    "name": "spawn_agent",
    "description": "Start a sub-agent.",
    "parameters": {
        "type": "object",
        "properties": {"task": {"type": "string"}},
        "required": ["task"],
        "additionalProperties": False,
    },
    "strict": False,
}
NAMESPACE: Any = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools to run sub-agents.",
    "tools": [SPAWN, {**SPAWN, "name": "wait_agent", "description": "Wait for a sub-agent."}],
}
SHELL: Any = {**SPAWN, "name": "shell", "description": "Run a command."}
REASONING: Any = {"effort": "medium", "summary": "auto"}
INCLUDE = ["reasoning.encrypted_content", "web_search_call.action.sources"]


class Served:
    def __init__(self) -> None:
        self.providers = {
            "o": FakeProvider("o", "openai", api_key=PROVIDER_KEY),
            "r": FakeProvider("r", "openai-responses", api_key=PROVIDER_KEY),
        }
        targets = {n: fake_target(p, PROVIDER_KEY) for n, p in self.providers.items()}
        routes = [
            Route(name="chat", primary=(targets["o"],)),  # no target can run a hosted tool
            Route(name="codex", primary=(targets["o"], targets["r"])),  # the chat target first
        ]
        self.router = quiet_router(routes, FakeNetwork(*self.providers.values()))
        self.records: list[Any] = []
        complete = self.router.complete

        async def recorded(*args: Any, **kwargs: Any) -> Response:  # the RouteRecord of each plain answer
            resp = await complete(*args, **kwargs)
            self.records.append(resp.record)
            return resp

        self.router.complete = recorded  # type: ignore[method-assign]
        tenant = Tenant(name="acme", key_hashes=(hash_key(ACME_KEY),), routes=frozenset({"chat", "codex"}))
        self.app = create_app(self.router, GatewaySettings(tenants=(tenant,)))

    def reset(self) -> Served:
        for p in self.providers.values():
            p.load("ok")
            p.clear()
        self.records.clear()
        return self


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Served, ServerThread]]:
    served = Served()
    with ServerThread(served.app) as thread:
        yield served, thread


@pytest.fixture
async def client(server: tuple[Served, ServerThread]) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server[1].base_url, api_key=ACME_KEY) as c:  # the SDK's defaults
        yield c


@pytest.fixture
def served(server: tuple[Served, ServerThread]) -> Served:
    return server[0].reset()


def sent(served: Served, provider: str) -> list[dict[str, Any]]:
    return [dict(call.json or {}) for call in served.providers[provider].calls if call.json is not None]


def _calls(output: list[Any]) -> list[tuple[str, str | None, str]]:
    return [(i.name, getattr(i, "namespace", None), i.arguments) for i in output if i.type == "function_call"]


@pytest.mark.parametrize("stream", [False, True])
async def test_namespace_functions_reach_a_chat_upstream_flat_and_the_call_comes_back_under_the_clients_name(
    served: Served, client: openai.AsyncOpenAI, stream: bool
) -> None:
    call = Reply.ok(tool_calls=[("multi_agent_v1__spawn_agent", {"task": "lint"})])
    served.providers["o"].load([call])
    params: dict[str, Any] = {
        "model": "chat",
        "input": "Lint the repo",
        "tools": [SHELL, NAMESPACE],
        "include": INCLUDE,
        "reasoning": REASONING,
    }
    if stream:
        events = [e async for e in await client.responses.create(stream=True, **params)]
        done = [e.item for e in events if e.type == "response.output_item.done"]
        added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
        assert [(i.name, getattr(i, "namespace", None)) for i in added] == [("spawn_agent", "multi_agent_v1")]
        output = events[-1].response.output
        assert _calls(done) == _calls(output)
    else:
        output = (await client.responses.create(**params)).output
    assert _calls(output) == [("spawn_agent", "multi_agent_v1", '{"task":"lint"}')]

    (body,) = sent(served, "o")
    tools = [(t["function"]["name"], t["function"].get("description")) for t in body["tools"]]
    assert tools == [
        ("shell", "Run a command."),
        ("multi_agent_v1__spawn_agent", "Tools to run sub-agents.\n\nStart a sub-agent."),
        ("multi_agent_v1__wait_agent", "Tools to run sub-agents.\n\nWait for a sub-agent."),
    ]
    assert "include" not in body and "reasoning" not in body  # Chat Completions has neither


async def test_a_namespaced_call_in_the_history_reaches_the_upstream_flat(
    served: Served, client: openai.AsyncOpenAI
) -> None:
    history: Any = [
        {"role": "user", "content": "Lint the repo"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "spawn_agent",
            "namespace": "multi_agent_v1",
            "arguments": '{"task":"lint"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "agent 7 started"},
    ]
    await client.responses.create(model="chat", input=history, tools=[NAMESPACE])
    (body,) = sent(served, "o")
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["multi_agent_v1__spawn_agent"]


@pytest.mark.parametrize("stream", [False, True])
async def test_web_search_include_and_summary_reach_a_responses_upstream_verbatim_and_leave_out_chat(
    served: Served, client: openai.AsyncOpenAI, stream: bool
) -> None:
    served.providers["r"].load([Reply.ok("It is sunny.", reasoning="Search first.")])
    params: dict[str, Any] = {
        "model": "codex",
        "input": "Weather in Oslo?",
        "tools": [SHELL, NAMESPACE, {"type": "web_search"}],
        "include": INCLUDE,
        "reasoning": REASONING,
    }
    if stream:
        events = [e async for e in await client.responses.create(stream=True, **params)]
        done = [e.item.type for e in events if e.type == "response.output_item.done"]
        assert "web_search_call" in done
        final = events[-1].response
    else:
        final = await client.responses.create(**params)
        (record,) = served.records
        (excluded,) = record.excluded
        assert excluded.target == "o"
        assert excluded.reason == "hosted tools (web_search) need an openai-responses target, not openai"
    kinds = [i.type for i in final.output]
    assert "web_search_call" in kinds and final.output_text == "It is sunny."
    (search,) = [i for i in final.output if i.type == "web_search_call"]
    assert search.action.type == "search"  # the upstream's item, verbatim

    assert sent(served, "o") == []  # the chat target is never called
    (body,) = sent(served, "r")
    assert body["tools"][-1] == {"type": "web_search"}
    assert [t.get("name") for t in body["tools"][:-1]] == [
        "shell",
        "multi_agent_v1__spawn_agent",
        "multi_agent_v1__wait_agent",
    ]
    assert body["include"] == INCLUDE
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert [t.type for t in final.tools] == ["function", "namespace", "web_search"]  # echoed as sent


async def test_a_route_with_no_responses_target_answers_without_the_hosted_tools(
    served: Served, client: openai.AsyncOpenAI
) -> None:
    """Codex offers web_search on every turn: a route that cannot run it answers with the
    client's own tools rather than refusing every request."""
    before = len(sent(served, "o"))
    resp = await client.responses.create(model="chat", input="Hi", tools=[SHELL, {"type": "web_search"}])
    assert resp.status == "completed"
    (body,) = sent(served, "o")[before:]
    assert [t["function"]["name"] for t in body["tools"]] == [SHELL["name"]]  # web_search left out


async def test_a_hosted_tool_that_is_all_the_model_may_call_is_a_400_naming_it(
    served: Served, client: openai.AsyncOpenAI
) -> None:
    before = len(sent(served, "o"))
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(model="chat", input="Hi", tools=[{"type": "web_search"}], tool_choice="required")
    assert info.value.status_code == 400
    assert info.value.body is not None and info.value.body["param"] == "tools[0].type"  # type: ignore[index]
    assert "web_search" in info.value.message
    assert sent(served, "o")[before:] == []


# Codex's freeform apply_patch (a custom tool with a Lark grammar; shapes: openai-python's
# types/responses custom_tool_param, response_custom_tool_call(_output)_param)
APPLY_PATCH: Any = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files. This is a FREEFORM tool, so do not wrap the patch in JSON.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" LF hunk+ "*** End Patch"'},
}
PATCH = '*** Begin Patch\n*** Add File: a.txt\n+caf\u00e9 "quoted" \\ back\n*** End Patch\n'
HISTORY: Any = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Create a.txt"}]},
    {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "status": "completed",
        "call_id": "call_p",
        "name": "apply_patch",
        "input": PATCH,
    },
    {"type": "custom_tool_call_output", "id": "ctco_1", "call_id": "call_p", "output": "Success. Updated a.txt"},
]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_freeform_call_and_its_output_reach_a_responses_upstream_as_they_were_and_leave_out_chat(
    served: Served, client: openai.AsyncOpenAI, stream: bool
) -> None:
    served.providers["r"].load([Reply.ok(tool_calls=[{"name": "apply_patch", "arguments": {"input": PATCH}}])])
    params: dict[str, Any] = {"model": "codex", "input": HISTORY, "tools": [SHELL, APPLY_PATCH]}
    if stream:
        events = [e async for e in await client.responses.create(stream=True, **params)]
        final = events[-1].response
    else:
        final = await client.responses.create(**params)
        (record,) = served.records
        (excluded,) = record.excluded
        assert (
            excluded.target == "o" and "custom_tool_call" in excluded.reason and "openai-responses" in excluded.reason
        )
    assert sent(served, "o") == []
    (body,) = sent(served, "r")
    assert body["tools"][-1] == APPLY_PATCH  # verbatim, grammar included
    assert body["input"][1:] == [
        {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Success. Updated a.txt"},
    ]
    # the model's next freeform call reaches the client as the upstream's item
    (call,) = [i for i in final.output if i.type == "custom_tool_call"]
    assert (call.name, call.input) == ("apply_patch", PATCH) and call.call_id


async def test_a_freeform_call_in_the_history_on_a_route_with_no_responses_target_is_a_400_naming_it(
    served: Served, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(model="chat", input=HISTORY, tools=[SHELL, APPLY_PATCH])
    assert info.value.body is not None and info.value.body["param"] == "input[1].type"  # type: ignore[index]
    assert "custom_tool_call" in info.value.message and "openai-responses" in info.value.message
    assert sent(served, "o") == []
