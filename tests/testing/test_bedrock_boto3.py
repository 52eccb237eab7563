"""boto3's own ``bedrock-runtime`` client, pointed at the fault kit over loopback, reads what it sends.

The client is the real one at its default settings (retry mode ``legacy``: 5 attempts in all
for throttling and 5xx, with up to 1 s of jittered backoff before the first retry), with
fixed test credentials; the fake checks each request's SigV4 signature by recomputing it.
Tests whose reply the SDK would retry script it ``always`` and say how many calls that makes,
or pass ``retries={"total_max_attempts": 1}`` where the SDK's sleeps would only slow the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError

from failover.testing import FakeProvider, FakeServer, Reply, Script

KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
MESSAGES = [{"role": "user", "content": [{"text": "What is the weather in Paris?"}]}]
TOOLS = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}},
            }
        }
    ]
}
ONE_ATTEMPT = Config(retries={"total_max_attempts": 1})


@pytest.fixture
def server() -> Iterator[tuple[FakeProvider, FakeServer]]:
    p = FakeProvider("p", "bedrock", api_key=KEY_ID, secret_key=SECRET)
    with FakeServer(p).run_in_thread() as srv:
        yield p, srv


def client(srv: FakeServer, p: FakeProvider, config: Config | None = None) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=srv.base_url_for(p),
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=config,
    )


def test_converse_reads_a_text_answer(server: tuple[FakeProvider, FakeServer]) -> None:
    p, srv = server
    p.load(["ok('Sunny, 21 C.', usage=(11, 4))"])
    out = client(srv, p).converse(modelId=MODEL, messages=MESSAGES, inferenceConfig={"maxTokens": 64})
    assert out["output"]["message"] == {"role": "assistant", "content": [{"text": "Sunny, 21 C."}]}
    assert out["stopReason"] == "end_turn"
    assert out["usage"] == {"inputTokens": 11, "outputTokens": 4, "totalTokens": 15}
    assert out["ResponseMetadata"]["RequestId"] == "req_p_1"
    (call,) = p.calls
    assert call.scripted and call.model == MODEL and call.path.endswith("/converse")  # its signature checked out


def test_converse_reads_a_tool_call(server: tuple[FakeProvider, FakeServer]) -> None:
    p, srv = server
    p.load([Reply.ok(tool_calls=[("get_weather", {"city": "Paris"})])])
    out = client(srv, p).converse(modelId=MODEL, messages=MESSAGES, toolConfig=TOOLS)
    (block,) = out["output"]["message"]["content"]
    assert block["toolUse"]["name"] == "get_weather" and block["toolUse"]["input"] == {"city": "Paris"}
    assert block["toolUse"]["toolUseId"].startswith("tooluse_") and out["stopReason"] == "tool_use"


@pytest.mark.parametrize(
    ("reply", "code", "status", "calls"),
    [
        ("invalid", "ValidationException", 400, 1),
        ("context_overflow", "ValidationException", 400, 1),
        ("unauthorized", "UnrecognizedClientException", 403, 1),
        ("not_found", "ResourceNotFoundException", 404, 1),
        ("quota", "ServiceQuotaExceededException", 400, 1),
        ("rate_limit", "ThrottlingException", 429, 1),
        ("overloaded", "ServiceUnavailableException", 503, 1),
        ("server_error", "InternalServerException", 500, 1),
    ],
)
def test_errors_are_the_sdks_own_exceptions(
    server: tuple[FakeProvider, FakeServer], reply: str, code: str, status: int, calls: int
) -> None:
    p, srv = server
    p.load(Script.always(reply))
    bedrock = client(srv, p, ONE_ATTEMPT)
    with pytest.raises(ClientError) as info:
        bedrock.converse(modelId=MODEL, messages=MESSAGES)
    error = info.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)
    assert error["Error"]["Message"]
    if code != "UnrecognizedClientException":  # an AWS-wide auth error, not in the service model
        assert isinstance(info.value, getattr(bedrock.exceptions, code))  # the modeled exception class
    assert len(p.calls) == calls


def test_the_sdk_at_its_defaults_retries_a_throttle_and_gets_the_answer(
    server: tuple[FakeProvider, FakeServer],
) -> None:
    p, srv = server
    p.load(["rate_limit", "ok('after one retry')"])
    out = client(srv, p).converse(modelId=MODEL, messages=MESSAGES)
    assert out["output"]["message"]["content"] == [{"text": "after one retry"}]
    assert p.kinds == ["rate_limit", "ok"] and out["ResponseMetadata"]["RetryAttempts"] == 1


def test_a_wrong_secret_is_refused_as_aws_refuses_it(server: tuple[FakeProvider, FakeServer]) -> None:
    p, srv = server
    bedrock = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=srv.base_url_for(p),
        aws_access_key_id=KEY_ID,
        aws_secret_access_key="not-the-secret",
        config=ONE_ATTEMPT,
    )
    with pytest.raises(ClientError) as info:
        bedrock.converse(modelId=MODEL, messages=MESSAGES)
    assert info.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert [c.scripted for c in p.calls] == [False]


def _collect(stream: Any) -> tuple[str, list[dict[str, Any]], list[str]]:
    text, tools, order = [], [], []
    for event in stream:
        (name,) = event
        order.append(name)
        if name == "contentBlockStart":
            tools.append({"start": event[name]["start"]["toolUse"], "input": ""})
        elif name == "contentBlockDelta":
            delta = event[name]["delta"]
            if "text" in delta:
                text.append(delta["text"])
            elif "toolUse" in delta:
                tools[-1]["input"] += delta["toolUse"]["input"]
    return "".join(text), tools, order


def test_converse_stream_reads_the_event_stream(server: tuple[FakeProvider, FakeServer]) -> None:
    p, srv = server
    p.load([Reply.ok("It is sunny in Paris.", tool_calls=[("get_weather", {"city": "Paris"})], split_bytes=7)])
    out = client(srv, p).converse_stream(modelId=MODEL, messages=MESSAGES, toolConfig=TOOLS)
    assert out["ResponseMetadata"]["HTTPHeaders"]["content-type"] == "application/vnd.amazon.eventstream"
    text, tools, order = _collect(out["stream"])
    assert text == "It is sunny in Paris."
    assert tools == [
        {"start": {"toolUseId": tools[0]["start"]["toolUseId"], "name": "get_weather"}, "input": '{"city":"Paris"}'}
    ]
    assert order[0] == "messageStart" and order[-2:] == ["messageStop", "metadata"]
    assert p.calls[0].stream and p.calls[0].path.endswith("/converse-stream")


@pytest.mark.parametrize(
    ("cause", "code"),
    [
        ("overloaded", "serviceUnavailableException"),
        ("rate_limit", "throttlingException"),
        ("server_error", "internalServerException"),
    ],
)
def test_a_mid_stream_exception_is_the_sdks_event_stream_error(
    server: tuple[FakeProvider, FakeServer], cause: str, code: str
) -> None:
    p, srv = server
    p.load([Reply.error_event_after(3, cause=cause, text="one two three four five")])
    out = client(srv, p).converse_stream(modelId=MODEL, messages=MESSAGES)
    seen: list[str] = []

    def read() -> None:
        for event in out["stream"]:
            seen.extend(event)

    with pytest.raises(EventStreamError) as info:
        read()
    assert info.value.response["Error"]["Code"] == code
    assert seen[0] == "messageStart" and "contentBlockDelta" in seen
