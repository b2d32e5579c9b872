"""The sweep runner for real: child processes, real codecs, a crashing/hanging fake, the CLI and API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfscout.api_sweep import sweep
from perfscout.errors import InputError
from perfscout.state.records import RESULT_COLUMNS
from perfscout.tools.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]

CRASHY = """\
name: crashy
repeats: 1
timeout_s: 6
memory_limit_mb: 1024
jobs: 2
plugins: [tests.fakes.crashing_codec]
datasets:
  - synthetic: "grf:8,16,16"
codecs:
  - sz3
  - {id: fake-crash, options: {behaviour: abort, crash_below: 1.0e-2}}
  - {id: fake-crash, options: {behaviour: segfault}}
  - {id: fake-crash, options: {behaviour: hang}}
  - {id: fake-crash, options: {behaviour: hog}}
modes: [abs]
bounds: [1.0e-1, 1.0e-3]
"""


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def crashy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    base = tmp_path_factory.mktemp("crashy")
    spec = base / "crashy.yaml"
    spec.write_text(CRASHY)
    df = sweep(spec, out=base / "run", progress=False, allow_plugins=True)
    return base / "run", df


def test_crashing_and_hanging_codecs_are_contained(crashy_run: tuple[Path, pd.DataFrame]) -> None:
    run_dir, df = crashy_run
    assert len(df) == 10  # 5 codec configs x 2 bounds: the sweep went on past every failure
    by = {(r.codec, r.bound, json.loads((run_dir / "raw" / r.task_key / "task.json").read_text())["options"]
           .get("behaviour", "")): r for r in df.itertuples()}
    assert all(by[("sz3", b, "")].status == "ok" and by[("sz3", b, "")].bound_ok for b in (1e-1, 1e-3))
    # abort only below its threshold: one real result, one crash
    assert by[("fake-crash", 1e-1, "abort")].status == "ok"
    aborted = by[("fake-crash", 1e-3, "abort")]
    assert aborted.status == "codec_crashed" and "SIGABRT" in aborted.error
    for b in (1e-1, 1e-3):
        seg = by[("fake-crash", b, "segfault")]
        assert seg.status == "codec_crashed" and "SIGSEGV" in seg.error
        assert "Segmentation fault" in seg.error and "crashing_codec.py" in seg.error  # faulthandler's frame
        hang = by[("fake-crash", b, "hang")]
        assert hang.status == "codec_timeout" and "6 s" in hang.error
        hog = by[("fake-crash", b, "hog")]
        assert hog.status in ("error", "codec_crashed") and "MemoryError" in hog.error
    # Crash records still say what was asked and where.
    assert {aborted.dataset, aborted.shape, aborted.mode} == {"grf:8x16x16", "8,16,16", "abs"}
    assert aborted.nbytes == 8 * 16 * 16 * 4 and aborted.run_id == df.attrs["run_id"]


def test_run_directory_holds_everything_needed_to_audit(crashy_run: tuple[Path, pd.DataFrame]) -> None:
    run_dir, df = crashy_run
    assert (run_dir / "spec.yaml").read_text() == CRASHY  # verbatim
    resolved = json.loads((run_dir / "spec.resolved.json").read_text())
    assert {t["task_key"] for t in resolved["tasks"]} == set(df["task_key"])
    platform = json.loads((run_dir / "platform.json").read_text())
    assert platform["platform_id"] and (df["platform_id"] == platform["platform_id"]).all()
    for key in df["task_key"]:
        raw = run_dir / "raw" / key
        assert (raw / "task.json").is_file() and (raw / "log.txt").is_file()
    ok_key = df.loc[df["status"] == "ok", "task_key"].iloc[0]
    assert json.loads((run_dir / "raw" / ok_key / "result.json").read_text())["task_key"] == ok_key
    seg_key = df.loc[df["error"].str.contains("SIGSEGV"), "task_key"].iloc[0]
    assert "Fatal Python error: Segmentation fault" in (run_dir / "raw" / seg_key / "log.txt").read_text()
    exported = pd.read_parquet(run_dir / "results.parquet")
    assert list(exported.columns) == list(RESULT_COLUMNS) and len(exported) == len(df)
    with ResultStore(run_dir / "results.sqlite") as store:
        assert store.attempts()["outcome"].notna().all()  # every attempt closed with its outcome


def test_a_used_run_directory_needs_resume(crashy_run: tuple[Path, pd.DataFrame]) -> None:
    run_dir, df = crashy_run
    with pytest.raises(InputError, match="already holds a sweep .*--resume"):
        sweep(run_dir / "spec.yaml", out=run_dir, progress=False, allow_plugins=True)
    # --resume with everything finished runs nothing and keeps every row as it was.
    again = sweep(run_dir / "spec.yaml", out=run_dir, resume=True, progress=False, allow_plugins=True)
    pd.testing.assert_frame_equal(again, df, check_like=False)


def test_cli_sweep_json_and_errors(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("repeats: 1\ndatasets: [{synthetic: 'smooth:8,8'}]\ncodecs: [zfp]\nbounds: [0.1, 0.01]\n")
    res = cli("sweep", str(spec), "--out", str(tmp_path / "run"), "--json", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # stdout holds one JSON document and nothing else
    assert doc["tasks"] == 2 and doc["ran"] == 2 and doc["statuses"] == {"ok": 2}
    again = cli("sweep", str(spec), "--out", str(tmp_path / "run"))
    assert again.returncode == 2 and "--resume" in again.stderr and "Traceback" not in again.stderr
    spec.write_text("repeats: 1\ndatasets: [{synthetic: 'smooth:8,8'}]\ncodecs: [zfp]\nbounds: [0.1, -1]\n")
    bad = cli("sweep", str(spec), "--out", str(tmp_path / "run2"))
    message = "".join(bad.stderr.split())  # rich wraps long lines (paths included)
    assert bad.returncode == 2 and f"{spec}:4".replace(" ", "") in message and "Traceback" not in message
    assert not (tmp_path / "run2").exists()  # nothing written for an invalid spec
    (tmp_path / "taken").write_text("a file where the run directory should go")
    spec.write_text("repeats: 1\ndatasets: [{synthetic: 'smooth:8,8'}]\ncodecs: [zfp]\nbounds: [0.1]\n")
    blocked = cli("sweep", str(spec), "--out", str(tmp_path / "taken" / "run"))
    assert blocked.returncode == 2 and "cannot create the run directory" in blocked.stderr
    assert "Traceback" not in blocked.stderr


@pytest.mark.slow
def test_quick_example_runs_from_the_cli(tmp_path: Path) -> None:
    res = cli("sweep", "examples/sweep_quick.yaml", "--out", str(tmp_path / "quick"), "--json", "--report",
              timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ran"] == doc["tasks"] == 48 and doc["statuses"] == {"ok": 48}
    assert (tmp_path / "quick" / "report.html").is_file()


@pytest.mark.slow
def test_quick_example_runs_from_the_api(tmp_path: Path) -> None:
    df = sweep(ROOT / "examples" / "sweep_quick.yaml", out=tmp_path / "quick", progress=False)
    assert len(df) == 48 and (df["status"] == "ok").all() and df["bound_ok"].all()
    assert set(df["codec"]) == {"sz3", "sz2", "zfp", "sz3-h5"}
    assert df.attrs["run_dir"] == str(tmp_path / "quick")


def test_scheduler_bounds_jobs_memory_and_one_task_per_gpu(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from perfscout.sweep.runner import SweepRunner
    from perfscout.sweep.spec import expand, load_spec

    spec = load_spec({
        # cores: 16 so that the job limit, not this machine's cores, is what stops the fourth
        "max_memory_mb": 1000, "jobs": 3, "cores": 16, "datasets": [{"synthetic": "grf:64,64,64"}],  # ~156 MiB each
        "codecs": ["sz3"], "bounds": [0.1, 0.01, 0.001, 0.0001],
    })
    tasks, _ = expand(spec)
    runner = SweepRunner(spec, tmp_path, jobs=None, progress=False, spec_text=None, resume=False)
    running = []
    for t in tasks:
        if runner._can_start(t, running):
            running.append(SimpleNamespace(task=t))
    assert len(running) == 3  # the job limit
    big = load_spec({"max_memory_mb": 1000, "jobs": 8, "cores": 16, "datasets": [{"synthetic": "grf:128,128,128"}],
                     "codecs": ["sz3"], "bounds": [0.1, 0.01, 0.001]})
    big_tasks, _ = expand(big)  # 8 MiB fields -> ~198 MiB estimated each
    runner = SweepRunner(big, tmp_path, jobs=None, progress=False, spec_text=None, resume=False)
    running = []
    for t in big_tasks * 2:
        if runner._can_start(t, running):
            running.append(SimpleNamespace(task=t))
    assert len(running) == int(1000 // big_tasks[0].est_memory_mb) == 5  # the memory budget, not the 8 jobs
    # A task bigger than the whole budget still runs alone, so a sweep cannot stall.
    tight = SweepRunner(big.model_copy(update={"max_memory_mb": 64}), tmp_path, jobs=None, progress=False,
                        spec_text=None, resume=False)
    assert big_tasks[0].est_memory_mb > 64
    assert tight._can_start(big_tasks[0], [])
    assert not tight._can_start(big_tasks[1], [SimpleNamespace(task=big_tasks[0])])
    gpu = [t.model_copy(update={"device": "cuda:0"}) for t in big_tasks[:2]]
    assert not runner._can_start(gpu[1], [SimpleNamespace(task=gpu[0])])  # one task per GPU
    other = big_tasks[0].model_copy(update={"device": "cuda:1"})
    assert runner._can_start(other, [SimpleNamespace(task=gpu[0])])


def test_an_unexpected_error_kills_the_children_still_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that refuses the first row ends the sweep, and the hanging task's child with it."""
    from perfscout.tools.results_store import StoreError

    spec = tmp_path / "hangs.yaml"
    spec.write_text("name: hangs\nrepeats: 1\ntimeout_s: 600\njobs: 2\nplugins: [tests.fakes.crashing_codec]\n"
                    "datasets: [{synthetic: 'grf:8,8'}]\ncodecs: [sz3, {id: fake-crash, options: {behaviour: hang}}]\n"
                    "modes: [abs]\nbounds: [1.0e-1]\n")
    out = tmp_path / "run"

    def refuse(self: ResultStore, record: object, attempt_id: object = None) -> None:
        raise StoreError("injected: the store refuses this row")

    monkeypatch.setattr(ResultStore, "put_result", refuse)
    with pytest.raises(StoreError, match="injected"):
        sweep(spec, out=out, progress=False, allow_plugins=True)
    workers = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended while we looked
            continue
        if any(str(out).encode() in a for a in argv):
            workers.append(b" ".join(argv))
    assert workers == []
