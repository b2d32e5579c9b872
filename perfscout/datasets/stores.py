"""Reading variables out of netCDF, HDF5 and Zarr files, one uniform record per variable.

:func:`file_kind` tells the format from the bytes (magic numbers, store layout), never from
the extension alone. Each reader lists a file's variables as :class:`StoredVariable`
(metadata only) and reads one variable's stored values, *as stored*: no CF decoding
happens here (that is :mod:`perfscout.datasets.cf`), so masks, packing and byte order
are decided in one place. Every failure of a reading library on a bad file becomes an
:class:`~perfscout.errors.InputError` that names the file.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from perfscout.errors import InputError

FileKind = Literal["netcdf", "hdf5", "zarr", "npy", "raw"]

#: The HDF5 superblock signature; it may follow a user block of 512, 1024, 2048... bytes.
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: netCDF-3 classic, 64-bit offset and CDF-5 (64-bit data) headers.
NETCDF3_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
NPY_SIGNATURE = b"\x93NUMPY"
ZIP_SIGNATURE = b"PK\x03\x04"
#: Files whose presence makes a directory (or a zip archive's root) a Zarr store.
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray", ".zmetadata")
#: Attributes netCDF-C writes into the HDF5 files it makes (netCDF-4 = HDF5 + these).
NETCDF4_MARKER_ATTRS = ("_NCProperties", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict")
#: How many HDF5 objects to look at for netCDF-4 markers before calling a file plain HDF5.
NETCDF4_MARKER_SCAN = 64


@dataclass
class StoredVariable:
    """One array in a file, as stored: name, shape, on-disk dtype, axis names, attributes.

    ``dtype`` is None for what is not a numeric array (strings, compound records,
    references); ``dtype_text`` then says what it is. ``byte_order`` is "little",
    "big" or "n/a" (one-byte types). ``implied_fill`` is a fill value the format itself
    declares as "missing" when no ``_FillValue`` attribute exists (netCDF's default
    fill; an xarray-written Zarr v2 array's ``fill_value``), with where it came from.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype | None
    dtype_text: str
    byte_order: str
    dims: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    implied_fill: tuple[Any, str] | None = None
    is_coordinate: bool = False
    notes: list[str] = field(default_factory=list)  # what reading found (e.g. chunks never written)


# -- format detection ----------------------------------------------------------------------
def _hdf5_signature_offset(p: Path) -> int | None:
    size = p.stat().st_size
    with p.open("rb") as f:
        offset = 0
        while offset + len(HDF5_SIGNATURE) <= size:
            f.seek(offset)
            if f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                return offset
            offset = 512 if offset == 0 else offset * 2
    return None


def _is_netcdf4(p: Path) -> bool:
    """An HDF5 file written by netCDF-C (or h5netcdf): the marker attributes it leaves."""
    import h5py

    try:
        with h5py.File(p, "r") as f:
            if any(k in f.attrs for k in NETCDF4_MARKER_ATTRS):
                return True
            seen: list[bool] = []

            def visit(_name: str, obj: Any) -> bool | None:
                seen.append(any(k in obj.attrs for k in NETCDF4_MARKER_ATTRS))
                return True if seen[-1] or len(seen) >= NETCDF4_MARKER_SCAN else None

            f.visititems(visit)
            return any(seen)
    except (OSError, RuntimeError, ValueError, KeyError):
        return False  # unreadable: call it HDF5 and let the reader say what is wrong


def _zip_is_zarr(p: Path) -> bool:
    try:
        with zipfile.ZipFile(p) as z:
            return any(n.rsplit("/", 1)[-1] in ZARR_MARKERS and n.count("/") <= 1 for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def file_kind(path: str | Path) -> FileKind | None:
    """The format of ``path`` from its bytes: netcdf, hdf5, zarr, npy, raw, or None.

    "netcdf": a netCDF-3 header (classic, 64-bit offset, CDF-5) or an HDF5 file carrying
    netCDF-4's marker attributes; "hdf5": any other HDF5 file; "zarr": a directory (or a
    zip archive) holding Zarr v2 or v3 metadata; "npy": a NumPy array file; "raw": any
    other non-empty regular file (headerless binary). None: no such path, an empty file,
    or a directory that is not a Zarr store.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        return "zarr" if any((p / m).is_file() for m in ZARR_MARKERS) else None
    if not p.is_file() or p.stat().st_size == 0:
        return None
    with p.open("rb") as f:
        head = f.read(8)
    if head[:4] in NETCDF3_SIGNATURES:
        return "netcdf"
    if head.startswith(NPY_SIGNATURE):
        return "npy"
    if head.startswith(ZIP_SIGNATURE) and _zip_is_zarr(p):
        return "zarr"
    if _hdf5_signature_offset(p) is not None:
        return "netcdf" if _is_netcdf4(p) else "hdf5"
    return "raw"


# -- shared helpers ---------------------------------------------------------------------------
def _numeric(dtype: Any) -> np.dtype | None:
    """The numpy dtype when it is a plain number (int, uint, float, bool), else None."""
    if not isinstance(dtype, np.dtype) or dtype.fields is not None:
        return None
    return dtype if dtype.kind in "iufb" else None


def _not_numeric_text(dtype: Any) -> str:
    """What a non-numeric variable holds, in words (for listings and refusals)."""
    if dtype is str or (isinstance(dtype, np.dtype) and dtype.kind in "SUO"):
        return "a string variable"
    if isinstance(dtype, np.dtype) and dtype.fields is not None:
        parts = ", ".join(f"{name} {dtype.fields[name][0]}" for name in dtype.names or ())
        return f"a compound type ({parts})"
    if isinstance(dtype, np.dtype) and dtype.kind == "c":
        return f"{dtype} (complex values)"
    return f"of type {getattr(dtype, 'name', dtype)}"


def _order_of(dtype: np.dtype | None) -> str:
    if dtype is None or dtype.itemsize == 1:
        return "n/a"
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and np.little_endian is False):
        return "big"
    return "little"


def plain_value(value: Any) -> Any:
    """An attribute value as JSON-friendly Python (bytes decoded, arrays as lists)."""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SO" or value.dtype.kind == "U":
            return [plain_value(v) for v in value.tolist()]
        return value.item() if value.size == 1 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    return str(value)


def resolve_name(names: list[str], wanted: str, p: Path) -> str:
    """The stored name for what the user typed: exact path, else a unique basename."""
    key = wanted.strip().strip("/")
    if key in names:
        return key
    by_base = [n for n in names if n.rsplit("/", 1)[-1] == key]
    if len(by_base) == 1:
        return by_base[0]
    if len(by_base) > 1:
        raise InputError(f"{p}: {wanted!r} names several variables: {', '.join(by_base)}; give the full path")
    folded = [n for n in names if n.lower() == key.lower() or n.rsplit("/", 1)[-1].lower() == key.lower()]
    hint = f" (did you mean {', '.join(folded)}?)" if folded else ""
    raise InputError(f"{p}: no variable {wanted!r}{hint}; variables: {', '.join(names) or 'none'}")


#: Bytes per element beyond the stored ones that loading surely holds at once (the decoded
#: float32 copy at least): a floor, so only what cannot fit is refused.
LOAD_BYTES_PER_ELEMENT = 4


def _check_fits_memory(p: Path, info: StoredVariable) -> None:
    """InputError before reading a variable this machine cannot hold: a chunked HDF5, Zarr
    or netCDF-4 variable of 4 TiB takes a few KiB on disk (unwritten chunks are the fill
    value), and the libraries would try to allocate all of it."""
    from perfscout.io import available_bytes

    n = math.prod(int(d) for d in info.shape)
    need = n * (LOAD_BYTES_PER_ELEMENT + (info.dtype.itemsize if info.dtype is not None else 8))
    have = available_bytes()
    if need > have:
        raise InputError(f"{p}:{info.name} has shape {tuple(info.shape)} ({n:.3g} values); loading it needs about "
                         f"{need / 2**30:.3g} GiB and {have / 2**30:.3g} GiB is available here (perfscout reads a "
                         "variable whole: slices are not supported)")


def _guard(p: Path, what: str, call: Callable[[], Any]) -> Any:
    """Run a reading library's call; its failure on a bad file becomes an InputError.

    The libraries raise many types for forged or truncated files (OSError, RuntimeError,
    KeyError, ValueError, JSON errors, codec errors), so this is the one place that
    catches broadly; MemoryError is a resource problem, not a bad file, and passes.
    """
    try:
        return call()
    except (InputError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - see the docstring
        raise InputError(f"{p}: not a readable {what} file ({type(exc).__name__}: {exc})") from exc


# -- netCDF (netCDF4-python: netCDF-3 and netCDF-4/HDF5) ---------------------------------------
def _netcdf_walk(ds: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = [(prefix + name, var) for name, var in ds.variables.items()]
    for gname, group in ds.groups.items():
        out += _netcdf_walk(group, f"{prefix}{gname}/")
    return out


def _netcdf_record(name: str, var: Any, classic: bool) -> StoredVariable:
    import netCDF4

    dtype = _numeric(var.dtype if isinstance(var.dtype, np.dtype) else None)
    attrs = {k: var.getncattr(k) for k in var.ncattrs()}
    order = _order_of(dtype)
    if dtype is not None and dtype.itemsize > 1:
        # netCDF-3 is big-endian by definition; netCDF-4 records it per variable.
        order = "big" if classic or var.endian() == "big" else "little"
    implied = None
    if dtype is not None and "_FillValue" not in attrs and dtype.itemsize > 1:
        # Unwritten elements hold netCDF's default fill, which netCDF calls missing
        # (as netCDF4-python does, not for one-byte types, which are often flags);
        # none when the variable was written in no-fill mode.
        if var.get_fill_value() is not None:
            key = dtype.newbyteorder("=").str[1:]
            if key in netCDF4.default_fillvals:
                implied = (netCDF4.default_fillvals[key], "netCDF's default fill value")
    text = str(dtype) if dtype is not None else _not_numeric_text(var.dtype)
    return StoredVariable(
        name=name, shape=tuple(int(d) for d in var.shape), dtype=dtype, dtype_text=text, byte_order=order,
        dims=tuple(var.dimensions), attrs=attrs, implied_fill=implied,
        is_coordinate=tuple(var.dimensions) == (name.rsplit("/", 1)[-1],),
    )


def _netcdf_open(p: Path) -> Any:
    import netCDF4

    from perfscout.datasets.netcdf3 import check_not_truncated

    with p.open("rb") as f:
        if f.read(4) in NETCDF3_SIGNATURES:  # netCDF-C reads a cut-off classic file as zeros
            check_not_truncated(p)
    return _guard(p, "netCDF", lambda: netCDF4.Dataset(p, "r"))


def _netcdf_list(p: Path) -> list[StoredVariable]:
    ds = _netcdf_open(p)
    with ds:
        classic = str(ds.data_model).startswith("NETCDF3")
        return _guard(p, "netCDF", lambda: [_netcdf_record(n, v, classic) for n, v in _netcdf_walk(ds)])


def _netcdf_read(p: Path, wanted: str) -> tuple[StoredVariable, np.ndarray]:
    ds = _netcdf_open(p)
    with ds:
        classic = str(ds.data_model).startswith("NETCDF3")
        walked = dict(_guard(p, "netCDF", lambda: _netcdf_walk(ds)))
        name = resolve_name(list(walked), wanted, p)
        var = walked[name]
        info = _guard(p, "netCDF", lambda: _netcdf_record(name, var, classic))
        if info.dtype is None:
            return info, np.empty(0)
        _check_fits_memory(p, info)

        def read() -> np.ndarray:
            var.set_auto_maskandscale(False)  # CF decoding is ours (perfscout.datasets.cf)
            return np.asarray(var[...])

        return info, _guard(p, "netCDF", read)


# -- HDF5 (h5py) --------------------------------------------------------------------------------
def _h5py() -> Any:
    import h5py

    try:  # registers Blosc, Zstd, LZ4, SZ, ZFP... filters so compressed datasets read
        import hdf5plugin  # noqa: F401
    except ImportError:  # pragma: no cover - a core dependency; HDF5 built-ins still work
        pass
    return h5py


def _h5_attrs(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in obj.attrs:
        try:
            value = obj.attrs[key]
        except (OSError, TypeError, ValueError):  # an attribute type h5py cannot map
            continue
        if key in ("DIMENSION_LIST", "REFERENCE_LIST"):  # object references, not metadata
            continue
        out[key] = value
    return out


def _h5_dims(ds: Any) -> tuple[str, ...]:
    names = []
    for dim in ds.dims:
        label = dim.label
        if not label and len(dim):
            label = dim[0].name.rsplit("/", 1)[-1]
        names.append(label or "")
    return tuple(names) if any(names) else ()


def _h5_record(ds: Any) -> StoredVariable:
    dtype = _numeric(ds.dtype)
    shape = tuple(int(d) for d in ds.shape) if ds.shape is not None else ()
    return StoredVariable(
        name=ds.name.lstrip("/"), shape=shape, dtype=dtype,
        dtype_text=str(dtype) if dtype is not None else _not_numeric_text(ds.dtype),
        byte_order=_order_of(dtype), dims=_h5_dims(ds), attrs=_h5_attrs(ds),
    )


def _h5_datasets(f: Any) -> list[Any]:
    h5py = _h5py()
    found: list[Any] = []
    f.visititems(lambda _n, o: found.append(o) if isinstance(o, h5py.Dataset) else None)
    return found


def _hdf5_list(p: Path) -> list[StoredVariable]:
    h5py = _h5py()
    f = _guard(p, "HDF5", lambda: h5py.File(p, "r"))
    with f:
        return _guard(p, "HDF5", lambda: [_h5_record(d) for d in _h5_datasets(f)])


def _hdf5_read(p: Path, wanted: str) -> tuple[StoredVariable, np.ndarray]:
    h5py = _h5py()
    f = _guard(p, "HDF5", lambda: h5py.File(p, "r"))
    with f:
        by_name = {d.name.lstrip("/"): d for d in _guard(p, "HDF5", lambda: _h5_datasets(f))}
        name = resolve_name(list(by_name), wanted, p)
        ds = by_name[name]
        info = _guard(p, "HDF5", lambda: _h5_record(ds))
        if info.dtype is None or ds.shape is None:
            return info, np.empty(0)
        _check_fits_memory(p, info)
        values = _guard(p, "HDF5", lambda: np.asarray(ds[()]))
        if ds.chunks is not None:
            expected = math.prod(-(-n // c) for n, c in zip(ds.shape, ds.chunks))
            _note_unwritten(info, _guard(p, "HDF5", lambda: ds.id.get_num_chunks()), expected, ds.fillvalue)
        return info, values


# -- Zarr (zarr-python 3: stores in format v2 and v3) --------------------------------------------
def _zarr() -> Any:
    import zarr  # pyproject keeps zfpy off 1.0.1.post0, whose version string breaks numcodecs

    return zarr


def _zarr_open(p: Path) -> Any:
    zarr = _zarr()

    def open_() -> Any:
        store: Any = str(p)
        if p.is_file():
            store = zarr.storage.ZipStore(str(p), mode="r")
        return zarr.open(store=store, mode="r")

    return _guard(p, "Zarr", open_)


def _zarr_byte_order(arr: Any, dtype: np.dtype | None) -> str:
    if dtype is None or dtype.itemsize == 1:
        return "n/a"
    meta = arr.metadata
    if getattr(meta, "zarr_format", 2) == 3:
        for codec in meta.to_dict().get("codecs", []):
            if isinstance(codec, dict) and codec.get("name") == "bytes":
                return str((codec.get("configuration") or {}).get("endian", "little"))
        return "little"
    return _order_of(dtype)  # a v2 array's dtype keeps its byte order ("<f4", ">i2")


def _zarr_record(name: str, arr: Any) -> StoredVariable:
    raw_dtype = arr.dtype
    dtype = _numeric(raw_dtype if isinstance(raw_dtype, np.dtype) else None)
    attrs = dict(arr.attrs.asdict())
    meta = arr.metadata
    dims = tuple(getattr(meta, "dimension_names", None) or attrs.get("_ARRAY_DIMENSIONS") or ())
    implied = None
    if (
        dtype is not None and getattr(meta, "zarr_format", 2) == 2 and "_FillValue" not in attrs
        and "_ARRAY_DIMENSIONS" in attrs and arr.fill_value is not None
    ):
        # xarray keeps a variable's _FillValue in a Zarr v2 array's fill_value (and marks
        # the arrays it writes with _ARRAY_DIMENSIONS); a plain array's fill_value (0 by
        # default) is only what unwritten chunks read as, and is not taken as missing.
        implied = (arr.fill_value, "the Zarr v2 fill_value (xarray's _FillValue)")
    order = _zarr_byte_order(arr, dtype)
    return StoredVariable(
        name=name, shape=tuple(int(d) for d in arr.shape), dtype=dtype,
        dtype_text=str(dtype) if dtype is not None else _not_numeric_text(raw_dtype),
        byte_order=order, dims=tuple(str(d) for d in dims), attrs=attrs, implied_fill=implied,
        is_coordinate=dims == (name.rsplit("/", 1)[-1],),
    )


def _zarr_arrays(root: Any) -> list[tuple[str, Any]]:
    zarr = _zarr()
    if isinstance(root, zarr.Array):
        return [(str(root.basename or root.path or "array"), root)]
    return sorted((str(n), o) for n, o in root.members(max_depth=None) if isinstance(o, zarr.Array))


def _zarr_list(p: Path) -> list[StoredVariable]:
    root = _zarr_open(p)
    return _guard(p, "Zarr", lambda: [_zarr_record(n, a) for n, a in _zarr_arrays(root)])


def _zarr_read(p: Path, wanted: str) -> tuple[StoredVariable, np.ndarray]:
    root = _zarr_open(p)
    arrays = dict(_guard(p, "Zarr", lambda: _zarr_arrays(root)))
    name = resolve_name(list(arrays), wanted, p)
    info = _guard(p, "Zarr", lambda: _zarr_record(name, arrays[name]))
    if info.dtype is None:
        return info, np.empty(0)
    arr = arrays[name]
    _check_fits_memory(p, info)
    values = _guard(p, "Zarr", lambda: np.asarray(arr[...]))
    _note_unwritten(info, _guard(p, "Zarr", lambda: arr.nchunks_initialized), arr.nchunks, arr.fill_value)
    return info, values


def _note_unwritten(info: StoredVariable, stored: int, expected: int, fill: Any) -> None:
    """Chunks never written read as the fill value: legitimate (zarr skips chunks that are all
    fill), but also what a partly copied store looks like, so it is said, with the count."""
    if stored < expected:
        info.notes.append(f"{expected - stored} of {expected} chunks are not stored and read as the fill "
                          f"value {plain_value(fill)!r} (never written, or missing from a partial copy)")


# -- dispatch ------------------------------------------------------------------------------------
_READERS: dict[str, tuple[Callable[[Path], list[StoredVariable]], Callable[[Path, str], tuple[StoredVariable, np.ndarray]]]] = {
    "netcdf": (_netcdf_list, _netcdf_read),
    "hdf5": (_hdf5_list, _hdf5_read),
    "zarr": (_zarr_list, _zarr_read),
}


def structured_kind(path: str | Path) -> tuple[Path, str]:
    """(path, kind) for a file with named variables; InputError for anything else."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"data file not found: {p}")
    kind = file_kind(p)
    if kind in _READERS:
        return p, kind  # type: ignore[return-value]
    what = {
        None: "an empty file or a folder that is no Zarr store" if p.exists() else "missing",
        "npy": "a NumPy .npy file (one array, no variables: use it without a variable name)",
        "raw": "not netCDF, HDF5 or Zarr (no known signature: a raw binary file needs its shape and dtype)",
    }[kind]
    raise InputError(f"{p}: {what}")


def list_stored(path: str | Path) -> tuple[str, list[StoredVariable]]:
    """(kind, every variable's metadata) of a netCDF/HDF5/Zarr file."""
    p, kind = structured_kind(path)
    return _with_hdf5_fallback(p, kind, lambda k: (k, _READERS[k][0](p)))


def read_stored(path: str | Path, name: str) -> tuple[str, StoredVariable, np.ndarray]:
    """(kind, metadata, stored values) of one variable; ``name`` as in :func:`list_stored`
    (a leading "/" is optional, and a basename is enough when it is unique)."""
    p, kind = structured_kind(path)
    return _with_hdf5_fallback(p, kind, lambda k: (k, *_READERS[k][1](p, name)))


def _with_hdf5_fallback(p: Path, kind: str, call: Callable[[str], Any]) -> Any:
    """``call(kind)``; an HDF5 file with netCDF-4 markers that netCDF-C will not open (a
    writer outside netCDF's rules) is read as plain HDF5 rather than refused."""
    try:
        return call(kind)
    except InputError as first:
        if kind != "netcdf" or _hdf5_signature_offset(p) is None or "not a readable netCDF" not in str(first):
            raise
        try:
            return call("hdf5")
        except InputError:
            raise first from None


__all__ = [
    "FileKind",
    "StoredVariable",
    "file_kind",
    "list_stored",
    "plain_value",
    "read_stored",
    "resolve_name",
    "structured_kind",
]

