"""Loaders for the file formats scientific fields come in: raw binary, .npy, HDF5, netCDF.

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


def _existing_file(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"data file not found: {p}")
    if not p.is_file():
        raise InputError(f"not a regular file: {p}")
    return p


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
        raise InputError(
            f"{p}: expected {expected} bytes for shape {dims} of {dt.name} "
            f"({n} values x {dt.itemsize} bytes) but the file has {actual} bytes{hint}"
        )
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


def load_hdf5(
    path: str | Path, dataset: str, *, allow_nonfinite: bool = False, name: str | None = None
) -> Field:
    """One dataset (e.g. "/group/temperature") of an HDF5 file, read whole."""
    import h5py

    p = _existing_file(path)
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise InputError(f"{p}: not a readable HDF5 file ({exc})") from exc
    with f:
        obj = f.get(dataset)
        if not isinstance(obj, h5py.Dataset):
            found: list[str] = []
            f.visititems(lambda n, o: found.append(n) if isinstance(o, h5py.Dataset) else None)
            raise InputError(
                f"{p}: no dataset {dataset!r}; datasets in the file: {', '.join(found) or 'none'}"
            )
        raw = obj[()]
    arr = validate_array(raw, allow_nonfinite=allow_nonfinite, what=f"{p}:{dataset}")
    return Field(
        name=name or dataset.strip("/").replace("/", "."),
        array=arr,
        source=f"hdf5:{p}:{dataset}",
        path=str(p),
    )


def _unpacked_dtype(*attrs: Any) -> np.dtype:
    """CF rule: unpacked data takes the type of scale_factor/add_offset (float here)."""
    kinds = [np.asarray(a).dtype for a in attrs if a is not None]
    if any(k == np.float64 for k in kinds):
        return np.dtype(np.float64)
    if kinds and all(k == np.float32 for k in kinds):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def load_netcdf(
    path: str | Path, variable: str, *, allow_nonfinite: bool = False, name: str | None = None
) -> Field:
    """One variable of a netCDF-3 or netCDF-4 file, unpacked explicitly.

    netCDF4-python by default masks (returns a masked array) and unpacks on read; we
    turn both off and do them here so the behaviour is visible and fixed:

    - elements equal to ``_FillValue`` or ``missing_value`` (compared in the packed
      type) become NaN, so they are refused like any non-finite value unless
      ``allow_nonfinite``. Not applied: ``valid_min``/``valid_max``/``valid_range``, and
      netCDF's *default* fill value for a variable without ``_FillValue`` (unwritten
      elements then come back as stored, e.g. 9.97e36 for floats);
    - with ``scale_factor`` and/or ``add_offset``, values are unpacked as
      ``packed * scale_factor + add_offset`` in float64 and stored in the attributes'
      type (CF: float32 attributes give a float32 field); without them the stored
      floats are returned as they are.
    """
    import netCDF4

    p = _existing_file(path)
    try:
        ds = netCDF4.Dataset(p, "r")
    except OSError as exc:
        raise InputError(f"{p}: not a readable netCDF file ({exc})") from exc
    with ds:
        if variable not in ds.variables:
            raise InputError(
                f"{p}: no variable {variable!r}; variables: {', '.join(ds.variables) or 'none'}"
            )
        var = ds.variables[variable]
        var.set_auto_maskandscale(False)
        packed = np.asarray(var[...])
        attrs = {k: var.getncattr(k) for k in var.ncattrs()}
    fill_values = [attrs[k] for k in ("_FillValue", "missing_value") if k in attrs]
    missing = np.zeros(packed.shape, dtype=bool)
    for fv in fill_values:
        for value in np.ravel(fv):  # missing_value may list several values
            missing |= packed == np.asarray(value).astype(packed.dtype)
    scale = attrs.get("scale_factor")
    offset = attrs.get("add_offset")
    if scale is not None or offset is not None:
        out_dtype = _unpacked_dtype(scale, offset)
        values = packed.astype(np.float64)
        if scale is not None:
            values = values * float(scale)
        if offset is not None:
            values = values + float(offset)
        values = values.astype(out_dtype)
    elif packed.dtype.kind == "f":
        values = packed.copy() if missing.any() else packed
    else:
        raise InputError(
            f"{p}:{variable} holds {packed.dtype} values without scale_factor/add_offset; "
            "perfscout handles float32 or float64 fields"
        )
    if missing.any():
        values = np.where(missing, np.nan, values).astype(values.dtype)
    arr = validate_array(values, allow_nonfinite=allow_nonfinite, what=f"{p}:{variable}")
    return Field(
        name=name or variable,
        array=arr,
        source=f"netcdf:{p}:{variable}",
        meta={"units": str(attrs.get("units", "")), "packed_dtype": str(packed.dtype)},
        path=str(p),
    )
