"""The one failure renderer: every failure kind has a row, the gateway and the in-process SDK
drop-in read the same table, and where their statuses differ the row says why.

The gateway's caller did not send the provider key, model name or account, so an upstream
refusal of them is the gateway's own 502; the drop-in's caller owns them, so the SDK raises the
class it raises for the provider's own answer (401, 404, 429). A failure the router already
waited out and retried is the gateway's 503 "every candidate failing for now"; in-process the
SDK raises what its caller catches for the same answer from the provider (429, 504).
"""

from __future__ import annotations

import pytest

from failover.gateway._errors import ApiError
from failover.inbound._failures import (
    CHAT,
    MESSAGES,
    RESPONSES,
    SDK_CHAT,
    SDK_MESSAGES,
    TABLE,
    Scrubber,
    render,
    status_for,
    unavailable,
)
from failover.integrations._sdk_core import status_for as drop_in_status_for
from failover.model import FailureKind, RouteRecord, Unavailable, Workflow

K = FailureKind
GATEWAY = (CHAT, RESPONSES, MESSAGES)
IN_PROCESS = (SDK_CHAT, SDK_MESSAGES)


def _failure(
    kind: FailureKind, *, retryable: bool = False, message: str = "provider said sk-live-abcdef1234"
) -> Unavailable:
    record = RouteRecord(
        request_id="req_1",
        route="r",
        workflow=Workflow.STOP,
        outcome=kind.value,
        attempts=(),
        waits=(),
        excluded=(),
        recovered=False,
        recovery_reason=None,
        target_used=None,
        elapsed_ms=1.0,
        added_latency_ms=0.0,
        total_cost=0.0,
    )
    return Unavailable(kind, message, retryable=retryable, request_id="req_1", record=record)


def test_every_failure_kind_has_one_row() -> None:
    assert set(TABLE) == set(FailureKind)


def test_the_gateway_and_the_drop_in_differ_only_where_a_row_says_why() -> None:
    differ = {kind for kind, row in TABLE.items() if row.gateway != row.in_process}
    assert differ == {
        K.AUTHENTICATION_OR_PERMISSION,
        K.MODEL_NOT_FOUND,
        K.QUOTA_EXHAUSTED,
        K.RATE_LIMITED,
        K.TIMEOUT,
        K.PROVIDER_OVERLOADED,
    }
    for kind, row in TABLE.items():
        assert bool(row.why) == (kind in differ), kind


@pytest.mark.parametrize(
    ("kind", "gateway", "drop_in"),
    [
        (K.AUTHENTICATION_OR_PERMISSION, 502, 401),
        (K.MODEL_NOT_FOUND, 502, 404),
        (K.QUOTA_EXHAUSTED, 502, 429),
    ],
)
def test_an_upstream_refusal_of_our_configuration_is_the_gateways_502_and_the_callers_own_in_process(
    kind: FailureKind, gateway: int, drop_in: int
) -> None:
    """The gateway's caller did not send the provider key: it gets the gateway's 502 and a fixed
    message, never the provider's words. In-process the caller owns the key: the status the
    provider itself would have given, with the provider's (scrubbed) message."""
    exc = _failure(kind)
    assert "caller did not send the provider key" in TABLE[kind].why
    for shape in GATEWAY:
        err = unavailable(exc, shape, Scrubber([]))
        assert err.status == status_for(exc, shape) == gateway
        assert "gateway configuration problem" in err.message and "provider said" not in err.message
    assert drop_in_status_for(exc, "openai") == drop_in_status_for(exc, "anthropic") == drop_in
    for shape in IN_PROCESS:
        err = unavailable(exc, shape, Scrubber([]))
        assert err.status == drop_in
        assert "provider said ***" in err.message and "sk-live" not in err.message


def test_a_failure_waited_out_is_the_gateways_503_and_the_providers_own_status_in_process() -> None:
    assert [status_for(_failure(k, retryable=True), CHAT) for k in (K.RATE_LIMITED, K.TIMEOUT)] == [503, 503]
    assert [status_for(_failure(k, retryable=True), SDK_CHAT) for k in (K.RATE_LIMITED, K.TIMEOUT)] == [429, 504]
    assert "already waited, retried and failed over" in TABLE[K.RATE_LIMITED].why


def test_a_final_status_turned_away_for_now_is_503_on_both_sides() -> None:
    for kind in (K.AUTHENTICATION_OR_PERMISSION, K.MODEL_NOT_FOUND):
        exc = _failure(kind, retryable=True)
        assert {status_for(exc, s) for s in (*GATEWAY, *IN_PROCESS)} == {503}


def test_provider_overload_is_529_for_anthropic_clients_on_both_sides() -> None:
    exc = _failure(K.PROVIDER_OVERLOADED, retryable=True)
    assert [status_for(exc, s) for s in (CHAT, RESPONSES, MESSAGES, SDK_CHAT, SDK_MESSAGES)] == [
        503,
        503,
        529,
        503,
        529,
    ]
    final = _failure(K.PROVIDER_OVERLOADED, retryable=False)  # the drop-in keeps the SDK's overload class
    assert [status_for(final, s) for s in (CHAT, MESSAGES, SDK_CHAT, SDK_MESSAGES)] == [502, 502, 503, 529]


def test_anthropic_overload_type_needs_a_retry_after_only_at_the_gateway() -> None:
    """Claude Code retries every overloaded_error whatever x-should-retry says: the gateway names
    that type only when there is a known moment to come back. In-process the type follows the status."""
    exc = _failure(K.PROVIDER_SERVER_ERROR, retryable=True)
    gateway = render(unavailable(exc, MESSAGES, Scrubber([])), MESSAGES, request_id="req_1")
    drop_in = render(unavailable(exc, SDK_MESSAGES, Scrubber([])), SDK_MESSAGES, request_id="req_1")
    assert gateway.status == drop_in.status == 503
    assert gateway.body["error"]["type"] == "api_error"
    assert drop_in.body["error"]["type"] == "overloaded_error"


def test_every_rendered_error_says_do_not_retry_and_names_the_request() -> None:
    exc = _failure(K.DEADLINE_EXHAUSTED)
    for shape in (*GATEWAY, *IN_PROCESS):
        out = render(unavailable(exc, shape, Scrubber([])), shape, request_id="req_1", record=exc.record)
        assert out.status == 504
        assert out.headers["x-should-retry"] == "false"
        assert out.headers["x-failover-request-id"] == "req_1"
        assert out.headers["x-failover-retryable"] == "false"
    # the gateway's Anthropic answers also name it where the anthropic SDK reads it
    assert (
        render(unavailable(exc, MESSAGES, Scrubber([])), MESSAGES, request_id="req_1").headers["request-id"] == "req_1"
    )
    assert (
        "request-id" not in render(unavailable(exc, SDK_MESSAGES, Scrubber([])), SDK_MESSAGES, request_id="r").headers
    )


def test_a_refusal_renders_in_each_envelope() -> None:
    err = ApiError(404, "no such route", code="model_not_found", param="model")
    openai = render(err, CHAT)
    assert openai.status == 404
    assert openai.body == {
        "error": {
            "message": "no such route",
            "type": "invalid_request_error",
            "code": "model_not_found",
            "param": "model",
        }
    }
    assert err.body() == openai.body
    anthropic = render(err, MESSAGES)
    assert anthropic.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "no such route", "details": {"error_code": "model_not_found"}},
    }
    assert openai.headers == anthropic.headers == {"x-should-retry": "false"}


def test_one_scrubber_for_both_sides() -> None:
    scrub = Scrubber(["hunter2-provider-secret", "abc"])  # too short to be a secret: left alone
    out = scrub("hunter2-provider-secret abc sk-proj-abcdef123 Bearer abcdefghijk")
    assert out == "*** abc *** ***"
