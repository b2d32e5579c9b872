"""Loaders for the file formats scientific fields come in: raw binary, .npy, HDF5, netCDF.

HDF5, netCDF (and Zarr) go through :mod:`perfscout.datasets.files`, which CF-decodes them.

Each returns a validated :class:`~perfscout.datasets.field.Field` (see
:func:`~perfscout.datasets.field.validate_array`) or raises an
:class:`~perfscout.errors.InputError` that names the file and what was wrong.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from perfscout.datasets.field import (
    Field,
    parse_dtype,
    parse_endian,
    parse_shape,
    shape_str,
    validate_array,
)
from perfscout.errors import InputError

#: The first bytes of every NumPy .npy file.
NPY_MAGIC = b"\x93NUMPY"


def _existing_file(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"data file not found: {p}")
    if not p.is_file():
        raise InputError(f"not a regular file: {p}")
    return p


def check_raw_size(p: Path, dims: tuple[int, ...], dt: np.dtype) -> int:
    """The number of values of a raw file of ``dims`` x ``dt``, or InputError when its size
    differs (both byte counts given, and a hint when the size fits the other float width)
    or loading it would not fit the memory available here."""
    n = math.prod(dims)
    expected = n * dt.itemsize
    actual = p.stat().st_size
    if actual != expected:
        hint = ""
        other = np.dtype(np.float64 if dt.itemsize == 4 else np.float32)
        if actual == n * other.itemsize:
            hint = f" (that size fits {other.name}: is the dtype wrong?)"
        elif actual % dt.itemsize == 0:
            hint = f" (the file holds {actual // dt.itemsize} {dt.name} values)"
        if _starts_with(p, NPY_MAGIC):
            hint += " (it is a .npy file: it carries its own shape and dtype)"
        raise InputError(
            f"{p}: expected {expected} bytes for shape {dims} of {dt.name} "
            f"({n} values x {dt.itemsize} bytes) but the file has {actual} bytes{hint}"
        )
    from perfscout.io import available_bytes

    have = available_bytes()
    if 2 * expected > have:  # a sparse file claims any size; the values and their native copy
        raise InputError(f"{p}: {expected / 2**30:.3g} GiB of {dt.name} values (shape {dims}); loading them needs "
                         f"about {2 * expected / 2**30:.3g} GiB and {have / 2**30:.3g} GiB is available here")
    return n


def _starts_with(p: Path, magic: bytes) -> bool:
    with open(p, "rb") as f:
        return f.read(len(magic)) == magic


def is_npy(path: str | Path) -> bool:
    """A NumPy ``.npy`` file: by its magic bytes (whatever its name), or by its suffix (so a
    damaged one is refused as a .npy file, not sized as raw values)."""
    p = Path(path).expanduser()
    try:
        return p.suffix == ".npy" or _starts_with(p, NPY_MAGIC)
    except OSError:
        return False


def npy_header(path: str | Path) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a ``.npy`` file from its header alone (no values read)."""
    p = _existing_file(path)
    try:
        with open(p, "rb") as f:
            major, _ = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(f)
    except (ValueError, OSError) as exc:
        raise InputError(f"{p}: not a readable .npy file ({exc})") from exc
    return tuple(int(s) for s in shape), np.dtype(dtype)


def load_raw(
    path: str | Path,
    shape: str | Iterable[int],
    dtype: Any,
    endian: str = "<",
    *,
    allow_nonfinite: bool = False,
    name: str | None = None,
    description: str = "",
) -> Field:
    """A raw binary file of ``dtype`` values in C order (slowest axis first).

    The file size must equal prod(shape) * itemsize exactly; otherwise the error gives
    both byte counts (and says so when the size would fit the other float width).
    ``endian``: "<" little (SDRBench, x86), ">" big, "=" native. The array is returned
    in native byte order.
    """
    p = _existing_file(path)
    dims = parse_shape(shape)
    dt = parse_dtype(dtype)
    order = parse_endian(endian)
    n = check_raw_size(p, dims, dt)
    raw = np.fromfile(p, dtype=dt.newbyteorder(order), count=n).reshape(dims)
    arr = validate_array(raw, allow_nonfinite=allow_nonfinite, what=str(p))
    return Field(
        name=name or p.name,
        array=arr,
        source=f"raw:{p}:{shape_str(dims)}:{dt.name}:{order}",
        description=description,
        path=str(p),
    )


def load_npy(
    path: str | Path, *, allow_nonfinite: bool = False, name: str | None = None
) -> Field:
    """A NumPy ``.npy`` file (pickles refused: a data file must not run code)."""
    p = _existing_file(path)
    try:
        raw = np.load(p, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(f"{p}: not a readable .npy file ({exc})") from exc
    if not isinstance(raw, np.ndarray):  # an .npz archive
        raise InputError(f"{p}: expected a single-array .npy file, got an archive")
    arr = validate_array(raw, allow_nonfinite=allow_nonfinite, what=str(p))
    return Field(name=name or p.stem, array=arr, source=f"npy:{p}", path=str(p))


def _structured(path: str | Path, variable: str, kind: str, allow_nonfinite: bool, name: str | None) -> Field:
    """load_hdf5/load_netcdf: :func:`perfscout.datasets.files.load_variable`, with the
    masked points as NaN when ``allow_nonfinite`` (else refused, counted by cause)."""
    from perfscout.datasets.files import load_variable
    from perfscout.datasets.stores import file_kind

    p = _existing_file(path) if not Path(path).expanduser().is_dir() else Path(path).expanduser()
    found = file_kind(p)
    # A netCDF-4 file is an HDF5 file: either loader reads it (netCDF4-python for both).
    if found != kind and not (kind == "hdf5" and found == "netcdf"):
        label = {"hdf5": "HDF5", "netcdf": "netCDF"}[kind]
        raise InputError(f"{p}: not a readable {label} file (its bytes say {found or 'nothing known'})")
    field = load_variable(p, variable, masked="nan" if allow_nonfinite else "refuse")
    if not allow_nonfinite:
        validate_array(field.array, what=f"{p}:{variable}")  # other NaN/Inf: refused here too
    if name:
        field.name = name
    return field


def load_hdf5(
    path: str | Path, dataset: str, *, allow_nonfinite: bool = False, name: str | None = None
) -> Field:
    """One dataset (e.g. "/group/temperature") of an HDF5 file, read whole and CF-decoded
    (see :mod:`perfscout.datasets.cf`); the name defaults to the path with dots."""
    field = _structured(path, dataset, "hdf5", allow_nonfinite, name)
    if not name:
        field.name = dataset.strip("/").replace("/", ".")
    return field


def load_netcdf(
    path: str | Path, variable: str, *, allow_nonfinite: bool = False, name: str | None = None
) -> Field:
    """One variable of a netCDF-3 or netCDF-4 file, CF-decoded by
    :mod:`perfscout.datasets.cf` (scale_factor/add_offset, _FillValue, missing_value,
    valid_min/valid_max/valid_range). Masked points are refused unless
    ``allow_nonfinite``, which makes them NaN. The name defaults to the variable's."""
    field = _structured(path, variable, "netcdf", allow_nonfinite, name)
    if not name:
        field.name = variable.strip("/")
    return field
