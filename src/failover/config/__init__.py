"""Loading routes and targets from YAML, with clear errors."""

from ._load import Config, config_from_dict, load_config, read_yaml

__all__ = ["Config", "config_from_dict", "load_config", "read_yaml"]
