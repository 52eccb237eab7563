"""Vertex AI targets in the config file: the endpoint a location gets, and what cannot be a
project or a location (both go into the request URL)."""

from __future__ import annotations

from typing import Any

import pytest

from failover.config import check_config, config_from_dict
from failover.config._yaml import Document


def _file(vertex: dict[str, Any], **extra: Any) -> dict[str, Any]:
    target = {"dialect": "anthropic", "model": "claude-sonnet-4@20250514", "vertex": vertex, **extra}
    return {"targets": {"t": target}, "routes": {"r": {"primary": ["t"]}}}


@pytest.mark.parametrize(
    ("location", "base_url"),
    [
        ("us-east5", "https://us-east5-aiplatform.googleapis.com"),
        ("global", "https://aiplatform.googleapis.com"),
        ("us", "https://aiplatform.us.rep.googleapis.com"),  # the multi-regions, as Google's SDKs call them
        ("eu", "https://aiplatform.eu.rep.googleapis.com"),
    ],
)
def test_the_location_gives_the_endpoint(location: str, base_url: str) -> None:
    cfg = config_from_dict(_file({"project": "my-project", "location": location}))
    assert cfg.targets["t"].base_url == base_url


def test_a_base_url_wins() -> None:
    cfg = config_from_dict(
        _file({"project": "example.com:my-project", "location": "us-east5"}, base_url="http://127.0.0.1:9")
    )
    assert cfg.targets["t"].base_url == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("vertex", "field", "words"),
    [
        (
            {"project": "my project", "location": "us-east5"},
            "targets.t.vertex.project",
            "not a Google Cloud project ID",
        ),
        ({"project": "p/../x", "location": "us-east5"}, "targets.t.vertex.project", "not a Google Cloud project ID"),
        ({"project": "p", "location": "us east5"}, "targets.t.vertex.location", "not a Vertex AI location"),
        ({"project": "p", "location": "evil.com/x"}, "targets.t.vertex.location", "not a Vertex AI location"),
        ({"project": "p", "location": "US-EAST5"}, "targets.t.vertex.location", "such as us-east5, or global"),
    ],
)
def test_what_cannot_go_into_the_url_is_refused_by_name(vertex: dict[str, str], field: str, words: str) -> None:
    report = check_config(Document(data=_file(vertex)), env={})
    assert [(p.field, words in p.problem) for p in report.errors] == [(field, True)]
