"""What the agent runtimes really send (``tests/inbound/captured``, recorded by
``python -m tests.runtimes.capture``) is read by the gateway's parsers without loss, and served.

For every captured request: the inbound parser of its dialect turns it into a Request, keeping
what the runtime needs (tools, namespaces flattened, hosted and freeform tools, thinking and
reasoning settings, ``max_tokens``, ``cache_control`` markers, ``context_management`` and the
``anthropic-beta`` header as pass-through); and the gateway, given the captured body and
headers, answers 200 from a fake upstream of the same dialect, which receives what failover
passes through verbatim. The fixture directories must be the pinned versions' (a version bump
without a re-capture fails here).
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import pytest

from failover import Route
from failover.gateway import GatewaySettings, create_app
from failover.inbound import anthropic, openai, responses
from failover.model import Request
from failover.testing import FakeNetwork, FakeProvider, Reply
from tests._sdk import fake_target, quiet_router

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "inbound" / "captured"
FIXTURES = sorted(CAPTURED.glob("*/*.json"))
PLACEHOLDER = "sk-capture-redacted"


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _pinned() -> set[str]:
    script = (ROOT / "scripts" / "runtimes.sh").read_text()
    claude = re.search(r"^CLAUDE_CODE=(\S+)$", script, re.M)
    codex = re.search(r"^CODEX=(\S+)$", script, re.M)
    assert claude is not None and codex is not None
    return {
        f"claude-code-{claude.group(1)}",
        f"codex-{codex.group(1)}",
        f"claude-agent-sdk-{metadata.version('claude-agent-sdk')}",
        f"openai-agents-{metadata.version('openai-agents')}",
    }


def test_the_captures_are_of_the_pinned_versions() -> None:
    """A version moved without a re-capture (python -m tests.runtimes.capture) fails here."""
    assert {d.name for d in CAPTURED.iterdir() if d.is_dir()} == _pinned()
    for d in CAPTURED.iterdir():
        names = sorted(f.stem for f in d.glob("*.json"))
        assert any("plain" in n for n in names) and any("tool-result" in n for n in names), d.name


@pytest.mark.parametrize("path", FIXTURES, ids=_id)
def test_no_secret_and_no_volatile_value_is_in_a_capture(path: Path) -> None:
    data = _load(path)
    headers = data["headers"]
    for name in ("authorization", "x-api-key"):
        if name in headers:
            assert headers[name].removeprefix("Bearer ") == PLACEHOLDER
    assert not {"host", "content-length"} & set(headers)
    text = path.read_text()
    assert "/tmp/" not in text and "127.0.0.1:" not in text.replace("127.0.0.1:8000", "")
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-(?!0000000)[0-9a-f]{12}", text)


# ------------------------------------------------------------------------------------ parsing


def parse(data: dict[str, Any]) -> Request:
    """The Request the gateway's endpoint for the captured path builds."""
    body, path = data["body"], data["path"]
    if path == "/v1/messages":
        return anthropic.to_request(anthropic.parse_body(body), headers=data["headers"])
    if path == "/v1/responses":
        return responses.to_request(responses.parse_body(body))
    assert path == "/v1/chat/completions", path
    return openai.to_request(openai.parse_body(body))


def _markers(value: Any) -> int:
    """cache_control markers anywhere in a JSON value."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(_markers(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_markers(v) for v in value)
    return 0


def _request_markers(req: Request) -> int:
    return (
        sum(t.cache_control is not None for t in req.tools)
        + sum(p.cache_control is not None for m in req.messages for p in m.content)
        + sum(c.cache_control is not None for m in req.messages for c in m.tool_calls)
    )


def _check_messages(data: dict[str, Any], req: Request) -> None:
    body = data["body"]
    assert len(req.tools) == len(body["tools"])
    assert req.max_tokens == body["max_tokens"]
    passed = req.passthrough
    assert passed is not None and passed.dialect == "anthropic"
    assert passed.headers["anthropic-beta"] == data["headers"]["anthropic-beta"]
    for name in ("context_management", "metadata"):  # what Claude Code sends beside the messages
        assert passed.fields[name] == body[name]
    # context_management only clears thinking: a hint another dialect may go without
    assert passed.opaque == frozenset() and "context_management" in passed.hints
    # every cache_control marker of the body is on its block of the Request
    assert _request_markers(req) == _markers(body) > 0
    effort = body["output_config"]["effort"]
    assert req.reasoning_effort == ("high" if effort in ("xhigh", "max") else effort)
    assert body["thinking"]["type"] == "adaptive"  # the model's default: no budget to map


def _check_responses(data: dict[str, Any], req: Request) -> None:
    body = data["body"]
    tools = body.get("tools", [])
    functions = [t for t in tools if t["type"] == "function"]
    namespaced = [f for t in tools if t["type"] == "namespace" for f in t["tools"]]
    hosted = [t for t in tools if t["type"] not in ("function", "namespace")]
    assert [t.name for t in req.tools] == [t["name"] for t in functions] + [
        f"{t['name']}__{f['name']}" for t in tools if t["type"] == "namespace" for f in t["tools"]
    ] or {t.name for t in req.tools} == {t["name"] for t in functions} | {
        f"{t['name']}__{f['name']}" for t in tools if t["type"] == "namespace" for f in t["tools"]
    }
    assert len(req.tools) == len(functions) + len(namespaced)
    assert [dict(t) for t in req.hosted_tools] == hosted  # verbatim
    assert req.include == tuple(body.get("include", ()))
    reasoning = body.get("reasoning") or {}
    assert req.reasoning_summary == reasoning.get("summary")
    assert req.reasoning_effort == reasoning.get("effort")
    custom = [i for i in body["input"] if i.get("type") == "custom_tool_call"]
    calls = {c.id: c for m in req.messages for c in m.tool_calls}
    for item in custom:  # a freeform call is kept as such, its input exact
        call = calls[item["call_id"]]
        assert call.freeform and call.name == item["name"] and call.parsed == {"input": item["input"]}
    outputs = {m.tool_call_id: m.text for m in req.messages if m.role == "tool"}
    for item in body["input"]:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            assert outputs[item["call_id"]] == item["output"]


@pytest.mark.parametrize("path", FIXTURES, ids=_id)
def test_every_captured_request_parses_and_keeps_what_the_runtime_needs(path: Path) -> None:
    data = _load(path)
    req = parse(data)
    assert req.messages
    if data["path"] == "/v1/messages":
        _check_messages(data, req)
    elif data["path"] == "/v1/responses":
        _check_responses(data, req)
    else:
        assert len(req.tools) == len(data["body"]["tools"])
        assert req.messages[0].role == "system"


def test_codex_for_a_model_it_knows_offers_freeform_and_client_side_tools() -> None:
    """What Codex sends for gpt-5.5: apply_patch as a freeform (custom, grammar) tool, and a
    tool_search run by the client; both kept whole for a Responses target."""
    (path,) = CAPTURED.glob("codex-*/3-known-model-plain.json")
    req = parse(_load(path))
    kinds = {str(t["type"]): t for t in req.hosted_tools}
    assert kinds["custom"]["name"] == "apply_patch" and kinds["custom"]["format"]["type"] == "grammar"
    assert kinds["tool_search"]["execution"] == "client"
    assert "web_search" in kinds


# ------------------------------------------------------------------------------------ served


def _serve(data: dict[str, Any]) -> tuple[Any, FakeProvider]:
    """An open gateway (loopback) whose route, named as the runtime's model, has one fake
    upstream of the captured dialect."""
    upstream = FakeProvider("up", data["dialect"], [Reply.ok("ok")], api_key="sk-upstream")
    route = Route(name=data["body"]["model"], primary=(fake_target(upstream, "sk-upstream"),))
    router = quiet_router([route], FakeNetwork(upstream))
    return create_app(router, GatewaySettings()), upstream


@pytest.mark.parametrize("path", FIXTURES, ids=_id)
async def test_the_gateway_serves_every_captured_request_from_an_upstream_of_its_dialect(path: Path) -> None:
    data = _load(path)
    body = data["body"]
    app, upstream = _serve(data)
    url = data["path"] + (f"?{data['query']}" if data["query"] else "")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        resp = await client.post(url, content=json.dumps(body).encode(), headers=data["headers"], timeout=30)
    assert resp.status_code == 200, resp.text
    if body.get("stream"):
        assert resp.headers["content-type"].startswith("text/event-stream")
    (call,) = upstream.calls
    assert call.status == 200
    sent = dict(call.json or {})
    if data["dialect"] == "anthropic":
        for name in ("context_management", "metadata"):  # verbatim, byte for byte
            assert json.dumps(sent[name]) == json.dumps(body[name])
        # the client's system blocks, verbatim, and its mid-conversation ``role: system``
        # messages (Claude Code's, the Agent SDK's) where it put them, blocks and markers as sent
        assert json.dumps(sent["system"]) == json.dumps(body["system"])
        # (with fields failover does not read: the Agent SDK's per-turn ``output_config``)
        placed = [i for i, m in enumerate(body["messages"]) if m["role"] == "system"]
        assert placed and [i for i, m in enumerate(sent["messages"]) if m["role"] == "system"] == placed
        for i in placed:
            assert json.dumps(sent["messages"][i]) == json.dumps(body["messages"][i])
        assert [m["role"] for m in sent["messages"]] == [m["role"] for m in body["messages"]]
        assert _markers(sent) == _markers(body)
        betas = call.headers["anthropic-beta"].split(",")
        assert betas == data["headers"]["anthropic-beta"].split(",")
        assert [t["name"] for t in sent["tools"]] == [t["name"] for t in body["tools"]]
    elif data["dialect"] == "openai-responses":
        hosted = [t for t in body.get("tools", []) if t["type"] not in ("function", "namespace")]
        assert [t for t in sent.get("tools", []) if t["type"] != "function"] == hosted
        for kind in ("custom_tool_call", "custom_tool_call_output"):
            keys = ("type", "call_id", "name", "input", "output")
            mine = [{k: i[k] for k in keys if k in i} for i in body["input"] if i.get("type") == kind]
            assert [i for i in sent["input"] if i["type"] == kind] == mine
        for name in ("client_metadata", "prompt_cache_key", "parallel_tool_calls"):  # Codex's, verbatim
            if name in body:
                assert json.dumps(sent[name]) == json.dumps(body[name])


CODEX = [p for p in FIXTURES if p.parent.name.startswith("codex-") and "custom-tool-result" not in p.stem]


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("path", CODEX, ids=_id)
async def test_codex_is_served_by_a_route_without_a_responses_target(path: Path, dialect: str) -> None:
    """Codex's bookkeeping fields (``client_metadata``, ``prompt_cache_key``, ``store``...) are
    hints another dialect goes without: a chat or Anthropic target still answers. (A history
    holding a freeform tool's call needs a Responses target: a 400 of its own, tested apart.)"""
    data = _load(path)
    app, upstream = _serve({**data, "dialect": dialect})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
        resp = await client.post(data["path"], content=json.dumps(data["body"]).encode(), headers=data["headers"])
    assert resp.status_code == 200, resp.text
    (call,) = upstream.calls
    assert call.json is not None and not {"client_metadata", "prompt_cache_key"} & set(call.json)
