"""Zarr v3 stores and xarray datasets written with perfscout's codecs, read back in a fresh
process (the codecs found by name through the entry points), bound verified on what the
libraries return."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from perfscout.codecs.numcodecs import zarr3
from perfscout.tools.bounds import verify_bound
from tests.conftest import load_shared_field

RNG = np.random.default_rng(3)


def _field(shape=(30, 48, 40), dtype=np.float32) -> np.ndarray:
    return np.cumsum(np.cumsum(RNG.standard_normal(shape), axis=0), axis=1).astype(dtype)


def _read_in_fresh_process(code: str, tmp_path: Path, loads: str = "perfscout.codecs.numcodecs.zarr3") -> np.ndarray:
    """Run ``code`` (which must np.save the array it read to OUT) in a new interpreter that
    has not imported perfscout: the store alone must say how to decode it, and the entry
    point must have loaded ``loads``."""
    out = tmp_path / "readback.npy"
    script = "import sys, numpy as np\nOUT = sys.argv[1]\n" + textwrap.dedent(code) + (
        f"\nassert {loads!r} in sys.modules  # loaded by the entry point\n")
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.load(out)


@pytest.mark.parametrize("serializer, abs_bound, pw_rel", [
    (zarr3.SZ3(mode="abs", bound=1e-2), 1e-2, None),
    (zarr3.SZ2(mode="pw_rel", bound=1e-3), None, 1e-3),
    (zarr3.SZ3H5(mode="abs", bound=1e-2), 1e-2, None),
    (zarr3.ZFP(mode="abs", bound=1e-2), 1e-2, None),
    (zarr3.SZP(mode="abs", bound=1e-2), 1e-2, None),
], ids=lambda v: getattr(v, "codec_name", None) or "b")
def test_zarr_v3_store_round_trip_bound_verified(tmp_path: Path, serializer, abs_bound, pw_rel) -> None:
    data = _field()
    if pw_rel is not None:
        data = data + np.float32(1000.0)  # point-wise relative: keep away from exact zeros
    store = tmp_path / "field.zarr"
    # Chunks that do not divide the shape: edge chunks are padded and cut back by zarr.
    arr = zarr.create_array(store, shape=data.shape, chunks=(16, 20, 40), dtype=data.dtype,
                            serializer=serializer, compressors=None)
    arr[:] = data
    meta = json.loads((store / "zarr.json").read_text())
    assert meta["codecs"][0]["name"] == serializer.codec_name
    back = _read_in_fresh_process(f"""
        import zarr
        np.save(OUT, zarr.open_array({str(store)!r}, mode="r")[:])
    """, tmp_path)
    assert back.shape == data.shape and back.dtype == data.dtype
    check = verify_bound(data, back, abs_bound=abs_bound, pw_rel_bound=pw_rel)
    assert check.bound_ok, check.message
    chunk_bytes = sum(p.stat().st_size for p in (store / "c").rglob("*") if p.is_file())
    assert chunk_bytes < data.nbytes  # it did compress


def test_zarr_rel_bound_is_the_whole_fields_in_every_chunk(tmp_path: Path) -> None:
    data = _field((64, 64))
    data[:8] *= 1e-3  # one chunk row with a tiny range of its own
    r = float(data.max() - data.min())
    store = tmp_path / "rel.zarr"
    arr = zarr.create_array(store, shape=data.shape, chunks=(8, 64), dtype=data.dtype,
                            serializer=zarr3.SZ3(mode="rel", bound=1e-3, value_range=r), compressors=None)
    arr[:] = data
    config = json.loads((store / "zarr.json").read_text())["codecs"][0]["configuration"]
    assert config["mode"] == "abs" and config["rel_bound"] == 1e-3 and config["value_range"] == r
    back = zarr.open_array(store, mode="r")[:]
    assert verify_bound(data, back, abs_bound=1e-3 * r).bound_ok


def test_xarray_to_zarr_encoding_round_trip_with_a_mask(tmp_path: Path) -> None:
    t = _field((12, 32, 36))
    t[:, :4, :4] = np.nan  # land: xarray keeps NaN, the codec stores it exactly
    ds = xr.Dataset({"t": (("time", "lat", "lon"), t), "p": (("lat", "lon"), _field((32, 36), np.float64))},
                    coords={"time": np.arange(12), "lat": np.linspace(-80, 80, 32), "lon": np.arange(36.0)})
    encoding = {
        "t": {"serializer": zarr3.SZ3(mode="abs", bound=1e-2, nonfinite="passthrough"), "compressors": None,
              "chunks": (6, 32, 36)},
        "p": {"serializer": zarr3.ZFP(mode="abs", bound=1e-4), "compressors": None},
    }
    store = tmp_path / "ds.zarr"
    ds.to_zarr(store, mode="w", zarr_format=3, encoding=encoding, consolidated=False)
    back = _read_in_fresh_process(f"""
        import xarray as xr
        ds = xr.open_zarr({str(store)!r}, consolidated=False)
        np.save(OUT, np.stack([ds["t"].values[0, :32, :36].astype("f8"), ds["p"].values]))
        assert ds["t"].dtype == np.float32
    """, tmp_path)
    reread = xr.open_zarr(store, consolidated=False)
    t_back = reread["t"].values
    finite = np.isfinite(t)
    assert np.isnan(t_back[~finite]).all()
    assert verify_bound(t[finite], t_back[finite], abs_bound=1e-2).bound_ok
    assert verify_bound(ds["p"].values, back[1], abs_bound=1e-4).bound_ok
    np.testing.assert_array_equal(back[0], t_back[0].astype("f8"))
    assert reread["t"].encoding["serializer"].codec_name == "numcodecs.perfscout.sz3"


def test_real_field_in_zarr_bound_verified(shared_data: Path, tmp_path: Path) -> None:
    data = load_shared_field("vorticity.128_128_41")
    r = float(data.max() - data.min())
    store = tmp_path / "vort.zarr"
    arr = zarr.create_array(store, shape=data.shape, chunks=(16, 64, 64), dtype=data.dtype,
                            serializer=zarr3.SZ3(mode="rel", bound=1e-4, value_range=r), compressors=None)
    arr[:] = data
    back = zarr.open_array(store, mode="r")[:]
    assert verify_bound(data, back, abs_bound=1e-4 * r).bound_ok


def test_zarr_v2_format_as_compressor_round_trip(tmp_path: Path) -> None:
    from perfscout.codecs.numcodecs import SZ2

    data = _field((40, 50))
    store = tmp_path / "v2.zarr"
    arr = zarr.create_array(store, shape=data.shape, chunks=(16, 25), dtype=data.dtype, zarr_format=2,
                            compressors=SZ2(mode="abs", bound=1e-2))
    arr[:] = data
    assert json.loads((store / ".zarray").read_text())["compressor"]["id"] == "perfscout.sz2"
    back = _read_in_fresh_process(f"""
        import zarr
        np.save(OUT, zarr.open_array({str(store)!r}, mode="r")[:])
    """, tmp_path, loads="perfscout.codecs.numcodecs")
    assert verify_bound(data, back, abs_bound=1e-2).bound_ok
