"""A named field (an N-D float array plus where it came from) and input validation.

Every loader and generator ends in :func:`validate_array`, so a codec only ever sees
a non-empty, 1-to-4-D, float32/float64, native-byte-order, C-contiguous array, and
(unless the caller allows it) finite values. Every refusal is an
:class:`~perfscout.errors.InputError` whose message says what was found and what
was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfscout.errors import InputError
# the one shape parser lives in state (graph and tools read shapes too); re-exported here
from perfscout.state.shapes import MAX_DIMS, parse_shape, shape_str  # noqa: F401

#: Accepted spellings of the two supported dtypes.
_DTYPE_ALIASES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "float32": np.dtype(np.float32),
    "float": np.dtype(np.float32),
    "single": np.dtype(np.float32),
    "f4": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "float64": np.dtype(np.float64),
    "double": np.dtype(np.float64),
    "f8": np.dtype(np.float64),
}

_ENDIAN_ALIASES = {
    "<": "<", "little": "<",
    ">": ">", "big": ">",
    "=": "=", "native": "=",
}


def parse_dtype(dtype: Any) -> np.dtype:
    """``np.dtype`` (native order) for "f32"/"f64"/"float32"/"float64" or a float dtype."""
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        if key in _DTYPE_ALIASES:
            return _DTYPE_ALIASES[key]
        raise InputError(f"unknown dtype {dtype!r}: use f32 or f64 (float32 / float64)")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise InputError(f"unknown dtype {dtype!r}: use f32 or f64 (float32 / float64)") from exc
    if dt.kind != "f" or dt.itemsize not in (4, 8):
        raise InputError(f"unsupported dtype {dt}: perfscout handles float32 or float64 fields")
    return dt.newbyteorder("=")


def dtype_tag(dtype: Any) -> str:
    """"f32" or "f64": the short form used in records and on the command line."""
    return "f32" if parse_dtype(dtype).itemsize == 4 else "f64"


def parse_endian(endian: str) -> str:
    """"<", ">" or "=" for the accepted spellings (little/big/native)."""
    key = str(endian).strip().lower()
    if key not in _ENDIAN_ALIASES:
        raise InputError(f"unknown byte order {endian!r}: use '<' (little), '>' (big) or '=' (native)")
    return _ENDIAN_ALIASES[key]


def _describe_nonfinite(a: np.ndarray) -> str:
    nan = int(np.count_nonzero(np.isnan(a)))
    pinf = int(np.count_nonzero(np.isposinf(a)))
    ninf = int(np.count_nonzero(np.isneginf(a)))
    first = np.unravel_index(int(np.argmax(~np.isfinite(a).reshape(-1))), a.shape)
    return (
        f"{nan} NaN, {pinf} +Inf, {ninf} -Inf of {a.size} values "
        f"(first at index {tuple(int(i) for i in first)})"
    )


def validate_array(a: Any, *, allow_nonfinite: bool = False, what: str = "array") -> np.ndarray:
    """Check ``a`` is a usable field and return it native-endian and C-contiguous.

    Refuses (InputError): a dtype other than float32/float64, an empty array, a 0-d
    scalar, more than 4 axes, and NaN/Inf unless ``allow_nonfinite``. Masked entries
    of a masked array count as NaN.
    """
    if isinstance(a, np.ma.MaskedArray):
        a = a.astype(np.float64).filled(np.nan) if a.dtype.kind != "f" else a.filled(np.nan)
    arr = np.asarray(a)
    if arr.dtype.kind != "f" or arr.dtype.itemsize not in (4, 8):
        raise InputError(
            f"{what} has dtype {arr.dtype}; perfscout handles float32 or float64 fields "
            "(convert with .astype(np.float32) first)"
        )
    if arr.ndim == 0:
        raise InputError(f"{what} is a 0-d scalar; a field needs 1 to {MAX_DIMS} axes")
    if arr.size == 0:
        raise InputError(f"{what} is empty (shape {arr.shape})")
    if arr.ndim > MAX_DIMS:
        raise InputError(f"{what} has {arr.ndim} axes (shape {arr.shape}); at most {MAX_DIMS}")
    if not allow_nonfinite and not np.isfinite(arr).all():
        raise InputError(
            f"{what} holds non-finite values: {_describe_nonfinite(arr)}; "
            "clean them or allow non-finite input explicitly"
        )
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr)


@dataclass
class Field:
    """A named N-D field ready for a codec.

    ``source`` says where the values came from (a file path with the variable, or a
    synthetic spec with its seed) so a result can be traced back and reproduced;
    ``path`` is the file itself when there is one (e.g. to hash it for provenance).
    ``notes`` are sentences saying what loading did to the stored values (unpacking,
    a dtype change, masked points), for the result's notes and the report.
    """

    name: str
    array: np.ndarray
    source: str = ""
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.array.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def dtype_tag(self) -> str:
        """"f32" or "f64"."""
        return dtype_tag(self.array.dtype)

    @property
    def shape_str(self) -> str:
        """"Z,Y,X" as in the result record."""
        return shape_str(self.array.shape)

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    @property
    def size(self) -> int:
        return int(math.prod(self.array.shape))

    def __repr__(self) -> str:  # the array itself would flood logs
        return f"Field(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, source={self.source!r})"
