"""The limited YAML loader now lives one layer down, in :mod:`perfscout.tools.safe_yaml`
(bench and tune specs are read with it too); this name stays for existing importers."""

from perfscout.tools.safe_yaml import DEFAULT_LIMITS, YAMLLimitError, YAMLLimits, compose_yaml, construct_yaml, load_yaml

__all__ = ["DEFAULT_LIMITS", "YAMLLimitError", "YAMLLimits", "compose_yaml", "construct_yaml", "load_yaml"]
