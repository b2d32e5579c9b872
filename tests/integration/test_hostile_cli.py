"""Hostile inputs across the CLI: every command, table-driven, through the real app.

Each case runs ``perfscout ...`` (typer's CliRunner on the same app ``main`` runs, so the
one error handler in ``perfscout.cli.LazyGroup.invoke`` is what is tested) with an input an
attacker or a tired user would give, and asserts what ``perfscout --help`` promises:
exit code 2 for bad input (1 for measured but not ok), one clear ``error:`` line on stderr
naming what is wrong, no traceback, nothing on stdout for a refused ``--json``, and no
partial file left where an output was asked for. The real components run: pysz/zfpy,
SQLite, the sweep engine, the ncu/perf parsers, the sandbox's argument checks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfscout.cli import app

ROOT = Path(__file__).resolve().parents[2]
NCU = ROOT / "tests" / "fixtures" / "ncu" / "h200_cupy_kernels_raw.csv"
runner = CliRunner()


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of hostile files; ``{F}`` in a case's arguments stands for it."""
    d = tmp_path_factory.mktemp("hostile")
    (d / "empty").write_bytes(b"")
    (d / "one").write_bytes(b"x")
    np.random.default_rng(0).standard_normal(1000).astype("<f4").tofile(d / "r1000.f32")
    (d / "r1001").write_bytes(np.zeros(1000, "<f4").tobytes() + b"z")
    np.full(64, np.nan, "<f4").tofile(d / "allnan.f32")
    (d / "fake.nc").write_bytes(b"CDF\x01" + bytes(range(256)) * 2)
    (d / "fake.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)))
    (d / "junk.bin").write_bytes(bytes(range(256)) * 16)
    (d / "hdr.csv").write_text('"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n')
    (d / "adir").mkdir()
    os.symlink(d / "loop1", d / "loop2")
    os.symlink(d / "loop2", d / "loop1")
    os.mkfifo(d / "fifo")  # a reader that opens it blocks until a writer comes: must be refused unopened
    (d / "list.yaml").write_text("- a\n- b\n")
    (d / "deep.yaml").write_text("a: " + "[" * 500 + "]" * 500 + "\n")
    levels = ["a: &a [x,x,x,x,x,x,x,x,x]"] + [
        f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]" for p, n in zip("abcdef", "bcdefg")]
    (d / "bomb.yaml").write_text("\n".join(levels) + "\n")
    (d / "ht.json").write_text("[1, 2, 3]")
    (d / "not_json.json").write_text("{not json")
    grid = "datasets: [{synthetic: 'grf:8,8'}]\ncodecs: [zfp]\nmodes: [abs]\nbounds: [1.0e-2]\n"
    specs = {
        "repeats_huge": "name: t\nrepeats: 1000000000\n" + grid,
        "jobs_negative": "name: t\njobs: -1\n" + grid,
        "unknown_key": "name: t\nbogus: 3\n" + grid,
        "bound_nan": "name: t\ndatasets: [{synthetic: 'grf:8,8'}]\ncodecs: [zfp]\nmodes: [abs]\nbounds: [.nan]\n",
        "bound_text": "name: t\ndatasets: [{synthetic: 'grf:8,8'}]\ncodecs: [zfp]\nmodes: [abs]\nbounds: [abc]\n",
        "synthetic_huge": f"name: t\ndatasets: [{{synthetic: 'grf:{2**62}'}}]\ncodecs: [zfp]\nmodes: [abs]\n"
                          "bounds: [1.0e-2]\n",
        "synthetic_5d": "name: t\ndatasets: [{synthetic: 'grf:2,2,2,2,2'}]\ncodecs: [zfp]\nmodes: [abs]\n"
                        "bounds: [1.0e-2]\n",
        "wrong_size": f"name: t\ndatasets: [{{path: '{d / 'r1000.f32'}', shape: [999], dtype: f32}}]\n"
                      "codecs: [zfp]\nmodes: [abs]\nbounds: [1.0e-2]\n",
        "fake_netcdf": f"name: t\ndatasets: [{{path: '{d / 'fake.nc'}', var: x}}]\ncodecs: [zfp]\nmodes: [abs]\n"
                       "bounds: [1.0e-2]\n",
        "plugins": "name: t\nplugins: [os]\n" + grid,
        "empty": "",
        "scalar": "42\n",
    }
    for name, text in specs.items():
        (d / f"{name}.yaml").write_text(text)
    return d


def _expand(args: list[str], d: Path) -> list[str]:
    return [a.replace("{F}", str(d)).replace("{NCU}", str(NCU)) for a in args]


def assert_clean_failure(result, code: int, needle: str) -> None:  # noqa: ANN001 - click's Result
    """Exit ``code``, an ``error:`` naming ``needle`` on stderr, no traceback."""
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"escaped: {exc!r}"
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    assert result.exit_code == code, (result.exit_code, result.stdout[-500:], result.stderr[-1500:])
    said = " ".join(result.stderr.split())  # rich wraps at 80 columns
    assert needle in said, said
    assert "unexpected" not in said, f"a bug reached the last line of defence: {said}"


E = ["--codec", "sz3", "--mode", "abs", "--bound", "1e-3"]
RAW = ["--data", "{F}/r1000.f32", "--shape", "1000", "--dtype", "f32"]

#: (arguments, exit code, what the message must say). {F}: the hostile folder.
CASES: list[tuple[list[str], int, str]] = [
    # -- eval: files, shapes, values, bounds, options ------------------------------------
    (["eval", "--data", "{F}/empty", "--shape", "4", "--dtype", "f32", *E], 2, "0 bytes"),
    (["eval", "--data", "{F}/one", "--shape", "1", "--dtype", "f32", *E], 2, "1 bytes"),
    (["eval", "--data", "{F}/r1001", "--shape", "1000", "--dtype", "f32", *E], 2, "4001 bytes"),
    (["eval", "--data", "{F}/r1000.f32", "--shape", "0,1000", "--dtype", "f32", *E], 2, ">= 1"),
    (["eval", "--data", "{F}/r1000.f32", "--shape", "-1000", "--dtype", "f32", *E], 2, ">= 1"),
    (["eval", "--data", "{F}/r1000.f32", "--shape", str(2**62), "--dtype", "f32", *E], 2, "bytes"),
    (["eval", "--data", "{F}/r1000.f32", "--shape", "1000", "--dtype", "i8", *E], 2, "unknown dtype"),
    (["eval", "--data", "{F}/allnan.f32", "--shape", "64", "--dtype", "f32", *E], 2, "non-finite"),
    (["eval", "--data", "{F}/allnan.f32", "--shape", "64", "--dtype", "f32", "--nonfinite", "passthrough", *E],
     2, "every element is non-finite"),
    (["eval", *RAW, "--codec", "sz3", "--mode", "abs", "--bound", "0"], 2, "bound must be"),
    (["eval", *RAW, "--codec", "sz3", "--mode", "abs", "--bound", "nan"], 2, "bound must be"),
    (["eval", *RAW, "--codec", "sz3", "--mode", "abs", "--bound", "-inf"], 2, "bound must be"),
    (["eval", *RAW, "--codec", "sz3", "--mode", "abs", "--bound", "abc"], 2, "--bound"),
    (["eval", *RAW, "--codec", "sz3", "--mode", "ratio", "--bound", "0.5"], 2, "ratio must be >= 1"),
    (["eval", *RAW, "--codec", "zfp", "--mode", "fixed_rate", "--bound", "1e300"], 2, "<= 64"),
    (["eval", *RAW, "--codec", "sz3", "--mode", "ratio", "--bound", "1e300"], 2, "no codec can exceed 4000x"),
    (["eval", *RAW, "--codec", "sz2", "--mode", "psnr", "--bound", "1e300"], 2, "no bound can express"),
    (["eval", *RAW, "--codec", "zfp", "--mode", "psnr", "--bound", "7000"], 2, "targets up to 6004 dB"),
    (["eval", *RAW, *E, "--repeats", "0"], 2, "repeats must be an integer from 1"),
    (["eval", *RAW, *E, "--repeats", "1000000000"], 2, "repeats must be an integer from 1 to 1000"),
    (["eval", *RAW, *E, "--device", "tpu"], 2, "device must be one of"),
    (["eval", *RAW, *E, "--option", "threads=1000000"], 2, "threads must be an integer"),
    (["eval", *RAW, "--codec", "../etc", "--mode", "abs", "--bound", "1"], 2, "unknown codec"),
    (["eval", "--data", "{F}/fake.nc", "--var", "x", *E], 2, "not a readable netCDF"),
    (["eval", "--data", "{F}/fake.h5", "--var", "x", *E], 2, "not a readable HDF5"),
    (["eval", "--data", "{F}/junk.bin", "--var", "x", *E], 2, "--var needs a netCDF, HDF5 or Zarr"),
    (["eval", "--data", "{F}/loop1", "--shape", "4", "--dtype", "f32", *E], 2, "not found"),
    (["eval", "--data", "{F}/adir", "--shape", "4", "--dtype", "f32", *E], 2, "not a regular file"),
    (["eval", "--synthetic", f"grf:{2**62}", *E], 2, "use a smaller shape"),
    (["eval", "--synthetic", "grf:1,1,1,1,1", *E], 2, "at most 4"),
    (["eval", "--dataset", "../../etc/passwd", *E], 2, "unknown dataset"),
    (["eval", "--synthetic", "grf:8,8", *E, "--save-compressed", "{F}/no/such/dir/x.pscz"], 2,
     "does not exist"),
    (["eval", "--synthetic", "grf:8,8", *E, "--save-compressed", "{F}/adir"], 2, "is a directory"),
    # -- decompress ----------------------------------------------------------------------
    (["decompress", "{F}/junk.bin", "--out", "{F}/out.raw"], 2, "bad magic"),
    (["decompress", "{F}/empty", "--out", "{F}/out.raw"], 2, "truncated"),
    (["decompress", "{F}/adir", "--out", "{F}/out.raw"], 2, "not found"),
    # -- diagnose / verify ---------------------------------------------------------------
    (["diagnose", "--ncu-csv", "{F}/empty", "--json"], 2, "no ncu CSV header"),
    (["diagnose", "--ncu-csv", "{F}/junk.bin", "--json"], 2, "binary data"),
    (["diagnose", "--ncu-csv", "{F}/hdr.csv", "--json"], 2, "no kernel rows"),
    (["diagnose", "--ncu-csv", "{F}/adir"], 2, "it is a directory"),
    (["diagnose", "--ncu-csv", "/dev/zero"], 2, "it is a device"),
    (["diagnose", "--ncu-csv", "{F}/fifo"], 2, "it is a FIFO"),
    (["diagnose", "--perf-csv", "{F}/fifo"], 2, "it is a FIFO"),
    (["diagnose", "--ncu-csv", "{NCU}", "--host-timing", "/dev/zero"], 2, "it is a device"),
    (["verify", "--kernel", "k", "--before-csv", "{NCU}", "--after-csv", "{NCU}", "--timings", "{F}/fifo"], 2,
     "it is a FIFO"),
    (["diagnose", "--ncu-csv", "{F}/loop1"], 2, "symlink loop"),
    (["diagnose", "--perf-csv", "{F}/empty"], 2, "no perf stat counter lines"),
    (["diagnose", "--ncu-rep", "{F}/junk.bin"], 2, "ncu"),
    (["diagnose"], 2, "give at least one"),
    (["diagnose", "--ncu-csv", "{NCU}", "--top", "-5"], 2, "--top"),
    (["diagnose", "--ncu-csv", "{NCU}", "--host-timing", "{F}/ht.json"], 2, "expected a JSON object"),
    (["diagnose", "--ncu-csv", "{NCU}", "--host-timing", "{F}/not_json.json"], 2, "host timing JSON"),
    (["diagnose", "--ncu-csv", "{NCU}", "--host-timing", "{F}/junk.bin"], 2, "host timing JSON"),
    (["verify", "--kernel", "k", "--before-csv", "{F}/junk.bin", "--after-csv", "{NCU}"], 2, "binary data"),
    (["verify", "--kernel", "nope", "--before-csv", "{NCU}", "--after-csv", "{NCU}"], 2, "not in the profile"),
    # -- sweep specs ---------------------------------------------------------------------
    (["sweep", "{F}/list.yaml", "--out", "{F}/s_list"], 2, "YAML mapping"),
    (["sweep", "{F}/bomb.yaml", "--out", "{F}/s_bomb"], 2, "alias bomb"),
    (["sweep", "{F}/deep.yaml", "--out", "{F}/s_deep"], 2, "nested more than"),
    (["sweep", "{F}/junk.bin", "--out", "{F}/s_junk"], 2, "sweep spec"),
    (["sweep", "{F}/repeats_huge.yaml", "--out", "{F}/s_rep"], 2, "repeats"),
    (["sweep", "{F}/jobs_negative.yaml", "--out", "{F}/s_jobs"], 2, "jobs"),
    (["sweep", "{F}/unknown_key.yaml", "--out", "{F}/s_unknown"], 2, "bogus"),
    (["sweep", "{F}/bound_nan.yaml", "--out", "{F}/s_nan"], 2, "finite"),
    (["sweep", "{F}/bound_text.yaml", "--out", "{F}/s_text"], 2, "valid number"),
    (["sweep", "{F}/synthetic_huge.yaml", "--out", "{F}/s_huge"], 2, "no machine holds"),
    (["sweep", "{F}/synthetic_5d.yaml", "--out", "{F}/s_5d"], 2, "at most 4"),
    (["sweep", "{F}/wrong_size.yaml", "--out", "{F}/s_size"], 2, "expected 3996 bytes"),
    (["sweep", "{F}/fake_netcdf.yaml", "--out", "{F}/s_nc"], 2, "not a readable netCDF"),
    (["sweep", "{F}/plugins.yaml", "--out", "{F}/s_plugins"], 2, "--allow-plugins"),
    (["sweep", "{F}/empty.yaml", "--out", "{F}/s_empty"], 2, "YAML mapping"),
    (["sweep", "{F}/scalar.yaml", "--out", "{F}/s_scalar"], 2, "YAML mapping"),
    (["sweep", "{F}/adir", "--out", "{F}/s_dir"], 2, "it is a directory"),
    (["sweep", "{F}/loop1", "--out", "{F}/s_loop"], 2, "symlink loop"),
    (["sweep", "/dev/zero", "--out", "{F}/s_zero"], 2, "it is a device"),
    (["sweep", "{F}/fifo", "--out", "{F}/s_fifo"], 2, "it is a FIFO"),
    (["sweep", "{F}/plugins.yaml", "--out", "{F}/one"], 2, "--allow-plugins"),
    # -- report / export / regress / agent / snapshot / bench / tune / profile / datasets --
    (["report", "{F}/adir"], 2, "not a sweep run directory"),
    (["report", "{F}/one"], 2, "not a sweep run directory"),
    (["export", "{F}/adir"], 2, "neither a sweep directory"),
    (["export", "--codec", "sz3", "--mode", "abs", "--bound", "nan"], 2, "bound must be"),
    (["export", "--codec", "sz3", "--mode", "rel", "--bound", "1e-3", "--value-range", "-1"], 2, "value range"),
    (["export", "--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--check", "grf:16,16", "--chunks", "0,0"],
     2, "--chunks"),
    (["export", "--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--target", "nope"], 2, "--target"),
    (["export", "--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--check", "grf:16,16", "--keep", "{F}"],
     2, "holds files that are not export's samples"),
    (["export", "--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--check", "grf:16,16", "--keep", "{F}/one"],
     2, "it is a file, not a directory"),
    (["regress", "{F}/adir", "{F}/adir"], 2, "not a run directory"),
    (["regress", "{F}/ht.json", "{F}/not_json.json"], 2, "samples"),
    (["regress", "nosuchbaseline", "other"], 2, "stored baseline"),
    (["regress", "--save-baseline", "../../evil", "{F}/adir"], 2, "baseline name"),
    (["regress", "a", "b", "--threshold", "nan"], 2, "threshold"),
    (["resume", "no-such-thread"], 2, "no run with thread id"),
    (["resume", "no-such-thread", "--answer", "{bad json"], 2, "not valid JSON"),
    (["snapshot", "--save", "../../evil", "--no-gpu"], 2, "snapshot name"),
    (["run", "--spec", "{F}/bomb.yaml"], 2, "alias bomb"),
    (["run", "--spec", "{F}/list.yaml"], 2, "mapping"),
    (["run"], 2, "give exactly one of"),
    (["tune", "{F}/list.yaml"], 2, "mapping"),
    (["tune", "{F}/adir"], 2, "it is a directory"),
    (["tune", "/dev/zero"], 2, "it is a device"),
    (["tune", "{F}/bomb.yaml"], 2, "alias bomb"),
    (["bench", "--spec", "{F}/fifo"], 2, "it is a FIFO"),
    (["bench", "--spec", "{F}/bomb.yaml"], 2, "alias bomb"),
    (["run", "--spec", "/dev/zero"], 2, "it is a device"),
    (["bench", "--repeats", "1000000000", "--", "true"], 2, "repeats"),
    (["bench", "--figure", "(unclosed", "--", "true"], 2, "does not compile"),
    (["bench", "--env", "NOEQUALS", "--", "true"], 2, "NAME=VALUE"),
    (["bench", "--repeats", "1", "--out", "{F}", "--", "true"], 2, "holds files that are not a bench run's"),
    (["snapshot", "--save", "", "--no-gpu"], 2, "snapshot name"),
    (["profile", "--tool", "gdb", "--", "true"], 2, "--tool"),
    (["profile", "--timeout", "-1", "--", "true"], 2, "wall-clock limit must be a finite number"),
    (["profile", "--timeout", "nan", "--", "true"], 2, "wall-clock limit must be a finite number"),
    (["datasets", "inspect", "{F}/fake.nc"], 2, "not a readable netCDF"),
    (["datasets", "inspect", "{F}/junk.bin"], 2, "no known signature"),
    (["datasets", "inspect", "{F}/adir"], 2, "no Zarr store"),
    (["datasets", "inspect", "{F}/loop1"], 2, "not found"),
]


@pytest.mark.parametrize(("args", "code", "needle"), CASES, ids=[" ".join(c[0])[:70] for c in CASES])
def test_hostile_input_is_a_clean_failure(args: list[str], code: int, needle: str, bad: Path,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in bad.iterdir())
    result = runner.invoke(app, _expand(args, bad))
    assert_clean_failure(result, code, needle)
    if "--json" in args:
        assert result.stdout == ""
    # nothing created beside the hostile files: no half-written output, no refused run's folder
    assert sorted(p.name for p in bad.iterdir()) == before


def test_a_refused_sweep_leaves_no_store(bad: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec refused while it is expanded (a field no machine holds) writes nothing: the
    size is checked before the store exists (it used to die in SQLite, int64 overflow)."""
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    out = tmp_path / "run"
    result = runner.invoke(app, ["sweep", str(bad / "synthetic_huge.yaml"), "--out", str(out), "--no-progress"])
    assert_clean_failure(result, 2, "no machine holds")
    assert not (out / "results.sqlite").exists()


def test_perfscout_home_that_is_a_file(bad: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home_file"
    home.write_text("not a directory")
    monkeypatch.setenv("PERFSCOUT_HOME", str(home))
    for args in (["runs"], ["snapshot", "--save", "box", "--no-gpu"], ["run", "what is this machine?"]):
        result = runner.invoke(app, args)
        assert_clean_failure(result, 2, "is a file, not a directory")
        assert "PERFSCOUT_HOME" in " ".join(result.stderr.split())
    assert home.read_text() == "not a directory"


@pytest.mark.parametrize(("home", "needle"), [
    ("~no-such-user-perfscout/x", "Could not determine home directory"),
    ("/proc/no/such/place", "cannot be used"),
])
def test_perfscout_home_that_cannot_be_used(home: str, needle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's checkpoints live in the home: one that cannot be created or written is
    said by name before the graph starts (it failed inside SQLite or pathlib, as a bug)."""
    monkeypatch.setenv("PERFSCOUT_HOME", home)
    for args in (["run", "what is this machine?"], ["resume", "abc"]):
        result = runner.invoke(app, args)
        assert_clean_failure(result, 2, needle)
        assert "PERFSCOUT_HOME" in " ".join(result.stderr.split())


def test_read_only_output_directory_keeps_what_is_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories; the permission check cannot fail here")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "keep.raw").write_bytes(b"mine")
    ro.chmod(0o500)
    try:
        result = runner.invoke(app, ["eval", "--synthetic", "grf:8,8", *E, "--save-compressed",
                                     str(ro / "keep.raw")])
        assert_clean_failure(result, 2, "Permission denied")
        assert (ro / "keep.raw").read_bytes() == b"mine" and sorted(os.listdir(ro)) == ["keep.raw"]
    finally:
        ro.chmod(0o700)


def test_a_failed_write_keeps_the_users_file(tmp_path: Path) -> None:
    """``--out`` that cannot be written (a directory in its place): refused, and a file of
    the user's with the same name elsewhere is untouched; no temporary file stays behind."""
    target = tmp_path / "field.raw"
    target.mkdir()
    packed = tmp_path / "f.pscz"
    ok = runner.invoke(app, ["eval", "--synthetic", "grf:8,8", *E, "--save-compressed", str(packed)])
    assert ok.exit_code == 0, ok.stderr
    result = runner.invoke(app, ["decompress", str(packed), "--out", str(target)])
    assert_clean_failure(result, 2, "is a directory")
    assert target.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["f.pscz", "field.raw"]


def test_unexpected_errors_are_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last line of defence: a bug (here planted: the loader raises ZeroDivisionError)
    is one ``error:`` line naming it and exit code 2; ``--verbose`` logs the traceback."""
    import perfscout.cli.eval_cmd as eval_cmd

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(eval_cmd, "load_input", broken)
    result = runner.invoke(app, ["eval", "--synthetic", "grf:8,8", *E])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    said = " ".join(result.stderr.split())
    assert "unexpected ZeroDivisionError: planted" in said and "Traceback" not in said
    verbose = runner.invoke(app, ["--verbose", "eval", "--synthetic", "grf:8,8", *E])
    assert verbose.exit_code == 2 and "Traceback" in verbose.stderr


def test_json_of_a_refusal_is_empty_stdout(bad: Path) -> None:
    result = runner.invoke(app, ["eval", "--data", str(bad / "r1001"), "--shape", "1000", "--dtype", "f32", *E,
                                 "--json"])
    assert_clean_failure(result, 2, "4001 bytes")
    assert result.stdout == ""
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC",{metrics}\n"","","","","","","","","","","",{units}\n')
ROW = '"0","1","p","h","k","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0",{cells}\n'


@pytest.mark.parametrize(("metrics", "units", "cells", "needle"), [
    ('"gpu__time_duration.sum"', '"nsecond"', '"abc"', "is not a finite number in 1 launch(es) (ID 0: 'abc')"),
    ('"gpu__time_duration.sum"', '"nsecond"', '"inf"', "is not a finite number in 1 launch(es) (ID 0: 'inf')"),
    ('"gpu__time_duration.sum","gpu__time_duration.sum"', '"nsecond","nsecond"', '"abc","12"',
     "appears 2 times and its copies disagree"),
])
def test_profile_cells_ncu_never_prints_are_said(metrics: str, units: str, cells: str, needle: str,
                                                 tmp_path: Path) -> None:
    """A hand-edited or damaged ncu CSV (a duration that is text or infinite, a metric
    column twice with different values) still diagnoses, and the JSON says what was odd
    instead of ranking an unknown time as zero in silence."""
    path = tmp_path / "odd.csv"
    path.write_text(HEAD.format(metrics=metrics, units=units) + ROW.format(cells=cells))
    result = runner.invoke(app, ["diagnose", "--ncu-csv", str(path), "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert any(needle in w for w in doc["warnings"]), doc["warnings"]


@pytest.mark.parametrize("kind", ["hdf5", "zarr", "netcdf", "raw"])
def test_a_variable_larger_than_memory_is_refused_before_reading(kind: str, tmp_path: Path) -> None:
    """A few KiB on disk can claim terabytes: chunked HDF5/Zarr/netCDF-4 variables whose
    chunks were never written, a sparse raw file. Refused with the sizes before the library
    is asked to allocate (h5py raised MemoryError for 4 TiB, which reached the user as a
    bug)."""
    n = 2**40
    if kind == "hdf5":
        h5py = pytest.importorskip("h5py")
        path, var = tmp_path / "huge.h5", "v"
        with h5py.File(path, "w") as f:
            f.create_dataset(var, shape=(n,), dtype="f4", chunks=(2**20,))
    elif kind == "zarr":
        zarr = pytest.importorskip("zarr")
        path, var = tmp_path / "huge.zarr", "array"
        zarr.open_array(str(path), mode="w", shape=(2**20, 2**20), chunks=(1024, 1024), dtype="f4")
    elif kind == "netcdf":
        netCDF4 = pytest.importorskip("netCDF4")
        path, var = tmp_path / "huge.nc", "v"
        with netCDF4.Dataset(path, "w") as d:
            d.createDimension("x", n)
            d.createVariable(var, "f4", ("x",))
    else:
        path, var = tmp_path / "sparse.f32", None
        try:
            with open(path, "wb") as fh:
                fh.truncate(n * 4)  # sparse: no block is written
        except OSError as exc:  # a file system without 4 TiB sparse files
            pytest.skip(f"cannot make a 4 TiB sparse file in {tmp_path}: {exc}")
    args = ["--var", var] if var else ["--shape", str(n), "--dtype", "f32"]
    result = runner.invoke(app, ["eval", "--data", str(path), *args, *E])
    assert_clean_failure(result, 2, "is available here")


def test_an_output_that_is_the_input_is_refused(bad: Path, tmp_path: Path) -> None:
    """``--save-compressed`` naming the data file (or a link to it), ``decompress --out``
    naming the stream: refused before anything runs, the input byte for byte intact."""
    data = tmp_path / "field.f32"
    data.write_bytes((bad / "r1000.f32").read_bytes())
    original = data.read_bytes()
    (tmp_path / "alias").symlink_to(data)
    for target in (data, tmp_path / "alias", tmp_path / "." / "field.f32"):
        result = runner.invoke(app, ["eval", "--data", str(data), "--shape", "1000", "--dtype", "f32", *E,
                                     "--save-compressed", str(target)])
        assert_clean_failure(result, 2, "is the input")
        assert data.read_bytes() == original
    packed = tmp_path / "f.pscz"
    ok = runner.invoke(app, ["eval", "--data", str(data), "--shape", "1000", "--dtype", "f32", *E,
                             "--save-compressed", str(packed)])
    assert ok.exit_code == 0, ok.stderr
    stream = packed.read_bytes()
    assert_clean_failure(runner.invoke(app, ["decompress", str(packed), "--out", str(packed)]), 2, "is the input")
    assert packed.read_bytes() == stream


@pytest.mark.slow
def test_a_large_binary_profile_is_refused_from_its_first_bytes(tmp_path: Path) -> None:
    """64 MiB of random bytes as --ncu-csv: refused from its first 64 KiB, not read whole.
    Two real CLI processes, a tiny and a large binary file: their peak RSS (VmHWM) differ by
    far less than the file (it was read whole before: +64 MiB)."""
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    small, large = tmp_path / "small.csv", tmp_path / "large.csv"
    small.write_bytes(rng.bytes(2**16))
    with open(large, "wb") as fh:
        for _ in range(64):
            fh.write(rng.bytes(2**20))

    def peak_kib(path: Path) -> int:
        # VmHWM is the process's own peak since exec (ru_maxrss would count the forked pytest)
        entry = ("import atexit, sys; atexit.register(lambda: sys.stdout.write(open('/proc/self/status').read())); "
                 "from perfscout.cli import main; main(sys.argv[1:])")
        proc = subprocess.run([sys.executable, "-c", entry, "diagnose", "--ncu-csv", str(path)], capture_output=True,
                              text=True, cwd=tmp_path, env={**os.environ, "PERFSCOUT_HOME": str(tmp_path / "home")},
                              timeout=120)
        assert proc.returncode == 2 and "binary data" in proc.stderr
        return int(next(ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("VmHWM:")))

    grown = peak_kib(large) - peak_kib(small)
    assert grown < 24 * 1024, f"peak RSS grew by {grown} KiB for a file it refuses"


def test_an_agent_run_whose_every_task_was_refused_is_not_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``perfscout run "profile `cat /etc/shadow`"``: the profile is refused (a path outside
    the run directory), the diagnosis has nothing to read; the run "finished" but measured
    nothing, which exited 0 and read as success. Now exit 2 with the first refusal."""
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", "profile `cat /etc/shadow`"])
    assert_clean_failure(result, 2, "was refused, nothing was measured")
    assert "/etc/shadow" in " ".join(result.stderr.split())


def test_a_grid_beyond_the_task_cap_is_refused_before_anything_is_written(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap (100,000 tasks) lowered to 4 so a real 6-task grid crosses it: refused while
    expanding, no run directory left (a pasted-twice bounds list would otherwise be
    expanded, stored and scheduled for hours)."""
    import perfscout.sweep.spec as spec_module

    monkeypatch.setattr(spec_module, "MAX_TASKS", 4)
    spec = tmp_path / "big.yaml"
    spec.write_text("name: big\ndatasets: [{synthetic: 'grf:8,8'}]\ncodecs: [zfp, sz3]\nmodes: [abs]\n"
                    "bounds: [1.0e-1, 1.0e-2, 1.0e-3]\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--no-progress"])
    assert_clean_failure(result, 2, "expands to more than 4 tasks")
    assert not out.exists()
