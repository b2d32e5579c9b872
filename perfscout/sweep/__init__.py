"""The sweep engine: a YAML spec expanded into tasks, run in contained processes, stored one
result at a time in SQLite (see :mod:`.spec`, :mod:`.runner`, :mod:`.api`).

It sits above ``perfscout.tools`` (its tasks call ``tools.evaluate``, its run directory holds
``tools.snapshot``'s platform record) and below ``perfscout.graph`` and the CLI. The results
store it writes is :mod:`perfscout.tools.results_store`, one layer down, because tools read
stored results too (export, regress).

Names are loaded lazily so that a task process imports only what it needs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run_sweep": ".runner", "SweepInterrupted": ".runner", "SweepOutcome": ".outcome",
    "SpecError": ".spec", "SweepSpec": ".spec", "SweepTask": ".spec", "expand": ".spec", "load_spec": ".spec",
    "STORE_NAME": "perfscout.tools.results_store", "ResultStore": "perfscout.tools.results_store",
    "open_results": "perfscout.tools.results_store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
