"""``POST /v1/embeddings``: OpenAI's embeddings endpoint over ``Router.embed``.

The body is read by :mod:`failover.inbound.embeddings`; everything else is the chat
endpoint's lifecycle (:class:`~failover.gateway._endpoint.Endpoint`): ``model`` names a route,
tenant keys, quotas, the envelope from the ``x-failover-*`` headers, drain, a client that
leaves cancelling the upstream calls, metrics, the access log, the ``x-failover-*``
response headers and OpenAI's error bodies with the gateway's statuses.

A route that cannot embed (its first primary is a chat model, see
:func:`failover.router._embed.cannot_embed`) is refused with a 400
``embeddings_unsupported`` naming the route and the fix, before any upstream call: an
embeddings call there would only ever fail, on the breakers the route's chat requests use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..inbound import SchemaField, answered_by, record_headers
from ..inbound.embeddings import EmbeddingsBody, embeddings_body, embeddings_json, parse_body, to_embed_request
from ..model import Embeddings, EmbedRequest, Envelope, RouteRecord, dumps
from ..router import Router, route_cannot_embed
from ._endpoint import Endpoint
from ._errors import ApiError
from ._sizes import field_of, too_many

HEAVY_ANSWER_VALUES = 256 * 1024  # more floats than this (~2.5 MB of JSON): written in a worker thread, in slices


@dataclass(frozen=True, slots=True)
class _Asked:
    """What the router is asked, and how the client wants the vectors written."""

    request: EmbedRequest
    encoding_format: str


@dataclass(frozen=True, slots=True)
class _Answer:
    embeddings: Embeddings
    encoding_format: str

    @property
    def record(self) -> RouteRecord | None:
        return self.embeddings.record


class EmbeddingsEndpoint(Endpoint[EmbeddingsBody, _Asked, _Answer]):
    """``POST /v1/embeddings``: vectors from a route's primary model or its equivalents only."""

    path = "/v1/embeddings"

    def from_json(self, data: Any) -> EmbeddingsBody:
        return parse_body(data)

    def to_request(self, body: EmbeddingsBody) -> _Asked:
        route = self.gw.router.routes.get(body.model)
        why = route_cannot_embed(route) if route is not None else None
        if why is not None:
            raise ApiError(
                400,
                f"route {body.model!r} cannot embed: {why}. Fix: send embeddings to a route whose first "
                "primary target is an embedding model (such as text-embedding-3-small), or configure one",
                code="embeddings_unsupported",
                param="model",
            )
        return _Asked(to_embed_request(body, max_inputs=self.gw.settings.max_embedding_inputs), body.encoding_format)

    def check_counts(self, body: Any) -> None:
        """At most ``max_embedding_inputs`` texts, and inputs x dimensions (asked for, else the
        route's first primary's configured ``dimensions``, when either is known) within
        ``max_embedding_values``: the answer's size, before anything is sent."""
        settings = self.gw.settings
        texts, dims, model = field_of(body, "input"), field_of(body, "dimensions"), field_of(body, "model")
        n = len(texts) if isinstance(texts, list) else 1
        if n > settings.max_embedding_inputs:
            raise too_many("input", n, "inputs", "max_embedding_inputs", settings.max_embedding_inputs)
        if not isinstance(dims, int) or isinstance(dims, bool):
            dims = None  # validation says what is wrong with it
        route = self.gw.router.routes.get(model) if isinstance(model, str) else None
        if dims is None and route is not None and route.primary:
            dims = route.primary[0].dimensions
        if dims is not None and n * dims > settings.max_embedding_values:
            raise too_many(
                "dimensions",
                n * dims,
                f"values ({n} inputs x {dims} dimensions)",
                "max_embedding_values",
                settings.max_embedding_values,
            )

    def heavy_answer(self, resp: _Answer) -> bool:
        return len(resp.embeddings.vectors) * (resp.embeddings.dimensions or 0) > HEAVY_ANSWER_VALUES

    def schema_fields(self, body: EmbeddingsBody) -> list[SchemaField]:
        return []  # no client JSON Schema in an embeddings request

    async def call(self, router: Router, route: str, req: _Asked, envelope: Envelope) -> _Answer:
        out = await router.embed(route, req.request, envelope=envelope)
        return _Answer(out, req.encoding_format)

    def answer(
        self, resp: _Answer, route: str, request_id: str, record: RouteRecord | None, body: EmbeddingsBody
    ) -> tuple[bytes | Sequence[bytes], Mapping[str, str]]:
        model = answered_by(record, route)
        if self.heavy_answer(resp):  # in a worker thread (see Endpoint._complete): one vector at a time
            body_bytes = embeddings_json(resp.embeddings, model=model, encoding_format=resp.encoding_format)
            _release(resp.embeddings)
            return body_bytes, record_headers(request_id, record)
        out = embeddings_body(resp.embeddings, model=model, encoding_format=resp.encoding_format)
        return dumps(out), record_headers(request_id, record)


def _release(out: Embeddings) -> None:
    """Free a large answer's numbers here, in the worker thread, one vector at a time: millions
    of floats freed in one go on the event loop (when the last reference to the vectors goes)
    held it for ~90 ms (2,048 x 3,072 values)."""
    for vector in out.vectors:
        if isinstance(vector, list):
            vector.clear()
