"""Sweeps on real Dask clusters (no mocks): a LocalCluster started by perfscout, one whose
worker is SIGKILLed mid-task, a task that kills every worker it touches, and a scheduler and
workers started as separate processes on 127.0.0.1 (one of them a pinned GPU worker).

Each asserts a complete, duplicate-free results table equal to the local executor's,
timings and run identity aside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed", reason="pip install 'perfscout[dask]'")

from perfscout.api_sweep import sweep  # noqa: E402
from perfscout.sweep.dask_executor import DaskOptions  # noqa: E402
from perfscout.tools.results_store import ResultStore  # noqa: E402
from tests.servers import stop_group  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VOLATILE = ["run_id", "started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps", "h2d_s", "d2h_s"]

#: 8 quick real tasks.
QUICK = """\
name: dquick
repeats: 1
datasets:
  - synthetic: "grf:16,32,32"
codecs: [sz3, zfp]
modes: [abs, rel]
bounds: [1.0e-2, 1.0e-4]
"""

#: 4 real tasks + 4 that sleep 2 s first (so a worker can be killed while one runs).
SLOW = """\
name: dslow
repeats: 1
plugins: [tests.fakes.worker_faults]
datasets:
  - synthetic: "grf:16,32,32"
codecs:
  - sz3
  - {id: fake-slow, options: {sleep_s: 2.0}}
modes: [abs]
bounds: [1.0e-1, 1.0e-2, 1.0e-3, 1.0e-4]
"""


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=VOLATILE).sort_values("task_key").reset_index(drop=True)


def check_complete(df: pd.DataFrame, reference: pd.DataFrame) -> None:
    assert df["task_key"].is_unique and len(df) == len(reference)
    pd.testing.assert_frame_equal(stable(df), stable(reference))


def attempts(out: Path) -> pd.DataFrame:
    with ResultStore(out / "results.sqlite") as store:
        return store.attempts()


@pytest.fixture(scope="module")
def quick_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    base = tmp_path_factory.mktemp("dref")
    (base / "quick.yaml").write_text(QUICK)
    return base / "quick.yaml", sweep(base / "quick.yaml", out=base / "run", progress=False, jobs=2)


def test_local_cluster_sweep_equals_the_local_executor(tmp_path: Path, quick_reference) -> None:
    spec, reference = quick_reference
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                          "--out", str(tmp_path / "run"), "--executor", "dask", "--workers", "2", "--json"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["executor"] == "dask" and doc["ran"] == 8 and doc["statuses"] == {"ok": 8}
    assert doc["dashboard"].startswith("http://127.0.0.1:") and "Dask dashboard: http://127.0.0.1:" in res.stderr
    with ResultStore(tmp_path / "run" / "results.sqlite") as store:
        df = store.results()
    check_complete(df, reference)
    att = attempts(tmp_path / "run")
    assert len(att) == 8 and (att["outcome"] == "ok").all()
    assert att["worker"].str.startswith("tcp://127.0.0.1:").all() and att["worker"].nunique() == 2  # both worked
    # each worker forked its CPU tasks from one task server of its own (imports done once)
    servers = {w: {json.loads(d)["task_server"] for d in g["detail"]} for w, g in att.groupby("worker")}
    assert all(len(s) == 1 and None not in s for s in servers.values()) and len(set().union(*servers.values())) == 2
    for key in df["task_key"]:  # the driver wrote the stored attempt's files, canonical names
        work = tmp_path / "run" / "raw" / key
        assert sorted(p.name for p in work.iterdir()) == ["evaluation.json", "log.txt", "result.json", "task.json"]
        # the timing spread came back from the worker as from a local child (the agent reads it)
        evaluation = json.loads((work / "evaluation.json").read_text())
        assert evaluation["timing"]["compress"]["repeats"] >= 1


@pytest.fixture(scope="module")
def slow_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    base = tmp_path_factory.mktemp("sref")
    (base / "slow.yaml").write_text(SLOW)
    return base / "slow.yaml", sweep(base / "slow.yaml", out=base / "run", progress=False, jobs=2,
                                     allow_plugins=True)


def _open_slow_attempt(out: Path) -> dict | None:
    """An attempt at a fake-slow task that a worker is running right now, if any."""
    import sqlite3

    try:
        with sqlite3.connect(out / "results.sqlite", timeout=5) as conn:
            rows = conn.execute(
                "SELECT a.task_key, a.worker, a.detail FROM attempts a JOIN tasks t USING (task_key) "
                "WHERE a.finished_at IS NULL AND a.worker LIKE 'tcp://%' AND t.config LIKE '%fake-slow%'").fetchall()
    except sqlite3.OperationalError:  # the store is not there yet
        return None
    return dict(zip(("task_key", "worker", "detail"), rows[0])) if rows else None


@pytest.mark.slow
def test_a_worker_killed_mid_task_is_retried_elsewhere_and_written_once(tmp_path: Path, slow_reference) -> None:
    spec, reference = slow_reference
    out = tmp_path / "run"
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, host="127.0.0.1", dashboard_address=":0",
                                  silence_logs=50) as cluster:
        box: dict = {}

        def run() -> None:
            try:
                box["df"] = sweep(spec, out=out, progress=False, allow_plugins=True,
                                  dask=DaskOptions(scheduler=cluster.scheduler_address))
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                box["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 120
        victim = None
        while victim is None:
            assert time.monotonic() < deadline and thread.is_alive(), box
            victim = _open_slow_attempt(out)
            time.sleep(0.05)
        os.kill(json.loads(victim["detail"])["pid"], 9)  # the worker process running that attempt
        thread.join(300)
        assert not thread.is_alive() and "error" not in box, box
    check_complete(box["df"], reference)
    att = attempts(out)
    mine = att[att["task_key"] == victim["task_key"]]
    assert "worker_lost" in set(mine["outcome"]) and victim["worker"] in set(mine["worker"])
    stored = mine[mine["outcome"] == "ok"]
    assert len(stored) == 1 and stored.iloc[0]["worker"] != victim["worker"]  # retried elsewhere, written once
    assert len(att[att["outcome"] == "ok"]) == len(reference)


@pytest.mark.slow
def test_a_task_that_kills_every_worker_is_recorded_crashed_with_its_history(tmp_path: Path) -> None:
    spec = tmp_path / "killer.yaml"
    spec.write_text("name: killer\nrepeats: 1\nplugins: [tests.fakes.worker_faults]\n"
                    "datasets: [{synthetic: 'grf:16,16'}]\ncodecs: [sz3, fake-killer]\nmodes: [abs]\n"
                    "bounds: [1.0e-2]\n")
    df = sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True,
               dask=DaskOptions(workers=2, retries=1))
    assert len(df) == 2 and df["task_key"].is_unique
    by = df.set_index("codec")
    assert by.loc["sz3", "status"] == "ok"
    crashed = by.loc["fake-killer"]
    assert crashed["status"] == "codec_crashed"
    assert "took down every Dask worker it ran on (2 lost, the scheduler's limit is 1 retries)" in crashed["error"]
    att = attempts(tmp_path / "run")
    lost = att[(att["task_key"] == crashed["task_key"])]
    assert list(lost["outcome"]) == ["worker_lost", "worker_lost"] and lost["worker"].nunique() == 2
    for w in lost["worker"]:
        assert w in crashed["error"]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


@pytest.fixture()
def separate_cluster(tmp_path: Path):
    """`dask scheduler` + two `dask worker`s + one pinned GPU worker, each its own process."""
    sched_file = tmp_path / "scheduler.json"
    procs = [_start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--dashboard-address", ":0", "--scheduler-file", str(sched_file)], tmp_path / "sched.log")]
    try:
        deadline = time.monotonic() + 60
        address = ""
        while not address:  # the file appears before the scheduler has written it whole
            assert time.monotonic() < deadline and procs[0].poll() is None, (tmp_path / "sched.log").read_text()
            try:
                address = json.loads(sched_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        for name in ("cpu-a", "cpu-b"):
            procs.append(_start([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                 "--name", name], tmp_path / f"{name}.log"))
        # Pinned to device 0 whether or not this machine has one (a CUDA task then runs the
        # codec's CPU reference and says gpu_unavailable, in both executors alike).
        procs.append(_start([sys.executable, "-m", "perfscout.sweep.gpu_workers", address, "--devices", "0",
                             "--name", "gpu"], tmp_path / "gpu.log"))
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(3, timeout=60)
        yield sched_file, address
    finally:
        for p in reversed(procs):
            stop_group(p, grace_s=10)


MIXED = """\
name: dmixed
repeats: 1
datasets:
  - synthetic: "grf:16,32,32"
codecs: [sz3, zfp, szp-gpu]
devices: [cpu, cuda:0]
modes: [abs]
bounds: [1.0e-2, 1.0e-4]
"""


# slow: a scheduler, three workers and the CLI driver, each its own process (15-25 s with the
# teardown); the fast loop keeps the LocalCluster comparison above.
@pytest.mark.slow
def test_scheduler_and_workers_in_separate_processes(tmp_path: Path, separate_cluster) -> None:
    sched_file, address = separate_cluster
    spec = tmp_path / "mixed.yaml"
    spec.write_text(MIXED)
    reference = sweep(spec, out=tmp_path / "ref", progress=False, jobs=2)
    # the szp-gpu tasks on cuda:0: with no GPU here their codec ran its CPU reference, and a
    # record says where it ran (device cpu, status gpu_unavailable), not where it was asked to
    gpu_tasks = reference["device"].str.startswith("cuda") | (reference["status"] == "gpu_unavailable")
    assert gpu_tasks.sum() == 2 and set(reference.loc[gpu_tasks, "codec"]) == {"szp-gpu"}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                          "--out", str(tmp_path / "run"), "--scheduler", str(sched_file), "--no-progress"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"scheduler {address}" in res.stderr
    with ResultStore(tmp_path / "run" / "results.sqlite") as store:
        df = store.results()
    check_complete(df, reference)
    att = attempts(tmp_path / "run")
    gpu_attempts = att[att["task_key"].isin(reference.loc[gpu_tasks, "task_key"])]
    assert len(gpu_attempts) == 2
    # GPU tasks ran only on the worker declaring GPU=1, which saw exactly its pinned device
    assert all(json.loads(d)["name"] == "gpu-0" and json.loads(d)["gpu"] == "0" for d in gpu_attempts["detail"])
    assert {json.loads(d)["name"] for d in att["detail"]} <= {"cpu-a", "cpu-b", "gpu-0"}


@pytest.mark.slow
def test_a_killed_dask_driver_resumes_without_repeating_a_stored_task(tmp_path: Path, slow_reference) -> None:
    import signal
    import sqlite3

    spec, reference = slow_reference
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec), "--out", str(out),
            "--executor", "dask", "--workers", "2", "--allow-plugins", "--no-progress"]
    driver = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120

    def stored() -> int:
        try:
            with sqlite3.connect(out / "results.sqlite", timeout=5) as conn:
                return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        except sqlite3.OperationalError:
            return 0

    while stored() < 3:
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait(30)
    with ResultStore(out / "results.sqlite") as store:
        before = store.results()
    assert 3 <= len(before) < len(reference)
    res = subprocess.run([*args, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr  # the dead driver's lock went with it
    with ResultStore(out / "results.sqlite") as store:
        after, att = store.results(), store.attempts()
    kept = after.set_index("task_key").loc[before["task_key"]].reset_index()[list(before.columns)]
    pd.testing.assert_frame_equal(kept, before)
    check_complete(after, reference)
    second = set(att.loc[att["session"] == 2, "task_key"])
    assert not second & set(before["task_key"])  # no stored task ran again


def test_dask_options_errors_are_clear(tmp_path: Path, quick_reference) -> None:
    spec, _ = quick_reference
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH="/usr/bin:/bin")  # no sbatch/qsub on this PATH

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                               "--out", str(tmp_path / "run"), *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)

    bad_key = tmp_path / "bad.yaml"
    bad_key.write_text("cores: 4\nmemroy: 8GiB\n")
    good = tmp_path / "good.yaml"
    good.write_text("cores: 1\nmemory: 1GiB\n")
    cases = [
        (["--cluster", "slurm"], "--cluster needs --cluster-config"),
        (["--executor", "local", "--scheduler", "tcp://127.0.0.1:1"], "drop --executor local"),
        (["--executor", "spark"], "--executor must be local or dask"),
        (["--cluster", "slurm", "--cluster-config", str(bad_key)], "invalid cluster config: memroy"),
        (["--cluster", "pbs", "--cluster-config", str(good)], "submits jobs with qsub, which is not on PATH"),
        (["--scheduler", str(tmp_path / "nope.json")], "cannot reach the Dask scheduler"),
    ]
    for args, message in cases:
        res = cli(*args)
        text = " ".join(res.stderr.split())
        assert res.returncode == 2 and message in text and "Traceback" not in res.stderr, (args, res.stderr)
        if "scheduler" not in message:  # refused before anything was written
            assert not (tmp_path / "run").exists(), args
