"""Loading routes and targets from YAML, with clear errors."""

from ._load import Config, UpstreamSettings, config_from_dict, load_config, read_yaml

__all__ = ["Config", "UpstreamSettings", "config_from_dict", "load_config", "read_yaml"]
