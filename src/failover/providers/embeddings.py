"""Embeddings on the wire: one :class:`EmbedAdapter` per dialect.

An adapter builds one HTTP request for a part of an :class:`~failover.model.EmbedRequest`
(at most :meth:`~EmbedAdapter.batch_size` inputs: the router splits a larger request and
sends the parts concurrently within one attempt) and reads the answer into
:class:`~failover.model.Embeddings` or a classified :class:`~failover.model.Failure`, with
each dialect's own error vocabulary (the same tables as generation).

=================  =========================================================================
OpenAI             ``POST {base}/embeddings`` (Azure: ``/openai/deployments/{model}/embeddings``):
                   ``{model, input, dimensions, encoding_format: "float"}`` -> ``data[].embedding``,
                   ``usage.prompt_tokens``. 2,048 inputs a call.
Gemini API         ``POST {base}/models/{m}:batchEmbedContents``: ``requests[{model, content: {parts:
                   [{text}]}, taskType, outputDimensionality}]`` -> ``embeddings[].values``. 100 a call.
Vertex AI          ``POST {host}/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:predict``:
                   ``instances[{content, task_type}]``, ``parameters.outputDimensionality`` ->
                   ``predictions[].embeddings.values`` and ``statistics.token_count``. 250 a call;
                   one for ``gemini-embedding-*`` models, which take one instance per request.
Bedrock            ``POST {base}/model/{id}/invoke`` (InvokeModel). Titan Text Embeddings:
                   ``{inputText, dimensions, normalize}`` -> ``{embedding, inputTextTokenCount}``,
                   one text a call. Cohere Embed: ``{texts, input_type, embedding_types,
                   output_dimension}`` -> ``embeddings`` (a list, or ``{"float": [...]}``), 96 a call.
=================  =========================================================================

Errors are each dialect's generation errors, classified by the same code: InvokeModel's
exceptions (botocore's service model) are Converse's.
"""

from __future__ import annotations

import array
import base64
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol
from urllib.parse import quote

from ..model import Dialect, Embeddings, EmbedInput, EmbedRequest, Failure, Target, Usage, dumps
from ..transport import HttpRequest, HttpResponse
from ._common import (
    as_dict,
    as_int,
    as_list,
    as_str,
    decode_json,
    non_finite,
    server_fault,
    unreadable,
    with_query,
)
from ._google import google_error
from ._headers import first_header, openai_rate_limits, parse_int, read_meta
from ._vertex import model_url
from .bedrock import _parse as _bedrock
from .openai._errors import openai_error

__all__ = ["EmbedAdapter", "embed_adapter_for"]

Vector = Sequence[float]


class EmbedAdapter(Protocol):
    """One dialect's embeddings: build a request for some inputs, read its answer."""

    name: str

    def unsupported(self, target: Target) -> str | None:
        """Why ``target``'s model has no embeddings in this dialect (None: it has)."""
        ...

    def batch_size(self, target: Target) -> int:
        """The most inputs one HTTP request to ``target`` may carry."""
        ...

    def build_embed(self, target: Target, request: EmbedRequest) -> HttpRequest:
        """The HTTP request embedding every input of ``request`` (at most :meth:`batch_size`)."""
        ...

    def parse_embed(self, target: Target, request: EmbedRequest, response: HttpResponse) -> Embeddings | Failure:
        """One vector per input of ``request``, in order, for an acceptable 2xx; a classified
        Failure for anything else (a 2xx without one vector per input is the provider's fault)."""
        ...


def dimensions_of(target: Target, request: EmbedRequest) -> int | None:
    """The size asked for: the request's, else the target's, else None (the model's own)."""
    return request.dimensions if request.dimensions is not None else target.dimensions


def _vector(raw: Any) -> Vector | None:
    """A JSON list of numbers as a compact float array; None when it is not one."""
    if not isinstance(raw, list) or not raw:
        return None
    try:
        return array.array("d", raw)
    except TypeError:  # a string, null or object among the numbers
        return None


def _b64_vector(raw: str) -> Vector | None:
    """OpenAI's ``encoding_format: base64``: little-endian float32 (a server that ignored
    our ``float``)."""
    try:
        data = base64.b64decode(raw, validate=True)
    except ValueError:
        return None
    if not data or len(data) % 4:
        return None
    floats = array.array("f", data)
    if sys.byteorder == "big":
        floats.byteswap()
    return array.array("d", floats)


def _finite(vec: Vector) -> bool:
    """No NaN or infinity in ``vec`` (a JSON answer was read strictly; base64 floats were not)."""
    return all(map(math.isfinite, vec))


def _count_mismatch(got: int, want: int) -> str:
    return f"the answer holds {got} embedding(s) for {want} input(s)"


# -------------------------------------------------------------------- OpenAI

_OPENAI_REQUEST_IDS = ("x-request-id", "apim-request-id")


class OpenAIEmbeddings:
    """``POST {base_url}/embeddings`` (and Azure deployments, as :class:`OpenAIDialect` does)."""

    name: str = "openai"

    def unsupported(self, target: Target) -> str | None:
        del target
        return None

    def batch_size(self, target: Target) -> int:
        del target
        return 2048  # the API's limit on inputs per request

    def build_embed(self, target: Target, request: EmbedRequest) -> HttpRequest:
        base = target.base_url.rstrip("/")
        headers = {"content-type": "application/json", "accept": "application/json"}
        if target.azure_deployment:
            url = f"{base}/openai/deployments/{quote(target.model, safe='')}/embeddings"
            if target.api_key:
                headers["api-key"] = target.api_key.reveal()
        else:
            url = f"{base}/embeddings"
            if target.api_key:
                headers["authorization"] = f"Bearer {target.api_key.reveal()}"
        headers.update(target.headers)
        body: dict[str, Any] = {"model": target.model, "input": list(request.inputs), "encoding_format": "float"}
        dims = dimensions_of(target, request)
        if dims is not None:
            body["dimensions"] = dims
        return HttpRequest(method="POST", url=with_query(url, target.query), headers=headers, json=body)

    def parse_embed(self, target: Target, request: EmbedRequest, response: HttpResponse) -> Embeddings | Failure:
        meta = read_meta(response.headers, request_id_headers=_OPENAI_REQUEST_IDS, rate_limits=openai_rate_limits)
        data = decode_json(response.body)
        if (refused := non_finite(self.name, target, response, meta, data)) is not None:
            return refused
        if not 200 <= response.status < 300 or isinstance(as_dict(data).get("error"), dict):
            return openai_error(self.name, target, response, meta, data)
        body = as_dict(data)
        items = [as_dict(d) for d in as_list(body.get("data"))]
        if "data" not in body:
            return unreadable(self.name, target, response, meta, "an embedding list")
        want = len(request.inputs)
        if len(items) != want:
            return server_fault(self.name, target, response, meta, _count_mismatch(len(items), want))
        vectors: list[Vector | None] = [None] * want
        for pos, item in enumerate(items):
            index = item.get("index", pos)
            raw = item.get("embedding")
            vec = _b64_vector(raw) if isinstance(raw, str) else _vector(raw)
            if not isinstance(index, int) or not 0 <= index < want or vec is None or vectors[index] is not None:
                return server_fault(self.name, target, response, meta, f"data[{pos}] is not an embedding of an input")
            if isinstance(raw, str) and not _finite(vec):
                return server_fault(self.name, target, response, meta, f"data[{pos}] holds NaN or infinity")
            vectors[index] = vec
        usage = as_dict(body.get("usage"))
        return Embeddings(
            vectors=tuple(v for v in vectors if v is not None),
            model=as_str(body.get("model")),
            usage=Usage(input_tokens=as_int(usage.get("prompt_tokens"))),
            provider_request_id=meta.request_id,
            rate_limits=meta.rate_limits,
        )


# -------------------------------------------------------------------- Gemini API and Vertex AI

_GEMINI_TASK: Final[Mapping[EmbedInput, str]] = {
    EmbedInput.QUERY: "RETRIEVAL_QUERY",
    EmbedInput.DOCUMENT: "RETRIEVAL_DOCUMENT",
    EmbedInput.SIMILARITY: "SEMANTIC_SIMILARITY",
    EmbedInput.CLASSIFICATION: "CLASSIFICATION",
    EmbedInput.CLUSTERING: "CLUSTERING",
}
_GOOGLE_REQUEST_IDS = ("x-goog-request-id", "x-request-id")


class GeminiEmbeddings:
    """The Gemini API's ``batchEmbedContents``, or Vertex AI's ``predict`` for a target with
    ``vertex`` (authorised with a google-auth token, so no API key header there)."""

    name: str = "gemini"

    def unsupported(self, target: Target) -> str | None:
        del target
        return None

    def batch_size(self, target: Target) -> int:
        if target.vertex is None:
            return 100  # batchEmbedContents: "at most 100 requests can be in one batch"
        # Vertex: 250 instances a request, but gemini-embedding models take one
        return 1 if "gemini" in target.model.rsplit("/", 1)[-1] else 250

    def build_embed(self, target: Target, request: EmbedRequest) -> HttpRequest:
        model = target.model.removeprefix("models/")
        headers = {"content-type": "application/json", "accept": "application/json"}
        dims = dimensions_of(target, request)
        task = _GEMINI_TASK[request.input_type] if request.input_type is not None else None
        body: dict[str, Any]
        if target.vertex is not None:
            instances: list[dict[str, Any]] = []
            for text in request.inputs:
                instance: dict[str, Any] = {"content": text}
                if task is not None:
                    instance["task_type"] = task
                instances.append(instance)
            body = {"instances": instances}
            if dims is not None:
                body["parameters"] = {"outputDimensionality": dims}
            url = model_url(target, "google", "predict")
        else:
            if target.api_key:
                headers["x-goog-api-key"] = target.api_key.reveal()
            name = f"models/{model}"
            requests = []
            for text in request.inputs:
                one: dict[str, Any] = {"model": name, "content": {"parts": [{"text": text}]}}
                if task is not None:
                    one["taskType"] = task
                if dims is not None:
                    one["outputDimensionality"] = dims
                requests.append(one)
            body = {"requests": requests}
            url = f"{target.base_url.rstrip('/')}/models/{quote(model, safe='')}:batchEmbedContents"
        headers.update(target.headers)
        return HttpRequest(method="POST", url=with_query(url, target.query), headers=headers, json=body)

    def parse_embed(self, target: Target, request: EmbedRequest, response: HttpResponse) -> Embeddings | Failure:
        meta = read_meta(response.headers, request_id_headers=_GOOGLE_REQUEST_IDS)
        raw_body = decode_json(response.body)
        if (refused := non_finite(self.name, target, response, meta, raw_body)) is not None:
            return refused
        body = as_dict(raw_body)
        if not 200 <= response.status < 300 or isinstance(body.get("error"), dict):
            return google_error(self.name, target, response, meta, body)
        want = len(request.inputs)
        tokens = 0
        if target.vertex is not None:
            if "predictions" not in body:
                return unreadable(self.name, target, response, meta, "a PredictResponse")
            raw: list[Any] = []
            for p in as_list(body.get("predictions")):
                emb = as_dict(as_dict(p).get("embeddings"))
                raw.append(emb.get("values"))
                tokens += as_int(as_dict(emb.get("statistics")).get("token_count"))
        else:
            if "embeddings" not in body:
                return unreadable(self.name, target, response, meta, "a BatchEmbedContentsResponse")
            raw = [as_dict(e).get("values") for e in as_list(body.get("embeddings"))]
            tokens = as_int(as_dict(body.get("usageMetadata")).get("promptTokenCount"))
        if len(raw) != want:
            return server_fault(self.name, target, response, meta, _count_mismatch(len(raw), want))
        vectors = [_vector(r) for r in raw]
        bad = next((i for i, v in enumerate(vectors) if v is None), None)
        if bad is not None:
            return server_fault(self.name, target, response, meta, f"embedding {bad} has no values")
        return Embeddings(
            vectors=tuple(v for v in vectors if v is not None),
            model=target.model,
            usage=Usage(input_tokens=tokens),
            provider_request_id=meta.request_id,
        )


# -------------------------------------------------------------------- Bedrock InvokeModel

_COHERE_INPUT: Final[Mapping[EmbedInput, str]] = {
    EmbedInput.QUERY: "search_query",
    EmbedInput.DOCUMENT: "search_document",
    EmbedInput.SIMILARITY: "clustering",  # Cohere has no similarity type; clustering is symmetric too
    EmbedInput.CLASSIFICATION: "classification",
    EmbedInput.CLUSTERING: "clustering",
}


def _is_cohere(model: str) -> bool:
    return "cohere.embed" in model


class BedrockEmbeddings:
    """InvokeModel for Amazon Titan Text Embeddings (G1 and v2) and Cohere Embed (v3, v4),
    told apart by the model id (also in an inference profile or ARN). SigV4-signed by the
    router's AWS credential chain after it is built."""

    name: str = "bedrock"

    def unsupported(self, target: Target) -> str | None:
        if _is_cohere(target.model) or "titan-embed-text" in target.model:
            return None
        return f"{target.model} is not an embedding model failover speaks on Bedrock (Titan Text, Cohere Embed)"

    def batch_size(self, target: Target) -> int:
        return 96 if _is_cohere(target.model) else 1  # Cohere: 96 texts a call; Titan: one

    def build_embed(self, target: Target, request: EmbedRequest) -> HttpRequest:
        model = target.model
        dims = dimensions_of(target, request)
        body: dict[str, Any]
        if _is_cohere(model):
            kind = request.input_type or EmbedInput.DOCUMENT  # Cohere requires one
            body = {"texts": list(request.inputs), "input_type": _COHERE_INPUT[kind], "embedding_types": ["float"]}
            if dims is not None:
                body["output_dimension"] = dims  # Embed v4; v3 has one size and refuses it
        else:
            if len(request.inputs) != 1:
                raise ValueError("Titan embeds one text per request")
            body = {"inputText": request.inputs[0]}
            if dims is not None:
                body["dimensions"] = dims
            if "titan-embed-text-v2" in model:
                body["normalize"] = True  # v2's default, said outright: unit vectors compare by dot product
        headers = {"content-type": "application/json", "accept": "application/json", **dict(target.headers)}
        url = f"{target.base_url.rstrip('/')}/model/{quote(model, safe='')}/invoke"
        url = with_query(url, target.query)
        return HttpRequest(method="POST", url=url, headers=headers, json=body, content=dumps(body))

    def parse_embed(self, target: Target, request: EmbedRequest, response: HttpResponse) -> Embeddings | Failure:
        meta = read_meta(response.headers, request_id_headers=_bedrock.REQUEST_ID_HEADERS)
        raw_body = decode_json(response.body)
        if (refused := non_finite(self.name, target, response, meta, raw_body)) is not None:
            return refused
        body = as_dict(raw_body)
        if not 200 <= response.status < 300:
            return _bedrock.error(target, response, meta, body)  # InvokeModel's errors are Converse's
        want = len(request.inputs)
        counted = parse_int(first_header(response.headers, ("x-amzn-bedrock-input-token-count",)))
        if _is_cohere(target.model):
            embeddings = body.get("embeddings")
            if isinstance(embeddings, dict):  # with embedding_types: {"float": [[...], ...]}
                embeddings = embeddings.get("float")
            if not isinstance(embeddings, list):
                return unreadable(self.name, target, response, meta, "a Cohere embed answer")
            raw: list[Any] = embeddings
            tokens = counted or 0
        else:
            if "embedding" not in body:
                return unreadable(self.name, target, response, meta, "a Titan embedding")
            raw = [body.get("embedding")]
            tokens = as_int(body.get("inputTextTokenCount")) or counted or 0
        if len(raw) != want:
            return server_fault(self.name, target, response, meta, _count_mismatch(len(raw), want))
        vectors = [_vector(r) for r in raw]
        bad = next((i for i, v in enumerate(vectors) if v is None), None)
        if bad is not None:
            return server_fault(self.name, target, response, meta, f"embedding {bad} is not a list of numbers")
        return Embeddings(
            vectors=tuple(v for v in vectors if v is not None),
            model=target.model,
            usage=Usage(input_tokens=tokens),
            provider_request_id=meta.request_id,
        )


_ADAPTERS: Mapping[Dialect, EmbedAdapter] = {
    Dialect.OPENAI: OpenAIEmbeddings(),
    Dialect.GEMINI: GeminiEmbeddings(),
    Dialect.BEDROCK: BedrockEmbeddings(),
}


def embed_adapter_for(dialect: Dialect) -> EmbedAdapter | None:
    """The shared embeddings adapter of dialect ``dialect``; None for a dialect without embeddings."""
    return _ADAPTERS.get(Dialect(dialect))
