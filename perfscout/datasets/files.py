"""Variables of netCDF, HDF5 and Zarr files as fields: list them, describe them, load one.

- :func:`file_kind` (from :mod:`perfscout.datasets.stores`): the format from the bytes;
- :func:`describe_file`: every variable with its shape, stored and unpacked dtype, CF
  packing and masks, units and names, and whether it loads as it is (and why not);
- :func:`load_variable`: one variable as a :class:`~perfscout.datasets.field.Field`,
  CF-decoded (:mod:`perfscout.datasets.cf`), in the dtype asked for, with length-1 axes
  (a time axis of one step) dropped, and ``notes`` saying what decoding did.

Every refusal is an :class:`~perfscout.errors.InputError` naming the file and variable.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field as PydanticField

from perfscout.datasets.cf import MaskPolicy, check_mask_policy, decode, plan_cf
from perfscout.datasets.field import MAX_DIMS, Field, parse_dtype, shape_str, validate_array
from perfscout.datasets.stores import (
    StoredVariable,
    file_kind,
    list_stored,
    plain_value,
    read_stored,
    resolve_name,
    structured_kind,
)
from perfscout.errors import InputError

#: Attributes copied into VariableInfo.attrs: skip the format's bookkeeping.
_HIDDEN_ATTRS = re.compile(r"^(_Netcdf4|_nc3|CLASS$|NAME$|_ARRAY_DIMENSIONS$|_NCProperties$)")


class VariableInfo(BaseModel):
    """One variable of a file as ``describe_file`` lists it (JSON-friendly)."""

    name: str  # the path inside the file: "z", "group/temp"
    shape: list[int]  # as stored
    dims: list[str] = PydanticField(default_factory=list)  # axis names, where the file has them
    field_shape: list[int] = PydanticField(default_factory=list)  # after dropping length-1 axes
    dtype_on_disk: str  # "int16", "float32", or what a non-numeric variable is
    byte_order: str  # "little" | "big" | "n/a" (one-byte types)
    dtype_unpacked: str | None = None  # "float32" | "float64" per CF; None: CF gives no float type
    dtype_reason: str = ""  # why that type ("the type of scale_factor", "the stored type")
    packed: bool = False  # scale_factor / add_offset present
    scale_factor: float | None = None
    add_offset: float | None = None
    masked_by: list[str] = PydanticField(default_factory=list)  # "_FillValue=-32767", "valid range"
    units: str = ""
    long_name: str = ""
    standard_name: str = ""
    attrs: dict[str, Any] = PydanticField(default_factory=dict)
    is_coordinate: bool = False  # a coordinate variable (lat, lon, time: named like its one axis)
    loadable: bool = True  # loads with the defaults (CF dtype, masked points aside)
    reason: str = ""  # why not, and what to pass instead
    notes: list[str] = PydanticField(default_factory=list)

    @property
    def needs_dtype(self) -> bool:
        """Not loadable as it is only because CF gives it no float type (plain integers):
        it loads once a dtype (f32/f64) is asked for."""
        return not self.loadable and bool(self.dtype_reason) and self.dtype_unpacked is None

    @property
    def nbytes(self) -> int:
        """Size of the field once loaded in the CF dtype (0 when there is none)."""
        if not self.dtype_unpacked:
            return 0
        return math.prod(self.field_shape or self.shape) * np.dtype(self.dtype_unpacked).itemsize

    def matches(self, word: str) -> bool:
        """True when ``word`` names this variable: its path, its last part, its
        standard_name, or its long_name (case and surrounding punctuation ignored)."""
        key = word.strip().strip("/").strip("'\"`").lower()
        if not key:
            return False
        candidates = {self.name.lower(), self.name.rsplit("/", 1)[-1].lower(), self.standard_name.lower(),
                      self.long_name.lower()}
        return key in candidates


def _drop_unit_axes(shape: tuple[int, ...], dims: tuple[str, ...]) -> tuple[tuple[int, ...], list[str]]:
    """Shape without length-1 axes (one axis kept at least), and the names of those dropped."""
    if len(shape) <= 1 or 1 not in shape:
        return shape, []
    kept = tuple(d for d in shape if d != 1) or (1,)
    dropped = [(dims[i] if i < len(dims) and dims[i] else f"axis {i}") for i, d in enumerate(shape) if d == 1]
    if kept == (1,):
        dropped = dropped[:-1]
    return kept, dropped


def _structure_problem(info: StoredVariable, what: str) -> str:
    if info.dtype is None:
        return f"{what} is {info.dtype_text}, not real numbers; perfscout compresses integer or float arrays"
    if len(info.shape) == 0:
        return f"{what} is a scalar (0-d); a field needs 1 to {MAX_DIMS} axes"
    if math.prod(info.shape) == 0:
        return f"{what} is empty (shape {info.shape})"
    kept, _ = _drop_unit_axes(info.shape, info.dims)
    if len(kept) > MAX_DIMS:
        return (f"{what} has {len(kept)} axes of length > 1 (shape {info.shape}); perfscout's codecs take "
                f"1 to {MAX_DIMS}: extract a slice first")
    return ""


def _text_attr(attrs: dict[str, Any], key: str) -> str:
    value = plain_value(attrs.get(key, ""))
    return value if isinstance(value, str) else str(value)


def _info(info: StoredVariable, what: str) -> VariableInfo:
    kept, _ = _drop_unit_axes(info.shape, info.dims)
    out = VariableInfo(
        name=info.name, shape=list(info.shape), dims=list(info.dims), field_shape=list(kept),
        dtype_on_disk=str(info.dtype.newbyteorder("=")) if info.dtype is not None else info.dtype_text,
        byte_order=info.byte_order, units=_text_attr(info.attrs, "units"),
        long_name=_text_attr(info.attrs, "long_name"), standard_name=_text_attr(info.attrs, "standard_name"),
        attrs={k: plain_value(v) for k, v in info.attrs.items() if not _HIDDEN_ATTRS.match(k)},
        is_coordinate=info.is_coordinate,
    )
    problem = _structure_problem(info, what)
    if problem:
        out.loadable, out.reason = False, problem
        return out
    assert info.dtype is not None
    try:
        plan = plan_cf(info.dtype, info.attrs, implied_fill=info.implied_fill, what=what)
    except InputError as exc:  # a bad attribute: list the variable, say why it cannot load
        out.loadable, out.reason = False, str(exc)
        return out
    out.packed, out.scale_factor, out.add_offset = plan.packed, plan.scale_factor, plan.add_offset
    out.masked_by, out.notes = plan.mask_attrs, list(plan.notes)
    out.dtype_unpacked = str(plan.cf_dtype) if plan.cf_dtype is not None else None
    out.dtype_reason = plan.cf_dtype_reason
    if plan.cf_dtype is None:
        out.loadable = False
        out.reason = f"{plan.cf_dtype_reason}: load it with dtype f32 or f64 (CLI: --dtype)"
    return out


def describe_file(path: str | Path) -> list[VariableInfo]:
    """Every variable of a netCDF, HDF5 or Zarr file (metadata only; no data is read).

    Raises InputError for a missing path, a file of another kind (raw binary, .npy, an
    empty file) and a file its format's library cannot read (forged, truncated).
    """
    p = Path(path).expanduser()
    _, stored = list_stored(p)
    return [_info(v, f"{p}:{v.name}") for v in stored]


def describe_variable(path: str | Path, var: str) -> VariableInfo:
    """One variable's :class:`VariableInfo` (``var`` resolved as :func:`load_variable` does)."""
    p = Path(path).expanduser()
    infos = describe_file(p)
    name = resolve_name([i.name for i in infos], var, p)
    return next(i for i in infos if i.name == name)


def load_variable(
    path: str | Path,
    var: str,
    *,
    dtype: Any = None,
    masked: MaskPolicy = "refuse",
    squeeze: bool = True,
) -> Field:
    """One variable of a netCDF, HDF5 or Zarr file as a CF-decoded field.

    ``var``: its path in the file ("z", "/group/temp"; a unique last part is enough).
    ``dtype``: "f32"/"f64" to get that type; None takes CF's unpacked type (the type of
    scale_factor/add_offset, else the stored float type); integers without packing need
    a dtype. ``masked``: what to do with fill / missing / out-of-valid-range points:
    "refuse" (raise :class:`~perfscout.datasets.cf.MaskedValuesError`, which counts
    them), "nan" (NaN there, for ``nonfinite="passthrough"``), or a number to fill them
    with. ``squeeze``: drop length-1 axes. Other NaN/Inf in the data are let through for
    the evaluation's non-finite policy. ``Field.notes`` say what decoding did;
    ``Field.meta`` holds it as data (``dtype_on_disk``, ``dtype_unpacked``, ``dtype``,
    ``masked_points``, ``masked_by``, ``squeezed_axes``, ``units``...).
    """
    policy = check_mask_policy(masked)
    if dtype is not None:
        parse_dtype(dtype)  # a bad dtype is refused before any reading
    kind, info, stored = read_stored(path, var)
    p = Path(path).expanduser()
    what = f"{p}:{info.name}"
    problem = _structure_problem(info, what)
    if problem:
        raise InputError(problem)
    assert info.dtype is not None
    plan = plan_cf(info.dtype, info.attrs, implied_fill=info.implied_fill, what=what)
    decoded = decode(stored.reshape(info.shape), plan, dtype=dtype, masked=policy, what=what)
    values, notes = decoded.values, [*info.notes, *decoded.notes]
    dropped: list[str] = []
    if squeeze:
        kept, dropped = _drop_unit_axes(values.shape, info.dims)
        if dropped:
            values = values.reshape(kept)
            notes.append(f"dropped length-1 axis {', '.join(dropped)}: shape {shape_str(info.shape)} -> "
                         f"{shape_str(kept)}")
    if len(values.shape) > MAX_DIMS:
        raise InputError(f"{what} has {values.ndim} axes (shape {values.shape}); at most {MAX_DIMS}")
    if info.byte_order == "big":
        notes.append("stored big-endian; read in native byte order")
    arr = validate_array(values, allow_nonfinite=True, what=what)
    meta: dict[str, Any] = {
        "format": kind, "variable": info.name, "shape_on_disk": list(info.shape), "dims": list(info.dims),
        "dtype_on_disk": str(info.dtype.newbyteorder("=")), "byte_order": info.byte_order,
        "dtype_unpacked": str(plan.cf_dtype) if plan.cf_dtype is not None else None,
        "dtype": str(arr.dtype), "dtype_changed": str(arr.dtype) != str(info.dtype.newbyteorder("=")),
        "packed": plan.packed, "scale_factor": plan.scale_factor, "add_offset": plan.add_offset,
        "masked_points": decoded.masked_points, "masked_by": decoded.masked_by,
        "masked_policy": policy, "squeezed_axes": dropped,
        "units": _text_attr(info.attrs, "units"), "long_name": _text_attr(info.attrs, "long_name"),
        "standard_name": _text_attr(info.attrs, "standard_name"),
    }
    return Field(
        name=f"{p.name}:{info.name}", array=arr, source=f"{kind}:{p}:{info.name}",
        description=meta["long_name"], meta=meta, path=str(p), notes=notes,
    )


def content_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes, or of a Zarr directory's files (relative names and bytes,
    in sorted order): what a result's data identity is hashed from."""
    p = Path(path).expanduser()
    h = hashlib.sha256()
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    for f in files:
        if f is not p:
            h.update(str(f.relative_to(p)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()


def field_dtype(info: VariableInfo, dtype: Any = None) -> str:
    """"f32"/"f64": the dtype :func:`load_variable` gives ``info``'s variable with ``dtype``."""
    if dtype is not None:
        return "f32" if parse_dtype(dtype).itemsize == 4 else "f64"
    if not info.dtype_unpacked:
        raise InputError(info.reason or f"{info.name}: give a dtype (f32 or f64)")
    return "f32" if np.dtype(info.dtype_unpacked).itemsize == 4 else "f64"


__all__ = [
    "VariableInfo",
    "content_digest",
    "describe_file",
    "describe_variable",
    "field_dtype",
    "file_kind",
    "load_variable",
    "structured_kind",
]
