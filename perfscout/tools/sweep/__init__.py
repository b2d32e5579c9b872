"""Evaluation campaigns: a YAML spec expanded into tasks, run in child processes, stored
one result at a time in SQLite (see :mod:`.spec`, :mod:`.runner`, :mod:`.store`).

Names are loaded lazily so that the per-task worker process imports only what it needs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run_sweep": "runner", "SweepInterrupted": "runner", "SweepOutcome": "runner",
    "SpecError": "spec", "SweepSpec": "spec", "Task": "spec", "expand": "spec", "load_spec": "spec",
    "STORE_NAME": "store", "ResultStore": "store", "open_results": "store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
