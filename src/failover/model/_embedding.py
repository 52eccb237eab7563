"""Embeddings: texts in, one vector per text out, in the same order.

An embedding request fails over only to an equivalent of the same model with the same
dimensions (see docs/contracts.md): vectors of different models, or of one model at two
sizes, are not comparable, so a cross-model fallback would be a silent downgrade that no
validation could catch afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from ._errors import InvalidRequest
from ._text import LONE_SURROGATE, LONE_SURROGATE_FIX, lone_surrogate
from ._usage import Usage

if TYPE_CHECKING:
    from ._record import RouteRecord
    from ._usage import RateLimitInfo


class EmbedInput(StrEnum):
    """What the vectors are for, where a model tunes them to it (Gemini ``taskType``, Vertex
    ``task_type``, Cohere ``input_type``); models without such a hint ignore it."""

    QUERY = "query"  # a search query, matched against documents
    DOCUMENT = "document"  # a document stored for retrieval
    SIMILARITY = "similarity"  # texts compared with each other
    CLASSIFICATION = "classification"
    CLUSTERING = "clustering"


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbedRequest:
    """Texts to embed. ``dimensions``: the size of every vector (None: the target's
    ``dimensions``, else the model's own); ``input_type``: what the vectors are for.

    >>> EmbedRequest(inputs=("a query",), dimensions=256, input_type=EmbedInput.QUERY)
    """

    inputs: tuple[str, ...]
    dimensions: int | None = None
    input_type: EmbedInput | None = None

    def check(self) -> None:
        """:class:`InvalidRequest` naming the field, before anything is sent."""
        if not self.inputs:
            raise InvalidRequest("inputs", "no text to embed", "pass at least one non-empty string")
        for i, text in enumerate(self.inputs):
            if not isinstance(text, str):
                raise InvalidRequest(f"inputs[{i}]", f"a {type(text).__name__}, not text", "pass strings only")
            if not text:
                raise InvalidRequest(f"inputs[{i}]", "an empty string", "leave it out: providers refuse empty input")
            if not text.isascii() and lone_surrogate(text) is not None:
                raise InvalidRequest(f"inputs[{i}]", LONE_SURROGATE, LONE_SURROGATE_FIX)
        d = self.dimensions
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d <= 0):
            raise InvalidRequest("dimensions", f"{d!r} is not a positive integer", "pass e.g. 256, or None")
        kind: object = self.input_type  # typed, but a caller may pass anything
        if kind is not None and not isinstance(kind, EmbedInput):
            choices = ", ".join(e.value for e in EmbedInput)
            raise InvalidRequest("input_type", f"{kind!r} is not known", f"use one of {choices}, or None")

    def part(self, start: int, stop: int) -> EmbedRequest:
        """The same request for ``inputs[start:stop]`` (one provider call of a larger one)."""
        return EmbedRequest(inputs=self.inputs[start:stop], dimensions=self.dimensions, input_type=self.input_type)


@dataclass(frozen=True, slots=True, kw_only=True)
class Embeddings:
    """One vector per input, in input order. ``usage.input_tokens`` is what the provider
    counted (an estimate where it reports nothing; the attempt says ``cost_estimated``);
    ``record`` is the request's RouteRecord, attached by the router."""

    vectors: tuple[Sequence[float], ...]
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    provider_request_id: str | None = None
    rate_limits: RateLimitInfo | None = None
    record: RouteRecord | None = None

    @property
    def dimensions(self) -> int | None:
        """The length of the vectors (None when there are none)."""
        return len(self.vectors[0]) if self.vectors else None

    def __len__(self) -> int:
        return len(self.vectors)

    def __repr__(self) -> str:
        used = self.record.target_used if self.record is not None else None
        return (
            f"Embeddings({len(self.vectors)} x {self.dimensions}, model={self.model!r}, "
            f"input_tokens={self.usage.input_tokens}, target={used!r})"
        )
