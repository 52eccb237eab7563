"""``POST /v1/messages`` passes what failover does not interpret through to an Anthropic target.

Claude Code (2.1.x, default settings) sends ``context_management`` (clear old thinking),
``cache_control`` on system, message and tool blocks, ``metadata.user_id`` and an
``anthropic-beta`` header: an Anthropic target gets each verbatim; a target of another
dialect goes without the hints (the attempt records it) and is left out for a field failover
cannot judge. The official anthropic SDK at default settings, against one real server.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from failover import Route, Router, Secret, Timeouts
from failover.gateway import GatewaySettings, Tenant, create_app, hash_key
from failover.inbound import anthropic as inbound
from failover.model import Phase
from failover.policy import Backoff, NoBreakers, Unlimited
from failover.testing import FakeNetwork, FakeProvider, Reply

from ._kit import ACME_KEY, ALL, PROVIDER_KEY, ServerThread

pytestmark = pytest.mark.e2e

BETA = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
EPHEMERAL = {"type": "ephemeral"}
CONTEXT = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
METADATA = {"user_id": "user_abc123_account__session_0f1e2d"}
SYSTEM: list[Any] = [
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
    {"type": "text", "text": "Be concise.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
]
TOOLS: list[Any] = [
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}},
    {
        "name": "Bash",
        "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        "cache_control": EPHEMERAL,
    },
]
MESSAGES: list[Any] = [
    {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Running ls."},
            {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.py\nb.py", "cache_control": EPHEMERAL},
            {"type": "text", "text": "Which is larger?", "cache_control": EPHEMERAL},
        ],
    },
]


def claude_code(**extra: Any) -> dict[str, Any]:
    """The keyword arguments of a Claude-Code-like ``messages.create``."""
    return {
        "model": extra.pop("model", "mixed"),
        "max_tokens": 512,
        "system": SYSTEM,
        "messages": MESSAGES,
        "tools": TOOLS,
        "metadata": METADATA,
        "extra_body": {"context_management": CONTEXT, **extra.pop("extra_body", {})},
        "extra_headers": {"anthropic-beta": BETA},
        **extra,
    }


def build() -> tuple[Any, Router, dict[str, FakeProvider]]:
    """Routes ``mixed`` (Anthropic primary, OpenAI fallback), ``claude`` and ``gpt`` (one target
    each). The Anthropic target sets an ``anthropic-beta`` of its own."""
    providers = {
        "claude": FakeProvider("claude", "anthropic", api_key=PROVIDER_KEY),
        "gpt": FakeProvider("gpt", "openai", api_key=PROVIDER_KEY),
    }
    targets = {
        n: p.target(
            api_key=Secret(PROVIDER_KEY),
            capabilities=ALL,
            timeouts=Timeouts(connect=2, first_event=5, idle=5, total=10, min_useful=0.05),
            max_attempts=1,
            tokenizer="estimate",
            headers={"anthropic-beta": "output-128k-2025-02-19"} if n == "claude" else {},
        )
        for n, p in providers.items()
    }
    router = Router(
        [
            Route(name="mixed", primary=(targets["claude"],), fallbacks=(targets["gpt"],)),
            Route(name="claude", primary=(targets["claude"],)),
            Route(name="gpt", primary=(targets["gpt"],)),
        ],
        transport=FakeNetwork(*providers.values()),
        retry_budget=Unlimited(),
        backoff=Backoff(base=0.01, cap=0.05),
        rng=random.Random(1),
        breakers=NoBreakers(),
    )
    settings = GatewaySettings(tenants=(Tenant(name="acme", key_hashes=(hash_key(ACME_KEY),)),))
    return create_app(router, settings), router, providers


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Router, dict[str, FakeProvider], ServerThread]]:
    app, router, providers = build()
    with ServerThread(app) as server:
        yield router, providers, server


@pytest.fixture
def client(served: tuple[Router, dict[str, FakeProvider], ServerThread]) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=f"http://127.0.0.1:{served[2].port}", api_key=ACME_KEY) as c:
        yield c  # the SDK's default settings (retries, timeout)


def _marks(sent: dict[str, Any]) -> dict[str, Any]:
    """Every cache_control marker in an upstream Anthropic body, by where it is."""
    return {
        "system": [b.get("cache_control") for b in sent["system"]],
        "tools": [t.get("cache_control") for t in sent["tools"]],
        "messages": [
            [None] if isinstance(m["content"], str) else [b.get("cache_control") for b in m["content"]]
            for m in sent["messages"]
        ],
    }


def test_claude_code_fields_reach_the_anthropic_target_verbatim(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["claude"].load([Reply.ok("b.py"), Reply.ok("b.py")])
    msg = client.messages.create(**claude_code(extra_body={"service_tier": "auto", "a_future_field": {"x": [1]}}))
    assert msg.content[0].text == "b.py"  # type: ignore[union-attr]
    call = providers["claude"].calls[-1]
    sent = dict(call.json or {})
    assert sent["context_management"] == CONTEXT
    assert sent["metadata"] == METADATA
    assert sent["service_tier"] == "auto"
    assert sent["a_future_field"] == {"x": [1]}  # a field failover does not know yet
    assert sent["system"] == SYSTEM  # blocks, as the client sent them, markers included
    assert _marks(sent) == {
        "system": [None, {"type": "ephemeral", "ttl": "1h"}],
        "tools": [None, EPHEMERAL],
        # failover sends the tool results as their own user turn (the API joins consecutive ones)
        "messages": [[None], [None, None], [EPHEMERAL], [EPHEMERAL]],
    }
    assert sent["tools"][1] == TOOLS[1]
    # the target's own beta first, then the client's, each once
    assert call.headers["anthropic-beta"] == "output-128k-2025-02-19," + BETA
    # and streamed, as Claude Code asks
    with client.messages.stream(**claude_code()) as s:
        final = s.get_final_message()
    assert final.content[0].text == "b.py"  # type: ignore[union-attr]
    streamed = providers["claude"].calls[-1]
    assert streamed.json is not None and streamed.json["context_management"] == CONTEXT
    assert _marks(dict(streamed.json)) == _marks(sent)


def test_without_a_marker_the_upstream_body_is_as_before(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["claude"].load([Reply.ok("hi")])
    client.messages.create(
        model="claude",
        max_tokens=32,
        system=[{"type": "text", "text": "A."}],
        messages=[{"role": "user", "content": "x"}],
    )
    sent = providers["claude"].calls[-1]
    assert sent.json is not None
    assert sent.json["system"] == "A." and sent.json["messages"] == [{"role": "user", "content": "x"}]
    assert not {"metadata", "context_management"} & set(sent.json)
    assert sent.headers["anthropic-beta"] == "output-128k-2025-02-19"


def test_count_tokens_accepts_the_same_body(client: anthropic.Anthropic) -> None:
    kwargs = claude_code()
    del kwargs["max_tokens"], kwargs["metadata"]  # not count_tokens parameters in the SDK
    kwargs["extra_body"] = {**kwargs["extra_body"], "metadata": METADATA}
    counted = client.messages.count_tokens(**kwargs)
    assert counted.input_tokens > 0


def test_an_overloaded_anthropic_primary_falls_back_to_openai_without_the_hints(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["claude"].load("overloaded")  # 529, every time
    providers["gpt"].load([Reply.ok("from gpt")])
    raw = client.with_options(max_retries=0).messages.with_raw_response.create(**claude_code())
    msg = raw.parse()
    assert msg.content[0].text == "from gpt"  # type: ignore[union-attr]
    assert raw.headers["x-failover-target"] == "gpt"
    assert providers["claude"].calls[-1].status == 529
    sent = providers["gpt"].calls[-1]
    assert sent.json is not None and sent.path.endswith("/chat/completions")
    text = repr(sent.json)
    assert "cache_control" not in text and "context_management" not in text and "metadata" not in sent.json
    assert "anthropic-beta" not in sent.headers


async def test_the_record_names_the_dropped_hints_and_the_ineligible_fallback(
    served: tuple[Router, dict[str, FakeProvider], ServerThread],
) -> None:
    """The router's own record, for the requests the gateway builds."""
    router, providers, _ = served
    body = {"model": "mixed", "max_tokens": 64, "system": SYSTEM, "messages": MESSAGES, "tools": TOOLS}
    hints = inbound.to_request(
        inbound.parse_body({**body, "metadata": METADATA, "context_management": CONTEXT}),
        headers={"anthropic-beta": BETA},
    )
    providers["claude"].load("overloaded")
    providers["gpt"].load([Reply.ok("from gpt")])
    resp = await router.complete("mixed", hints)
    assert resp.record is not None
    claude, gpt = resp.record.attempts[0], resp.record.attempts[-1]
    assert (claude.target, claude.passthrough_dropped) == ("claude", ())
    assert gpt.target == "gpt" and gpt.phase is Phase.FALLBACK
    assert gpt.passthrough_dropped == ("anthropic-beta", "cache_control", "context_management", "metadata")
    assert resp.record.to_dict()["attempts"][-1]["passthrough_dropped"] == list(gpt.passthrough_dropped)

    unknown = inbound.to_request(inbound.parse_body({**body, "a_future_field": True}))
    providers["claude"].load([Reply.ok("from claude")])
    resp = await router.complete("mixed", unknown)
    assert resp.record is not None and resp.record.target_used == "claude"
    (gone,) = resp.record.excluded
    assert gone.target == "gpt" and "a_future_field" in gone.reason and not gone.temporary


def test_an_unknown_field_leaves_the_openai_fallback_out(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["claude"].load("overloaded")
    gpt_calls = len(providers["gpt"].calls)
    with pytest.raises(anthropic.APIStatusError) as exc:  # the Anthropic primary could honour it: not a 400
        client.with_options(max_retries=0).messages.create(**claude_code(extra_body={"a_future_field": 1}))
    assert exc.value.status_code == 529
    assert len(providers["gpt"].calls) == gpt_calls  # never called


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"a_future_field": 1}, "a_future_field"),
        ({"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}, "context_management"),
    ],
)
def test_a_field_no_candidate_can_honour_is_a_400(
    served: tuple[Router, dict[str, FakeProvider], ServerThread],
    client: anthropic.Anthropic,
    extra: dict[str, Any],
    param: str,
) -> None:
    _, providers, _ = served
    gpt_calls = len(providers["gpt"].calls)
    with pytest.raises(anthropic.BadRequestError) as exc:
        client.messages.create(
            model="gpt", max_tokens=32, messages=[{"role": "user", "content": "x"}], extra_body=extra
        )
    assert param in exc.value.message and "Anthropic" in exc.value.message
    assert len(providers["gpt"].calls) == gpt_calls


def test_hints_alone_go_to_an_openai_only_route(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["gpt"].load([Reply.ok("ok")])
    msg = client.messages.create(**claude_code(model="gpt", extra_body={"service_tier": "auto"}))
    assert msg.content[0].text == "ok"  # type: ignore[union-attr]


def test_an_unknown_field_and_an_unknown_beta_reach_the_anthropic_target_byte_for_byte(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    """Values failover has never seen, with key order, unicode and number forms that a
    re-encoding could change: what reaches the upstream encodes to the same bytes."""
    _, providers, _ = served
    providers["claude"].load([Reply.ok("ok")])
    future = {"z": 1.5, "a": ["\u00e9\u4e2d", {"nested": None, "n": -0.0, "big": 12345678901234567890}], "t": True}
    unknown_beta = "a-beta-failover-has-never-heard-of-2099-01-01"
    client.messages.create(
        model="claude",
        max_tokens=32,
        messages=[{"role": "user", "content": "x"}],
        extra_body={"a_future_field": future},
        extra_headers={"anthropic-beta": unknown_beta},
    )
    call = providers["claude"].calls[-1]
    assert call.json is not None
    assert json.dumps(call.json["a_future_field"], ensure_ascii=False) == json.dumps(future, ensure_ascii=False)
    assert call.headers["anthropic-beta"] == f"output-128k-2025-02-19,{unknown_beta}"


# Claude Code's and the Agent SDK's form: a system message inside the conversation, with a
# cache_control marker, a per-turn field failover does not read, unicode and key orders a
# re-encoding could change.
PLACED: dict[str, Any] = {
    "content": [
        {"text": "# Environment\nPrimary working directory: /proj \u00e9\u4e2d", "type": "text"},
        {"type": "text", "text": "Today is 2026-01-01.", "cache_control": {"ttl": "1h", "type": "ephemeral"}},
    ],
    "role": "system",
    "output_config": {"effort": "medium"},
}
MID_BETA = "mid-conversation-system-2026-04-07"


def _with_placed() -> list[Any]:
    return [MESSAGES[0], PLACED, *MESSAGES[1:]]


def test_a_mid_conversation_system_message_reaches_the_anthropic_target_in_place_byte_for_byte(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["claude"].load([Reply.ok("ok"), Reply.ok("ok")])
    kwargs = claude_code(model="claude", messages=_with_placed(), extra_headers={"anthropic-beta": MID_BETA})
    client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as s:
        s.get_final_message()
    for call in providers["claude"].calls[-2:]:
        assert call.json is not None
        sent = call.json["messages"]
        # (failover sends the tool results as their own user turn, as above)
        assert [m["role"] for m in sent] == ["user", "system", "assistant", "user", "user"]
        assert json.dumps(sent[1], ensure_ascii=False) == json.dumps(PLACED, ensure_ascii=False)
        assert call.json["system"] == SYSTEM  # the top-level system as sent, nothing added to it
        assert call.headers["anthropic-beta"] == f"output-128k-2025-02-19,{MID_BETA}"


def test_a_mid_conversation_system_message_falls_back_to_openai_as_a_system_message_in_place(
    served: tuple[Router, dict[str, FakeProvider], ServerThread], client: anthropic.Anthropic
) -> None:
    _, providers, _ = served
    providers["claude"].load("overloaded")
    providers["gpt"].load([Reply.ok("from gpt")])
    raw = client.with_options(max_retries=0).messages.with_raw_response.create(**claude_code(messages=_with_placed()))
    assert raw.headers["x-failover-target"] == "gpt"
    sent = providers["gpt"].calls[-1].json
    assert sent is not None
    assert [m["role"] for m in sent["messages"]] == ["system", "system", "user", "system", "assistant", "tool", "user"]
    assert sent["messages"][3] == {
        "role": "system",
        "content": "# Environment\nPrimary working directory: /proj \u00e9\u4e2dToday is 2026-01-01.",
    }
    assert "cache_control" not in repr(sent) and "output_config" not in repr(sent)
