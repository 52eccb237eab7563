"""An embedding target's `dimensions` in the config file."""

from __future__ import annotations

import pytest

from failover import ConfigError
from failover.config import config_from_dict


def _file(dimensions: object) -> dict[str, object]:
    target = {
        "dialect": "gemini",
        "model": "gemini-embedding-001",
        "vertex": {"project": "p", "location": "us-central1"},
    }
    return {
        "targets": {"v": {**target, "dimensions": dimensions}},
        "routes": {"search": {"primary": ["v"]}},
    }


def test_dimensions_reach_the_target() -> None:
    cfg = config_from_dict(_file(768))
    assert cfg.targets["v"].dimensions == 768
    assert cfg.targets["v"].base_url == "https://us-central1-aiplatform.googleapis.com"


def test_a_bad_size_names_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(_file(0))
    assert info.value.field == "targets.v.dimensions"
