"""Hostile client JSON Schemas: no fetch, no file read, no backtracking, no unbounded work.

A schema arrives in ``response_format`` or a tool definition, from whoever sends the request.
Each test here is one way such a schema once stalled the gateway, reached the network or the
disk, or pinned memory; each asserts the 400 (naming the field) and that nothing else happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from failover import Request
from failover.gateway import GatewaySettings, Tenant, create_app, hash_key
from failover.gateway._default import embedded_router
from failover.model import Message, ResponseFormat, Tool
from failover.testing import Reply
from failover.testing._answer import EXAMPLE_MAX_ITEMS, EXAMPLE_MAX_VALUES, _example
from failover.validation import DEFAULT_LIMITS, InvalidSchema, SchemaLimits, check_schema, schema_errors
from failover.validation._schema import _BY_ID, _COMPILED, ByteCache
from tests.gateway._kit import ACME_KEY, Kit, chat_body

# -- helpers ---------------------------------------------------------------------------------------


class Listener:
    """A loopback TCP listener in a thread that records every connection it gets (and answers
    none): a schema that makes the gateway reach it has made it send a request somewhere."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(0.5)
                try:
                    self.received.append(conn.recv(4096) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.1)  # a connection in flight would be accepted by now
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@contextlib.asynccontextmanager
async def watchdog() -> AsyncIterator[list[float]]:
    """Yields a list that ends up holding the worst real-time overshoot (seconds) of a 10 ms
    sleep on this event loop while the block ran: how long anything stalled the loop.

    The garbage earlier tests of this process left is collected first: a full collection of
    it, due by chance inside the block, would be measured as this request's stall."""
    gc.collect()
    worst = [0.0]
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            worst[0] = max(worst[0], time.perf_counter() - t - 0.01)

    task = asyncio.create_task(tick())
    await asyncio.sleep(0.02)
    try:
        yield worst
    finally:
        await asyncio.sleep(0.02)
        done.set()
        await task


_OPENED: list[str] = []
_WATCHED: set[str] = set()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str | bytes | Path):
        path = str(args[0] if not isinstance(args[0], bytes) else args[0].decode(errors="replace"))
        if path in _WATCHED:
            _OPENED.append(path)


sys.addaudithook(_audit)  # audit hooks cannot be removed: it only looks at paths a test watches


def fmt(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}


def tool(schema: Any) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": schema}}]


def messages_body(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}], **extra}


def big_kit(**settings: Any) -> Kit:
    """The gateway kit with room for large bodies (the schema limits are what is tested)."""
    kit = Kit()
    kit.settings = dataclasses.replace(kit.settings, max_body_bytes=32 * 1024 * 1024, max_json_depth=200, **settings)
    kit.app = create_app(kit.router, kit.settings)
    return kit


def ask(**fields: Any) -> Request:
    return Request(messages=(Message.user("hi"),), **fields)


def no_upstream(kit: Kit) -> None:
    assert [p.name for p in kit.providers.values() if p.calls] == []


# -- 1. no $ref is ever fetched or read ------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        "chat.response_format",
        "chat.tools",
        "messages.output_config",
        "messages.tools",
        "responses.text_format",
        "responses.tools",
    ],
)
async def test_a_remote_ref_sends_nothing_anywhere_and_is_a_400_naming_the_field(where: str) -> None:
    kit = Kit()
    with Listener() as listener:
        schema = {"type": "object", "properties": {"a": {"$ref": f"http://127.0.0.1:{listener.port}/s.json"}}}
        async with kit.client() as c:
            if where == "chat.response_format":
                r = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt(schema)))
                param = "response_format.json_schema.schema.properties.a.$ref"
            elif where == "chat.tools":
                r = await c.post("/v1/chat/completions", json=chat_body("tools", tools=tool(schema)))
                param = "tools[0].function.parameters.properties.a.$ref"
            elif where == "responses.text_format":
                text = {"format": {"type": "json_schema", "name": "out", "schema": schema}}
                r = await c.post("/v1/responses", json={"model": "chat", "input": "Hi", "text": text})
                param = "text.format.schema.properties.a.$ref"
            elif where == "responses.tools":
                tools = [{"type": "function", "name": "f", "parameters": schema}]
                r = await c.post("/v1/responses", json={"model": "tools", "input": "Hi", "tools": tools})
                param = "tools[0].parameters.properties.a.$ref"
            elif where == "messages.output_config":
                body = messages_body(output_config={"format": {"type": "json_schema", "schema": schema}})
                r = await c.post("/v1/messages", json=body)
                param = "output_config.format.schema.properties.a.$ref"
            else:
                r = await c.post("/v1/messages", json=messages_body(tools=[{"name": "f", "input_schema": schema}]))
                param = "tools[0].input_schema.properties.a.$ref"
    assert listener.received == []
    assert r.status_code == 400, r.text
    text = r.text
    assert param in text and "$defs" in text  # the field and the fix
    if not where.startswith("messages"):  # OpenAI's error body has the field in param
        assert r.json()["error"]["param"] == param
    no_upstream(kit)


async def test_a_remote_meta_schema_is_never_fetched() -> None:
    kit = Kit()
    with Listener() as listener:
        schema = {"$schema": f"http://127.0.0.1:{listener.port}/meta", "type": "object"}
        async with kit.client() as c:
            r = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt(schema)))
        with pytest.raises(InvalidSchema, match="never"):
            check_schema({"properties": {"a": {"$schema": f"http://127.0.0.1:{listener.port}/m2"}}})
    assert listener.received == []
    assert r.status_code == 400 and r.json()["error"]["param"] == "response_format.json_schema.schema.$schema"
    check_schema({"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"})  # a known draft is fine
    no_upstream(kit)


async def test_the_python_validator_fetches_nothing_even_under_a_remote_id() -> None:
    # "#..." refs under an $id that names the listener resolve inside the schema, in memory
    with Listener() as listener:
        base = f"http://127.0.0.1:{listener.port}/root.json"
        schema = {"$id": base, "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
        assert schema_errors(schema, {"a": "x"}) == ["a: 'x' is not of type 'integer'"]
        with pytest.raises(InvalidSchema, match="not a local reference"):
            schema_errors({"$id": base, "properties": {"a": {"$ref": "other.json"}}}, {"a": 1})
    assert listener.received == []


async def test_a_ref_through_a_tarpit_does_not_hold_the_request_or_the_loop() -> None:
    # the listener never answers: a fetch would hang until the deadline
    kit = Kit()
    with Listener() as listener:
        schema = {"$ref": f"http://127.0.0.1:{listener.port}/slow"}
        async with watchdog() as worst, kit.client() as c:
            started = time.perf_counter()
            r = await c.post(
                "/v1/chat/completions",
                json=chat_body(response_format=fmt(schema)),
                headers={"x-failover-deadline-ms": "1000"},
            )
            health = await c.get("/healthz")
            elapsed = time.perf_counter() - started
    assert listener.received == []
    assert r.status_code == 400 and health.status_code == 200
    assert elapsed < 1.0 and worst[0] < 0.1


async def test_a_file_ref_is_never_opened_and_its_content_never_shown(tmp_path: Path) -> None:
    secret = "TOPSECRET-9f2c1e7a"
    path = tmp_path / "secret.json"
    path.write_text(json.dumps({"type": "integer", "description": secret, "enum": [secret]}))
    _WATCHED.add(str(path))
    try:
        kit = Kit()
        async with kit.client() as c:
            chat = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt({"$ref": path.as_uri()})))
            body = messages_body(tools=[{"name": "f", "input_schema": {"$ref": path.as_uri()}}])
            msg = await c.post("/v1/messages", json=body)
        with pytest.raises(InvalidSchema) as caught:
            schema_errors({"$ref": path.as_uri()}, 1)
    finally:
        _WATCHED.discard(str(path))
    assert _OPENED == []
    for r in (chat, msg):
        assert r.status_code == 400, r.text
        assert secret not in r.text and secret not in str(r.headers)
    assert chat.json()["error"]["param"] == "response_format.json_schema.schema.$ref"
    assert secret not in str(caught.value)
    no_upstream(kit)


async def test_the_embedded_default_refuses_remote_refs_too() -> None:
    router, _net = embedded_router(latency=0.0)
    app = create_app(router, GatewaySettings())
    with Listener() as listener:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
            schema = {"$ref": f"http://127.0.0.1:{listener.port}/x"}
            r = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt(schema)))
    assert listener.received == []
    assert r.status_code == 400, r.text


async def test_the_router_refuses_the_same_schemas_with_a_typed_error() -> None:
    kit = Kit()
    with Listener() as listener:
        remote = {"$ref": f"http://127.0.0.1:{listener.port}/x"}
        with pytest.raises(InvalidSchema) as caught:
            await kit.router.complete("chat", ask(response_format=ResponseFormat.json_schema(remote)))
        assert caught.value.field == "response_format.schema.$ref"
        bad_tool = Tool(name="f", parameters={"type": "object", "properties": {"a": {"$ref": "#/nope"}}})
        with pytest.raises(InvalidSchema) as caught:
            kit.router.stream("tools", ask(tools=(bad_tool,)))
        assert caught.value.field.startswith("tools[0].parameters")
    assert listener.received == []
    no_upstream(kit)


# -- 2. compiling is bounded, after the quota, off the loop ----------------------------------------


def wide(n: int, **prop: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "string", **prop} for i in range(n)}}


def encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()  # before the watchdog: the client's own encoding is not the gateway's


async def stall_of(kit: Kit, raw: bytes) -> tuple[httpx.Response, float]:
    async with watchdog() as worst, kit.client() as c:
        r = await c.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    return r, worst[0]


async def test_the_measured_huge_schema_is_refused_without_the_old_stall() -> None:
    # 250,000 properties in a 7 MiB body once kept the worker busy for 113 s. Decoding a body
    # that large takes most of a second by itself, give or take a few hundred ms (that is the
    # body size limit's business): the same schema in a field the gateway ignores is the
    # control, and the schema may add nothing that shows above that noise.
    kit = big_kit()
    schema = wide(250_000)
    ignored, refused = encoded(chat_body(metadata={"ignored": schema})), encoded(chat_body(response_format=fmt(schema)))
    control = min([(await stall_of(kit, ignored))[1] for _ in range(2)])
    r, hostile = await stall_of(kit, refused)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "schema_too_large"
    assert err["param"].startswith("response_format.json_schema.schema")
    assert f"max_schema_nodes={DEFAULT_LIMITS.max_nodes}" in err["message"]
    assert hostile < control + 1.0, f"the schema stalled the loop {hostile - control:.3f}s beyond its body"
    assert sum(len(p.calls) for p in kit.providers.values()) == 2  # the two controls only


async def test_a_schema_over_the_value_limit_does_not_stall_the_loop() -> None:
    # the same refusal on a body small enough to decode in a few ms: nothing else may stall
    kit = big_kit(schema_limits=dataclasses.replace(DEFAULT_LIMITS, max_nodes=2_000))
    r, worst = await stall_of(kit, encoded(chat_body(response_format=fmt(wide(5_000)))))  # once 2 s of CPU
    assert r.status_code == 400, r.text
    assert "max_schema_nodes=2000" in r.json()["error"]["message"]
    assert worst < 0.1, f"the event loop stalled {worst:.3f}s"
    no_upstream(kit)


async def test_a_large_schema_within_the_limits_compiles_off_the_event_loop() -> None:
    kit = big_kit()
    # ~9k values, under max_schema_nodes, and broken on purpose: checking it once took 1.4 s on
    # the loop; now its meta-validation and compilation run in a thread after admission
    schema = wide(3_000)
    for i in range(100):
        schema["properties"][f"p{i}"]["pattern"] = "^[a-z]+$"
    schema["properties"]["p0"] = {"type": "strin"}
    raw = encoded(chat_body(response_format=fmt(schema)))
    async with watchdog() as worst, kit.client() as c:
        r = await c.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "response_format.json_schema.schema.properties.p0.type"
    assert worst[0] < 0.1, f"the event loop stalled {worst[0]:.3f}s"
    no_upstream(kit)


async def test_schemas_are_compiled_after_the_tenant_is_admitted() -> None:
    # a tenant out of requests gets its 429 before any schema work: a broken schema is not even looked at
    kit = Kit()
    tenant = Tenant(name="acme", key_hashes=(hash_key(ACME_KEY),), rpm=1)
    kit.settings = dataclasses.replace(kit.settings, tenants=(tenant,))
    kit.app = create_app(kit.router, kit.settings)
    broken = fmt({"type": "object", "properties": {"a": {"type": "strin"}}})
    async with kit.client() as c:
        first = await c.post("/v1/chat/completions", json=chat_body())
        second = await c.post("/v1/chat/completions", json=chat_body(response_format=broken))
    assert first.status_code == 200
    assert second.status_code == 429, second.text


def test_the_schema_limits_are_settings() -> None:
    from failover.gateway._settings import settings_from_dict

    limits = {"max_schema_nodes": 500, "max_schema_pattern_chars": 10, "max_schema_patterns": 3, "max_schema_depth": 8}
    s = settings_from_dict({"limits": {**limits, "max_schema_bytes": 4096}})
    assert s.schema_limits == SchemaLimits(
        max_bytes=4096, max_depth=8, max_nodes=500, max_pattern_chars=10, max_patterns=3
    )
    assert settings_from_dict(None).schema_limits == DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("schema", "limit"),
    [
        ({"type": "object", "properties": {f"p{i}": {} for i in range(1001)}}, "max_schema_nodes"),
        ({"type": "string", "description": "x" * 5000}, "max_schema_bytes"),
        ({"type": "string", "pattern": "a" * 101}, "max_schema_pattern_chars"),
        ({"type": "object", "patternProperties": {"b" * 101: {}}}, "max_schema_pattern_chars"),
        ({"properties": {f"p{i}": {"pattern": f"^{i}$"} for i in range(11)}}, "max_schema_patterns"),
        (json.loads('{"items":' * 20 + "{}" + "}" * 20), "max_schema_depth"),
    ],
)
def test_each_limit_names_itself(schema: dict[str, Any], limit: str) -> None:
    limits = SchemaLimits(
        max_bytes=4096 if limit == "max_schema_bytes" else 10**6,
        max_depth=16,
        max_nodes=1000,
        max_pattern_chars=100,
        max_patterns=10,
    )
    with pytest.raises(InvalidSchema) as caught:
        check_schema(schema, limits)
    assert caught.value.limit == limit and limit in str(caught.value)


def test_many_heavy_patterns_are_bounded_in_memory() -> None:
    # 200 distinct ".{1,1000}"-style patterns once compiled to over 200 MiB; one is a real
    # client's pattern (1 MB compiled), but together they stay within max_schema_pattern_bytes
    check_schema({"properties": {f"p{i}": {"pattern": f"^.{{1,1000}}x{i}$"} for i in range(3)}})
    heavy = {"properties": {f"p{i}": {"pattern": f"^.{{1,1000}}x{i}$"} for i in range(40)}}
    with pytest.raises(InvalidSchema, match="max_schema_pattern_bytes") as caught:
        check_schema(heavy)
    assert caught.value.limit == "max_schema_pattern_bytes"
    assert caught.value.field.endswith(".pattern") and "minLength/maxLength" in str(caught.value)
    # nested counts multiply: 72 MB for one pattern, refused on its own
    with pytest.raises(InvalidSchema, match="8 MiB") as caught:
        check_schema({"properties": {"a": {"type": "string", "pattern": "^(a{1,1000}){1,1000}$"}}})
    assert caught.value.field == ".properties.a.pattern"
    many = {"properties": {f"p{i}": {"pattern": f"^x{i}$"} for i in range(DEFAULT_LIMITS.max_patterns + 1)}}
    with pytest.raises(InvalidSchema) as caught:
        check_schema(many)
    assert caught.value.limit == "max_schema_patterns"


# -- 3. patterns run in linear time ----------------------------------------------------------------

EVIL = "^(a+)+$"
NEAR_MISS = "a" * 25 + "!"  # Python's re: ~1 s of backtracking; 28 characters took 10 s


async def test_a_catastrophic_pattern_in_the_response_format_does_not_stall_the_loop() -> None:
    kit = Kit({"s": [Reply.ok(json.dumps({"x": NEAR_MISS}))] * 4})
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}, "required": ["x"]}
    async with watchdog() as worst, kit.client() as c:
        started = time.perf_counter()
        r = await c.post(
            "/v1/chat/completions",
            json=chat_body("solo", response_format=fmt(schema)),
            headers={"x-failover-deadline-ms": "2000"},
        )
        elapsed = time.perf_counter() - started
    assert r.status_code == 422, r.text  # the answer does not match: a contract failure, told in linear time
    assert "does not match '^(a+)+$'" in r.text
    assert len(kit.providers["s"].calls) == 2  # the answer and its repair
    assert worst[0] < 0.1, f"the event loop stalled {worst[0]:.3f}s"
    assert elapsed < 2.0


async def test_a_catastrophic_pattern_in_tool_parameters_does_not_stall_the_loop() -> None:
    kit = Kit({"t": [Reply.ok(tool_calls=[("f", {"x": NEAR_MISS})])] * 4})
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}}
    async with watchdog() as worst, kit.client() as c:
        r = await c.post(
            "/v1/chat/completions",
            json=chat_body("tools", tools=tool(schema), tool_choice="required"),
            headers={"x-failover-deadline-ms": "2000"},
        )
    assert r.status_code != 500, r.text
    assert worst[0] < 0.1, f"the event loop stalled {worst[0]:.3f}s"


async def test_catastrophic_pattern_properties_are_linear_too() -> None:
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False}
    started = time.perf_counter()
    errs = schema_errors(schema, {"a" * 40 + "!": 1})
    assert time.perf_counter() - started < 0.5
    assert errs and "does not match any of the regexes" in errs[0]


@pytest.mark.parametrize("pattern", ["^(?=a)a$", "^(a)\\1$", "(?<!x)y"])
async def test_a_pattern_the_linear_engine_cannot_run_is_a_400_at_request_time(pattern: str) -> None:
    kit = Kit()
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    async with kit.client() as c:
        chat = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt(schema)))
        msg = await c.post(
            "/v1/messages", json=messages_body(output_config={"format": {"type": "json_schema", "schema": schema}})
        )
    assert chat.status_code == 400 and msg.status_code == 400
    assert chat.json()["error"]["param"] == "response_format.json_schema.schema.properties.x.pattern"
    assert "output_config.format.schema.properties.x.pattern" in msg.text and "lookaround" in msg.text
    no_upstream(kit)


# -- 6. every client schema is checked before any upstream call, on both endpoints -----------------


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "properties": {"a": {"type": 5}}}, "not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"$ref": "#/nope"}}}, "cannot be resolved"),
        ({"type": "object", "properties": {"a": {"$dynamicRef": "#node"}}}, "$dynamicRef is not supported"),
    ],
)
@pytest.mark.parametrize(
    "where",
    [
        "chat.response_format",
        "chat.tools",
        "messages.output_config",
        "messages.tools",
        "responses.text_format",
        "responses.tools",
    ],
)
async def test_a_broken_schema_is_a_400_before_any_upstream_call(schema: dict[str, Any], says: str, where: str) -> None:
    kit = Kit()
    async with kit.client() as c:
        if where == "chat.response_format":
            r = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt(schema)))
            field = "response_format.json_schema.schema"
        elif where == "chat.tools":
            r = await c.post("/v1/chat/completions", json=chat_body("tools", tools=tool(schema)))
            field = "tools[0].function.parameters"
        elif where == "messages.output_config":
            body = messages_body(output_config={"format": {"type": "json_schema", "schema": schema}})
            r = await c.post("/v1/messages", json=body)
            field = "output_config.format.schema"
        else:
            r = await c.post("/v1/messages", json=messages_body(tools=[{"name": "f", "input_schema": schema}]))
            field = "tools[0].input_schema"
    assert r.status_code == 400, r.text
    assert field in r.text and says in r.text
    no_upstream(kit)


# -- 11. the caches are bounded by bytes -----------------------------------------------------------


def test_the_compiled_schema_caches_stay_under_their_byte_caps() -> None:
    _COMPILED.clear()
    _BY_ID.clear()
    pad = "d" * 200
    for n in range(24):  # ~800 KB each: 24 of them would pin ~450 MiB if kept
        schema = {
            "type": "object",
            "$comment": str(n),
            "properties": {f"p{i}": {"description": pad} for i in range(3500)},
        }
        check_schema(schema)
        assert _COMPILED.bytes <= _COMPILED.max_bytes
        assert _BY_ID.bytes <= _BY_ID.max_bytes
    assert len(_COMPILED) < 24
    _COMPILED.clear()
    _BY_ID.clear()


def test_a_byte_cache_evicts_the_oldest_and_never_keeps_what_does_not_fit() -> None:
    cache: ByteCache[str] = ByteCache(max_bytes=100, max_entries=10)
    for i in range(10):
        cache.put(i, "v", 30)
        assert cache.bytes <= 100
    assert len(cache) == 3 and cache.get(9) == "v" and cache.get(0) is None
    cache.put("huge", "v", 101)
    assert cache.get("huge") is None and cache.bytes <= 100


# -- 13. the fault kit's example answers are bounded -----------------------------------------------


def test_the_example_generator_is_bounded_whatever_the_schema_asks() -> None:
    started = time.perf_counter()
    huge = {"type": "array", "minItems": 1e8, "items": {"type": "array", "minItems": 10**9, "items": {}}}
    value = _example(huge, huge, "ok")
    assert len(value) <= EXAMPLE_MAX_ITEMS
    assert len(json.dumps(value)) < EXAMPLE_MAX_VALUES * 10
    text = _example({"type": "string", "minLength": 10**9}, None, "ok")
    assert len(text) <= EXAMPLE_MAX_ITEMS
    props = _example({"type": "object", "minProperties": 10**9}, None, "ok")
    assert len(props) <= EXAMPLE_MAX_ITEMS
    loop = {"$defs": {"n": {"type": "array", "minItems": 50, "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    assert len(json.dumps(_example(loop, loop, "ok"))) < EXAMPLE_MAX_VALUES * 10
    assert time.perf_counter() - started < 1.0


async def test_the_embedded_default_answers_a_huge_min_items_without_allocating_it() -> None:
    router, _net = embedded_router(latency=0.0)
    app = create_app(router, GatewaySettings())
    schema = {"type": "object", "properties": {"xs": {"type": "array", "minItems": 100_000_000}}}
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with watchdog() as worst, httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=30) as c:
        started = time.perf_counter()
        r = await c.post("/v1/chat/completions", json=chat_body(response_format=fmt(schema)))
        elapsed = time.perf_counter() - started
    assert r.status_code != 500, r.text
    assert len(r.content) < 100_000
    assert elapsed < 5 and worst[0] < 0.1


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"type": "\ud800"}, ".type"),
        ({"enum": ["a", "\udfff"]}, ".enum[1]"),
        ({"properties": {"\ud800k": {"type": "string"}}}, ".properties"),
    ],
)
def test_a_lone_surrogate_in_a_schema_is_refused_naming_where(schema: dict[str, Any], field: str) -> None:
    # a library caller (no gateway decoding before it) once got a UnicodeEncodeError from the compiler
    with pytest.raises(InvalidSchema) as caught:
        check_schema(schema)
    assert caught.value.field.startswith(field) and "surrogate" in caught.value.problem
