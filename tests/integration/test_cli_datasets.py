"""`perfscout datasets list [--json]` through typer's CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.datasets import registry as registry_module
from perfscout.datasets.registry import ENV_SDRBENCH_DIR, ENV_SHARED_DATA

runner = CliRunner()


def test_datasets_list_json(shared_data: Path) -> None:
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # exactly one JSON document on stdout
    by_name = {d["name"]: d for d in doc["datasets"]}
    assert by_name["vorticity.512_512"]["available"] is True
    assert by_name["vorticity.512_512"]["shape"] == [512, 512]
    assert Path(by_name["vorticity.512_512"]["path"]).resolve() == (shared_data / "vorticity.512_512").resolve()
    assert by_name["nyx-temperature"]["kind"] == "remote"
    assert by_name["nyx-temperature"]["url"].endswith("SDRBENCH-EXASKY-NYX-512x512x512.tar.gz")
    assert by_name["grf"]["kind"] == "synthetic" and by_name["grf"]["available"] is True
    assert Path(doc["shared_data_dir"]).resolve() == shared_data.resolve()
    expected_keys = {"name", "kind", "shape", "dtype", "nbytes", "available", "reason",
                     "description", "path", "url"}
    assert all(set(d) == expected_keys for d in doc["datasets"])


def test_datasets_list_json_without_shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SHARED_DATA, str(tmp_path / "nowhere"))
    monkeypatch.delenv(ENV_SDRBENCH_DIR, raising=False)
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["shared_data_dir"] is None
    assert doc["shared_data_searched"] == [str(tmp_path / "nowhere")]
    shared = [d for d in doc["datasets"] if d["kind"] == "shared"]
    assert len(shared) == 4 and not any(d["available"] for d in shared)
    assert all(str(tmp_path / "nowhere") in d["reason"] for d in shared)


def test_datasets_list_table(shared_data: Path) -> None:
    result = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name in ("vorticity.128_128_41", "cesm-atm-cldhgh", "grayscott"):
        assert name in out
    joined = "".join(out.split())  # long URLs are folded over lines
    assert "41x128x128" in out and "SDRBENCH-CESM-ATM-1800x3600.tar.gz" in joined


def test_bad_registry_is_a_clear_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "registry.yaml"
    bad.write_text("shared:\n  - {name: x, shape: [2], dtype: int8, file: x}\n")
    monkeypatch.setattr(registry_module, "REGISTRY_PATH", bad)
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 2
    assert "unknown dtype 'int8'" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_datasets_list_json_in_a_real_subprocess(shared_data: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from perfscout.cli import main; main()", "datasets", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {d["kind"] for d in doc["datasets"]} == {"shared", "remote", "synthetic"}


def test_table_prints_reasons_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reason quotes a path; "[red]" in it is text, not rich markup to swallow.
    where = tmp_path / "[red]nowhere"
    monkeypatch.setenv(ENV_SHARED_DATA, str(where))
    monkeypatch.delenv(ENV_SDRBENCH_DIR, raising=False)
    result = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "".join(str(where).split()) in "".join(result.stdout.split())


# -- netCDF / HDF5 / Zarr variables: `datasets inspect`, `eval --var`, sweep specs with `var` --------
def _write_geopotential(path: Path) -> np.ndarray:
    """A packed int16 z(time=1, lat, lon) with float32 scale/offset and a few fill points;
    returns what CF says the unpacked float32 field is (NaN at the fill points)."""
    import netCDF4

    y, x = np.meshgrid(np.linspace(0, 3, 48), np.linspace(0, 4, 64), indexing="ij")
    packed = (np.sin(y) * np.cos(x) * 20000).astype(np.int16)[None]
    packed[0, 0, :3] = -32767
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        for dim, n in zip(("time", "lat", "lon"), packed.shape):
            ds.createDimension(dim, n)
        z = ds.createVariable("z", "i2", ("time", "lat", "lon"), fill_value=np.int16(-32767))
        z.scale_factor, z.add_offset = np.float32(0.5), np.float32(50000.0)
        z.units, z.standard_name = "m**2 s**-2", "geopotential"
        z.set_auto_maskandscale(False)
        z[:] = packed
    unpacked = (packed[0].astype(np.float64) * np.float32(0.5) + np.float32(50000.0)).astype(np.float32)
    unpacked[packed[0] == -32767] = np.nan
    return unpacked


def test_datasets_inspect_lists_variables(tmp_path: Path) -> None:
    path = tmp_path / "era.nc"
    _write_geopotential(path)
    result = runner.invoke(app, ["datasets", "inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["format"] == "netcdf"
    (z,) = doc["variables"]
    assert z["name"] == "z" and z["shape"] == [1, 48, 64] and z["field_shape"] == [48, 64]
    assert z["dtype_on_disk"] == "int16" and z["dtype_unpacked"] == "float32" and z["packed"] is True
    assert z["masked_by"] == ["_FillValue=-32767"] and z["standard_name"] == "geopotential"
    table = runner.invoke(app, ["datasets", "inspect", str(path)], env={"COLUMNS": "160"})
    assert table.exit_code == 0 and "float32" in table.stdout and "int16" in table.stdout
    (tmp_path / "junk.nc").write_bytes(b"CDF\x01" + b"\xff" * 20)
    bad = runner.invoke(app, ["datasets", "inspect", str(tmp_path / "junk.nc")])
    assert bad.exit_code == 2 and "not a readable netCDF file" in bad.stderr and "Traceback" not in bad.output


def test_eval_var_end_to_end_verifies_the_bound_on_unpacked_data(tmp_path: Path) -> None:
    path = tmp_path / "f.nc"
    unpacked = _write_geopotential(path)
    base = [sys.executable, "-c", "from perfscout.cli import main; main()"]
    # Masked points are refused by default, counted, with both ways out named.
    refused = subprocess.run([*base, "eval", "--data", str(path), "--var", "z", "--codec", "sz3", "--mode",
                              "rel", "--bound", "1e-3", "--json"], capture_output=True, text=True, timeout=120)
    text = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and refused.stdout == "" and "Traceback" not in text
    assert "3 masked point(s) of 3072" in text and "--nonfinite passthrough" in text and "--fill-masked" in text
    stream, raw = tmp_path / "z.psz", tmp_path / "z.raw"
    proc = subprocess.run([*base, "eval", "--data", str(path), "--var", "z", "--codec", "sz3", "--mode", "rel",
                           "--bound", "1e-3", "--nonfinite", "passthrough", "--json", "--repeats", "1",
                           "--save-compressed", str(stream)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["dataset"] == "f.nc:z" and rec["shape"] == "48,64" and rec["dtype"] == "f32"
    assert rec["status"] == "ok" and rec["bound_ok"] is True
    notes = " ".join(proc.stderr.split())
    assert "unpacked int16 to float32" in notes and "dropped length-1 axis time" in notes
    assert "3 of 3072 points are masked" in notes
    # Independently of the tool's own check: decode the saved stream, compare with CF's values.
    dec = subprocess.run([*base, "decompress", str(stream), "--out", str(raw)], capture_output=True, text=True,
                         timeout=120)
    assert dec.returncode == 0, dec.stderr
    recon = np.fromfile(raw, dtype="<f4").reshape(48, 64)
    valid = ~np.isnan(unpacked)
    value_range = float(unpacked[valid].max() - unpacked[valid].min())
    err = np.abs(recon[valid].astype(np.float64) - unpacked[valid])
    assert err.max() <= 1e-3 * value_range * (1 + 1e-6) and err.max() == pytest.approx(rec["max_abs_err"])
    assert np.isnan(recon[~valid]).all()  # the masked points come back as they went in
    filled = runner.invoke(app, ["eval", "--data", str(path), "--var", "z", "--codec", "zfp", "--mode", "abs",
                                 "--bound", "1", "--fill-masked", "50000", "--dtype", "f64", "--json"])
    assert filled.exit_code == 0, filled.output
    assert json.loads(filled.stdout)["dtype"] == "f64"


def test_eval_var_refusals(tmp_path: Path) -> None:
    path = tmp_path / "f.nc"
    _write_geopotential(path)
    rawfile = tmp_path / "r.bin"
    np.zeros(16, np.float32).tofile(rawfile)
    cases = [
        (["--data", str(path)], "name the variable with --var (variables: z (1x48x64 int16))"),
        (["--data", str(path), "--var", "t2m"], "no variable 't2m'"),
        (["--data", str(path), "--var", "z", "--shape", "48,64"], "--shape is for raw files"),
        (["--data", str(rawfile), "--var", "z"], "--var needs a netCDF, HDF5 or Zarr file"),
        (["--data", str(rawfile), "--shape", "16", "--dtype", "f32", "--fill-masked", "0"], "--fill-masked applies"),
        (["--synthetic", "grf:8,8", "--var", "z"], "--var and --fill-masked name a variable of a --data file"),
    ]
    for args, message in cases:
        res = runner.invoke(app, ["eval", *args, "--codec", "sz3", "--mode", "abs", "--bound", "1"])
        assert res.exit_code == 2, (args, res.output)
        assert message in " ".join(res.stderr.split()) and "Traceback" not in res.output


def test_sweep_spec_with_a_file_variable(tmp_path: Path) -> None:
    from perfscout.api_sweep import sweep
    from perfscout.errors import InputError

    nc, h5 = tmp_path / "f.nc", tmp_path / "g.h5"
    _write_geopotential(nc)
    import h5py

    with h5py.File(h5, "w") as h:
        h.create_dataset("run/temp", data=np.linspace(250, 300, 32 * 32, dtype=">f4").reshape(32, 32),
                         chunks=(8, 8), compression="gzip")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "repeats: 1\nnonfinite: passthrough\n"
        f"datasets:\n  - {{path: {nc.name}, var: z}}\n  - {{path: {h5.name}, var: /run/temp, dtype: f64}}\n"
        "codecs: [zfp]\nmodes: [rel]\nbounds: [1.0e-3]\n")
    df = sweep(spec, out=tmp_path / "run", progress=False, jobs=1)
    by = {row.dataset: row for row in df.itertuples()}
    assert set(by) == {"f.nc:z", "g.h5:run/temp"}
    assert by["f.nc:z"].shape == "48,64" and by["f.nc:z"].dtype == "f32" and by["f.nc:z"].status == "ok"
    assert by["g.h5:run/temp"].dtype == "f64" and by["g.h5:run/temp"].status == "ok"
    # Refused masked points are a nonfinite_input record (not a crash), like NaN input.
    spec.write_text(spec.read_text().replace("nonfinite: passthrough", "nonfinite: refuse"))
    df = sweep(spec, out=tmp_path / "run2", progress=False, jobs=1)
    rows = {row.dataset: row for row in df.itertuples()}
    assert rows["f.nc:z"].status == "nonfinite_input" and "3 masked point(s)" in rows["f.nc:z"].error
    spec.write_text(f"datasets: [{{path: {nc.name}, var: nothere}}]\ncodecs: [zfp]\nbounds: [1.0e-3]\n")
    with pytest.raises(InputError, match="no variable 'nothere'"):
        sweep(spec, out=tmp_path / "run3", progress=False)
    spec.write_text(f"datasets: [{{path: {nc.name}, var: z, shape: [48, 64]}}]\ncodecs: [zfp]\nbounds: [1.0e-3]\n")
    with pytest.raises(InputError, match="drop 'shape'"):
        sweep(spec, out=tmp_path / "run4", progress=False)


def test_real_field_packed_into_netcdf_round_trips_and_evaluates(tmp_path: Path, shared_data: Path) -> None:
    """The real 3-D vorticity, packed to int16 the way archives pack it (scale/offset from the
    range, compressed, big-endian chunks), read back exactly as CF says and evaluated."""
    import netCDF4

    from perfscout.datasets import load_variable
    from perfscout.tools.evaluate import evaluate

    field = np.fromfile(shared_data / "vorticity.128_128_41", dtype="<f4").reshape(41, 128, 128)
    lo, hi = float(field.min()), float(field.max())
    scale = np.float64((hi - lo) / (2**16 - 2))
    offset = np.float64((hi + lo) / 2)
    packed = np.round((field - offset) / scale).astype(np.int16)
    path = tmp_path / "vort.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        for dim, n in zip(("time", "z", "y", "x"), (1, *field.shape)):
            ds.createDimension(dim, n)
        v = ds.createVariable("vort", ">i2", ("time", "z", "y", "x"), zlib=True, endian="big",
                              chunksizes=(1, 8, 64, 64), fill_value=np.int16(-32768))
        v.scale_factor, v.add_offset = scale, offset
        v.set_auto_maskandscale(False)
        v[:] = packed[None]
    loaded = load_variable(path, "vort")
    cf = (packed.astype(np.float64) * scale + offset)
    assert loaded.dtype == np.float64 and loaded.shape == field.shape
    np.testing.assert_array_equal(loaded.array, cf)
    assert np.abs(loaded.array - field).max() <= scale / 2 * (1 + 1e-9)  # packing error only
    rec = evaluate(loaded, "sz3", "rel", 1e-3, repeats=1)
    assert rec.status == "ok" and rec.bound_ok and rec.dataset == "vort.nc:vort" and rec.dtype == "f64"
