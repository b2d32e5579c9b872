"""The traps a newcomer fell into in their first hour (issue 28), each closed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfscout import agent
from perfscout.cli import app
from perfscout.graph.context import Context
from perfscout.graph.understand.assess import _guess_shapes
from perfscout.state.records import CompressionResult
from tests.conftest import ROOT

runner = CliRunner()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_eval_without_shape_proposes_what_the_byte_count_allows(tmp_path: Path) -> None:
    cube = tmp_path / "my_field.raw"
    np.zeros((91, 91, 91), dtype="<f4").tofile(cube)
    args = ["eval", "--data", str(cube), "--codec", "sz3", "--mode", "rel", "--bound", "1e-3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    said = _one_line(result.stderr)
    assert "--data needs --shape" in said and "its 3014284 bytes fit --shape 91,91,91 --dtype f32" in said
    # the agent's guesser, not a copy of it: the same proposals, in the same order
    assert _guess_shapes(cube, cube.stat().st_size, None) == ["91x91x91 float32"]
    square = tmp_path / "v.512_512"
    np.zeros((512, 512), dtype="<f4").tofile(square)
    said = _one_line(runner.invoke(app, ["eval", "--data", str(square), "--codec", "zfp", "--mode", "abs",
                                         "--bound", "1"]).stderr)
    assert "fit --shape 512,512 --dtype f32 or --shape 64,64,64 --dtype f32" in said
    # a given dtype narrows the proposals; a size nothing fits adds nothing
    said = _one_line(runner.invoke(app, [*args, "--dtype", "f64"]).stderr)
    assert said.endswith("(raw binary, C order)")
    proposed = re.search(r"fit (--shape \S+ --dtype f32)", _one_line(result.stderr)).group(1)
    ok = runner.invoke(app, [*args, *shlex.split(proposed)])  # the proposal works as given
    assert ok.exit_code == 0, ok.output


@pytest.fixture()
def netcdf_file(tmp_path: Path) -> Path:
    netCDF4 = pytest.importorskip("netCDF4")
    path = tmp_path / "field.nc"
    rng = np.random.default_rng(2)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("y", 48)
        ds.createDimension("x", 64)
        t = ds.createVariable("t", "f4", ("y", "x"))
        t[:] = rng.standard_normal((48, 64)).astype("f4")
        ds.createVariable("lat", "f4", ("y",))[:] = np.linspace(-80, 80, 48, dtype="f4")
    return path


def test_export_check_on_a_netcdf_file_takes_the_var_its_message_names(netcdf_file: Path) -> None:
    setting = ["export", "--codec", "sz3", "--mode", "abs", "--bound", "1e-3", "--target", "numcodecs"]
    asked = runner.invoke(app, [*setting, "--check", str(netcdf_file)])
    assert asked.exit_code == 2 and "name the variable with --var" in _one_line(asked.stderr)
    assert "t (48x64" in _one_line(asked.stderr)
    done = runner.invoke(app, [*setting, "--check", str(netcdf_file), "--var", "t", "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert [c["status"] for c in doc["check"]] == ["ok"] and "(48, 64)" in doc["note"]
    alone = runner.invoke(app, [*setting, "--var", "t"])
    assert alone.exit_code == 2 and "give --check FILE too" in _one_line(alone.stderr)
    assert "No such option" not in asked.output + done.output + alone.output


def test_the_raw_file_example_asks_for_the_shape_first_as_its_comment_says(perfscout_home: Path,
                                                                          builtin_codecs_only: None) -> None:
    # builtin_codecs_only: "codecs: cpu" is every installed CPU codec, and a test module that
    # imports tests.fakes at collection (test_isolate) registers fake-crash for the whole run
    example = ROOT / "examples" / "agent_raw_file.yaml"
    comment = [line[1:].strip() for line in example.read_text().splitlines() if line.startswith("#")]
    make = next(line for line in comment if line.startswith("python3 -c"))
    # as the comment says: the spec copied to the data's folder (here the working directory),
    # the comment's own command making the file beside it
    spec = Path("agent_raw_file.yaml")
    spec.write_text(example.read_text())
    subprocess.run([sys.executable, *shlex.split(make)[1:]], check=True, timeout=120)
    assert Path("my_field.raw").is_file()
    ctx = Context(home=str(perfscout_home), noise_threshold=1e9)
    out = agent.run(spec, context=ctx)
    assert out.status == "interrupted" and set(out.question["needs"]) == {"shape", "dtype"}
    answer = json.loads(re.search(r"--answer '(\{.*?\})'", " ".join(comment)).group(1))
    done = agent.resume(out.thread_id, answer, context=ctx)
    assert done.status == "done"
    # agent.run()'s outcome carries the records, typed, beside the report
    assert done.records and all(isinstance(r, CompressionResult) for r in done.records)
    assert {r.codec for r in done.records} >= {"sz3", "zfp"} and all(r.bound_ok for r in done.records)
    stored = json.loads((Path(done.run_dir) / "results.json").read_text())["records"]
    assert [r.model_dump(mode="json") for r in done.records] == [CompressionResult(**r).model_dump(mode="json")
                                                                for r in stored]
    assert done.records[0].codec in done.report


def test_runs_says_the_default_home_is_shared_and_how_to_keep_a_job_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFSCOUT_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    said = _one_line(runner.invoke(app, ["runs"]).stdout)
    assert str(tmp_path / "xdg" / "perfscout") in said
    assert "shared by every perfscout process of this user" in said and "PERFSCOUT_HOME=DIR" in said
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "mine"))
    said = _one_line(runner.invoke(app, ["runs"]).stdout)
    assert "($PERFSCOUT_HOME)" in said and "shared by every" not in said
