"""``datasets.DataRef`` / ``open`` / ``describe``: what a dataset argument names, read one way.

Real files written here (raw, .npy, netCDF with a packed, masked variable): each reference
opens to the values written, ``describe`` agrees with ``open`` on shape, dtype and size
without reading the values, and every wrong input is an InputError that says what to give.
"""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest

from perfscout import datasets
from perfscout.datasets import DataRef, describe, file_ref, parse_ref
from perfscout.errors import InputError


def _values(shape: tuple[int, ...], dtype: str = "f4") -> np.ndarray:
    return np.cumsum(np.random.default_rng(3).standard_normal(shape), axis=-1).astype(dtype)


def _agree(ref: DataRef) -> datasets.Field:
    field = datasets.open(ref)
    info = describe(ref)
    assert (info.shape, info.dtype, info.nbytes) == (field.shape, field.dtype_tag, field.nbytes)
    return field


def test_npy_is_read_by_its_header_whatever_its_name(tmp_path: Path) -> None:
    x = _values((6, 7), "f8")
    np.save(tmp_path / "a.npy", x)
    (tmp_path / "a.npy").rename(tmp_path / "a.bin")  # the bytes say .npy, the name does not
    ref = parse_ref(str(tmp_path / "a.bin"), shape="9,9", dtype="f32")  # a wrong shape for it is not used
    assert ref.source == "npy" and ref.missing() == []
    np.testing.assert_array_equal(_agree(ref).array, x)


def test_raw_needs_shape_and_dtype_and_its_size_is_checked_before_reading(tmp_path: Path) -> None:
    x = _values((4, 5, 6))
    x.astype(">f4").tofile(tmp_path / "b.raw")
    ref = parse_ref(str(tmp_path / "b.raw"))
    assert ref.source == "raw" and ref.missing() == ["shape", "dtype"]
    with pytest.raises(InputError, match="needs its shape and dtype"):
        datasets.open(ref)
    ref = file_ref(tmp_path / "b.raw", shape="4,5,6", dtype="f32", endian=">")
    np.testing.assert_array_equal(_agree(ref).array, x)
    with pytest.raises(InputError, match=r"expected 960 bytes .* has 480 bytes \(that size fits float32"):
        describe(file_ref(tmp_path / "b.raw", shape="4,5,6", dtype="f64"))
    np.save(tmp_path / "c.npy", x)
    with pytest.raises(InputError, match="it is a .npy file"):  # sized as raw on purpose: the hint says why
        from perfscout.datasets.loaders import check_raw_size

        check_raw_size(tmp_path / "c.npy", (4, 5, 6), np.dtype("f4"))


def test_synthetic_and_registry_names(tmp_path: Path) -> None:
    ref = parse_ref("synthetic:grf:16,12:f64:seed=3")
    assert (ref.synthetic, ref.shape, ref.dtype, ref.seed) == ("grf", (16, 12), "f64", 3)
    field = _agree(ref)
    np.testing.assert_array_equal(field.array, datasets.parse_synthetic("grf:16,12:f64:seed=3").array)
    assert describe(ref).label == "grf:16x12#3"
    assert parse_ref("vorticity.512_512") == DataRef(source="name", name="vorticity.512_512")
    info = describe(DataRef(source="name", name="vorticity.512_512"))  # from the registry: no file needed
    assert (info.shape, info.dtype, info.nbytes) == ((512, 512), "f32", 512 * 512 * 4)
    with pytest.raises(InputError, match="unknown dataset"):
        datasets.open(DataRef(source="name", name="no-such-field"))


def test_a_netcdf_variable_with_its_missing_value_policy(tmp_path: Path) -> None:
    path = tmp_path / "d.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 3)
        nc.createDimension("x", 4)
        v = nc.createVariable("t", "f4", ("y", "x"), fill_value=np.float32(-999))
        v.set_auto_maskandscale(False)
        v[:] = np.array([[1, 2, 3, -999], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=np.float32)
    assert file_ref(path).source == "variable"  # by its bytes, even without a var
    with pytest.raises(InputError, match=r"name the variable .*t \(3x4 float32\)"):
        datasets.open(file_ref(path))
    with pytest.raises(InputError, match="masked"):  # refused by default, counted
        datasets.open(file_ref(path, var="t"))
    kept = _agree(file_ref(path, var="t", masked=datasets.masked_policy(None, "passthrough")))
    assert np.isnan(kept.array[0, 3]) and kept.array[2, 3] == 11
    filled = datasets.open(file_ref(path, var="t", masked=datasets.masked_policy(0.5, "refuse")))
    assert filled.array[0, 3] == 0.5
    with pytest.raises(InputError, match="--shape is for raw files"):
        file_ref(path, var="t", shape="3,4")
    raw = tmp_path / "e.raw"
    _values((8,)).tofile(raw)
    with pytest.raises(InputError, match="--fill-masked applies to a netCDF"):
        file_ref(raw, shape="8", dtype="f32", masked=0.0)
