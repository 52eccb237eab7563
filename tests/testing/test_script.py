"""Scenario data: Reply constructors and string forms, Script order, Scenario.from_dict."""

from __future__ import annotations

import pytest

from failover.model import Dialect
from failover.testing import FakeProvider, FakeToolCall, Reply, ReplyKind, Scenario, Script


def test_constructors_set_kind_and_fields() -> None:
    r = Reply.rate_limit(retry_after=2.0, retry_after_ms=1500)
    assert (r.kind, r.retry_after, r.retry_after_ms) == (ReplyKind.RATE_LIMIT, 2.0, 1500)
    d = Reply.delay(3, text="late", latency=0.5)
    assert (d.kind, d.seconds, d.text, d.wait) == (ReplyKind.DELAY, 3, "late", 3.5)
    ok = Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})], usage=(10, 5))
    assert ok.tool_calls == (FakeToolCall("get_weather", {"city": "Paris"}),)
    assert ok.usage == (10, 5)
    assert Reply.hang().is_http_answer is False
    assert Reply.reset().is_http_answer is False
    assert Reply.truncate().has_ok_body is True
    assert Reply.server_error().has_ok_body is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ok", Reply.ok()),
        ("ok('hello')", Reply.ok("hello")),
        ("ok(text='hello', usage=(3, 4))", Reply.ok("hello", usage=(3, 4))),
        ("hang", Reply.hang()),
        ("hang()", Reply.hang()),
        ("rate_limit(retry_after=2)", Reply.rate_limit(retry_after=2)),
        ("rate_limit(2)", Reply.rate_limit(retry_after=2)),
        ("rate_limit(retry_after_ms=250)", Reply.rate_limit(retry_after_ms=250)),
        ("delay(1.5)", Reply.delay(1.5)),
        ("delay(seconds=1.5, json={'a': [1, 2]})", Reply.delay(1.5, json={"a": [1, 2]})),
        ("server_error(latency=0.2)", Reply.server_error(latency=0.2)),
        ("context_overflow(prompt_tokens=9000, limit=8192)", Reply.context_overflow(prompt_tokens=9000, limit=8192)),
        ("ok(tool_calls=[{'name': 'f', 'args': {'x': 1}}])", Reply.ok(tool_calls=[FakeToolCall("f", {"x": 1})])),
        ("ok(tool_calls=[('f', {'x': 1})])", Reply.ok(tool_calls=[FakeToolCall("f", {"x": 1})])),
        ("malformed_tool_args('lookup', arguments='{bad')", Reply.malformed_tool_args("lookup", arguments="{bad")),
        ("  schema_invalid({'wrong': 2})  ", Reply.schema_invalid({"wrong": 2})),
    ],
)
def test_string_form_parses(text: str, expected: Reply) -> None:
    assert Reply.parse(text) == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "rate_limit", "retry_after": 2},
        {"rate_limit": {"retry_after": 2}},
        {"rate_limit": 2},
        Reply.rate_limit(retry_after=2),
    ],
)
def test_mapping_forms_parse(spec: object) -> None:
    assert Reply.parse(spec) == Reply.rate_limit(retry_after=2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "reply",
    [
        Reply.ok(),
        Reply.ok("hi", latency=0.25),
        Reply.ok(tool_calls=[("f", {"x": [1, "y"]})], json={"a": 1}, usage=(1, 2)),
        Reply.delay(0),
        Reply.delay(2.5, text="late"),
        Reply.rate_limit(retry_after=2, retry_after_ms=1500, message="slow down"),
        Reply.overloaded(retry_after=1),
        Reply.context_overflow(limit=10),
        Reply.invalid("bad temperature"),
        Reply.truncate("cut"),
        Reply.refuse("no"),
        Reply.malformed_tool_args("g", arguments="{"),
        Reply.malformed_tool_args(),
        Reply.schema_invalid({"wrong": 1}),
        Reply.connect_error(latency=3),
        Reply.ok("whole", plain=True),
        Reply.rate_limit(retry_after_date=3),
        Reply.overloaded(retry_after_date=1.5),
    ],
)
def test_to_string_round_trips(reply: Reply) -> None:
    assert Reply.parse(reply.to_string()) == reply
    assert repr(reply) == f"Reply.{reply.to_string()}"


def test_repr_reads_like_the_constructor() -> None:
    assert repr(Reply.rate_limit(retry_after=2.0)) == "Reply.rate_limit(retry_after=2)"
    assert repr(Reply.ok("hello")) == "Reply.ok('hello')"
    assert repr(Reply.hang()) == "Reply.hang"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("rate_limt(retry_after=2)", "unknown reply kind 'rate_limt'"),
        ("rate_limit(retry_aftr=2)", "unexpected keyword argument 'retry_aftr'"),
        ("rate_limit(retry_after=__import__('os'))", "arguments must be literals"),
        ("rate_limit(retry_after=-1)", "must be a finite number >= 0"),
        ("ok(usage=(1,))", "usage is (input_tokens, output_tokens)"),
        ("ok(tool_calls='f')", "tool_calls must be a list"),
        ("os.system('x')", "is not of the form name(kw=value, ...)"),
        ("ok(", "is not of the form name(kw=value, ...)"),
        ("ok(**{'text': 'x'})", "arguments must be literals"),
        ("__class__", "unknown reply kind '__class__'"),
    ],
)
def test_garbage_raises_value_error_naming_the_entry(spec: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        Scenario.from_dict({"a": ["ok", spec]})
    message = str(info.value)
    assert message.startswith("scenario provider 'a', reply #2: ")
    assert fragment in message


def test_script_order_then_default() -> None:
    s = Script.of("rate_limit(retry_after=2)", Reply.hang(), default="server_error")
    kinds = [s.reply_for(i).kind for i in range(5)]
    assert kinds == [ReplyKind.RATE_LIMIT, ReplyKind.HANG, *[ReplyKind.SERVER_ERROR] * 3]
    assert len(s) == 2
    assert Script().reply_for(0) == Reply.ok()
    assert Script.always("overloaded").reply_for(7) == Reply.overloaded()


@pytest.mark.parametrize(
    ("spec", "first", "then"),
    [
        (["hang", "ok('x')"], ReplyKind.HANG, ReplyKind.OK),
        ("hang", ReplyKind.HANG, ReplyKind.HANG),  # a single reply answers every call
        ({"replies": ["hang"], "default": "server_error"}, ReplyKind.HANG, ReplyKind.SERVER_ERROR),
        ({"default": "quota"}, ReplyKind.QUOTA, ReplyKind.QUOTA),
        ({"kind": "refuse"}, ReplyKind.REFUSE, ReplyKind.REFUSE),
        (None, ReplyKind.OK, ReplyKind.OK),
    ],
)
def test_script_data_forms(spec: object, first: ReplyKind, then: ReplyKind) -> None:
    s = Script.parse(spec)  # type: ignore[arg-type]
    assert s.reply_for(0).kind is first
    assert s.reply_for(2).kind is then


def test_scenario_from_dict_builds_providers() -> None:
    sc = Scenario.from_dict(
        {
            "a": ["rate_limit(retry_after=2)", "ok"],
            "b": {"replies": ["hang"], "default": "server_error", "dialect": "anthropic", "latency": 0.1},
            "c": {"dialect": "gemini", "model": "gemini-2.0-flash"},
        }
    )
    assert sc.names == ("a", "b", "c")
    assert sc["a"].reply_for(0) == Reply.rate_limit(retry_after=2)
    assert sc["a"].reply_for(1) == Reply.ok()
    assert sc["b"].default == Reply.server_error()
    assert sc["c"].replies == () and sc["c"].default == Reply.ok()
    a, b, c = sc.providers()
    assert (a.dialect, b.dialect, c.dialect) == (Dialect.OPENAI, Dialect.ANTHROPIC, Dialect.GEMINI)
    assert (b.latency, c.model) == (0.1, "gemini-2.0-flash")
    assert b.next_reply == Reply.hang()
    net = sc.network(dialect="gemini")
    assert net["a"].dialect is Dialect.GEMINI


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"a": {"replies": "hang"}}, "scenario provider 'a': 'replies' must be a list"),
        ({"a": {"replies": [], "colour": "red"}}, "unknown key(s) ['colour']"),
        ({"a": {"dialect": "cohere"}}, "unknown dialect 'cohere'"),
        ({"a": {"latency": -1}}, "latency must be a number >= 0"),
        ({"a": 42}, "expected a list of replies"),
        ({"b": {"replies": ["ok", "ok", 7]}}, "scenario provider 'b', reply #3: expected a reply string"),
        ({"b": {"default": "explode"}}, "scenario provider 'b', default: 'explode': unknown reply kind"),
    ],
)
def test_scenario_errors_name_the_entry(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        Scenario.from_dict(data)
    assert fragment in str(info.value)


def test_scenario_is_yaml_loadable() -> None:
    yaml = pytest.importorskip("yaml")
    text = """
    primary:
      - rate_limit(retry_after=2)
      - {kind: delay, seconds: 1.5}
      - ok: {text: done}
    backup:
      dialect: anthropic
      replies: [hang]
      default: server_error
    """
    sc = Scenario.from_dict(yaml.safe_load(text))
    assert list(sc["primary"].replies) == [Reply.rate_limit(retry_after=2), Reply.delay(1.5), Reply.ok("done")]
    assert sc.plan("backup").dialect is Dialect.ANTHROPIC
    with pytest.raises(KeyError, match="has: primary, backup"):
        sc.plan("nope")


def test_provider_rejects_bad_names_and_dialects() -> None:
    with pytest.raises(ValueError, match="lower-case DNS label"):
        FakeProvider("Bad Name")
    with pytest.raises(ValueError, match="unknown dialect 'cohere'"):
        FakeProvider("a", "cohere")
    with pytest.raises(ValueError, match=r"FakeProvider 'a' script, reply #1: 'nope'"):
        FakeProvider("a", "openai", ["nope"])


# -- streams as data -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ok('hi', chunk_interval=0.05)", Reply.ok("hi", chunk_interval=0.05)),
        ("ok(heartbeat_interval=15, split_bytes=7)", Reply.ok(heartbeat_interval=15, split_bytes=7)),
        ("stall_before_first", Reply.stall_before_first()),
        ("stall_before_first(10)", Reply.stall_before_first(10)),
        ("stall_before_first(seconds='forever')", Reply.stall_before_first()),
        ("stall_after(3, 10)", Reply.stall_after(3, 10)),
        ("stall_after(3)", Reply.stall_after(3, None)),
        ("stall_after(3, 'forever', heartbeat_interval=1)", Reply.stall_after(3, heartbeat_interval=1)),
        ("heartbeats_only(15)", Reply.heartbeats_only(15)),
        ("heartbeats_only(1, 30, text='queued')", Reply.heartbeats_only(1, 30, text="queued")),
        ("drop_after(2, chunk_interval=0.1)", Reply.drop_after(2, chunk_interval=0.1)),
        ("malformed_after(after=4)", Reply.malformed_after(4)),
        ("error_event_after(3, message='busy')", Reply.error_event_after(3, message="busy")),
    ],
)
def test_stream_string_forms_parse(text: str, expected: Reply) -> None:
    assert Reply.parse(text) == expected


@pytest.mark.parametrize(
    "reply",
    [
        Reply.ok("streamed", chunk_interval=0.05, heartbeat_interval=1, split_bytes=7),
        Reply.delay(1, chunk_interval=0.5),
        Reply.truncate("cut", chunk_interval=0.25),
        Reply.refuse(split_bytes=3),
        Reply.content_filter(heartbeat_interval=2),
        Reply.malformed_tool_args("g", chunk_interval=0.1),
        Reply.schema_invalid({"x": 1}, split_bytes=5),
        Reply.stall_before_first(),
        Reply.stall_before_first(0),
        Reply.stall_before_first(10, chunk_interval=0.1, latency=0.5),
        Reply.stall_after(3, 10),
        Reply.stall_after(3, heartbeat_interval=2, text="x"),
        Reply.heartbeats_only(2),
        Reply.heartbeats_only(2, 30, split_bytes=4),
        Reply.drop_after(0),
        Reply.drop_after(5, tool_calls=[("f", {"a": 1})], usage=(1, 2)),
        Reply.malformed_after(2, json={"a": 1}),
        Reply.error_event_after(1, message="Overloaded again", chunk_interval=0.2),
    ],
)
def test_stream_replies_round_trip(reply: Reply) -> None:
    assert Reply.parse(reply.to_string()) == reply
    assert repr(reply) == f"Reply.{reply.to_string()}"


def test_stream_reply_reprs_and_fields() -> None:
    assert repr(Reply.stall_after(3, 10.0)) == "Reply.stall_after(3, 10)"
    assert repr(Reply.stall_after(3)) == "Reply.stall_after(3)"
    assert repr(Reply.stall_before_first()) == "Reply.stall_before_first"
    assert repr(Reply.ok("x", chunk_interval=0.05)) == "Reply.ok('x', chunk_interval=0.05)"
    r = Reply.stall_after(3, 10, latency=0.5)
    assert (r.kind, r.after, r.seconds, r.wait, r.timed, r.has_ok_body) == (
        ReplyKind.STALL_AFTER,
        3,
        10,
        0.5,  # the stall comes after the headers: not part of the wait before them
        True,
        True,
    )
    assert Reply.stall_before_first(float("inf")).seconds is None
    assert Reply.ok().timed is False and Reply.ok(split_bytes=7).timed is True
    sc = Scenario.from_dict(
        {"a": ["stall_after(3, 10)", {"kind": "drop_after", "after": 2}], "b": "heartbeats_only(1)"}
    )
    assert sc["a"].replies == (Reply.stall_after(3, 10), Reply.drop_after(2))
    assert sc["b"].default == Reply.heartbeats_only(1)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("stall_after", "missing 1 required positional argument: 'after'"),
        ("stall_after(-1, 10)", "Reply.after must be an integer >= 0"),
        ("stall_after(2.5)", "Reply.after must be an integer >= 0"),
        ("stall_after(2, -3)", "Reply.seconds must be a finite number >= 0"),
        ("stall_before_first('soon')", "a stall lasts a number of seconds or 'forever'"),
        ("heartbeats_only(0)", "heartbeat_interval must be > 0"),
        ("ok(chunk_interval=-0.1)", "Reply.chunk_interval must be a finite number >= 0"),
        ("ok(split_bytes=0)", "Reply.split_bytes must be an integer >= 1"),
        ("drop_after(1, seconds=3)", "unexpected keyword argument 'seconds'"),
    ],
)
def test_bad_stream_replies_name_the_problem(spec: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        Reply.parse(spec)
    assert fragment in str(info.value)
