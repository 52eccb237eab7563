"""validate(request, response, contract): every check, passing and failing, with messages that name what failed."""

from __future__ import annotations

import pytest

from failover import Contract, FailureKind, Message, Request, Response, ResponseFormat, Tool, ToolCall
from failover.model import Failure
from failover.validation import Check, check_contract, failed_checks, validate

SCHEMA = {
    "type": "object",
    "properties": {"category": {"enum": ["billing", "shipping"]}, "confidence": {"type": "number", "maximum": 1}},
    "required": ["category"],
}
WEATHER = Tool(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def ask(*, schema: dict[str, object] | None = None, kind: str | None = None, tools: tuple[Tool, ...] = ()) -> Request:
    fmt = None
    if schema is not None:
        fmt = ResponseFormat.json_schema(schema)
    elif kind is not None:
        fmt = ResponseFormat(kind=kind)  # type: ignore[arg-type]
    return Request(messages=(Message.user("hi"),), response_format=fmt, tools=tools)


def call(name: str, arguments: str, parsed: dict[str, object] | None = None, id: str = "call_1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments, parsed=parsed)


def failed(outcome: Response | Failure, kind: FailureKind, *checks: Check) -> Failure:
    assert isinstance(outcome, Failure), outcome
    assert outcome.kind is kind, outcome
    assert failed_checks(outcome) == frozenset(checks), outcome.provider_code
    assert outcome.status == 200 and outcome.response is not None
    return outcome


# -- structured output ----------------------------------------------------------------------


def test_schema_valid_output_is_parsed() -> None:
    out = validate(ask(schema=SCHEMA), Response(text='{"category": "billing", "confidence": 0.5}'))
    assert isinstance(out, Response) and out.parsed == {"category": "billing", "confidence": 0.5}


def test_schema_mismatch_names_the_field_and_the_rule() -> None:
    f = failed(
        validate(ask(schema=SCHEMA), Response(text='{"category": "refund", "confidence": 3}')),
        FailureKind.SCHEMA_INVALID,
        Check.SCHEMA,
    )
    assert "category: 'refund' is not one of ['billing', 'shipping']" in f.message
    assert "confidence: 3 is greater than the maximum of 1" in f.message
    assert "return JSON that matches" in f.message


def test_output_that_is_not_json_says_so_and_how_to_fix_it() -> None:
    f = failed(
        validate(ask(schema=SCHEMA), Response(text="```json\n{}\n```")), FailureKind.SCHEMA_INVALID, Check.SCHEMA
    )
    assert "not JSON" in f.message and "code fences" in f.message


def test_json_object_must_be_an_object() -> None:
    assert isinstance(validate(ask(kind="json_object"), Response(text='{"a": 1}')), Response)
    f = failed(validate(ask(kind="json_object"), Response(text="[1, 2]")), FailureKind.SCHEMA_INVALID, Check.SCHEMA)
    assert "not an object (an array)" in f.message


def test_a_broken_schema_is_the_callers_mistake() -> None:
    with pytest.raises(ValueError, match=r"response_format\.schema"):
        validate(ask(schema={"type": "bogus"}), Response(text="{}"))


def test_the_two_argument_call_ignores_contract_constraints() -> None:
    out = validate(Request.simple("hi"), Response(text="x" * 10_000))
    assert isinstance(out, Response)


# -- required fields -----------------------------------------------------------------------


def test_required_fields_present() -> None:
    c = Contract(required_fields=("category", "reason"))
    out = validate(ask(kind="json_object"), Response(text='{"category": "billing", "reason": "r"}'), c)
    assert isinstance(out, Response) and out.parsed["reason"] == "r"


def test_required_fields_missing_are_named() -> None:
    c = Contract(required_fields=("category", "reason", "ticket"))
    f = failed(
        validate(ask(schema=SCHEMA), Response(text='{"category": "billing"}'), c),
        FailureKind.SCHEMA_INVALID,
        Check.REQUIRED_FIELDS,
    )
    assert "lacks the required fields 'reason', 'ticket'" in f.message
    assert "'category'" not in f.message


def test_required_fields_need_an_object() -> None:
    c = Contract(required_fields=("category",))
    f = failed(
        validate(ask(schema={}), Response(text='"billing"'), c), FailureKind.SCHEMA_INVALID, Check.REQUIRED_FIELDS
    )
    assert "JSON object with the fields 'category', not a string" in f.message


def test_required_fields_do_not_apply_to_text_output() -> None:
    c = Contract(required_fields=("category",))
    assert isinstance(validate(Request.simple("hi"), Response(text="plain words"), c), Response)


# -- tool calls ----------------------------------------------------------------------------


def test_a_valid_tool_call_passes() -> None:
    resp = Response(tool_calls=(call("get_weather", '{"city": "Paris"}', {"city": "Paris"}),))
    assert validate(ask(tools=(WEATHER,)), resp) is resp


def test_unknown_tool_names_it_and_the_offered_ones() -> None:
    resp = Response(tool_calls=(call("get_wether", '{"city": "Paris"}', {"city": "Paris"}),))
    f = failed(validate(ask(tools=(WEATHER,)), resp), FailureKind.TOOL_CALL_MALFORMED, Check.UNKNOWN_TOOL)
    assert "tool 'get_wether' does not exist" in f.message and "'get_weather'" in f.message


def test_a_tool_call_when_no_tools_were_offered() -> None:
    resp = Response(tool_calls=(call("search", "{}", {}),))
    f = failed(validate(ask(), resp), FailureKind.TOOL_CALL_MALFORMED, Check.UNKNOWN_TOOL)
    assert "no tools were offered" in f.message and "answer in text" in f.message


def test_tool_arguments_against_the_parameter_schema() -> None:
    resp = Response(tool_calls=(call("get_weather", '{"city": 75001}', {"city": 75001}),))
    f = failed(validate(ask(tools=(WEATHER,)), resp), FailureKind.TOOL_CALL_MALFORMED, Check.TOOL_ARGUMENTS)
    assert "tool 'get_weather'" in f.message and "city: 75001 is not of type 'string'" in f.message
    assert "you sent '{\"city\": 75001}'" in f.message


def test_tool_arguments_that_are_not_json() -> None:
    resp = Response(tool_calls=(call("get_weather", '{"city": "Par'),))
    f = failed(validate(ask(tools=(WEATHER,)), resp), FailureKind.TOOL_CALL_MALFORMED, Check.TOOL_ARGUMENTS)
    assert "not a JSON object" in f.message and "Unterminated string" in f.message


def test_every_bad_call_is_reported_not_only_the_first() -> None:
    resp = Response(
        tool_calls=(
            call("get_weather", "{}", {}, id="c1"),
            call("nope", "{}", {}, id="c2"),
        )
    )
    f = failed(
        validate(ask(tools=(WEATHER,)), resp), FailureKind.TOOL_CALL_MALFORMED, Check.TOOL_ARGUMENTS, Check.UNKNOWN_TOOL
    )
    assert f.message.startswith("(1) tool 'get_weather' (call c1)") and "(2) call c2: tool 'nope'" in f.message


def test_no_tool_calls_on_the_route() -> None:
    c = Contract(no_tool_calls=True)
    assert isinstance(validate(ask(tools=(WEATHER,)), Response(text="It is sunny."), c), Response)
    resp = Response(tool_calls=(call("get_weather", '{"city": "Paris"}', {"city": "Paris"}),))
    f = failed(validate(ask(tools=(WEATHER,)), resp, c), FailureKind.TOOL_CALL_MALFORMED, Check.NO_TOOL_CALLS)
    assert "'get_weather'" in f.message and "tools may not be called on this route" in f.message


def test_tool_calls_skip_the_structured_output_and_length_checks() -> None:
    c = Contract(min_output_chars=50, output_languages=frozenset({"ru"}))
    resp = Response(text="Let me check.", tool_calls=(call("get_weather", '{"city": "Paris"}', {"city": "Paris"}),))
    assert validate(ask(schema=SCHEMA, tools=(WEATHER,)), resp, c) is resp


# -- length --------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "ok"), [(0, False), (9, False), (10, True), (20, True), (21, False)])
def test_length_bounds(n: int, ok: bool) -> None:
    c = Contract(min_output_chars=10, max_output_chars=20)
    out = validate(Request.simple("hi"), Response(text="x" * n), c)
    assert isinstance(out, Response) is ok


def test_length_messages_give_the_numbers_and_the_fix() -> None:
    c = Contract(min_output_chars=100, max_output_chars=1000)
    f = failed(
        validate(Request.simple("hi"), Response(text="y" * 1234), c), FailureKind.SCHEMA_INVALID, Check.MAX_OUTPUT_CHARS
    )
    assert "1,234 characters long, over the limit of 1,000" in f.message and "shorten it" in f.message
    f = failed(
        validate(Request.simple("hi"), Response(text="short"), c), FailureKind.SCHEMA_INVALID, Check.MIN_OUTPUT_CHARS
    )
    assert "5 characters long, under the minimum of 100" in f.message


def test_length_counts_characters_not_bytes() -> None:
    c = Contract(max_output_chars=5)
    assert isinstance(validate(Request.simple("hi"), Response(text="日本語です"), c), Response)


def test_length_of_structured_output_that_came_back_parsed_only() -> None:
    c = Contract(max_output_chars=10)
    f = validate(ask(kind="json_object"), Response(parsed={"category": "billing"}), c)
    failed(f, FailureKind.SCHEMA_INVALID, Check.MAX_OUTPUT_CHARS)


# -- language ------------------------------------------------------------------------------

EN = "The parcel left the warehouse on Tuesday and should arrive before the race on Saturday."
ZH = "包裹已于周二离开仓库，预计会在周六比赛之前送达。"
JA = "荷物は火曜日に倉庫を出発し、土曜日のレースまでに到着する予定です。"
RU = "Посылка покинула склад во вторник и должна прибыть до субботней гонки."


@pytest.mark.parametrize(
    ("lang", "text", "ok"),
    [
        ("en", EN, True),
        ("en", ZH, False),
        ("en", JA, False),
        ("en", RU, False),
        ("zh", ZH, True),
        ("zh", EN, False),
        ("zh", JA, False),  # kana: not Chinese
        ("zh", RU, False),
        ("ja", JA, True),
        ("ja", EN, False),
        ("ja", RU, False),
        ("ja", ZH, True),  # Han only may be Japanese: the check is conservative
        ("ru", RU, True),
        ("ru", EN, False),
        ("ru", ZH, False),
        ("ru", JA, False),
    ],
)
def test_output_language_by_script(lang: str, text: str, ok: bool) -> None:
    c = Contract(output_languages=frozenset({lang}))
    out = validate(Request.simple("hi"), Response(text=text), c)
    assert isinstance(out, Response) is ok, out


def test_language_message_names_what_was_seen_and_what_is_required() -> None:
    c = Contract(output_languages=frozenset({"en", "de"}))
    f = failed(validate(Request.simple("hi"), Response(text=ZH), c), FailureKind.SCHEMA_INVALID, Check.OUTPUT_LANGUAGES)
    assert "mostly written in Chinese characters (Han)" in f.message
    assert "requires German or English (Latin script)" in f.message and "write the whole answer in" in f.message


def test_language_of_json_output_reads_the_values_not_the_keys() -> None:
    c = Contract(output_languages=frozenset({"zh"}))
    text = '{"category": "shipping", "priority": "high", "reason": "包裹五天没有移动，客户需要在周六之前收到"}'
    assert isinstance(validate(ask(kind="json_object"), Response(text=text), c), Response)
    text = '{"category": "shipping", "reason": "The parcel has not moved for five days and the customer needs it."}'
    failed(
        validate(ask(kind="json_object"), Response(text=text), c), FailureKind.SCHEMA_INVALID, Check.OUTPUT_LANGUAGES
    )


# -- forbidden patterns --------------------------------------------------------------------


def test_forbidden_pattern_absent_passes_present_fails_without_quoting_the_match() -> None:
    c = Contract(forbidden_patterns=(r"(?i)as an ai\b", r"\b\d{4}-\d{4}-\d{4}-\d{4}\b"))
    assert isinstance(validate(Request.simple("hi"), Response(text="Your order has shipped."), c), Response)
    f = failed(
        validate(Request.simple("hi"), Response(text="Card 4111-1111-1111-1111 was charged."), c),
        FailureKind.SCHEMA_INVALID,
        Check.FORBIDDEN_PATTERNS,
    )
    assert "forbidden pattern #1" in f.message and "at character 5" in f.message and "rewrite it" in f.message
    assert "4111" not in f.message


def test_forbidden_pattern_in_tool_arguments_is_a_tool_call_failure() -> None:
    c = Contract(forbidden_patterns=(r"DROP\s+TABLE",))
    sql = Tool(name="sql", parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    resp = Response(tool_calls=(call("sql", '{"q": "DROP TABLE users"}', {"q": "DROP TABLE users"}),))
    f = failed(validate(ask(tools=(sql,)), resp, c), FailureKind.TOOL_CALL_MALFORMED, Check.FORBIDDEN_PATTERNS)
    assert "the arguments of tool 'sql'" in f.message


def test_patterns_are_compiled_once() -> None:
    from failover.validation._contract import _patterns

    c = Contract(forbidden_patterns=(r"secret-\d+",))
    _patterns.cache_clear()
    for _ in range(5):
        validate(Request.simple("hi"), Response(text="nothing here"), c)
    info = _patterns.cache_info()
    assert info.misses == 1 and info.hits == 4


def test_several_problems_are_reported_together_for_the_single_repair() -> None:
    c = Contract(max_output_chars=20, forbidden_patterns=("(?i)sorry",), output_languages=frozenset({"ru"}))
    f = failed(
        validate(Request.simple("hi"), Response(text="Sorry, I cannot find that parcel anywhere in our system."), c),
        FailureKind.SCHEMA_INVALID,
        Check.FORBIDDEN_PATTERNS,
        Check.MAX_OUTPUT_CHARS,
        Check.OUTPUT_LANGUAGES,
    )
    assert f.message.startswith("(1) ") and "(2) " in f.message and "(3) " in f.message


# -- check_contract ------------------------------------------------------------------------


def test_check_contract_accepts_a_sound_contract() -> None:
    check_contract(
        Contract(
            min_output_chars=1,
            max_output_chars=10,
            output_languages=frozenset({"en-US", "zh_Hant", "ja"}),
            forbidden_patterns=("a+",),
            required_fields=("x",),
        )
    )


@pytest.mark.parametrize(
    ("contract", "says"),
    [
        (Contract(forbidden_patterns=("ok", "(unclosed")), "forbidden_patterns[1]"),
        (Contract(output_languages=frozenset({"klingon"})), "unknown language code(s) klingon"),
        (Contract(min_output_chars=10, max_output_chars=5), "larger than max_output_chars"),
        (Contract(max_output_chars=-1), "max_output_chars must be >= 0"),
    ],
)
def test_check_contract_rejects_what_can_never_be_checked(contract: Contract, says: str) -> None:
    with pytest.raises(ValueError) as ei:
        check_contract(contract)
    assert says in str(ei.value)


def test_failed_checks_of_a_provider_failure_is_empty() -> None:
    assert failed_checks(Failure(kind=FailureKind.SCHEMA_INVALID, message="x", provider_code="bad")) == frozenset()


def test_failed_checks_reads_the_typed_checks_never_the_provider_code() -> None:
    # a provider's own code that happens to look like failover's says nothing about the contract
    lookalike = Failure(kind=FailureKind.SCHEMA_INVALID, message="x", provider_code="validation:no_tool_calls")
    assert failed_checks(lookalike) == frozenset()
    typed = Failure(kind=FailureKind.SCHEMA_INVALID, message="x", checks=("no_tool_calls", "schema"))
    assert failed_checks(typed) == {Check.NO_TOOL_CALLS, Check.SCHEMA}


def test_checks_anything_tells_the_router_whether_the_contract_level_was_checked() -> None:
    from failover.validation import checks_anything

    plain = Request.simple("hi")
    assert not checks_anything(plain) and not checks_anything(plain, Contract())
    assert not checks_anything(plain, Contract(required_fields=("x",)))  # only JSON output has fields
    assert checks_anything(plain, Contract(max_output_chars=10))
    assert checks_anything(plain, Contract(no_tool_calls=True))
    assert checks_anything(ask(kind="json_object")) and checks_anything(ask(tools=(WEATHER,)))


def test_a_broken_tool_schema_names_the_tool() -> None:
    bad = Tool(name="broken", parameters={"type": "object", "properties": {"x": {"type": 5}}})
    resp = Response(tool_calls=(call("broken", '{"x": 1}', {"x": 1}),))
    with pytest.raises(ValueError, match="tool 'broken' parameters: not a valid JSON Schema"):
        validate(ask(tools=(bad,)), resp)
