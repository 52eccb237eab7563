"""Embedding endpoints of the fake providers: the paths, the 200 bodies, Bedrock's errors.

* OpenAI ``POST .../embeddings``: ``{"object": "list", "data": [{"object": "embedding",
  "index", "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}``, the
  vectors as floats or, for ``encoding_format: base64`` (the openai SDK's default), as
  base64 of little-endian float32.
* Gemini API ``.../models/{m}:batchEmbedContents``: ``{"embeddings": [{"values"}]}``.
* Vertex AI ``.../publishers/google/models/{m}:predict``: ``{"predictions": [{"embeddings":
  {"values", "statistics": {"truncated", "token_count"}}}], "metadata":
  {"billableCharacterCount"}}``.
* Bedrock InvokeModel ``.../model/{id}/invoke``: Titan Text Embeddings ``{"embedding",
  "inputTextTokenCount", "embeddingsByType"}``; Cohere Embed ``{"id", "texts",
  "embeddings", "response_type"}`` (``{"float": [...]}`` when ``embedding_types`` is sent);
  the ``x-amzn-bedrock-input-token-count`` header.

Vectors are deterministic: each is a unit vector drawn from a seed of its text, of the
requested size (the model's usual size when none is asked for), so equal texts give equal
vectors on every fake and in every run. Errors are each dialect's generation errors (the same
envelopes; InvokeModel's are Converse's). A 200 kind that only means something for generation (truncate,
refuse, content_filter, malformed_tool_args, schema_invalid) is answered with the vectors.

This module is pure and knows nothing of the rest of the kit: ``_dialects`` dispatches here.
"""

from __future__ import annotations

import array
import base64
import hashlib
import json
import math
import random
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ..model import Dialect

__all__ = ["embed_answer", "embed_model", "embed_problem", "fake_vector"]

Answer = tuple[int, tuple[tuple[str, str], ...], bytes]

_JSON = "application/json"
_GEMINI_JSON = "application/json; charset=UTF-8"


def embed_model(dialect: Dialect, path: str) -> str | None:
    """The model an embeddings path names ("" when the body names it: OpenAI); None when the
    path is not an embeddings endpoint of ``dialect``."""
    if dialect is Dialect.OPENAI:
        return "" if path.endswith("/embeddings") else None
    if dialect is Dialect.GEMINI:
        slash = path.rfind("/models/")
        model, _, method = path[slash + 8 :].partition(":") if slash >= 0 else ("", "", "")
        if model and "/" not in model and method in ("batchEmbedContents", "predict"):
            return model
        return None
    if dialect is Dialect.BEDROCK:
        _, sep, tail = path.rpartition("/model/")
        model, _, op = tail.partition("/")
        return unquote(model) if sep and model and op == "invoke" else None
    return None


def _vertex(path: str) -> bool:
    return path.endswith(":predict")


def _cohere(model: str) -> bool:
    return "cohere.embed" in model


def _texts(dialect: Dialect, path: str, body: Mapping[str, Any], model: str) -> list[str] | None:
    """The texts a well-formed body asks to embed; None when the body is not one."""
    if dialect is Dialect.OPENAI:
        raw = body.get("input")
        if isinstance(raw, str):
            return [raw]
        if isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
            return list(raw)
        if isinstance(raw, list) and raw and all(isinstance(t, int | list) for t in raw):
            return [json.dumps(t) for t in raw]  # token arrays: embedded as their text
        return None
    if dialect is Dialect.GEMINI:
        out: list[str] = []
        if _vertex(path):
            for inst in _list(body.get("instances")):
                content = inst.get("content") if isinstance(inst, Mapping) else None
                if not isinstance(content, str):
                    return None
                out.append(content)
        else:
            for req in _list(body.get("requests")):
                parts = req.get("content", {}).get("parts") if isinstance(req, Mapping) else None
                texts = [p.get("text") for p in _list(parts) if isinstance(p, Mapping)]
                if not texts or not all(isinstance(t, str) for t in texts):
                    return None
                out.append("".join(str(t) for t in texts))
        return out or None
    if _cohere(model):
        raw = body.get("texts")
        ok = isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw)
        return list(raw) if ok and isinstance(raw, list) else None
    text = body.get("inputText")
    return [text] if isinstance(text, str) and text else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def embed_problem(dialect: Dialect, path: str, body: Mapping[str, Any]) -> str | None:
    """What the real API says of a body it refuses before any model runs (None: acceptable):
    a required field missing, or more dimensions than the model has."""
    model = embed_model(dialect, path) or ""
    asked = _asked_dims(dialect, path, body, model)
    native = _native(model or str(body.get("model", "")))
    if asked is not None and not 0 < asked <= native:
        return f"dimensions {asked} is not supported by this model: at most {native}"
    if dialect is Dialect.OPENAI:
        if not isinstance(body.get("model"), str) and "/deployments/" not in path:
            return "you must provide a model parameter"
        if "input" not in body:
            return "Missing required parameter: 'input'."
        if _texts(dialect, path, body, model) is None:
            return (
                "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
            )
        return None
    if dialect is Dialect.GEMINI:
        if _vertex(path) and not body.get("instances"):
            return "Invalid JSON payload received. Unknown name or missing field: instances"
        if not _vertex(path) and not body.get("requests"):
            return "* BatchEmbedContentsRequest.requests: at least one request is required\n"
        if _texts(dialect, path, body, model) is None:
            return "* BatchEmbedContentsRequest.requests[0].content: contents is not specified\n"
        return None
    if _cohere(model):
        if not isinstance(body.get("input_type"), str):
            return "Malformed input request: #: required key [input_type] not found, please reformat your input"
        if _texts(dialect, path, body, model) is None:
            return "Malformed input request: #: required key [texts] not found, please reformat your input"
        return None
    if _texts(dialect, path, body, model) is None:
        return "Malformed input request: #: required key [inputText] not found, please reformat your input"
    return None


# -- vectors ---------------------------------------------------------------------------------------

_NATIVE = (  # the model's own size, by a part of its name (first match)
    ("text-embedding-3-large", 3072),
    ("text-embedding-3-small", 1536),
    ("ada-002", 1536),
    ("gemini-embedding", 3072),
    ("text-embedding-00", 768),
    ("text-multilingual-embedding", 768),
    ("titan-embed-text-v2", 1024),
    ("titan-embed-text-v1", 1536),
    ("cohere.embed-v4", 1536),
    ("cohere.embed", 1024),
)


def _native(model: str) -> int:
    return next((n for part, n in _NATIVE if part in model), 256)


def fake_vector(text: str, dimensions: int) -> list[float]:
    """A unit vector of ``dimensions`` drawn from a seed of ``text``: the same everywhere."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    rng = random.Random(seed)
    draw = rng.random
    v = [draw() - 0.5 for _ in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [round(x / norm, 6) for x in v]


def _asked_dims(dialect: Dialect, path: str, body: Mapping[str, Any], model: str) -> int | None:
    """The size a body asks for (None: the model's own)."""
    value: Any
    if dialect is Dialect.OPENAI:
        value = body.get("dimensions")
    elif dialect is Dialect.GEMINI and _vertex(path):
        params = body.get("parameters")
        value = params.get("outputDimensionality") if isinstance(params, Mapping) else None
    elif dialect is Dialect.GEMINI:
        first = next(iter(_list(body.get("requests"))), None)
        value = first.get("outputDimensionality") if isinstance(first, Mapping) else None
    else:
        value = body.get("output_dimension" if _cohere(model) else "dimensions")
    if value is None:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _b64(vector: list[float]) -> str:
    floats = array.array("f", vector)
    if sys.byteorder == "big":
        floats.byteswap()
    return base64.b64encode(floats.tobytes()).decode("ascii")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _dims(value: Any, model: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 65_536:
        return value
    return _native(model)


def embed_answer(
    dialect: Dialect, path: str, body: Mapping[str, Any], *, model: str, request_id: str, response_id: str
) -> Answer:
    """The 200 answer of an embeddings request whose body :func:`embed_problem` accepted."""
    path_model = embed_model(dialect, path) or ""
    texts = _texts(dialect, path, body, path_model) or []
    tokens = sum(_tokens(t) for t in texts)
    out: dict[str, Any]
    headers: tuple[tuple[str, str], ...]
    if dialect is Dialect.OPENAI:
        size = _dims(body.get("dimensions"), model)
        b64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "index": i, "embedding": _b64(v) if b64 else v}
            for i, v in enumerate(fake_vector(t, size) for t in texts)
        ]
        out = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        headers = (("content-type", _JSON), ("x-request-id", request_id), ("openai-processing-ms", "1"))
        return 200, headers, _dumps(out)
    if dialect is Dialect.GEMINI:
        if _vertex(path):
            params = body.get("parameters")
            size = _dims(params.get("outputDimensionality") if isinstance(params, Mapping) else None, path_model)
            predictions = [
                {
                    "embeddings": {
                        "statistics": {"truncated": False, "token_count": _tokens(t)},
                        "values": fake_vector(t, size),
                    }
                }
                for t in texts
            ]
            out = {"predictions": predictions, "metadata": {"billableCharacterCount": sum(len(t) for t in texts)}}
        else:
            requests = [r for r in _list(body.get("requests")) if isinstance(r, Mapping)]
            out = {
                "embeddings": [
                    {"values": fake_vector(t, _dims(r.get("outputDimensionality"), path_model))}
                    for t, r in zip(texts, requests, strict=False)
                ]
            }
        return 200, (("content-type", _GEMINI_JSON), ("x-goog-request-id", request_id)), _dumps(out)
    headers = (
        ("content-type", _JSON),
        ("x-amzn-requestid", request_id),
        ("x-amzn-bedrock-invocation-latency", "12"),
        ("x-amzn-bedrock-input-token-count", str(tokens)),
    )
    if _cohere(path_model):
        size = _dims(body.get("output_dimension"), path_model)
        vectors = [fake_vector(t, size) for t in texts]
        by_type = isinstance(body.get("embedding_types"), list)
        out = {
            "id": response_id,
            "texts": texts,
            "embeddings": {"float": vectors} if by_type else vectors,
            "response_type": "embeddings_by_type" if by_type else "embeddings_floats",
        }
        return 200, headers, _dumps(out)
    size = _dims(body.get("dimensions"), path_model)
    vector = fake_vector(texts[0], size) if texts else []
    out = {"embedding": vector, "inputTextTokenCount": tokens, "embeddingsByType": {"float": vector}}
    return 200, headers, _dumps(out)
