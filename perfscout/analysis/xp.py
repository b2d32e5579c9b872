"""Array-namespace helper: the same analysis code runs on NumPy and CuPy arrays.

We return the *full* library module (``numpy`` or ``cupy``), not a strict array-API
wrapper: the metrics need ``quantile``, ``histogram``, ``cumsum`` and ``unravel``-style
helpers that CuPy mirrors from NumPy but the array-API standard does not all define.
CuPy is never imported here unless an input already is a CuPy array, so the core
install (no CUDA) pays nothing.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy

try:  # optional: the standard detector when the user has it installed
    from array_api_compat import is_cupy_array as _is_cupy_array
except ImportError:  # pragma: no cover - depends on the environment

    def _is_cupy_array(x: Any) -> bool:
        return type(x).__module__.split(".", 1)[0] == "cupy"


def get_namespace(*arrays: Any) -> ModuleType:
    """``cupy`` if any input is a CuPy array, else ``numpy``."""
    for a in arrays:
        if _is_cupy_array(a):
            import cupy  # already imported by whoever made the array

            return cupy
    return numpy


def to_float(value: Any) -> float:
    """A Python float from a NumPy/CuPy scalar or 0-d array (syncs the device)."""
    return float(value)


def to_host(a: Any) -> numpy.ndarray:
    """A NumPy copy of ``a`` (no copy when it already is NumPy)."""
    if _is_cupy_array(a):
        return a.get()
    return numpy.asarray(a)
