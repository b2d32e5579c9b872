"""The bottom layer of perfscout's file handling: every layer writes, reads and parses files
through these names, and ``tests/unit/test_io_only.py`` fails on a copy written elsewhere.

- :mod:`.atomic`: files written whole or not at all (:func:`write_atomic`,
  :func:`write_json_atomic`, :func:`atomic_path` for writers that take a path, :func:`write_new` for
  a file made once and never overwritten, like a key), and finished
  files renamed onto their final names (:func:`move_into_place`);
- :mod:`.input_files`: what a file a user named must be before it is read (a regular file
  within a size limit: :func:`read_input_text`, :func:`read_input_bytes`,
  :func:`check_input_file`), what an output folder must be (:func:`check_output_dir`), and
  how much memory this process may still take (:func:`available_bytes`);
- :mod:`.yaml_safe`: YAML with size, depth and alias limits (:func:`load_yaml_file`,
  :func:`load_yaml`, :func:`compose_yaml`), and the package's own YAML files
  (:func:`load_package_yaml`).

It imports nothing of perfscout but :mod:`perfscout.errors` (``tests/unit/test_layering.py``).
Names load lazily: a process that only writes a report does not import PyYAML (25 ms).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "write_atomic": ".atomic", "write_json_atomic": ".atomic", "atomic_path": ".atomic", "move_into_place": ".atomic",
    "write_new": ".atomic",
    "read_input_text": ".input_files", "read_input_bytes": ".input_files", "check_input_file": ".input_files",
    "check_output_dir": ".input_files", "output_dir_entries": ".input_files", "available_bytes": ".input_files",
    "SMALL_DOCUMENT_BYTES": ".input_files", "PARSE_BYTES_PER_BYTE": ".input_files",
    "load_yaml": ".yaml_safe", "load_yaml_file": ".yaml_safe", "load_package_yaml": ".yaml_safe",
    "compose_yaml": ".yaml_safe", "construct_yaml": ".yaml_safe", "YAMLLimitError": ".yaml_safe",
    "YAMLLimits": ".yaml_safe", "DEFAULT_LIMITS": ".yaml_safe",
}

#: The same names, spelled out for linters and ``from perfscout.io import *``
#: (``tests/unit/test_io_only.py`` checks the two agree).
__all__ = ["DEFAULT_LIMITS", "PARSE_BYTES_PER_BYTE", "SMALL_DOCUMENT_BYTES", "YAMLLimitError", "YAMLLimits",
           "atomic_path", "available_bytes", "check_input_file", "check_output_dir", "compose_yaml",
           "construct_yaml", "load_package_yaml", "load_yaml", "load_yaml_file", "move_into_place", "output_dir_entries",
           "read_input_bytes", "read_input_text", "write_atomic", "write_json_atomic", "write_new"]

if TYPE_CHECKING:  # what a type checker and an editor see; at run time __getattr__ loads them
    from perfscout.io.atomic import atomic_path, move_into_place, write_atomic, write_json_atomic, write_new
    from perfscout.io.input_files import (PARSE_BYTES_PER_BYTE, SMALL_DOCUMENT_BYTES, available_bytes,
                                          check_input_file, check_output_dir, output_dir_entries,
                                          read_input_bytes, read_input_text)
    from perfscout.io.yaml_safe import (DEFAULT_LIMITS, YAMLLimitError, YAMLLimits, compose_yaml, construct_yaml,
                                        load_package_yaml, load_yaml, load_yaml_file)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value  # looked up once
    return value
