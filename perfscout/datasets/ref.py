"""What a dataset argument names (:class:`DataRef`) and the one way to read it (:func:`open`).

The CLI (``perfscout eval``), sweeps and the agent all name their data with a ``DataRef``
and read it with :func:`open`, so one file gives one field whichever door it came in by:
a ``.npy`` file is read by its header everywhere (never asked for a shape, never sized as
raw), a raw file needs its shape and dtype everywhere, a netCDF/HDF5/Zarr variable is
CF-decoded with the same missing-value policy everywhere. :func:`describe` sizes a
reference (shape, dtype, bytes) from metadata without reading the values where the
format allows it (headers, file size, registry entries, generator arguments).

Non-finite values of raw and ``.npy`` files are let through here: the evaluation's
``nonfinite`` policy decides about them, with a message that names the way out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from perfscout.datasets.field import Field, dtype_tag, parse_dtype, parse_endian, parse_shape
from perfscout.errors import InputError

Source = Literal["name", "synthetic", "raw", "npy", "variable"]
#: Masked points of a file variable (fill / missing / out of range): refused (counted), as
#: NaN kept aside losslessly ("nan"), or filled with a number.
Masked = Literal["refuse", "nan"] | float

#: Suffixes that make a dataset argument a file even without a "/" in it.
FILE_SUFFIXES = (".raw", ".bin", ".dat", ".f32", ".f64", ".npy", ".nc", ".nc4", ".h5", ".hdf5", ".zarr")


class DataRef(BaseModel):
    """A dataset by what names it; nothing is read until :func:`open`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Source
    name: str | None = None  # source "name": a registry name
    path: str | None = None  # "raw" | "npy" | "variable": the file (a Zarr store may be a folder)
    var: str | None = None  # "variable": the variable ("z", "/group/temp")
    synthetic: str | None = None  # "synthetic": the generator kind ("grf")
    seed: int = 0  # "synthetic"
    shape: tuple[int, ...] | None = None  # "raw" (required), "synthetic"; else from the file
    dtype: Literal["f32", "f64"] | None = None  # "raw" (required), "synthetic"; "variable": a cast
    endian: Literal["<", ">", "="] = "<"  # "raw"
    masked: Masked = "refuse"  # "variable"

    def missing(self) -> list[str]:
        """The inputs this reference still needs before it can be opened ("shape", "dtype")."""
        if self.source != "raw":
            return []
        return [k for k in ("shape", "dtype") if getattr(self, k) is None]


class DataInfo(BaseModel):
    """What :func:`describe` says about a reference without loading it."""

    label: str  # the display name (file name, "file.nc:z", "grf:64x64", registry name)
    shape: tuple[int, ...]
    dtype: Literal["f32", "f64"]
    nbytes: int


def masked_policy(fill_masked: float | None, nonfinite: str) -> Masked:
    """A variable's masked points: filled when a fill value is given, else kept aside as NaN
    under ``nonfinite="passthrough"``, else refused (counted by cause)."""
    if fill_masked is not None:
        return float(fill_masked)
    return "nan" if nonfinite == "passthrough" else "refuse"


def _dtype_tag(dtype: object) -> Literal["f32", "f64"] | None:
    return None if dtype is None else ("f32" if parse_dtype(dtype).itemsize == 4 else "f64")


def synthetic_ref(spec: str) -> DataRef:
    """``KIND:SHAPE[:DTYPE][:seed=N]`` (e.g. ``grf:64,64:f64``) as a reference."""
    from perfscout.datasets.synthetic import split_synthetic

    kind, shape, dtype, seed = split_synthetic(spec)
    return DataRef(source="synthetic", synthetic=kind, shape=parse_shape(shape), dtype=_dtype_tag(dtype),
                   seed=seed)


def file_ref(path: str | Path, *, shape: object = None, dtype: object = None, endian: str | None = None,
             var: str | None = None, masked: Masked = "refuse") -> DataRef:
    """A file, its format read from its bytes: a netCDF/HDF5/Zarr variable (``var``), a
    ``.npy`` array (shape and dtype from its header), else raw values (``shape``/``dtype``)."""
    from perfscout.datasets.loaders import is_npy
    from perfscout.datasets.stores import file_kind

    p = Path(path).expanduser()
    structured = p.exists() and file_kind(p) in ("netcdf", "hdf5", "zarr")
    if var is not None or structured:
        if shape is not None:
            raise InputError("--shape is for raw files: a netCDF, HDF5 or Zarr variable has its own shape")
        return DataRef(source="variable", path=str(p), var=var, dtype=_dtype_tag(dtype), masked=masked)
    if not isinstance(masked, str):  # "nan" is harmless on a raw file (the nonfinite policy's say)
        raise InputError("--fill-masked applies to a netCDF, HDF5 or Zarr variable (--var)")
    if p.is_file() and is_npy(p):
        return DataRef(source="npy", path=str(p))
    return DataRef(source="raw", path=str(p), shape=None if shape is None else parse_shape(shape),
                   dtype=_dtype_tag(dtype), endian=parse_endian(endian or "<"))  # type: ignore[arg-type]


def looks_like_file(text: str) -> bool:
    """A dataset argument that names a file rather than a registry entry."""
    return "/" in text or text.startswith((".", "~")) or text.endswith(FILE_SUFFIXES)


def parse_ref(text: str, *, shape: object = None, dtype: object = None, endian: str | None = None,
              var: str | None = None, masked: Masked = "refuse") -> DataRef:
    """A dataset argument as the agent and the CLI take it: ``synthetic:KIND:SHAPE``, a file
    (a path, or a name with a data file's suffix; with ``var`` always a file), else a registry name."""
    if text.startswith("synthetic:"):
        return synthetic_ref(text.split(":", 1)[1])
    if var is not None or looks_like_file(text):
        return file_ref(text, shape=shape, dtype=dtype, endian=endian, var=var, masked=masked)
    return DataRef(source="name", name=text)


def _variable_listing(p: Path) -> str:
    from perfscout.datasets.files import describe_file
    from perfscout.datasets.stores import file_kind

    listing = ", ".join(f"{i.name} ({'x'.join(map(str, i.shape))} {i.dtype_on_disk})"
                        for i in describe_file(p) if i.dtype_unpacked or i.loadable)
    return f"{p} is a {file_kind(p)} file: name the variable with --var (variables: {listing or 'none loadable'}); in a spec or a tool call, var:"


def _check_complete(ref: DataRef) -> Path | None:
    if ref.missing():
        raise InputError(f"raw file {ref.path} needs its " + " and ".join(ref.missing())
                         + " (C order, slowest axis first; f32 or f64)")
    if ref.path is None:
        return None
    p = Path(ref.path).expanduser()
    if not p.exists():
        raise InputError(f"data file not found: {p}")
    if ref.source == "variable" and ref.var is None:
        raise InputError(_variable_listing(p))
    return p


def _registry_entry(name: str) -> dict | None:
    from perfscout.datasets.registry import load_registry

    reg = load_registry()
    return next((e for kind in ("shared", "remote", "synthetic") for e in reg[kind] if e["name"] == name), None)


def describe(ref: DataRef) -> DataInfo:
    """Label, shape, dtype and size of ``ref`` from metadata: a raw file's size is checked
    against its shape, a ``.npy`` header or a variable's metadata is read, a registry
    entry's declared shape is used; only a name the registry does not hold is loaded."""
    p = _check_complete(ref)
    if ref.source == "synthetic":
        shape, dtype = tuple(ref.shape or ()), ref.dtype or "f32"
        label = f"{ref.synthetic}:{'x'.join(map(str, shape))}" + (f"#{ref.seed}" if ref.seed else "")
    elif ref.source == "raw":
        from perfscout.datasets.loaders import check_raw_size

        assert p is not None and ref.shape is not None and ref.dtype is not None
        if not p.is_file():
            raise InputError(f"not a regular file: {p}")
        check_raw_size(p, ref.shape, parse_dtype(ref.dtype))
        shape, dtype, label = ref.shape, ref.dtype, p.name
    elif ref.source == "npy":
        from perfscout.datasets.loaders import npy_header

        assert p is not None
        shape, np_dtype = npy_header(p)
        if np_dtype.kind != "f" or np_dtype.itemsize not in (4, 8):
            raise InputError(f"{p} has dtype {np_dtype}; perfscout handles float32 or float64 fields")
        dtype, label = dtype_tag(np_dtype), p.name
    elif ref.source == "variable":
        from perfscout.datasets.files import describe_variable, field_dtype

        assert p is not None and ref.var is not None
        info = describe_variable(p, ref.var)
        if not info.loadable and not (ref.dtype and info.needs_dtype):
            raise InputError(f"{p}:{ref.var}: {info.reason}")
        shape, dtype, label = tuple(info.field_shape), field_dtype(info, ref.dtype), f"{p.name}:{info.name}"
    else:
        entry = _registry_entry(ref.name or "")
        if entry is None:  # a synthetic spec given as a name, or unknown (open says which)
            field = open(ref)
            shape, dtype = field.shape, field.dtype_tag
        else:
            shape, dtype = parse_shape(entry["shape"]), _dtype_tag(entry["dtype"]) or "f32"
        label = ref.name or ""
    nbytes = math.prod(shape) * (4 if dtype == "f32" else 8)
    return DataInfo(label=label, shape=tuple(shape), dtype=dtype, nbytes=nbytes)  # type: ignore[arg-type]


def open(ref: DataRef) -> Field:  # noqa: A001 - datasets.open, as the issue names it
    """The field ``ref`` names, validated (see :func:`~perfscout.datasets.field.validate_array`),
    or an :class:`~perfscout.errors.InputError` that says what is wrong or missing."""
    from perfscout.datasets import files, loaders, registry
    from perfscout.datasets.synthetic import synthetic

    p = _check_complete(ref)
    if ref.source == "synthetic":
        return synthetic(ref.synthetic or "", ref.shape or (), ref.dtype or "f32", ref.seed)
    if ref.source == "raw":
        assert p is not None and ref.shape is not None
        return loaders.load_raw(p, ref.shape, ref.dtype, ref.endian, allow_nonfinite=True)
    if ref.source == "npy":
        return loaders.load_npy(p, allow_nonfinite=True)  # type: ignore[arg-type]
    if ref.source == "variable":
        return files.load_variable(p, ref.var or "", dtype=ref.dtype, masked=ref.masked)  # type: ignore[arg-type]
    return registry.get_dataset(ref.name or "")


__all__ = ["DataInfo", "DataRef", "FILE_SUFFIXES", "Masked", "describe", "file_ref", "looks_like_file",
           "masked_policy", "open", "parse_ref", "synthetic_ref"]
