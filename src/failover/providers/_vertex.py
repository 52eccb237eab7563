"""Google Vertex AI: where a model is called, for the dialects Vertex serves (Gemini and Claude).

A target with ``vertex`` (its project and location) is called at Vertex's publisher-model
resource instead of the provider's own API::

    {root}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}

``root`` is the target's ``base_url`` (a proxy, or a loopback fake in tests), else the
location's endpoint: ``https://{location}-aiplatform.googleapis.com`` for a region,
``https://aiplatform.googleapis.com`` for ``global``, ``https://aiplatform.{us|eu}.rep.googleapis.com``
for the multi-regions (:attr:`failover.model.Vertex.root_url`, as google-genai and
anthropic's ``AnthropicVertex`` choose them). A ``base_url`` that already ends in an API
version (``/v1``, ``/v1beta1``) keeps it. Methods: Gemini ``generateContent``,
``streamGenerateContent`` (``?alt=sse``), ``countTokens``; Claude ``rawPredict``,
``streamRawPredict`` and ``count-tokens:rawPredict`` (the count is a model of its own).

References: cloud.google.com/vertex-ai/generative-ai/docs/reference/rest (v1
projects.locations.publishers.models), .../partner-models/claude (use-claude, count-tokens),
google-genai's ``_api_client.py`` and anthropic-sdk-python's ``lib/vertex/_client.py``.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from ..model import Target, Vertex

__all__ = ["ANTHROPIC_VERTEX_VERSION", "anthropic_count_url", "model_url", "vertex_of"]

# Claude on Vertex takes its API version in the body, and only this one.
ANTHROPIC_VERTEX_VERSION = "vertex-2023-10-16"

_VERSIONED = re.compile(r"/v1(?:beta1)?$")


def vertex_of(target: Target) -> Vertex:
    """The target's Vertex project and location (a ValueError names the field when absent)."""
    if target.vertex is None:
        raise ValueError(f"target {target.name!r} has no vertex: set vertex: {{project: ..., location: ...}}")
    return target.vertex


def _api_root(target: Target, vertex: Vertex) -> str:
    root = (target.base_url or vertex.root_url).rstrip("/")
    return root if _VERSIONED.search(root) else root + "/v1"


def _resource(target: Target, vertex: Vertex, publisher: str) -> str:
    project = quote(vertex.project, safe=":")  # domain-scoped projects: example.com:my-project
    location = quote(vertex.location, safe="")
    return f"{_api_root(target, vertex)}/projects/{project}/locations/{location}/publishers/{publisher}/models"


def model_url(target: Target, publisher: str, method: str) -> str:
    """The URL of ``method`` on the target's model (``publisher``: ``google`` or ``anthropic``).

    The model keeps its ``@version`` suffix as written (``claude-sonnet-4@20250514``): ``@`` is
    allowed in a path segment, and Vertex names Claude versions that way.
    """
    vertex = vertex_of(target)
    model = target.model.removeprefix("models/")
    return f"{_resource(target, vertex, publisher)}/{quote(model, safe='@')}:{method}"


def anthropic_count_url(target: Target) -> str:
    """Claude's token count on Vertex: ``.../publishers/anthropic/models/count-tokens:rawPredict``
    (the model goes in the body)."""
    return f"{_resource(target, vertex_of(target), 'anthropic')}/count-tokens:rawPredict"
