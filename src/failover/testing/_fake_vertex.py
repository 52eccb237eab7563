"""What a fake provider does differently when it is called as Google Vertex AI.

A Gemini or Anthropic fake also serves Vertex's paths (``.../projects/{p}/locations/{l}/
publishers/{google|anthropic}/models/{model}:{method}``, under any prefix), so one fake
stands for the provider's own API and for the model on Vertex:

* the model is in the path; Claude's body has no ``model`` but an ``anthropic_version``
  (``rawPredict`` / ``streamRawPredict``; its count is ``models/count-tokens:rawPredict``);
* the credential is an OAuth access token (``Authorization: Bearer``), never an API key;
* Google's front end answers what it refuses before the model runs in Google's envelope
  (``google.rpc.Status``): a missing or bad token (401 ``UNAUTHENTICATED``), quota (429
  ``RESOURCE_EXHAUSTED``, with ``RetryInfo`` when the reply scripts a wait), billing (403
  ``PERMISSION_DENIED`` / ``BILLING_DISABLED``) and an unknown model (404 ``NOT_FOUND``),
  for Claude too; everything else is the provider's own answer, as on its API.

Pure helpers: ``_dialects`` builds the endpoints and the HTTP answers from them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..model import Dialect
from ._kinds import ReplyKind
from ._reply import Reply

__all__ = ["SERVED", "check_vertex", "vertex_error", "vertex_route"]

_PATH = re.compile(
    r"/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
    r"/publishers/(?P<publisher>[^/]+)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$"
)
_PUBLISHER = {Dialect.GEMINI: "google", Dialect.ANTHROPIC: "anthropic"}
SERVED = frozenset(_PUBLISHER)  # the dialects whose models Vertex AI serves
_METHODS = {
    Dialect.GEMINI: {
        "generateContent": ("generate", False),
        "streamGenerateContent": ("generate", True),
        "countTokens": ("count_tokens", False),
    },
    Dialect.ANTHROPIC: {"rawPredict": ("generate", False), "streamRawPredict": ("generate", True)},
}

_MISSING = (
    "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or "
    "other valid authentication credential. See https://developers.google.com/identity/sign-in/web/"
    "devconsole-project."
)
_INVALID = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other "
    "valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
)


def vertex_route(dialect: Dialect, path: str) -> tuple[str, bool, str | None] | None:
    """``(operation, stream_path, model)`` for a Vertex path of ``dialect``; None if it is not one.

    Claude's count is the model ``count-tokens`` (the counted model is in the body).
    """
    match = _PATH.search(path)
    if match is None or match["publisher"] != _PUBLISHER.get(dialect):
        return None
    model, method = match["model"], match["method"]
    if dialect is Dialect.ANTHROPIC and model == "count-tokens":
        return ("count_tokens", False, None) if method == "rawPredict" else None
    found = _METHODS[dialect].get(method)
    return None if found is None else (found[0], found[1], model)


def _bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    return value[7:].strip() or None if value[:7].lower() == "bearer " else None


def check_vertex(
    dialect: Dialect,
    operation: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    *,
    api_key: str | Callable[[str], bool] | None,
) -> Reply | None:
    """The refusal Vertex sends before any model runs: a missing or wrong access token (only
    checked when ``api_key``, the token or a test of it, is given), or Claude's required
    fields missing. None when the request is acceptable."""
    if api_key is not None:
        token = _bearer(headers)
        if token is None:
            return Reply.unauthorized(message=_MISSING)
        if not (api_key(token) if callable(api_key) else token == api_key):
            return Reply.unauthorized(message=_INVALID)
    if dialect is Dialect.ANTHROPIC:
        required = ("anthropic_version", "messages") + (("max_tokens",) if operation == "generate" else ("model",))
        for name in required:
            if name not in body:
                return Reply.invalid(f"{name}: Field required")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return Reply.invalid("messages: at least one message is required")
        return None
    if operation == "generate" and not body.get("contents"):
        return Reply.invalid("Unable to submit request because it has an empty contents field.")
    return None


def vertex_error(reply: Reply, path: str, model: str, wait: float | None) -> tuple[int, dict[str, Any]] | None:
    """``(status, body)`` of the error Google's front end sends for ``reply``, or None when the
    provider behind it answers (its own envelope, as on its API)."""
    kind = reply.kind
    details: list[dict[str, Any]] = []
    if kind is ReplyKind.UNAUTHORIZED:
        status, code = 401, "UNAUTHENTICATED"
        message = reply.message or _INVALID
        reason = "CREDENTIALS_MISSING" if message == _MISSING else "ACCESS_TOKEN_TYPE_UNSUPPORTED"
        details = [_info(reason, {"service": "aiplatform.googleapis.com", "method": _method(path)})]
    elif kind is ReplyKind.RATE_LIMIT:
        status, code = 429, "RESOURCE_EXHAUSTED"
        message = reply.message or (
            "Resource exhausted. Please try again later. Please refer to "
            "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details."
        )
        if wait is not None:
            details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait:g}s"}]
    elif kind is ReplyKind.QUOTA:
        status, code = 403, "PERMISSION_DENIED"
        project = _segment(path, "projects") or "my-project"
        message = reply.message or (
            f"This API method requires billing to be enabled. Please enable billing on project #{project} by "
            f"visiting https://console.developers.google.com/billing/enable?project={project} then retry. If you "
            "enabled billing for this project recently, wait a few minutes for the action to propagate to our "
            "systems and retry."
        )
        metadata = {"consumer": f"projects/{project}", "service": "aiplatform.googleapis.com"}
        details = [_info("BILLING_DISABLED", metadata)]
    elif kind is ReplyKind.NOT_FOUND:
        status, code = 404, "NOT_FOUND"
        start = path.find("projects/")
        resource = path[start:].rpartition(":")[0] if start >= 0 else model
        message = reply.message or (
            f"Publisher Model `{resource}` was not found or your project does not have access to it. Please "
            "ensure you are using a valid model version. For more information, see: "
            "https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"
        )
    else:
        return None
    error: dict[str, Any] = {"code": status, "message": message, "status": code}
    if details:
        error["details"] = details
    return status, {"error": error}


def _info(reason: str, metadata: dict[str, str]) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "googleapis.com",
        "metadata": metadata,
    }


def _segment(path: str, name: str) -> str | None:
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part == name:
            return parts[i + 1]
    return None


def _method(path: str) -> str:
    method = path.rpartition(":")[2]
    return f"google.cloud.aiplatform.v1.PredictionService.{method[:1].upper()}{method[1:]}"
