"""OpenAI's embeddings wire format as a server speaks it (``POST /v1/embeddings``).

The body: ``model`` (a route), ``input`` (a string or a list of strings; at most 2,048, as
OpenAI), ``dimensions``, ``encoding_format`` (``float``, or ``base64``: little-endian float32,
what the openai SDK asks for by default and decodes itself), ``user`` (ignored) and
failover's own ``input_type`` (``query``, ``document``, ``similarity``, ``classification``,
``clustering``: the hint Gemini, Vertex and Cohere take). Token arrays are refused: a route's
targets may be models with other tokenizers, and the ids of one mean nothing to another.

>>> body = parse_body({"model": "search", "input": ["a", "b"], "dimensions": 256})
>>> to_embed_request(body).dimensions
256
"""

from __future__ import annotations

import array
import base64
import sys
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..model import LONE_SURROGATE, LONE_SURROGATE_FIX, Embeddings, EmbedInput, EmbedRequest, dumps, lone_surrogate
from ._wire import WireError, validation_error

__all__ = [
    "MAX_INPUTS",
    "SLICE_BYTES",
    "EmbeddingsBody",
    "embeddings_body",
    "embeddings_json",
    "parse_body",
    "to_embed_request",
]

MAX_INPUTS = 2048  # OpenAI's limit on inputs per request; failover splits them per provider anyway
SLICE_BYTES = 1024 * 1024  # a large answer is sent in slices of this size (a join of it holds the GIL ~0.6 ms)


class EmbeddingsBody(BaseModel):
    """The fields of an embeddings request the gateway reads."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str = Field(min_length=1)
    input: str | list[str] | list[int] | list[list[int]] = Field(
        description="a text, or a list of texts; token arrays are refused (the route's models tokenize differently)"
    )
    dimensions: int | None = Field(None, ge=1, strict=True)
    encoding_format: Literal["float", "base64"] = "float"
    input_type: Literal["query", "document", "similarity", "classification", "clustering"] | None = Field(
        None, description="failover's extension: what the vectors are for, where the model takes a hint"
    )
    user: str | None = None

    @property
    def stream(self) -> bool:
        return False


def parse_body(data: Any) -> EmbeddingsBody:
    """Validate a decoded body; a problem is a 400 :class:`WireError` naming the field."""
    if not isinstance(data, dict):
        raise WireError(400, "the request body must be a JSON object", code="invalid_body")
    try:
        return EmbeddingsBody.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, tags=frozenset({"str", "int"}), unions=frozenset({"input"})) from None


def to_embed_request(body: EmbeddingsBody, *, max_inputs: int = MAX_INPUTS) -> EmbedRequest:
    """The body as the router's EmbedRequest (at most ``max_inputs`` texts); a 400
    :class:`WireError` naming the field."""
    raw = body.input
    texts: list[str]
    if isinstance(raw, str):
        texts = [raw]
    elif raw and not all(isinstance(t, str) for t in raw):
        raise WireError(
            400,
            "input: token arrays are not supported: a route's targets may be models with other tokenizers, "
            "whose token ids mean something else; send the text instead",
            param="input",
            code="unsupported_input",
        )
    else:
        texts = [t for t in raw if isinstance(t, str)]
    if not texts:
        raise WireError(400, "input: an empty list; send at least one text", param="input")
    if len(texts) > max_inputs:
        raise WireError(400, f"input: {len(texts)} texts; send at most {max_inputs} in one request", param="input")
    for i, text in enumerate(texts):
        where = "input" if isinstance(raw, str) else f"input[{i}]"
        if not text:
            raise WireError(400, f"{where}: an empty string; leave it out", param=where)
        if not text.isascii() and lone_surrogate(text) is not None:
            raise WireError(
                400, f"{where}: {LONE_SURROGATE}. Fix: {LONE_SURROGATE_FIX}", param=where, code="invalid_unicode"
            )
    kind = EmbedInput(body.input_type) if body.input_type is not None else None
    return EmbedRequest(inputs=tuple(texts), dimensions=body.dimensions, input_type=kind)


def _b64(vector: Any) -> str:
    floats = array.array("f", vector)
    if sys.byteorder == "big":
        floats.byteswap()
    return base64.b64encode(floats.tobytes()).decode("ascii")


def _floats(vector: Any) -> list[float]:
    return vector.tolist() if isinstance(vector, array.array) else list(vector)


def embeddings_body(result: Embeddings, *, model: str, encoding_format: str = "float") -> dict[str, Any]:
    """OpenAI's ``{"object": "list", "data": [...], "model", "usage"}``; ``model`` is the model that answered."""
    encode = _b64 if encoding_format == "base64" else _floats
    data = [{"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(result.vectors)]
    tokens = result.usage.input_tokens
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def embeddings_json(result: Embeddings, *, model: str, encoding_format: str = "float") -> list[bytes]:
    """:func:`embeddings_body` as compact JSON in slices of about :data:`SLICE_BYTES` each (joined,
    the same bytes as encoding it whole), written one vector at a time: a thread writing 2,048
    vectors of 3,072 floats (~63 MB) gives the GIL back between vectors instead of holding it for
    the whole answer (~0.5 s), and no 63 MB join holds it either (~40 ms): the slices are sent
    as they are."""
    encode = _b64 if encoding_format == "base64" else _floats
    tokens = result.usage.input_tokens
    usage = dumps({"prompt_tokens": tokens, "total_tokens": tokens})
    slices: list[bytes] = []
    part: list[bytes] = [b'{"object":"list","data":[']
    size = 0
    for i, v in enumerate(result.vectors):
        item = dumps({"object": "embedding", "index": i, "embedding": encode(v)})
        if i:
            part.append(b",")
        part.append(item)
        size += len(item)
        if size >= SLICE_BYTES:
            slices.append(b"".join(part))
            part, size = [], 0
    part += (b'],"model":', dumps(model), b',"usage":', usage, b"}")
    slices.append(b"".join(part))
    return slices
