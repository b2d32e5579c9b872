"""netCDF, HDF5 and Zarr variables as fields: real files written here, values checked element
by element against what CF says, and forged or truncated files refused with a clear message.

The CF reference used throughout: ``unpacked = packed * scale_factor + add_offset`` in
float64, rounded once to the attributes' type; masked where the *stored* value equals
_FillValue / missing_value or lies outside the valid range.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st

from perfscout.datasets import (
    MaskedValuesError,
    VariableInfo,
    content_digest,
    describe_file,
    describe_variable,
    field_dtype,
    file_kind,
    load_hdf5,
    load_netcdf,
    load_variable,
)
from perfscout.datasets.cf import decode, plan_cf
from perfscout.errors import InputError



def cf_reference(packed: np.ndarray, scale: float, offset: float, out: type) -> np.ndarray:
    return (packed.astype(np.float64) * float(scale) + float(offset)).astype(out)


PACKED = np.array([[[-32767, 0, 1, 2, 300], [0, -1, 32000, -32000, 7], [5, 0, 0, 11, -32767],
                    [1234, -4321, 0, 17, 99]]], dtype=np.int16)  # (time=1, y=4, x=5); -32767 = fill


def _write_packed_netcdf(path: Path, fmt: str, attr_type: type, *, group: str = "",
                         endian: str = "native") -> None:
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        where = ds.createGroup(group) if group else ds
        for dim, n in zip(("time", "y", "x"), PACKED.shape):
            where.createDimension(dim, n)
        kw = {"endian": endian} if fmt.startswith("NETCDF4") else {}
        z = where.createVariable("z", "i2", ("time", "y", "x"), fill_value=np.int16(-32767), **kw)
        z.scale_factor = attr_type(0.01)
        z.add_offset = attr_type(5000.0)
        z.units = "m**2 s**-2"
        z.long_name = "Geopotential"
        z.standard_name = "geopotential"
        z.set_auto_maskandscale(False)
        z[:] = PACKED
        x = where.createVariable("x", "f4", ("x",))
        x[:] = np.arange(5, dtype=np.float32)


# -- netCDF ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF4_CLASSIC", "NETCDF4"])
@pytest.mark.parametrize("attr_type", [np.float32, np.float64])
def test_packed_int16_unpacks_as_cf_says(tmp_path: Path, fmt: str, attr_type: type) -> None:
    path = tmp_path / "era.nc"
    _write_packed_netcdf(path, fmt, attr_type)
    f = load_variable(path, "z", masked="nan")
    ref = cf_reference(PACKED, attr_type(0.01), attr_type(5000.0), attr_type)[0]
    ref[PACKED[0] == -32767] = np.nan
    assert f.dtype == np.dtype(attr_type)  # CF 8.1: the type of scale_factor/add_offset
    assert f.shape == (4, 5)  # the length-1 time axis is dropped, and said so
    np.testing.assert_array_equal(f.array, ref)
    assert f.meta["dtype_on_disk"] == "int16" and f.meta["dtype_unpacked"] == np.dtype(attr_type).name
    assert f.meta["masked_points"] == 2 and f.meta["masked_by"] == {"_FillValue=-32767": 2}
    assert f.meta["squeezed_axes"] == ["time"] and f.meta["units"] == "m**2 s**-2"
    text = " ".join(f.notes)
    assert f"unpacked int16 to {np.dtype(attr_type).name}" in text and "dropped length-1 axis time" in text
    assert "2 of 20 points are masked" in text
    assert f.name == "era.nc:z" and f.path == str(path) and f.source == f"netcdf:{path}:z"


def test_masked_points_are_refused_by_default_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "era.nc"
    _write_packed_netcdf(path, "NETCDF4", np.float32)
    with pytest.raises(MaskedValuesError, match=r"era.nc:z has 2 masked point\(s\) of 20 \(_FillValue=-32767: 2\)") as exc:
        load_variable(path, "z")
    assert exc.value.count == 2 and exc.value.total == 20
    assert "--nonfinite passthrough" in str(exc.value) and "--fill-masked VALUE" in str(exc.value)
    filled = load_variable(path, "z", masked=-1.5)
    assert filled.array[0, 0] == np.float32(-1.5) and np.isfinite(filled.array).all()
    assert "filled with -1.5 as asked" in " ".join(filled.notes)
    with pytest.raises(InputError, match="masked must be"):
        load_variable(path, "z", masked="drop")
    with pytest.raises(InputError, match="must be finite"):
        load_variable(path, "z", masked=float("inf"))


def test_netcdf4_groups_by_path_and_by_unique_name(tmp_path: Path) -> None:
    path = tmp_path / "g.nc"
    _write_packed_netcdf(path, "NETCDF4", np.float64, group="analysis")
    for name in ("/analysis/z", "analysis/z", "z"):
        f = load_variable(path, name, masked="nan")
        assert f.meta["variable"] == "analysis/z" and f.dtype == np.float64
    infos = {i.name: i for i in describe_file(path)}
    assert set(infos) == {"analysis/z", "analysis/x"}
    z = infos["analysis/z"]
    assert z.packed and z.scale_factor == 0.01 and z.add_offset == 5000.0
    assert z.dtype_on_disk == "int16" and z.dtype_unpacked == "float64" and z.field_shape == [4, 5]
    assert z.dims == ["time", "y", "x"] and z.masked_by == ["_FillValue=-32767"]
    assert z.units == "m**2 s**-2" and z.standard_name == "geopotential" and z.loadable
    assert z.matches("Z") and z.matches("geopotential") and z.matches("/analysis/z") and not z.matches("t")
    assert infos["analysis/x"].is_coordinate and not z.is_coordinate
    with pytest.raises(InputError, match=r"no variable 'temp'.*variables: analysis/z, analysis/x"):
        load_variable(path, "temp")


def test_ambiguous_name_asks_for_the_full_path(tmp_path: Path) -> None:
    path = tmp_path / "two.nc"
    with netCDF4.Dataset(path, "w") as ds:
        for g in ("a", "b"):
            grp = ds.createGroup(g)
            grp.createDimension("x", 3)
            grp.createVariable("t", "f4", ("x",))[:] = np.ones(3, np.float32)
    with pytest.raises(InputError, match=r"'t' names several variables: a/t, b/t; give the full path"):
        load_variable(path, "t")
    assert load_variable(path, "b/t").array.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # scipy's writer
def test_nan_fill_value_on_int16_keeps_valid_zeros(tmp_path: Path) -> None:
    """The bug: a NaN _FillValue cast to int16 became 0 and masked every valid zero."""
    from scipy.io import netcdf_file  # writes netCDF-3 attributes of any type, as other writers do

    path = tmp_path / "nanfill.nc"
    packed = np.array([0, 1, 0, -3, 0], dtype=np.int16)
    with netcdf_file(path, "w") as f:
        f.createDimension("x", packed.size)
        v = f.createVariable("q", "i2", ("x",))
        v[:] = packed
        v._FillValue = np.float32(np.nan)
        v.missing_value = np.float32(np.nan)
        v.scale_factor = np.float32(0.5)
    out = load_variable(path, "q")  # nothing is masked: no int16 equals NaN
    np.testing.assert_array_equal(out.array, np.array([0.0, 0.5, 0.0, -1.5, 0.0], dtype=np.float32))
    assert out.meta["masked_points"] == 0
    assert "_FillValue=nan ignored: a variable of type int16 cannot hold that value" in " ".join(out.notes)
    legacy = load_netcdf(path, "q")  # the old entry point goes through the same decoder
    np.testing.assert_array_equal(legacy.array, out.array)


def test_missing_value_list_and_valid_range_mask(tmp_path: Path) -> None:
    path = tmp_path / "m.nc"
    stored = np.array([1.0, -1.0, 3.0, -2.0, 500.0, -50.0, 7.0], dtype=np.float32)
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", stored.size)
        v = ds.createVariable("v", "f4", ("x",))
        v.missing_value = np.array([-1.0, -2.0], dtype=np.float32)
        v.valid_range = np.array([-10.0, 100.0], dtype=np.float32)
        v.set_auto_maskandscale(False)
        v[:] = stored
    f = load_variable(path, "v", masked="nan")
    assert np.isnan(f.array[[1, 3, 4, 5]]).all() and f.array[[0, 2, 6]].tolist() == [1.0, 3.0, 7.0]
    assert f.meta["masked_by"] == {"missing_value=-1": 1, "missing_value=-2": 1,
                                   "below valid_min -10": 1, "above valid_max 100": 1}


@pytest.mark.parametrize("units", ["packed", "unpacked"])
def test_valid_min_max_in_packed_or_unpacked_units(tmp_path: Path, units: str) -> None:
    """NUG/CF 8.1: limits of the unpacked (float) type apply to unpacked values."""
    from scipy.io import netcdf_file  # keeps float limits on an int16 variable as written

    path = tmp_path / "v.nc"
    packed = np.array([-100, 0, 100, 200], dtype=np.int16)  # unpacked: 0, 10, 20, 30 (x0.1 + 10)
    with netcdf_file(path, "w") as ds:
        ds.createDimension("x", 4)
        v = ds.createVariable("t", "i2", ("x",))
        v[:] = packed
        v.scale_factor, v.add_offset = np.float32(0.1), np.float32(10.0)
        if units == "packed":
            v.valid_min, v.valid_max = np.int16(0), np.int16(100)
        else:  # 20.0f is the float32 of 100 * 0.1f + 10: at the limit, not above it
            v.valid_min, v.valid_max = np.float32(10.0), np.float32(20.0)
    f = load_variable(path, "t", masked="nan")
    expected = cf_reference(packed, np.float32(0.1), np.float32(10.0), np.float32)
    expected[[0, 3]] = np.nan
    np.testing.assert_array_equal(f.array, expected)


def test_netcdf_default_fill_marks_unwritten_points(tmp_path: Path) -> None:
    path = tmp_path / "partial.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 3)
        v = ds.createVariable("w", "f4", ("t", "x"))
        v[1, :] = np.array([1.0, 2.0, 3.0], dtype=np.float32)  # record 0 is never written
    f = load_variable(path, "w", masked="nan")
    assert np.isnan(f.array[0]).all() and f.array[1].tolist() == [1.0, 2.0, 3.0]
    assert list(f.meta["masked_by"]) == ["netCDF's default fill value 9.96921e+36"]


def test_unsigned_convention(tmp_path: Path) -> None:
    from scipy.io import netcdf_file

    path = tmp_path / "u.nc"
    with netcdf_file(path, "w") as f:
        f.createDimension("x", 4)
        v = f.createVariable("b", "b", ("x",))  # signed bytes holding unsigned values
        v[:] = np.array([-1, 0, 127, -128], dtype=np.int8)  # 255, 0, 127, 128
        v._Unsigned = b"true"
        v._FillValue = np.int8(-1)  # 255 as unsigned
        v.scale_factor = np.float32(2.0)
    out = load_variable(path, "b", masked="nan")
    np.testing.assert_array_equal(out.array, np.array([np.nan, 0.0, 254.0, 256.0], dtype=np.float32))


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_big_endian_netcdf(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "be.nc"
    values = np.linspace(-3.5, 7.25, 12, dtype=np.float64).reshape(3, 4)
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("y", 3)
        ds.createDimension("x", 4)
        kw = {"endian": "big"} if fmt == "NETCDF4" else {}
        ds.createVariable("d", ">f8" if kw else "f8", ("y", "x"), **kw)[:] = values
    f = load_variable(path, "d")
    assert f.array.dtype.isnative and f.meta["byte_order"] == "big"
    np.testing.assert_array_equal(f.array, values)
    assert describe_variable(path, "d").byte_order == "big"


# -- dtype asked for ----------------------------------------------------------------------------
def test_dtype_asked_for_and_its_notes(tmp_path: Path) -> None:
    path = tmp_path / "d.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 3)
        ds.createVariable("f", "f4", ("x",))[:] = np.array([0.1, 0.2, 0.3], dtype=np.float32)
        ds.createVariable("big", "f8", ("x",))[:] = np.array([1.0, 1e300, 2.0])
        ds.createVariable("n", "i4", ("x",))[:] = np.array([1, 2**24 + 1, -7], dtype=np.int32)
    up = load_variable(path, "f", dtype="f64")
    assert up.dtype == np.float64 and up.array.tolist() == np.array([0.1, 0.2, 0.3], np.float32).astype(np.float64).tolist()
    assert "CF unpacks to float32 (the stored type); converted to float64 as asked" in up.notes
    with pytest.raises(InputError, match=r"1 value\(s\) exceed float32's range.*use dtype f64"):
        load_variable(path, "big", dtype="f32")
    with pytest.raises(InputError, match="int32 values and CF gives no float type.*dtype f32 or f64"):
        load_variable(path, "n")
    n32 = load_variable(path, "n", dtype="float32")
    assert n32.dtype == np.float32 and "1 integer value(s) beyond 2^24 are rounded in float32" in n32.notes
    assert load_variable(path, "n", dtype="f64").array.tolist() == [1.0, 2.0**24 + 1, -7.0]
    with pytest.raises(InputError, match="unknown dtype"):
        load_variable(path, "f", dtype="f16")
    assert field_dtype(describe_variable(path, "f")) == "f32" and field_dtype(describe_variable(path, "n"), "f64") == "f64"


# -- HDF5 ---------------------------------------------------------------------------------------
def test_hdf5_nested_groups_chunked_compressed_and_cf_attributes(tmp_path: Path) -> None:
    import hdf5plugin

    path = tmp_path / "sim.h5"
    temp = np.linspace(250, 310, 2 * 30 * 40, dtype=np.float32).reshape(2, 30, 40)
    packed = np.arange(-600, 600, dtype=np.int16).reshape(30, 40)
    packed[3, 4] = -9999
    with h5py.File(path, "w") as h:
        h.create_dataset("run1/fields/temp", data=temp, chunks=(1, 10, 10), compression="gzip", shuffle=True)
        p = h.create_dataset("run1/fields/pressure", data=packed, chunks=(10, 10), **hdf5plugin.Zstd())
        p.attrs["scale_factor"] = np.float64(0.25)
        p.attrs["add_offset"] = np.float64(1000.0)
        p.attrs["_FillValue"] = np.int16(-9999)
        p.attrs["units"] = b"hPa"  # bytes attributes, as many HDF5 writers leave them
        h.create_dataset("run1/be", data=temp[0].astype(">f4"))
        h.create_dataset("labels", data=np.array([b"a", b"b"]))
    assert file_kind(path) == "hdf5"
    np.testing.assert_array_equal(load_variable(path, "/run1/fields/temp").array, temp)
    f = load_variable(path, "run1/fields/pressure", masked="nan")
    ref = cf_reference(packed, 0.25, 1000.0, np.float64)
    ref[3, 4] = np.nan
    np.testing.assert_array_equal(f.array, ref)
    assert f.meta["units"] == "hPa" and f.meta["format"] == "hdf5"
    be = load_variable(path, "be")
    assert be.array.dtype == np.dtype("float32") and be.array.dtype.isnative and be.meta["byte_order"] == "big"
    np.testing.assert_array_equal(be.array, temp[0])
    infos = {i.name: i for i in describe_file(path)}
    assert set(infos) == {"run1/fields/temp", "run1/fields/pressure", "run1/be", "labels"}
    assert not infos["labels"].loadable and "a string variable" in infos["labels"].reason
    with pytest.raises(InputError, match="a string variable, not real numbers"):
        load_variable(path, "labels")
    legacy = load_hdf5(path, "/run1/fields/temp")
    assert legacy.name == "run1.fields.temp"


def test_shapes_scalars_empty_and_too_many_axes(tmp_path: Path) -> None:
    path = tmp_path / "shapes.h5"
    with h5py.File(path, "w") as h:
        h["scalar"] = np.float32(1.0)
        h.create_dataset("empty", shape=(0, 4), dtype="f4")
        h["five"] = np.zeros((2, 2, 2, 2, 2), np.float32)
        h["ones"] = np.full((1, 1, 1), 3.0, np.float32)
        h["keep"] = np.arange(6, dtype=np.float64).reshape(1, 2, 1, 3)
    with pytest.raises(InputError, match="is a scalar"):
        load_variable(path, "scalar")
    with pytest.raises(InputError, match=r"is empty \(shape \(0, 4\)\)"):
        load_variable(path, "empty")
    with pytest.raises(InputError, match="has 5 axes of length > 1.*extract a slice"):
        load_variable(path, "five")
    assert load_variable(path, "ones").shape == (1,)
    assert load_variable(path, "keep").shape == (2, 3)
    assert load_variable(path, "keep", squeeze=False).shape == (1, 2, 1, 3)
    listed = {i.name: i for i in describe_file(path)}
    assert not listed["five"].loadable and not listed["scalar"].loadable and listed["keep"].field_shape == [2, 3]


# -- Zarr ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_v2_and_v3(tmp_path: Path, zarr_format: int) -> None:
    store = tmp_path / f"ocean_v{zarr_format}.zarr"
    sst = np.linspace(-1.8, 30.5, 6 * 8, dtype=np.float32).reshape(6, 8)
    packed = np.arange(48, dtype=np.int16).reshape(1, 6, 8) - 10
    packed[0, 2, 2] = -32768
    root = zarr.open_group(store, mode="w", zarr_format=zarr_format)
    root.create_array("surface/sst", data=sst, chunks=(3, 4), attributes={"units": "degC"})
    kw = {"serializer": zarr.codecs.BytesCodec(endian="big")} if zarr_format == 3 else {}
    q = root.create_array("deep/q", shape=packed.shape, dtype=">i2" if zarr_format == 2 else "i2",
                          chunks=(1, 3, 3), fill_value=0,
                          attributes={"scale_factor": 0.5, "add_offset": 1.0, "_FillValue": -32768}, **kw)
    q[...] = packed
    assert file_kind(store) == "zarr"
    np.testing.assert_array_equal(load_variable(store, "surface/sst").array, sst)
    f = load_variable(store, "q", masked="nan")
    ref = cf_reference(packed[0], 0.5, 1.0, np.float64)  # JSON numbers: float64 attributes
    ref[2, 2] = np.nan
    np.testing.assert_array_equal(f.array, ref)
    assert f.meta["byte_order"] == "big" and f.meta["format"] == "zarr" and f.shape == (6, 8)
    # The array's fill_value (0 here) is what unwritten chunks read as, not a CF mask: the
    # zeros among the data stay data.
    assert f.meta["masked_by"] == {"_FillValue=-32768": 1}
    infos = {i.name: i for i in describe_file(store)}
    assert infos["surface/sst"].units == "degC" and infos["deep/q"].byte_order == "big"


def test_zarr_v2_written_by_xarray_uses_fill_value_as_fill(tmp_path: Path) -> None:
    """xarray keeps a variable's _FillValue in a Zarr v2 array's fill_value."""
    store = tmp_path / "xr.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=2)
    packed = np.array([[0, -99, 3]], dtype=np.int16)
    a = root.create_array("t2m", shape=packed.shape, dtype="i2", fill_value=-99,
                          attributes={"_ARRAY_DIMENSIONS": ["y", "x"], "scale_factor": 0.1})
    a[...] = packed
    f = load_variable(store, "t2m", masked="nan")
    np.testing.assert_array_equal(f.array, np.array([0.0, np.nan, 0.30000000000000004]))
    assert describe_variable(store, "t2m").dims == ["y", "x"]


def test_zarr_zip_store(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    root.create_array("v", data=np.arange(10, dtype=np.float64))
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted(store.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(store))
    assert file_kind(archive) == "zarr"
    assert load_variable(archive, "v").array.tolist() == list(range(10))


# -- format detection, forged and truncated files -------------------------------------------------
def test_file_kind_from_bytes_not_extension(tmp_path: Path) -> None:
    nc3 = tmp_path / "looks.h5"
    _write_packed_netcdf(nc3, "NETCDF3_CLASSIC", np.float32)
    nc4 = tmp_path / "a.dat"
    _write_packed_netcdf(nc4, "NETCDF4", np.float32)
    h5 = tmp_path / "looks.nc"
    with h5py.File(h5, "w") as h:
        h["x"] = np.ones(3)
    ub = tmp_path / "userblock.h5"
    with h5py.File(ub, "w", userblock_size=512) as h:
        h["x"] = np.ones(3)
    raw = tmp_path / "f.zarr"
    np.arange(4, dtype=np.float32).tofile(raw)
    npy = tmp_path / "a.bin"
    with npy.open("wb") as fh:
        np.save(fh, np.ones(3))
    (tmp_path / "empty.nc").write_bytes(b"")
    (tmp_path / "plain_dir").mkdir()
    assert [file_kind(p) for p in (nc3, nc4, h5, ub, raw, npy)] == ["netcdf", "netcdf", "hdf5", "hdf5", "raw", "npy"]
    assert file_kind(tmp_path / "empty.nc") is None and file_kind(tmp_path / "plain_dir") is None
    assert file_kind(tmp_path / "missing.nc") is None
    assert load_variable(h5, "x").array.tolist() == [1.0, 1.0, 1.0]  # .nc that is plain HDF5
    assert load_variable(ub, "x").array.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(InputError, match="no known signature: a raw binary file needs its shape and dtype"):
        describe_file(raw)
    with pytest.raises(InputError, match="a NumPy .npy file"):
        load_variable(npy, "x")
    with pytest.raises(InputError, match="data file not found"):
        describe_file(tmp_path / "missing.nc")
    with pytest.raises(InputError, match="empty file or a folder that is no Zarr store"):
        describe_file(tmp_path / "plain_dir")


def _truncate(path: Path, keep: float) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA", "NETCDF4"])
@pytest.mark.parametrize("keep", [0.3, 0.9, 0.999])
def test_truncated_netcdf_is_a_clear_error(tmp_path: Path, fmt: str, keep: float) -> None:
    """netCDF-C reads a cut-off classic file as zeros: the header's sizes catch it first."""
    path = tmp_path / "t.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("x", 500)
        ds.createDimension("t", None)
        ds.createVariable("z", "f4", ("x",))[:] = np.arange(500, dtype=np.float32)
        ds.createVariable("r", "i2", ("t", "x"))[0:3] = np.ones((3, 500), np.int16)
        ds.createVariable("q", "f8", ("t",))[0:3] = np.ones(3)
    from perfscout.datasets.netcdf3 import expected_size

    if fmt != "NETCDF4":
        assert expected_size(path) == path.stat().st_size
    assert load_variable(path, "r", dtype="f32").shape == (3, 500)
    _truncate(path, keep)
    pattern = r"t.nc: (truncated netCDF file: its header needs at least \d+ bytes|not a readable (HDF5|netCDF) file)"
    with pytest.raises(InputError, match=pattern):
        load_variable(path, "z")
    with pytest.raises(InputError, match=pattern):
        describe_file(path)


def test_forged_headers_are_clear_errors(tmp_path: Path) -> None:
    cases = {
        "forged3.nc": b"CDF\x01" + b"\xff" * 60,
        "forged4.nc": b"\x89HDF\r\n\x1a\n" + b"\x00\x07" * 100,
        "short.nc": b"CDF\x02\x00",
    }
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(InputError, match=rf"{name}: not a readable (netCDF|HDF5) file"):
            describe_file(p)
        with pytest.raises(InputError, match=rf"{name}: not a readable (netCDF|HDF5) file"):
            load_variable(p, "z")


def test_broken_zarr_stores_are_clear_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.zarr"
    root = zarr.open_group(good, mode="w", zarr_format=3)
    root.create_array("v", data=np.arange(100, dtype=np.float32), chunks=(10,))
    bad_json = tmp_path / "badjson.zarr"
    shutil.copytree(good, bad_json)
    (bad_json / "v" / "zarr.json").write_text("{ this is not json")
    with pytest.raises(InputError, match="badjson.zarr: not a readable Zarr file"):
        load_variable(bad_json, "v")
    bad_chunk = tmp_path / "badchunk.zarr"
    shutil.copytree(good, bad_chunk)
    chunk = next(p for p in (bad_chunk / "v").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.write_bytes(b"\x00garbage, not a zstd frame")
    with pytest.raises(InputError, match="badchunk.zarr: not a readable Zarr file"):
        load_variable(bad_chunk, "v")
    v2 = tmp_path / "v2.zarr"
    v2.mkdir()
    (v2 / ".zarray").write_text('{"zarr_format": 2, "shape": "many"}')
    with pytest.raises(InputError, match="v2.zarr: not a readable Zarr file"):
        describe_file(v2)


def test_bad_cf_attributes_are_named(tmp_path: Path) -> None:
    path = tmp_path / "attrs.h5"
    with h5py.File(path, "w") as h:
        a = h.create_dataset("a", data=np.arange(4, dtype=np.int16))
        a.attrs["scale_factor"] = "0.5"  # a string, not a number
        b = h.create_dataset("b", data=np.arange(4, dtype=np.float32))
        b.attrs["valid_range"] = np.array([5.0, 1.0])
    with pytest.raises(InputError, match="attribute scale_factor='0.5' is not a number"):
        load_variable(path, "a")
    with pytest.raises(InputError, match="valid_range .* has its minimum above its maximum"):
        load_variable(path, "b")
    listed = {i.name: i for i in describe_file(path)}  # listed anyway, with the reason
    assert not listed["a"].loadable and "scale_factor" in listed["a"].reason


def test_every_point_masked_is_refused_whatever_the_policy(tmp_path: Path) -> None:
    path = tmp_path / "allfill.h5"
    with h5py.File(path, "w") as h:
        h["m"] = np.full((3, 3), -1.0, np.float32)
        h["m"].attrs["_FillValue"] = np.float32(-1.0)
    for policy in ("refuse", "nan", 0.0):
        with pytest.raises(MaskedValuesError, match="every one of its 9 points is masked"):
            load_variable(path, "m", masked=policy)


def test_content_digest_changes_with_the_data(tmp_path: Path) -> None:
    store = tmp_path / "d.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=3)
    arr = root.create_array("v", data=np.zeros(8, np.float32))
    before = content_digest(store)
    arr[0] = 1.0
    assert content_digest(store) != before
    f = tmp_path / "f.bin"
    f.write_bytes(b"abc")
    assert content_digest(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_variable_info_is_json_friendly(tmp_path: Path) -> None:
    path = tmp_path / "era.nc"
    _write_packed_netcdf(path, "NETCDF4", np.float32)
    for info in describe_file(path):
        again = VariableInfo.model_validate_json(info.model_dump_json())
        assert again == info
    assert "_Netcdf4Dimid" not in str(describe_file(path)[0].attrs)


# -- the decoder as a property: any int16 packing, any fill, against the CF formula ----------------
@given(
    packed=st.lists(st.integers(-32768, 32767), min_size=1, max_size=40),
    scale=st.floats(1e-6, 1e3, allow_nan=False),
    offset=st.floats(-1e5, 1e5, allow_nan=False),
    fill=st.one_of(st.integers(-32768, 32767), st.just(float("nan")), st.just(1e9), st.just(0.5)),
    attr_type=st.sampled_from([np.float32, np.float64]),
)
def test_decode_matches_the_cf_formula(packed: list[int], scale: float, offset: float, fill: float,
                                       attr_type: type) -> None:
    stored = np.array(packed, dtype=np.int16)
    attrs = {"scale_factor": attr_type(scale), "add_offset": attr_type(offset), "_FillValue": fill}
    plan = plan_cf(stored.dtype, attrs)
    representable = isinstance(fill, int)
    masked = stored == fill if representable else np.zeros(stored.shape, bool)
    if masked.all():
        with pytest.raises(MaskedValuesError):
            decode(stored, plan, masked="nan")
        return
    out = decode(stored, plan, masked="nan")
    ref = cf_reference(stored, attr_type(scale), attr_type(offset), attr_type)
    ref[masked] = np.nan
    assert out.values.dtype == np.dtype(attr_type)
    np.testing.assert_array_equal(out.values, ref)
    assert out.masked_points == int(masked.sum())


def test_odd_types_are_listed_and_refused_or_read_plainly(tmp_path: Path) -> None:
    path = tmp_path / "types.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 3)
        ds.createVariable("names", str, ("x",))[0] = "a"
        pair = ds.createCompoundType(np.dtype([("a", "f4"), ("b", "i4")]), "pair")
        ds.createVariable("pairs", pair, ("x",))
        u = ds.createVariable("u", "u2", ("x",), fill_value=np.uint16(65535))
        u.scale_factor = np.float32(0.1)
        u.set_auto_maskandscale(False)
        u[:] = np.array([0, 65535, 1000], "u2")
    infos = {i.name: i for i in describe_file(path)}
    assert infos["names"].dtype_on_disk == "a string variable" and not infos["names"].loadable
    assert infos["pairs"].dtype_on_disk == "a compound type (a float32, b int32)"
    with pytest.raises(InputError, match="pairs is a compound type .* not real numbers"):
        load_variable(path, "pairs")
    np.testing.assert_array_equal(load_variable(path, "u", masked="nan").array,
                                  np.array([0.0, np.nan, 100.0], dtype=np.float32))
    h5 = tmp_path / "odd.h5"
    with h5py.File(h5, "w") as h:
        h["c"] = np.ones(3, np.complex64)
        h["m"] = np.array([1, 2, -9], np.float32)
        h["m"].attrs["missing_value"] = "N/A"
        h["n"] = np.array([1, np.nan, 3], np.float32)
        h["half"] = np.array([1, 2, 3], np.float16)
    with pytest.raises(InputError, match=r"complex64 \(complex values\)"):
        load_variable(h5, "c")
    m = load_variable(h5, "m")
    assert m.array.tolist() == [1.0, 2.0, -9.0] and "missing_value='N/A' ignored" in m.notes[0]
    with pytest.raises(MaskedValuesError, match=r"1 masked point\(s\) of 3 \(NaN in the stored values: 1\)"):
        load_variable(h5, "n")
    half = load_variable(h5, "half")
    assert half.dtype == np.float32 and "stored float16 read as float32" in half.notes


def test_zarr_v3_sharded_array(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "shard.zarr", mode="w", zarr_format=3)
    values = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    root.create_array("s", shape=values.shape, chunks=(8, 8), shards=(32, 32), dtype="f4")[...] = values
    np.testing.assert_array_equal(load_variable(tmp_path / "shard.zarr", "s").array, values)


def test_chunks_never_written_are_said(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "sparse.zarr", mode="w", zarr_format=3)
    root.create_array("v", shape=(100,), chunks=(10,), dtype="f4", fill_value=0.0)[:30] = 1.0
    z = load_variable(tmp_path / "sparse.zarr", "v")
    assert z.array[:30].tolist() == [1.0] * 30 and not z.array[30:].any()
    assert "7 of 10 chunks are not stored and read as the fill value 0.0" in z.notes[0]
    with h5py.File(tmp_path / "sparse.h5", "w") as h:
        h.create_dataset("v", shape=(100,), chunks=(10,), dtype="f4")[:30] = 1.0
        h.create_dataset("full", data=np.ones(100, np.float32), chunks=(10,))
    assert "7 of 10 chunks are not stored" in load_variable(tmp_path / "sparse.h5", "v").notes[0]
    assert load_variable(tmp_path / "sparse.h5", "full").notes == []


def test_hdf5_with_netcdf_markers_netcdf_cannot_open_is_read_as_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "h5netcdf-like.nc"
    with h5py.File(path, "w") as h:
        h.attrs["_NCProperties"] = b"version=2,netcdf=4.9.0"
        h["v"] = np.arange(5, dtype=np.float32)
        h["dangling"] = h5py.SoftLink("/nowhere")  # netCDF-C refuses the file ("HDF error")
    assert file_kind(path) == "netcdf"
    f = load_variable(path, "v")
    assert f.source.startswith("hdf5:") and f.array.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [i.name for i in describe_file(path)] == ["v"]
