"""Kill a real sweep with SIGKILL (and stop one with Ctrl-C), resume it, compare with an uninterrupted run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from perfscout.api_sweep import sweep
from perfscout.tools.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]

#: 16 tasks, one at a time: long enough to be killed in the middle.
SPEC = """\
name: killme
repeats: 1
jobs: 1
datasets:
  - synthetic: "grf:16,32,32"
  - synthetic: "smooth:16,32,32"
codecs: [sz3, zfp]
modes: [abs, rel]
bounds: [1.0e-2, 1.0e-4]
"""

#: Columns that differ between two runs of the same tasks by nature (time, identity of the run).
VOLATILE = ["run_id", "started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps", "h2d_s", "d2h_s"]

pytestmark = pytest.mark.slow


def start_cli(spec: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec), "--out", str(out),
         "--no-progress", *extra],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def stored_count(out: Path) -> int:
    db = out / "results.sqlite"
    if not db.is_file():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def wait_for_results(proc: subprocess.Popen, out: Path, n: int, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while stored_count(out) < n:
        assert proc.poll() is None, f"sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "sweep made no progress"
        time.sleep(0.05)


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=VOLATILE).sort_values("task_key").reset_index(drop=True)


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    base = tmp_path_factory.mktemp("ref")
    (base / "spec.yaml").write_text(SPEC)
    return sweep(base / "spec.yaml", out=base / "run", progress=False)


def test_sigkill_then_resume_loses_and_repeats_nothing(tmp_path: Path, reference: pd.DataFrame) -> None:
    spec, out = tmp_path / "spec.yaml", tmp_path / "run"
    spec.write_text(SPEC)
    proc = start_cli(spec, out)
    wait_for_results(proc, out, 4)
    workers = children_of(proc.pid)
    proc.send_signal(signal.SIGKILL)  # no chance to clean up: the store must already be consistent
    proc.wait()
    with ResultStore(out / "results.sqlite") as store:
        before = store.results()
        total = store.task_count()
    assert 4 <= len(before) < total == 16, "the kill must land mid-run"
    # The workers die with their parent (PR_SET_PDEATHSIG): no orphan races the resume.
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{w}").exists() and "Z" not in Path(f"/proc/{w}/stat").read_text().split()[2]
              for w in workers):
        assert time.monotonic() < deadline, "a worker outlived the killed sweep"
        time.sleep(0.05)

    res = start_cli(spec, out, "--resume")
    _, err = res.communicate(timeout=300)
    assert res.returncode == 0, err
    assert f"{len(before)} already done" in err
    with ResultStore(out / "results.sqlite") as store:
        after = store.results()
        attempts = store.attempts()
    # Nothing lost: every row stored before the kill is still there, bit for bit (timings too).
    kept = after.set_index("task_key").loc[before["task_key"]].reset_index()[list(before.columns)]
    pd.testing.assert_frame_equal(kept, before)
    # Nothing repeated: one row per task, and no finished task was started again in session 2.
    assert after["task_key"].is_unique and len(after) == 16
    second = set(attempts.loc[attempts["session"] == 2, "task_key"])
    assert not second & set(before["task_key"])
    assert second == set(after["task_key"]) - set(before["task_key"])
    # The final table equals an uninterrupted run's, timings and run identity aside.
    pd.testing.assert_frame_equal(stable(after), stable(reference))


def test_ctrl_c_stops_cleanly_and_resume_finishes(tmp_path: Path, reference: pd.DataFrame) -> None:
    spec, out = tmp_path / "spec.yaml", tmp_path / "run"
    spec.write_text(SPEC)
    proc = start_cli(spec, out)
    wait_for_results(proc, out, 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "sweep interrupted" in err and "--resume" in err and "Traceback" not in err
    n = stored_count(out)
    assert 3 <= n < 16
    assert (out / "results.parquet").is_file()  # the export reflects what was kept
    assert len(pd.read_parquet(out / "results.parquet")) == n
    done = start_cli(spec, out, "--resume")
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    with ResultStore(out / "results.sqlite") as store:
        pd.testing.assert_frame_equal(stable(store.results()), stable(reference))
