"""The provider's own window and count in a context-overflow error, in every dialect.

Each wording is one a provider really sends: the captures of /work/shared/wire, and the
messages quoted in provider issues and sources (vLLM, DeepSeek, Anthropic, Gemini, Bedrock,
llama.cpp). A wording with no numbers, or one not known, gives None: never a wrong number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failover.model import Dialect, Failure, FailureKind, Target, Vertex
from failover.providers import dialect_for
from failover.providers._window import WindowNumbers, window_numbers
from tests.conftest import WIRE

from ._wire import load, response, target

K = FailureKind


def _failure(dialect: Dialect, status: int, body: dict[str, object], t: Target | None = None, **hdr: str) -> Failure:
    out = dialect_for(dialect).parse(t or target(dialect), response(status, json.dumps(body), **hdr))
    assert isinstance(out, Failure)
    return out


def _numbers(f: Failure) -> tuple[FailureKind, int | None, int | None, bool]:
    return f.kind, f.window_limit, f.window_used, f.window_includes_output


# -- the wire captures ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "name", "expected"),
    [
        # "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens."
        (
            Dialect.OPENAI,
            "openai-chat/14-error-400-context-length-exceeded.json",
            (K.CONTEXT_OVERFLOW, 4097, 4294, False),
        ),
        # "prompt is too long: 3333404 tokens > 200000 maximum"
        (
            Dialect.ANTHROPIC,
            "anthropic/10-error-400-prompt-too-long.http",
            (K.CONTEXT_OVERFLOW, 200000, 3333404, False),
        ),
        # code invalid_request_error, octet-stream; "... you requested 1250025 tokens (1250025 in the
        # messages, 0 in the completion)": the total, completion included
        (
            Dialect.OPENAI,
            "deepseek/03-error-400-context-length-octet-stream.http",
            (K.CONTEXT_OVERFLOW, 1048565, 1250025, True),
        ),
    ],
)
def test_the_wire_captures_give_the_providers_numbers(
    dialect: Dialect, name: str, expected: tuple[FailureKind, int, int, bool]
) -> None:
    path: Path = WIRE / name
    out = dialect_for(dialect).parse(target(dialect), load(WIRE, name))
    assert path.is_file() and isinstance(out, Failure)
    assert _numbers(out) == expected


# -- the wordings, one by one --------------------------------------------------------------------

WORDINGS = [
    # OpenAI, Azure OpenAI: input only
    (
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9631 tokens. "
        "Please reduce the length of the messages.",
        WindowNumbers(8192, 9631, False),
    ),
    # thousands commas
    (
        "This model's maximum context length is 8,192 tokens. However, your messages resulted in 9,631 tokens.",
        WindowNumbers(8192, 9631, False),
    ),
    # vLLM and OpenAI's older wording: the total requested, completion included
    (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
        "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
        WindowNumbers(4096, 5000, True),
    ),
    (
        "This model's maximum context length is 4097 tokens, however you requested 4226 tokens "
        "(3970 in your prompt; 256 for the completion). Please reduce your prompt; or completion length.",
        WindowNumbers(4097, 4226, True),
    ),
    # vLLM: the input alone, and max_tokens too large for what the input leaves
    (
        "This model's maximum context length is 1536 tokens. However, your request has 4176 input tokens. "
        "Please reduce the length of the input messages.",
        WindowNumbers(1536, 4176, False),
    ),
    (
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is "
        "4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None",
        WindowNumbers(4096, 10778, True),
    ),
    # Anthropic (and Claude on Bedrock, whose message wraps it)
    ("prompt is too long: 210000 tokens > 200000 maximum", WindowNumbers(200000, 210000, False)),
    (
        "The model returned the following errors: prompt is too long: 200049 tokens > 200000 maximum",
        WindowNumbers(200000, 200049, False),
    ),
    (
        "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input length "
        "or `max_tokens` and try again",
        WindowNumbers(200000, 242959, True),
    ),
    # Gemini, Vertex: with and without the count
    (
        "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).",
        WindowNumbers(1048576, 1234567, False),
    ),
    ("The input token count exceeds the maximum number of tokens allowed (1048576).", WindowNumbers(1048576)),
    # no numbers: nothing is made up
    ("Input is too long for requested model.", WindowNumbers()),
    ("Your input exceeds the context window of this model. Please adjust your input and try again.", WindowNumbers()),
    ("the request exceeds the available context size, try increasing it", WindowNumbers()),
    ("too many input tokens", WindowNumbers()),
    ("maximum context length exceeded by 12 tokens", WindowNumbers()),
    ("", WindowNumbers()),
]


@pytest.mark.parametrize(("message", "expected"), WORDINGS)
def test_each_known_wording_gives_its_numbers_and_an_unknown_one_none(message: str, expected: WindowNumbers) -> None:
    assert window_numbers(message) == expected


# -- each dialect classifies the overflow and carries the numbers ----------------------------------


def test_openai_chat_reads_an_overflow_that_only_its_message_tells() -> None:
    # DeepSeek, vLLM: code invalid_request_error (or the status), the message is the only sign
    msg = (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
        "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
    )
    body = {"object": "error", "message": msg, "type": "BadRequestError", "param": None, "code": 400}
    assert _numbers(_failure(Dialect.OPENAI, 400, body)) == (K.CONTEXT_OVERFLOW, 4096, 5000, True)


def test_azure_openai_overflow_carries_the_numbers() -> None:
    msg = (
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
        "Please reduce the length of the messages."
    )
    body = {
        "error": {
            "message": msg,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    azure = target(Dialect.OPENAI, base_url="https://x.openai.azure.com", azure_deployment=True)
    assert _numbers(_failure(Dialect.OPENAI, 400, body, azure)) == (K.CONTEXT_OVERFLOW, 128000, 130512, False)


def test_llama_cpp_says_its_numbers_in_fields() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9000,
            "n_ctx": 4096,
        }
    }
    assert _numbers(_failure(Dialect.OPENAI, 400, body)) == (K.CONTEXT_OVERFLOW, 4096, 9000, False)


def test_the_responses_api_overflow_has_no_numbers() -> None:
    msg = "Your input exceeds the context window of this model. Please adjust your input and try again."
    body = {
        "error": {"message": msg, "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}
    }
    assert _numbers(_failure(Dialect.OPENAI_RESPONSES, 400, body)) == (K.CONTEXT_OVERFLOW, None, None, False)


def test_the_responses_api_with_an_openai_wording_carries_the_numbers() -> None:
    msg = "This model's maximum context length is 272000 tokens. However, your messages resulted in 300000 tokens."
    body = {"error": {"message": msg, "type": "invalid_request_error", "param": "input", "code": None}}
    assert _numbers(_failure(Dialect.OPENAI_RESPONSES, 400, body)) == (K.CONTEXT_OVERFLOW, 272000, 300000, False)


def test_anthropic_input_and_max_tokens_over_the_limit() -> None:
    msg = (
        "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, "
        "decrease input length or `max_tokens` and try again"
    )
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": msg}}
    assert _numbers(_failure(Dialect.ANTHROPIC, 400, body)) == (K.CONTEXT_OVERFLOW, 200000, 207951, True)


@pytest.mark.parametrize("vertex", [False, True])
def test_gemini_and_vertex_overflow_carries_the_numbers(vertex: bool) -> None:
    msg = "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576)."
    body = {"error": {"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}}
    t = target(Dialect.GEMINI, vertex=Vertex(project="p", location="us-central1") if vertex else None)
    assert _numbers(_failure(Dialect.GEMINI, 400, body, t)) == (K.CONTEXT_OVERFLOW, 1048576, 1234567, False)


BEDROCK = Target(
    name="b",
    dialect=Dialect.BEDROCK,
    model="anthropic.claude-3-haiku",
    base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Input is too long for requested model.", (K.CONTEXT_OVERFLOW, None, None, False)),
        ("too many input tokens", (K.CONTEXT_OVERFLOW, None, None, False)),
        (
            "The model returned the following errors: prompt is too long: 204444 tokens > 200000 maximum",
            (K.CONTEXT_OVERFLOW, 200000, 204444, False),
        ),
        (
            "The model returned the following errors: input length and `max_tokens` exceed context limit: "
            "199134 + 21333 > 204698, decrease input length or `max_tokens` and try again",
            (K.CONTEXT_OVERFLOW, 204698, 220467, True),
        ),
    ],
)
def test_bedrock_validation_exception_overflow(
    message: str, expected: tuple[FailureKind, int | None, int | None, bool]
) -> None:
    f = _failure(
        Dialect.BEDROCK, 400, {"message": message}, BEDROCK, x_amzn_errortype="ValidationException:http://internal"
    )
    assert _numbers(f) == expected


def test_numbers_are_read_only_from_a_context_overflow() -> None:
    # a rate limit that happens to speak of tokens says nothing about a window
    msg = "Rate limit reached: Limit 30000, Used 29000, Requested 4000. maximum context length is 8192 tokens."
    body = {"error": {"message": msg, "type": "tokens", "code": "rate_limit_exceeded"}}
    assert _numbers(_failure(Dialect.OPENAI, 429, body)) == (K.RATE_LIMITED, None, None, False)
