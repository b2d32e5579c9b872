"""`perfscout export` and perfscout.tools.export: from a sweep, an agent run or a given
setting to numcodecs / Zarr / xarray / HDF5 configuration, and --check with each target's
own library (h5py + hdf5plugin for HDF5), bound verified on what was read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest
import yaml

from perfscout.errors import InputError
from perfscout.tools import export as ex
from perfscout.tools.bounds import verify_bound
from tests.conftest import load_shared_field

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from perfscout.cli import main; main(sys.argv[1:])"
RNG = np.random.default_rng(7)
SMOOTH = np.cumsum(np.cumsum(RNG.standard_normal((24, 40, 36)), axis=0), axis=1).astype(np.float32)


def perfscout(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFSCOUT_HOME": str(home), "COLUMNS": "80",
           "PERFSCOUT_PLANNER": "deterministic"}
    return subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep: sz3 and zfp, abs and rel, on a smooth synthetic field."""
    root = tmp_path_factory.mktemp("sweep")
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "export-src", "repeats": 1, "jobs": 1, "datasets": [{"synthetic": "smooth:16,32,32"}],
        "codecs": ["sz3", "zfp"], "devices": ["cpu"], "modes": ["abs", "rel"], "bounds": [1e-2, 1e-3],
    }))
    out = root / "run"
    r = perfscout("sweep", str(spec), "--out", str(out), "--no-progress", cwd=root, home=root / "home")
    assert r.returncode == 0, r.stderr
    return out


def test_hdf5_filter_arguments_round_trip_through_h5py(tmp_path: Path) -> None:
    for codec, mode, bound in (("sz3", "abs", 1e-2), ("sz2", "pw_rel", 1e-2), ("zfp", "abs", 1e-3),
                               ("zfp", "fixed_rate", 16), ("sz3-h5", "rel", 1e-3)):
        data = SMOOTH + (np.float32(500) if mode == "pw_rel" else np.float32(0))
        s = ex.resolve_for_data(ex.make_setting(codec, mode, bound), data)
        name, kwargs = ex.hdf5_filter(s)
        path = tmp_path / f"{codec}-{mode}.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=data, chunks=(12, 40, 36), **getattr(hdf5plugin, name)(**kwargs))
        with h5py.File(path, "r") as f:  # what HDF5 gives back from disk
            back = f["x"][()]
            stored = f["x"].id.get_storage_size()
        check = verify_bound(data, back, abs_bound=s.abs_bound if mode in ("abs", "rel") else None,
                             pw_rel_bound=bound if mode == "pw_rel" else None)
        assert check.bound_ok in (True, None), (codec, mode, check.message)
        assert stored < data.nbytes
    assert ex.hdf5_filter(ex.make_setting("szp-gpu", "abs", 1e-3)) is None  # no HDF5 filter runs szp


def test_configs_and_snippets_are_what_the_libraries_take(tmp_path: Path) -> None:
    s = ex.make_setting("sz3", "rel", 1e-3, value_range=float(SMOOTH.max() - SMOOTH.min()))
    cfg = ex.configs(s)
    import numcodecs
    import zarr

    assert numcodecs.get_codec(cfg["numcodecs"]).get_config() == cfg["numcodecs"]
    assert cfg["numcodecs"]["mode"] == "abs" and cfg["numcodecs"]["rel_bound"] == 1e-3
    assert cfg["hdf5"]["kwargs"] == {"absolute": s.abs_bound}
    # The printed Zarr pipeline is exactly what zarr writes into zarr.json.
    from perfscout.codecs.numcodecs.zarr3 import SZ3

    store = tmp_path / "a.zarr"
    arr = zarr.create_array(store, shape=SMOOTH.shape, dtype="f4", serializer=SZ3(**{
        k: v for k, v in cfg["numcodecs"].items() if k != "id"}), compressors=None)
    arr[:] = SMOOTH
    assert json.loads((store / "zarr.json").read_text())["codecs"] == cfg["zarr"]["codecs"]
    # Every snippet runs as printed on the user's `data` / `ds` and the result holds the bound.
    snips = ex.snippets("sz3", "rel", 1e-3, dtype="f32")
    import xarray as xr

    namespace = {"data": SMOOTH, "ds": xr.Dataset({"t": (("a", "b", "c"), SMOOTH)}), "np": np}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for target in ("numcodecs", "zarr", "xarray", "hdf5"):
            exec(snips[target], namespace)  # noqa: S102 - the snippet is ours; running it is the test
    finally:
        os.chdir(cwd)
    eb = 1e-3 * float(SMOOTH.max() - SMOOTH.min())
    assert verify_bound(SMOOTH, namespace["back"], abs_bound=eb).bound_ok
    assert verify_bound(SMOOTH, zarr.open_array(tmp_path / "field.zarr", mode="r")[:], abs_bound=eb).bound_ok
    with h5py.File(tmp_path / "field.h5", "r") as f:
        assert verify_bound(SMOOTH, f["field"][()], abs_bound=eb).bound_ok
    with xr.open_zarr(tmp_path / "dataset.zarr") as back_ds:
        assert verify_bound(SMOOTH, back_ds["t"].values, abs_bound=eb).bound_ok


def test_check_every_target_verifies_bound_and_ratio(tmp_path: Path) -> None:
    s = ex.make_setting("zfp", "abs", 1e-3)
    results = {c.target: c for c in ex.check(s, SMOOTH, tmp_path, chunks=(8, 40, 36))}
    assert set(results) == set(ex.TARGETS)
    for c in results.values():
        assert c.status == "ok" and c.bound_ok and c.ratio > 1 and c.max_abs_err <= 1e-3, c
        assert Path(c.path).exists()
    szp = {c.target: c for c in ex.check(ex.make_setting("szp-gpu", "abs", 1e-3), SMOOTH, tmp_path / "szp")}
    assert szp["hdf5"].status == "not_applicable" and szp["zarr"].status == "ok"


def test_check_reports_a_broken_bound_as_a_finding(tmp_path: Path) -> None:
    # zfp's accuracy mode misses its tolerance on values spanning many decades (DESIGN.md)
    data = (10.0 ** RNG.uniform(-30, 30, size=4096)) * RNG.choice([-1, 1], 4096)
    results = {c.target: c for c in ex.check(ex.make_setting("zfp", "abs", 1e-12, dtype="f64"), data, tmp_path,
                                             targets=("numcodecs", "hdf5"))}
    assert results["hdf5"].status == "bound_violated" and results["hdf5"].bound_ok is False
    assert results["numcodecs"].status == "bound_violated"  # the codec refused to write the chunk


def test_choose_best_ratio_with_bound_held_or_the_named_row(sweep_dir: Path) -> None:
    best = ex.choose_setting(sweep_dir)
    rows, kind = ex.stored_records(sweep_dir)
    assert kind == "sweep"
    held = [r for r in rows if r["status"] == "ok" and r["bound_ok"]]
    assert best.expected_ratio == max(r["ratio"] for r in held)
    named = ex.choose_setting(sweep_dir, codec="zfp", mode="rel", bound=1e-3)
    assert (named.codec, named.mode, named.bound) == ("zfp", "rel", 1e-3) and named.value_range > 0
    # zfp has no native rel: the record's enforced abs bound is what gets exported
    assert ex.numcodecs_config(named)["mode"] == "abs"
    with pytest.raises(InputError, match="held its bound"):
        ex.choose_setting(sweep_dir, codec="sz2")


def test_fixed_rate_rows_are_exported_when_asked_for_by_mode(tmp_path: Path) -> None:
    spec = tmp_path / "fr.yaml"
    spec.write_text(yaml.safe_dump({"name": "fr", "repeats": 1, "jobs": 1, "datasets": [{"synthetic": "smooth:8,16,16"}],
                                    "codecs": ["zfp"], "devices": ["cpu"], "modes": ["fixed_rate"], "bounds": [8]}))
    r = perfscout("sweep", str(spec), "--out", str(tmp_path / "run"), "--no-progress", cwd=tmp_path,
                  home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    with pytest.raises(InputError, match="held its bound"):  # no bound: never "the best that held"
        ex.choose_setting(tmp_path / "run")
    s = ex.choose_setting(tmp_path / "run", mode="fixed_rate")
    assert (s.codec, s.mode, s.bound) == ("zfp", "fixed_rate", 8.0)
    assert ex.hdf5_filter(s) == ("Zfp", {"rate": 8.0})


def test_cli_export_from_a_sweep_with_check_json(sweep_dir: Path, tmp_path: Path) -> None:
    r = perfscout("export", str(sweep_dir), "--codec", "sz3", "--mode", "rel", "--bound", "1e-3",
                  "--check", "smooth:16,32,32", "--json", cwd=tmp_path, home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["setting"]["codec"] == "sz3" and doc["setting"]["expected_ratio"] > 1
    assert set(doc["configs"]) == set(ex.TARGETS) and set(doc["snippets"]) == set(ex.TARGETS)
    checks = {c["target"]: c for c in doc["check"]}
    for target in ex.TARGETS:
        assert checks[target]["status"] == "ok" and checks[target]["bound_ok"], checks[target]
        assert checks[target]["ratio_vs_expected"] > 0.2  # same field: close to what the sweep measured


@pytest.mark.slow
def test_cli_export_from_an_agent_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"datasets": ["synthetic:smooth:16,16"], "codecs": ["sz3", "zfp"],
                                    "mode": "abs", "bounds": [1e-2], "repeats": 1}))
    run = perfscout("run", "--spec", str(spec), "--json", cwd=tmp_path, home=home)
    assert run.returncode == 0, run.stderr
    run_dir = json.loads(run.stdout)["run_dir"]
    r = perfscout("export", run_dir, "--target", "numcodecs", "--target", "hdf5", cwd=tmp_path, home=home)
    assert r.returncode == 0, r.stderr
    assert "agent run" in r.stdout and "numcodecs.get_codec" in r.stdout and "hdf5plugin." in r.stdout
    assert "zarr.create_array" not in r.stdout  # only the targets asked for


def test_cli_export_given_setting_real_field_text(shared_data: Path, tmp_path: Path) -> None:
    field = shared_data / "vorticity.512_512"
    r = perfscout("export", "--codec", "sz3", "--mode", "rel", "--bound", "1e-3", "--check", str(field),
                  "--shape", "512,512", "--dtype", "f32", "--keep", str(tmp_path / "kept"),
                  cwd=tmp_path, home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    assert "--check: written, read back" in r.stdout and "bound_violated" not in r.stdout
    data = load_shared_field("vorticity.512_512")
    with h5py.File(tmp_path / "kept" / "sample.h5", "r") as f:  # the kept HDF5 file, reread here
        eb = 1e-3 * float(data.max() - data.min())
        assert verify_bound(data, f["field"][()], abs_bound=eb).bound_ok


@pytest.mark.parametrize("args, needle", [
    (("--codec", "sz3", "--mode", "psnr", "--bound", "60"), "searched per field"),
    (("--codec", "sz3", "--mode", "pw_rel", "--bound", "1e-3"), "no native mode"),
    (("--codec", "nope", "--mode", "abs", "--bound", "1e-3"), "cannot be exported"),
    (("--codec", "sz3", "--mode", "abs"), "--bound"),
    (("--codec", "sz3", "--mode", "abs", "--bound", "-1"), "positive"),
    (("--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--target", "netcdf"), "--target"),
    (("--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--check", "no/such/file"), "not a file"),
    (("--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--check", "smooth:8,8", "--chunks", "4"), "axes"),
    (("--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--check", "smooth:8,8", "--chunks", "4,9"), "larger"),
    (("/nonexistent/run",), "neither a sweep"),
])
def test_cli_export_bad_input_exits_2_with_a_message(tmp_path: Path, args, needle) -> None:
    r = perfscout("export", *args, cwd=tmp_path, home=tmp_path / "home")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in " ".join(r.stderr.split()) and "Traceback" not in r.stderr


def test_cli_export_rel_without_a_range_prints_snippets_that_compute_it(tmp_path: Path) -> None:
    r = perfscout("export", "--codec", "sz2", "--mode", "rel", "--bound", "1e-3", "--json", cwd=tmp_path,
                  home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["configs"] is None and "np.nanmax(data) - np.nanmin(data)" in doc["snippets"]["numcodecs"]


def test_use_it_markdown_ends_a_report_with_the_best_verified_setting(sweep_dir: Path) -> None:
    rows, _ = ex.stored_records(sweep_dir)
    text = ex.use_it_markdown(rows)
    best = ex.choose_setting(sweep_dir)
    assert text.startswith("## Use it") and f"**{best.codec} " in text
    assert text.count("```python") == 4 and "numcodecs.get_codec" in text and "hdf5plugin." in text
    broken = [{**r, "bound_ok": False} for r in rows]
    assert ex.use_it_markdown(broken) == ""  # nothing held its bound: nothing to recommend
    with pytest.raises(InputError, match="cannot be exported"):
        ex.make_setting("nvcomp-lz4", "abs", 1e-3)
