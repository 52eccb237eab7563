"""Through the gateway: the tool schemas real agent runtimes send get a 200 (a fake upstream);
patterns that compile too large are a 400 naming the field and the fix, before any upstream call."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway._kit import Kit, chat_body
from tests.validation.test_schema_real_clients import SEND_MESSAGE, big_enum, pydantic_chain

REAL = {"send_message": SEND_MESSAGE, "pydantic_defs": pydantic_chain(30), "enum_2000": big_enum(2000)}


async def post(kit: Kit, endpoint: str, schema: dict[str, Any]) -> Any:
    async with kit.client() as c:
        if endpoint == "messages":
            body = {
                "model": "chat",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "Hi"}],
                "tools": [{"name": "SendMessage", "input_schema": schema}],
            }
            return await c.post("/v1/messages", json=body)
        tools = [{"type": "function", "function": {"name": "SendMessage", "parameters": schema}}]
        return await c.post("/v1/chat/completions", json=chat_body(tools=tools))


@pytest.mark.parametrize("endpoint", ["messages", "chat"])
@pytest.mark.parametrize("name", sorted(REAL))
async def test_real_agent_tool_schemas_get_a_200(endpoint: str, name: str) -> None:
    kit = Kit()
    r = await post(kit, endpoint, REAL[name])
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("endpoint", ["messages", "chat"])
async def test_a_pattern_that_compiles_too_large_is_a_400_naming_the_field_and_the_fix(endpoint: str) -> None:
    kit = Kit()
    schema = {"type": "object", "properties": {"m": {"type": "string", "pattern": "^(a{1,1000}){1,1000}$"}}}
    r = await post(kit, endpoint, schema)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    where = "tools[0].input_schema" if endpoint == "messages" else "tools[0].function.parameters"
    assert f"{where}.properties.m.pattern" in (error.get("param") or error["message"]), error
    assert "8 MiB" in error["message"] and "minLength/maxLength" in error["message"]
    assert [p.name for p in kit.providers.values() if p.calls] == []


@pytest.mark.parametrize("endpoint", ["messages", "chat"])
async def test_too_many_heavy_patterns_are_a_400_naming_the_budget(endpoint: str) -> None:
    kit = Kit()
    schema = {"properties": {f"p{i}": {"pattern": f"^[\\s\\S]{{0,1000}}{i}$"} for i in range(40)}}
    r = await post(kit, endpoint, schema)
    assert r.status_code == 400, r.text
    assert "max_schema_pattern_bytes" in r.json()["error"]["message"]
    assert [p.name for p in kit.providers.values() if p.calls] == []
