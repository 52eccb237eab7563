"""The published OpenAPI 3.1 schema of the gateway (``GET /openapi.json``).

The request bodies are generated from the same pydantic models that validate them at the
edge (``ChatCompletionBody``, ``MessagesBody``, ``ResponsesBody``), so the schema cannot drift
from what is accepted; responses
and the other endpoints are described by hand. Route names are not listed (``model`` is a
string): which routes a key may use is for ``GET /v1/models`` to say, behind the key.
"""

from __future__ import annotations

from typing import Any

from ..inbound.anthropic import MessagesBody
from ..inbound.embeddings import EmbeddingsBody
from ..inbound.responses import ResponsesBody
from ._openai import ChatCompletionBody
from ._settings import REQUEST_HEADERS

_REF = "#/components/schemas/{model}"

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": ["string", "null"]},
                "param": {"type": ["string", "null"]},
            },
        }
    },
}

_MODEL = {
    "type": "object",
    "required": ["id", "object", "created", "owned_by"],
    "properties": {
        "id": {"type": "string", "description": "a route name"},
        "object": {"const": "model"},
        "created": {"type": "integer"},
        "owned_by": {"type": "string"},
    },
}

# the model field of every answer: the model that answered, not the route (docs/gateway.md)
_ANSWERED_BY = (
    "the upstream model that answered (the model of the target used, e.g. a fallback's), which usage "
    "and cost tools should bill; the route the request named is in the x-failover-route header"
)

_COMPLETION = {
    "type": "object",
    "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "chat.completion"},
        "created": {"type": "integer"},
        "model": {"type": "string", "description": _ANSWERED_BY},
        "choices": {"type": "array", "items": {"type": "object"}},
        "usage": {"type": "object"},
    },
}

_HEADER_DOCS = {
    "x-failover-deadline-ms": ("integer", "end-to-end budget in milliseconds"),
    "x-failover-max-attempts": ("integer", "attempts of every kind, over all targets"),
    "x-failover-max-cost": ("number", "USD over all attempts, failed ones included"),
    "x-failover-allow-fallback": ("string", "true or false: may approved cross-model fallbacks answer"),
    "x-failover-side-effects": ("string", "none, read_only or write_possible"),
    "x-failover-request-id": ("string", "your request id, 1-128 of A-Za-z0-9._:-"),
    "x-failover-task-id": ("string", "the agent task (the ledger's operation id), 1-128 of A-Za-z0-9._:-"),
    "x-failover-hold-tokens": (
        "integer",
        "a stream's commit point: output is held until this many tokens have arrived (0: shown as it comes); "
        "a failure before it is recovered invisibly",
    ),
    "x-failover-max-tokens-policy": (
        "string",
        "cap or refuse: a max_tokens above a target's max output is capped to it (the default) or "
        "leaves the target out",
    ),
    "x-failover-hold-ms": ("integer", "a stream's commit point in time: output is held at most this long"),
    "x-failover-live-reasoning": (
        "string",
        "true or false: stream reasoning as it comes (then a failure while the model thinks is not retried)",
    ),
}


def _err(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


_ERRORS = {
    "400": _err("invalid body or header"),
    "401": _err("missing or wrong API key"),
    "403": _err("the key may not do this"),
    "404": _err("unknown route"),
    "413": _err("body too large"),
    "422": _err("no answer met the contract"),
    "429": _err("tenant rate limit (rate_limit_exceeded) or budget (budget_exhausted)"),
    "502": _err("the gateway's upstream configuration is broken"),
    "503": _err("every candidate failed for now, or the gateway is shutting down"),
    "504": _err("the deadline ran out"),
}


def _get(summary: str, schema: dict[str, Any], *, auth: bool = True, media: str = "application/json") -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": {"description": "OK", "content": {media: {"schema": schema}}}},
    }
    if auth:
        op["responses"].update({k: _ERRORS[k] for k in ("401", "403")})
    else:
        op["security"] = []
    return op


_ANTHROPIC_ERROR = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object", "properties": {"error_code": {"type": "string"}}},
            },
        },
        "request_id": {"type": "string"},
    },
}

_MESSAGE = {
    "type": "object",
    "required": ["id", "type", "role", "model", "content", "stop_reason", "usage"],
    "properties": {
        "id": {"type": "string"},
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "model": {"type": "string", "description": _ANSWERED_BY},
        "content": {"type": "array", "items": {"type": "object"}},
        "stop_reason": {"type": ["string", "null"]},
        "usage": {"type": "object"},
    },
}


def _messages_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The Messages body schema, its definitions prefixed ``Anthropic`` (the chat body has
    models of the same names)."""
    body = MessagesBody.model_json_schema(ref_template="#/components/schemas/Anthropic{model}")
    defs = {f"Anthropic{name}": schema for name, schema in body.pop("$defs", {}).items()}
    return body, defs


def _messages_path(params: list[dict[str, Any]]) -> dict[str, Any]:
    def err(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AnthropicError"}}},
        }

    errors = {code: err(str(_ERRORS[code]["description"])) for code in _ERRORS}
    errors["529"] = err("the last failure was provider overload (Anthropic's overloaded_error)")
    return {
        "post": {
            "summary": "An Anthropic Messages answer over a route, plain or streamed (SSE); key as x-api-key or bearer",
            "parameters": params,
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/MessagesRequest"},
                        "example": {
                            "model": "chat",
                            "max_tokens": 256,
                            "messages": [{"role": "user", "content": "Hi"}],
                        },
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "the message; with stream=true, Anthropic's Server-Sent Events",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Message"}},
                        "text/event-stream": {"schema": {"type": "string"}},
                    },
                },
                **errors,
            },
            "security": [{"bearer": []}, {"x-api-key": []}],
        }
    }


def _count_tokens_path() -> dict[str, Any]:
    errors = {
        code: {
            "description": str(_ERRORS[code]["description"]),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AnthropicError"}}},
        }
        for code in ("400", "401", "403", "404", "413")
        if code in _ERRORS
    }
    return {
        "post": {
            "summary": "Input tokens failover counts for a Messages body (the route's first target); no provider call",
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/MessagesRequest"},
                        "example": {"model": "chat", "messages": [{"role": "user", "content": "Hi"}]},
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "the count",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["input_tokens"],
                                "properties": {"input_tokens": {"type": "integer", "minimum": 0}},
                            }
                        }
                    },
                },
                **errors,
            },
            "security": [{"bearer": []}, {"x-api-key": []}],
        }
    }


_EMBEDDINGS = {
    "type": "object",
    "required": ["object", "data", "model", "usage"],
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["object", "index", "embedding"],
                "properties": {
                    "object": {"const": "embedding"},
                    "index": {"type": "integer", "minimum": 0},
                    "embedding": {
                        "description": "floats, or base64 of little-endian float32 (encoding_format base64)",
                        "oneOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"}],
                    },
                },
            },
        },
        "model": {"type": "string", "description": _ANSWERED_BY},
        "usage": {
            "type": "object",
            "required": ["prompt_tokens", "total_tokens"],
            "properties": {"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}},
        },
    },
}


def _embeddings_path(params: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "post": {
            "summary": "Embeddings over a route: its primary model or an equivalent of it, never another model",
            "parameters": params,
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/EmbeddingsRequest"},
                        "example": {"model": "chat", "input": ["first text", "second text"]},
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "one vector per input, in input order",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/EmbeddingList"}}},
                },
                **_ERRORS,
            },
        }
    }


_RESPONSE = {
    "type": "object",
    "required": ["id", "object", "created_at", "status", "model", "output"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response"},
        "created_at": {"type": "integer"},
        "status": {"enum": ["completed", "incomplete"]},
        "incomplete_details": {"type": ["object", "null"]},
        "model": {"type": "string", "description": _ANSWERED_BY},
        "output": {"type": "array", "items": {"type": "object"}},
        "usage": {"type": "object"},
        "store": {"const": False},
    },
}


def _responses_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The Responses body schema, its definitions prefixed ``Responses`` (the chat body has
    models of the same names)."""
    body = ResponsesBody.model_json_schema(ref_template="#/components/schemas/Responses{model}")
    defs = {f"Responses{name}": schema for name, schema in body.pop("$defs", {}).items()}
    return body, defs


def _responses_paths(params: list[dict[str, Any]]) -> dict[str, Any]:
    stored = {
        "summary": "Not offered: failover keeps no responses (always 404, saying so)",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"404": _err("failover stores no responses"), **{k: _ERRORS[k] for k in ("401", "403")}},
    }
    return {
        "/v1/responses": {
            "post": {
                "summary": "An OpenAI Responses answer over a route, plain or streamed (SSE); stateless",
                "parameters": params,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/ResponsesRequest"},
                            "example": {"model": "chat", "input": "Hello"},
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "the response; with stream=true, the Responses API's Server-Sent Events",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Response"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    **_ERRORS,
                },
            }
        },
        "/v1/responses/{id}": {"get": stored, "delete": stored},
    }


def openapi_schema(*, metrics: bool = True) -> dict[str, Any]:
    body = ChatCompletionBody.model_json_schema(ref_template=_REF)
    defs = body.pop("$defs", {})
    messages_body, messages_defs = _messages_schema()
    responses_body, responses_defs = _responses_schema()
    chat_params = [
        {
            "name": h,
            "in": "header",
            "required": False,
            "description": _HEADER_DOCS[h][1],
            "schema": {"type": _HEADER_DOCS[h][0]},
        }
        for h in REQUEST_HEADERS
    ]
    paths: dict[str, Any] = {
        "/v1/chat/completions": {
            "post": {
                "summary": "A chat completion over a route, plain or streamed (SSE)",
                "parameters": chat_params,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/ChatCompletionRequest"},
                            "example": {"model": "chat", "messages": [{"role": "user", "content": "Hello"}]},
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "the answer; with stream=true, Server-Sent Events of chat.completion.chunk",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/ChatCompletion"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    **_ERRORS,
                },
            }
        },
        "/v1/messages": _messages_path(chat_params),
        "/v1/messages/count_tokens": _count_tokens_path(),
        **_responses_paths(chat_params),
        "/v1/embeddings": _embeddings_path([p for p in chat_params if p["name"] != "x-failover-live-reasoning"]),
        "/v1/models": {
            "get": _get(
                "The routes this key may use",
                {
                    "type": "object",
                    "required": ["object", "data"],
                    "properties": {
                        "object": {"const": "list"},
                        "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}},
                    },
                },
            )
        },
        "/v1/models/{name}": {
            "get": {
                **_get("One route", {"$ref": "#/components/schemas/Model"}),
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            }
        },
        "/admin/health": {"get": _get("Routes, breakers, limiters, tenant quotas (admin key)", {"type": "object"})},
        "/healthz": {"get": _get("Liveness", {"type": "object"}, auth=False)},
        "/readyz": {
            "get": {
                **_get("Readiness: 503 while draining for shutdown", {"type": "object"}, auth=False),
                "responses": {
                    "200": {"description": "ready", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "503": {"description": "draining", "content": {"application/json": {"schema": {"type": "object"}}}},
                },
            }
        },
        "/openapi.json": {"get": _get("This document", {"type": "object"}, auth=False)},
    }
    if metrics:
        paths["/metrics"] = {
            "get": _get(
                "Prometheus metrics (admin key unless configured public)", {"type": "string"}, media="text/plain"
            )
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "failover gateway",
            "version": "1",
            "description": "An OpenAI-compatible gateway (Chat Completions, Responses, Anthropic Messages): "
            "`model` names a route. See docs/gateway.md.",
        },
        "paths": paths,
        "components": {
            "schemas": {
                **defs,
                **messages_defs,
                **responses_defs,
                "ChatCompletionRequest": body,
                "MessagesRequest": messages_body,
                "ResponsesRequest": responses_body,
                "Response": _RESPONSE,
                "Message": _MESSAGE,
                "AnthropicError": _ANTHROPIC_ERROR,
                "ChatCompletion": _COMPLETION,
                "EmbeddingsRequest": EmbeddingsBody.model_json_schema(ref_template=_REF),
                "EmbeddingList": _EMBEDDINGS,
                "Model": _MODEL,
                "Error": _ERROR,
            },
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "x-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
        "security": [{"bearer": []}],
    }


__all__ = ["openapi_schema"]
