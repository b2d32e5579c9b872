"""Datasets: loaders on tiny files written here, validation refusals, synthetic fields, registry."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest

from perfscout.datasets import (
    Field,
    get_dataset,
    list_datasets,
    load_hdf5,
    load_netcdf,
    load_npy,
    load_raw,
    load_registry,
    parse_dtype,
    parse_shape,
    parse_synthetic,
    synthetic,
    validate_array,
)
from perfscout.datasets.registry import ENV_SDRBENCH_DIR, ENV_SHARED_DATA
from perfscout.errors import InputError, PerfscoutError

# -- dtype / shape parsing ----------------------------------------------------------


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("f32", np.float32), ("F32", np.float32), ("float32", np.float32), (np.float32, np.float32),
        (np.dtype("float32"), np.float32), ("f64", np.float64), ("float64", np.float64),
        (np.float64, np.float64), (np.dtype(">f8"), np.float64), ("double", np.float64),
    ],
)
def test_parse_dtype_accepts(spelling, expected) -> None:
    dt = parse_dtype(spelling)
    assert dt == np.dtype(expected) and dt.isnative


@pytest.mark.parametrize("spelling", ["f16", "int8", "uint16", np.int32, np.float16, "complex64", "banana", 3])
def test_parse_dtype_refuses(spelling) -> None:
    with pytest.raises(InputError, match="dtype"):
        parse_dtype(spelling)


def test_parse_shape() -> None:
    assert parse_shape("41,128,128") == (41, 128, 128)
    assert parse_shape("64x64") == (64, 64)
    assert parse_shape([3, 4]) == (3, 4)
    assert parse_shape(d for d in (3, 4)) == (3, 4)
    for bad in ["", "4,,5", "a,b", "0,4", "-1", "1,2,3,4,5", [2.5], (d for d in [2.5])]:
        with pytest.raises(InputError):
            parse_shape(bad)


# -- validate_array -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros(4, dtype=np.int32), "dtype int32"),
        (np.zeros(4, dtype=np.float16), "dtype float16"),
        (np.zeros((0, 3), dtype=np.float32), "empty"),
        (np.array(1.0, dtype=np.float32), "0-d"),
        (np.zeros((1, 1, 1, 1, 2), dtype=np.float32), "5 axes"),
        (np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32), r"1 NaN, 1 \+Inf, 1 -Inf of 4 values \(first at index \(1,\)\)"),
    ],
)
def test_validate_array_refusals(array: np.ndarray, message: str) -> None:
    with pytest.raises(InputError, match=message):
        validate_array(array)


def test_validate_array_allows_nonfinite_when_asked_and_normalises_byte_order() -> None:
    a = np.array([1.0, np.nan], dtype=">f4")
    out = validate_array(a, allow_nonfinite=True)
    assert out.dtype == np.float32 and out.dtype.isnative
    assert out[0] == 1.0 and np.isnan(out[1])
    f = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert validate_array(f).flags["C_CONTIGUOUS"]
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    with pytest.raises(InputError, match="NaN"):
        validate_array(masked)


def test_input_error_is_a_perfscout_error() -> None:
    with pytest.raises(PerfscoutError):
        validate_array(np.zeros(0, dtype=np.float32))


# -- raw -----------------------------------------------------------------------------


@pytest.mark.parametrize("endian", ["<", ">", "little", "big"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_load_raw_roundtrip(tmp_path: Path, endian: str, dtype: str) -> None:
    dt = parse_dtype(dtype)
    order = {"little": "<", "big": ">"}.get(endian, endian)
    values = (np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 1.5 - 7).astype(dt)
    path = tmp_path / "field.raw"
    values.astype(dt.newbyteorder(order)).tofile(path)
    f = load_raw(path, "2,3,4", dtype, endian=endian)
    assert isinstance(f, Field)
    assert f.shape == (2, 3, 4) and f.dtype == dt and f.array.dtype.isnative
    np.testing.assert_array_equal(f.array, values)
    assert f.name == "field.raw" and str(path) in f.source and f.path == str(path)
    assert f.dtype_tag == dtype and f.shape_str == "2,3,4" and f.nbytes == values.nbytes


def test_load_raw_wrong_endianness_gives_different_values(tmp_path: Path) -> None:
    path = tmp_path / "le.f32"
    np.array([1.0, 2.0], dtype="<f4").tofile(path)
    assert load_raw(path, (2,), "f32", ">", allow_nonfinite=True).array.tolist() != [1.0, 2.0]


def test_load_raw_size_mismatch_says_expected_and_actual_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f.raw"
    np.zeros(10, dtype=np.float32).tofile(path)  # 40 bytes
    with pytest.raises(InputError, match=r"expected 48 bytes for shape \(3, 4\) of float32 \(12 values x 4 bytes\) but the file has 40 bytes"):
        load_raw(path, (3, 4), "f32")
    with pytest.raises(InputError, match="fits float64"):
        load_raw(path, (5,), "f32")  # 40 bytes = 5 doubles
    np.zeros(3, dtype=np.float32).tofile(path)
    with pytest.raises(InputError, match="holds 3 float32 values"):
        load_raw(path, (4,), "f32")


def test_load_raw_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "f.raw"
    np.zeros(4, dtype=np.float32).tofile(path)
    with pytest.raises(InputError, match="unknown dtype"):
        load_raw(path, (4,), "i16")
    with pytest.raises(InputError, match="byte order"):
        load_raw(path, (4,), "f32", endian="middle")
    with pytest.raises(InputError, match="not found"):
        load_raw(tmp_path / "missing.raw", (4,), "f32")
    with pytest.raises(InputError, match="not a regular file"):
        load_raw(tmp_path, (4,), "f32")
    empty = tmp_path / "empty.raw"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="expected 16 bytes"):
        load_raw(empty, (4,), "f32")


def test_load_raw_nonfinite_refused_unless_allowed(tmp_path: Path) -> None:
    path = tmp_path / "nan.raw"
    np.array([1.0, np.nan, 3.0, np.inf], dtype="<f4").tofile(path)
    with pytest.raises(InputError, match=r"1 NaN, 1 \+Inf"):
        load_raw(path, (4,), "f32")
    assert np.isnan(load_raw(path, (4,), "f32", allow_nonfinite=True).array[1])


# -- npy -----------------------------------------------------------------------------


def test_load_npy(tmp_path: Path) -> None:
    values = np.linspace(0, 1, 12, dtype=">f8").reshape(3, 4)  # big-endian on disk
    np.save(tmp_path / "a.npy", values)
    f = load_npy(tmp_path / "a.npy")
    assert f.shape == (3, 4) and f.dtype == np.float64 and f.array.dtype.isnative
    assert f.path == str(tmp_path / "a.npy")
    np.testing.assert_array_equal(f.array, values)
    assert f.name == "a"


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.arange(4, dtype=np.int16), "dtype int16"),
        (np.array(2.0, dtype=np.float32), "0-d"),
        (np.zeros((2, 0), dtype=np.float32), "empty"),
        (np.array([np.nan], dtype=np.float32), "NaN"),
        (np.array([{"a": 1}], dtype=object), "not a readable .npy"),
    ],
)
def test_load_npy_refusals(tmp_path: Path, array: np.ndarray, message: str) -> None:
    np.save(tmp_path / "bad.npy", array, allow_pickle=True)
    with pytest.raises(InputError, match=message):
        load_npy(tmp_path / "bad.npy")


def test_load_npy_not_npy(tmp_path: Path) -> None:
    (tmp_path / "x.npy").write_text("hello")
    with pytest.raises(InputError, match="not a readable .npy"):
        load_npy(tmp_path / "x.npy")


# -- HDF5 ----------------------------------------------------------------------------


def test_load_hdf5(tmp_path: Path) -> None:
    values = np.arange(60, dtype=np.float32).reshape(3, 4, 5) / 7
    with h5py.File(tmp_path / "f.h5", "w") as h:
        h.create_dataset("group/temperature", data=values)
        h.create_dataset("counts", data=np.arange(3))
    f = load_hdf5(tmp_path / "f.h5", "/group/temperature")
    np.testing.assert_array_equal(f.array, values)
    assert f.name == "group.temperature" and f.dtype == np.float32 and f.path == str(tmp_path / "f.h5")
    with pytest.raises(InputError, match=r"no variable 'pressure'.*counts, group/temperature"):
        load_hdf5(tmp_path / "f.h5", "pressure")
    with pytest.raises(InputError, match="int64 values and CF gives no float type.*dtype f32 or f64"):
        load_hdf5(tmp_path / "f.h5", "counts")
    (tmp_path / "bad.h5").write_text("not hdf5")
    with pytest.raises(InputError, match="not a readable HDF5"):
        load_hdf5(tmp_path / "bad.h5", "x")


# -- netCDF --------------------------------------------------------------------------


def _write_packed_nc(path: Path, fmt: str, attr_dtype: type) -> np.ndarray:
    packed = np.array([[1, 2, 3], [4, -999, 6]], dtype=np.int16)
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("y", 2)
        ds.createDimension("x", 3)
        v = ds.createVariable("t", "i2", ("y", "x"), fill_value=-999)
        v.scale_factor = attr_dtype(0.5)
        v.add_offset = attr_dtype(10.0)
        v.units = "K"
        v.set_auto_maskandscale(False)
        v[:] = packed
        w = ds.createVariable("w", "f8", ("y", "x"))
        w[:] = np.arange(6.0).reshape(2, 3)
        c = ds.createVariable("count", "i4", ("x",))
        c[:] = np.arange(3)
    return packed


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_load_netcdf_scale_offset_and_fill(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "f.nc"
    _write_packed_nc(path, fmt, np.float32)
    with pytest.raises(InputError, match=r"f.nc:t has 1 masked point\(s\) of 6 \(_FillValue=-999: 1\)"):
        load_netcdf(path, "t")  # the _FillValue element is missing data
    f = load_netcdf(path, "t", allow_nonfinite=True)
    assert f.dtype == np.float32  # CF: the unpacked type is the attributes' type
    expected = np.array([[10.5, 11.0, 11.5], [12.0, np.nan, 13.0]], dtype=np.float32)
    np.testing.assert_array_equal(f.array, expected)  # packed * 0.5 + 10
    assert f.meta["units"] == "K" and f.meta["dtype_on_disk"] == "int16"
    plain = load_netcdf(path, "w")
    np.testing.assert_array_equal(plain.array, np.arange(6.0).reshape(2, 3))
    assert plain.dtype == np.float64


def test_load_netcdf_float64_attributes_unpack_to_float64(tmp_path: Path) -> None:
    path = tmp_path / "f.nc"
    _write_packed_nc(path, "NETCDF4", np.float64)
    f = load_netcdf(path, "t", allow_nonfinite=True)
    assert f.dtype == np.float64 and f.array[0, 0] == 10.5


def test_load_netcdf_missing_value_list(tmp_path: Path) -> None:
    path = tmp_path / "m.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 5)
        v = ds.createVariable("v", "f4", ("x",))
        v.missing_value = np.array([-1.0, -2.0], dtype=np.float32)
        v.set_auto_maskandscale(False)
        v[:] = np.array([1.0, -1.0, 3.0, -2.0, 5.0], dtype=np.float32)
    f = load_netcdf(path, "v", allow_nonfinite=True)
    assert np.isnan(f.array[[1, 3]]).all() and f.array[[0, 2, 4]].tolist() == [1.0, 3.0, 5.0]


def test_load_netcdf_refusals(tmp_path: Path) -> None:
    path = tmp_path / "f.nc"
    _write_packed_nc(path, "NETCDF4", np.float32)
    with pytest.raises(InputError, match=r"no variable 'pressure'; variables: t, w, count"):
        load_netcdf(path, "pressure")
    with pytest.raises(InputError, match="int32 values and CF gives no float type"):
        load_netcdf(path, "count")
    (tmp_path / "bad.nc").write_text("not netcdf")
    with pytest.raises(InputError, match="not a readable netCDF"):
        load_netcdf(tmp_path / "bad.nc", "t")


# -- synthetic -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["grf", "smooth", "grayscott"])
@pytest.mark.parametrize("shape", [(300,), (24, 20), (12, 10, 8)])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_synthetic_shapes_dtypes_determinism(kind: str, shape: tuple[int, ...], dtype: str) -> None:
    a = synthetic(kind, shape, dtype=dtype, seed=5)
    b = synthetic(kind, shape, dtype=dtype, seed=5)
    c = synthetic(kind, shape, dtype=dtype, seed=6)
    assert a.shape == shape and a.dtype == parse_dtype(dtype)
    assert np.isfinite(a.array).all()
    np.testing.assert_array_equal(a.array, b.array)  # same seed, same bits
    assert not np.array_equal(a.array, c.array)
    assert float(a.array.max() - a.array.min()) > 0
    assert "seed=5" in a.source


def test_synthetic_f32_is_the_f64_field_to_float32_precision() -> None:
    # smooth is computed in float64 and rounded; grf and grayscott in float32 (lean builds)
    for kind, atol in (("smooth", 0.0), ("grf", 2e-5), ("grayscott", 1e-4)):
        f64 = synthetic(kind, (16, 16), "f64", seed=1).array
        f32 = synthetic(kind, (16, 16), "f32", seed=1).array
        assert f32.dtype == np.float32
        np.testing.assert_allclose(f32, f64.astype(np.float32), rtol=0, atol=atol)


def test_synthetic_character() -> None:
    grf = synthetic("grf", (64, 64), "f64").array
    assert abs(grf.mean()) < 1e-12 and grf.std() == pytest.approx(1.0)
    smooth = synthetic("smooth", (64, 64), "f64").array
    # a linear predictor's residual (second difference) is far smaller on the smooth field
    rough = np.abs(np.diff(grf, 2, axis=1)).mean() / grf.std()
    calm = np.abs(np.diff(smooth, 2, axis=1)).mean() / smooth.std()
    assert calm < rough / 3
    gs = synthetic("grayscott", (64, 64), "f64").array
    assert gs.min() >= 0 and gs.max() <= 1  # V is a concentration


def test_parse_synthetic() -> None:
    f = parse_synthetic("grf:16,8")
    assert f.shape == (16, 8) and f.dtype == np.float32
    g = parse_synthetic("smooth:4x5x6:f64:seed=3")
    assert g.shape == (4, 5, 6) and g.dtype == np.float64
    np.testing.assert_array_equal(g.array, synthetic("smooth", (4, 5, 6), "f64", 3).array)
    assert parse_synthetic("grayscott:32:seed=2").meta["seed"] == 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("grf", "expected KIND:SHAPE"),
        ("plasma:8,8", "unknown synthetic kind 'plasma'"),
        ("grf:8,8:f16", "unknown dtype"),
        ("grf:8,0", "must be >= 1"),
        ("grf:2,2,2,2", "1-D to 3-D"),
        ("grf:8:f32:seed=1:extra", "too many"),
    ],
)
def test_parse_synthetic_refusals(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_synthetic(spec)


def test_synthetic_bad_seed() -> None:
    with pytest.raises(InputError, match="seed"):
        synthetic("grf", (8,), seed=-1)


# -- registry ------------------------------------------------------------------------

README_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*([\d x]+?)\s*\|[^|]*\|\s*(\S+)\s*\.\.\s*(\S+)\s*\|\s*$")


def _readme_fields(data_dir: Path) -> dict[str, tuple[tuple[int, ...], str, str]]:
    """file -> (shape, lo, hi) as written in ../shared/data/README.md."""
    rows = {}
    for line in (data_dir / "README.md").read_text().splitlines():
        m = README_ROW.match(line)
        if m:
            shape = tuple(int(d) for d in m.group(2).split("x"))
            rows[m.group(1)] = (shape, m.group(3), m.group(4))
    return rows


def _half_unit(text: str) -> float:
    """Half a unit in the last digit written: the rounding tolerance of a README figure."""
    exponent = Decimal(text).as_tuple().exponent
    return 0.5 * 10.0 ** int(exponent)


def test_shared_fields_load_with_readme_shape_and_range(shared_data: Path) -> None:
    readme = _readme_fields(shared_data)
    assert len(readme) == 4
    shared = {e["name"]: e for e in load_registry()["shared"]}
    for file, (shape, lo, hi) in readme.items():
        assert file in shared, f"{file} from the README is missing in the registry"
        f = get_dataset(file)
        assert f.shape == shape and f.dtype == np.float32
        assert abs(float(f.array.min()) - float(lo)) <= _half_unit(lo), (file, f.array.min(), lo)
        assert abs(float(f.array.max()) - float(hi)) <= _half_unit(hi), (file, f.array.max(), hi)
        assert shared[file]["value_range"] == [float(lo), float(hi)]
        assert Path(f.path).parent.resolve() == shared_data.resolve()  # read in place, not copied


def test_list_datasets_covers_every_kind(shared_data: Path) -> None:
    infos = {i.name: i for i in list_datasets()}
    kinds = {i.kind for i in infos.values()}
    assert kinds == {"shared", "remote", "synthetic"}
    assert all(infos[n].available for n in ("vorticity.512_512", "999x999.float"))
    assert infos["vorticity.128_128_41"].shape == [41, 128, 128]
    remote = [i for i in infos.values() if i.kind == "remote"]
    assert {"cesm-atm-cldhgh", "hurricane-isabel-p", "nyx-temperature", "miranda-density",
            "qmcpack-einspline", "scale-letkf-pres"} <= {i.name for i in remote}
    for i in remote:
        assert i.url.startswith("https://") and i.url.endswith(".tar.gz")
        assert i.nbytes == int(np.prod(i.shape)) * (4 if i.dtype == "f32" else 8)
    assert infos["miranda-density"].dtype == "f64" and infos["nyx-temperature"].nbytes == 512**3 * 4
    assert all(i.available for i in infos.values() if i.kind == "synthetic")


def test_shared_missing_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SHARED_DATA, str(tmp_path))
    info = {i.name: i for i in list_datasets()}["vorticity.512_512"]
    assert not info.available and str(tmp_path) in info.reason
    with pytest.raises(InputError, match=f"not available: vorticity.512_512 not found in {re.escape(str(tmp_path))}"):
        get_dataset("vorticity.512_512")
    (tmp_path / "vorticity.512_512").write_bytes(b"\0" * 100)  # truncated copy
    info = {i.name: i for i in list_datasets()}["vorticity.512_512"]
    assert not info.available and "has 100 bytes, expected 1048576" in info.reason


def test_remote_not_downloaded_gives_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SDRBENCH_DIR, raising=False)
    info = {i.name: i for i in list_datasets()}["hurricane-isabel-p"]
    assert not info.available and info.url in info.reason and ENV_SDRBENCH_DIR in info.reason
    with pytest.raises(InputError, match="SDRBENCH-Hurricane-ISABEL-100x500x500.tar.gz"):
        get_dataset("hurricane-isabel-p")


def test_remote_found_under_sdrbench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SDRBENCH_DIR, str(tmp_path))
    info = {i.name: i for i in list_datasets()}["cesm-atm-cldhgh"]
    assert not info.available
    assert f"CLDHGH_1_1800_3600.f32 or CLDHGH_1_1800_3600.dat not found under {tmp_path}" in info.reason
    # A sparse file of the real CESM field's exact size, where the archive would extract it
    # (under the second of the two names archive versions use).
    target = tmp_path / "SDRBENCH-CESM-ATM-1800x3600" / "1800x3600" / "CLDHGH_1_1800_3600.dat"
    target.parent.mkdir(parents=True)
    with open(target, "wb") as fh:
        fh.truncate(1800 * 3600 * 4)
    info = {i.name: i for i in list_datasets()}["cesm-atm-cldhgh"]
    assert info.available and info.path == str(target)
    f = get_dataset("cesm-atm-cldhgh")
    assert f.shape == (1800, 3600) and f.dtype == np.float32 and f.meta["kind"] == "remote"
    with open(target, "wb") as fh:
        fh.truncate(1000)
    info = {i.name: i for i in list_datasets()}["cesm-atm-cldhgh"]
    assert not info.available and "has 1000 bytes, expected 25920000" in info.reason


def test_custom_registry_remote_raw_big_endian(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.arange(20, dtype=np.float64).reshape(4, 5) / 3
    (tmp_path / "data").mkdir()
    values.astype(">f8").tofile(tmp_path / "data" / "tiny.d64")
    reg = tmp_path / "reg.yaml"
    reg.write_text(
        "remote:\n"
        "  - name: tiny\n    file: tiny.d64\n    shape: [4, 5]\n    dtype: f64\n    endian: '>'\n"
        "    url: https://example.invalid/tiny.tar.gz\n    description: a tiny test field\n"
    )
    monkeypatch.setenv(ENV_SDRBENCH_DIR, str(tmp_path))
    f = get_dataset("tiny", registry=reg)
    np.testing.assert_array_equal(f.array, values)
    assert f.description == "a tiny test field" and f.array.dtype.isnative
    # an explicit path overrides the search
    values.astype(">f8").tofile(tmp_path / "elsewhere.bin")
    g = get_dataset("tiny", registry=reg, path=tmp_path / "elsewhere.bin")
    np.testing.assert_array_equal(g.array, values)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shared:\n  - name: x\n", "needs name, shape, dtype"),
        ("shared:\n  - {name: x, shape: [2], dtype: f32}\n", "needs a file"),
        ("shared:\n  - {name: x, file: [a, b], shape: [2], dtype: f32}\n", "needs one file name"),
        ("synthetic:\n  - {name: lava, shape: [2], dtype: f32}\n", "unknown synthetic kind"),
        ("synthetic:\n  - {name: grf, shape: [2], dtype: f32}\n  - {name: grf, shape: [2], dtype: f32}\n", "duplicate"),
        ("shared:\n  - {name: x, file: x, shape: [2], dtype: i8}\n", "unknown dtype"),
        ("- just a list\n", "mapping"),
        ("shared: [unclosed\n", "cannot read"),
    ],
)
def test_malformed_registry(tmp_path: Path, text: str, message: str) -> None:
    reg = tmp_path / "reg.yaml"
    reg.write_text(text)
    with pytest.raises(InputError, match=message):
        list_datasets(reg)


def test_get_dataset_synthetic_and_unknown() -> None:
    f = get_dataset("grf", shape=(8, 8), dtype="f64", seed=2)
    np.testing.assert_array_equal(f.array, synthetic("grf", (8, 8), "f64", 2).array)
    assert get_dataset("smooth:16").shape == (16,)
    with pytest.raises(InputError, match=r"unknown dataset 'nope'; known: vorticity\.512_512"):
        get_dataset("nope")
