"""The kinds of answer a fake provider can give, by name: what a script is written in.

Each kind is a constructor of :class:`~._reply.Reply` (``Reply.rate_limit``) and the name of
its data form (``"rate_limit(retry_after=2)"``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["STREAM_FAULT_KINDS", "ReplyKind"]


class ReplyKind(StrEnum):
    """Every answer a fake provider can give. 200-with-a-problem kinds come after the errors,
    and the stream faults (a 200 stream that goes wrong on cue) last."""

    OK = "ok"  # 200 with text, tool calls or a JSON object
    DELAY = "delay"  # wait ``seconds``, then answer like ``ok``
    HANG = "hang"  # never answer; ends only when the client goes away
    RATE_LIMIT = "rate_limit"  # 429 with retry-after / retry-after-ms (Gemini: RetryInfo)
    QUOTA = "quota"  # OpenAI 429 insufficient_quota; Anthropic 400 credit balance; Gemini 429 per-day quota
    OVERLOADED = "overloaded"  # Anthropic 529 overloaded_error; OpenAI 503; Gemini 503 UNAVAILABLE
    SERVER_ERROR = "server_error"  # 500
    UNAUTHORIZED = "unauthorized"  # 401; Gemini 400 API_KEY_INVALID
    NOT_FOUND = "not_found"  # 404 for the model
    CONTEXT_OVERFLOW = "context_overflow"  # 400 with the dialect's real "too long" message
    INVALID = "invalid"  # 400 invalid request
    RESET = "reset"  # the server closes the connection without answering
    CONNECT_ERROR = "connect_error"  # the connection is never made (in-process: phase "connect")
    TRUNCATE = "truncate"  # 200, finish_reason length / stop_reason max_tokens / MAX_TOKENS
    REFUSE = "refuse"  # 200, OpenAI message.refusal / Anthropic refusal / Gemini SAFETY
    CONTENT_FILTER = "content_filter"  # 200, OpenAI content_filter / Anthropic refusal / Gemini prompt block
    MALFORMED_TOOL_ARGS = "malformed_tool_args"  # 200, a tool call whose arguments are not JSON
    SCHEMA_INVALID = "schema_invalid"  # 200, JSON that does not match the requested schema
    # Stream faults. "events" are the stream's own events (heartbeats are not counted); a request
    # that did not ask for a stream gets its body as ONE event. ``seconds`` None means forever.
    STALL_BEFORE_FIRST = "stall_before_first"  # headers, then nothing for ``seconds``, then the stream
    STALL_AFTER = "stall_after"  # ``after`` events, then nothing for ``seconds``, then the rest
    HEARTBEATS_ONLY = "heartbeats_only"  # headers, then only keep-alives for ``seconds``, then the stream
    DROP_AFTER = "drop_after"  # ``after`` events, then the connection closes: no terminal event
    END_AFTER = "end_after"  # ``after`` events, then the body ends cleanly: no terminal event ([DONE])
    MALFORMED_AFTER = "malformed_after"  # ``after`` events, then one whose data is not JSON, then the rest
    ERROR_EVENT_AFTER = "error_event_after"  # ``after`` events, then the dialect's error event (``cause``)


STREAM_FAULT_KINDS = frozenset(
    {
        ReplyKind.STALL_BEFORE_FIRST,
        ReplyKind.STALL_AFTER,
        ReplyKind.HEARTBEATS_ONLY,
        ReplyKind.DROP_AFTER,
        ReplyKind.END_AFTER,
        ReplyKind.MALFORMED_AFTER,
        ReplyKind.ERROR_EVENT_AFTER,
    }
)
