"""CUDA tasks through one long-lived worker per device, still contained (no GPU needed).

On this machine the CUDA tasks' codecs run their CPU reference (szp-gpu without CuPy runs its
NumPy reference and says so), which is enough to test the worker: several tasks in one process,
a hung task killed with its worker and the worker replaced, a segfault contained, resume, and
the same results as ``task_start: spawn``. A plug-in codec declared ``device = "cuda"`` plays
the misbehaving GPU library.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from perfscout.api_sweep import sweep
from perfscout.sweep.gpuworker import GpuWorker, GpuWorkerError
from perfscout.tools.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]

#: A CUDA-device codec (CPU arithmetic) that hangs, segfaults or runs, by its option ``behaviour``.
FAKE_GPU = '''\
import ctypes, time
import numpy as np
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.registry import register_codec


class FakeGpu(Codec):
    codec_id = "fake-gpu"
    family = "fake"
    device = "cuda"
    native_modes = ("abs",)

    @classmethod
    def version(cls):
        return "fake 1"

    def compress(self, array):
        b = self.options.get("behaviour", "none")
        if b == "hang":
            while True:
                time.sleep(3600)
        if b == "segfault":
            ctypes.string_at(0)
        if b == "poison":  # leaves its library unusable, as a sticky CUDA error leaves the context
            from perfscout.sweep import gpuworker
            gpuworker.register_health_check(lambda: "fake-gpu: the device context is poisoned")
        if b == "hog":  # host memory the worker's RSS watch must see (600 MiB, touched)
            self.options["_hog"] = np.ones(600 * 2**20, dtype=np.uint8)
            time.sleep(60)
        q = np.rint(array.astype(np.float64) / (1.8 * self.bound)).astype(np.int64)
        return Compressed(data=q.tobytes(), shape=array.shape, dtype=array.dtype.name, codec_id=self.codec_id,
                          mode=self.mode, bound=self.bound, abs_bound=self.bound)

    def decompress(self, c):
        q = np.frombuffer(c.data, dtype=np.int64).reshape(c.shape)
        return (q * 1.8 * self.bound).astype(c.dtype)


register_codec("fake-gpu", f"{__name__}:FakeGpu")
'''


def _attempts(run_dir: Path) -> pd.DataFrame:
    with ResultStore(run_dir / "results.sqlite") as store:
        return store.attempts()


def _with_behaviour(df: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """The results with each task's codec option ``behaviour`` (from the resolved task list)."""
    tasks = json.loads((run_dir / "spec.resolved.json").read_text())["tasks"]
    by_key = {t["task_key"]: t["options"].get("behaviour", "none") for t in tasks}
    return df.assign(behaviour=df["task_key"].map(by_key))


def _details(att: pd.DataFrame) -> list[dict]:
    return [json.loads(d) for d in att["detail"]]


def _spec(tmp_path: Path, codecs: str, bounds: str = "[1.0e-1, 1.0e-2, 1.0e-3]", timeout: int = 60,
          extra: str = "") -> Path:
    (tmp_path / "fakegpu.py").write_text(FAKE_GPU)
    spec = tmp_path / "g.yaml"
    spec.write_text(f"name: g\nrepeats: 1\ntimeout_s: {timeout}\nplugins: [fakegpu.py]\n{extra}"
                    "datasets: [{synthetic: 'smooth:8,16,16'}]\n"
                    f"codecs: {codecs}\ndevices: [cuda:0]\nmodes: [abs]\nbounds: {bounds}\n")
    return spec


def test_cuda_tasks_run_in_one_worker_and_match_spawned_ones(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[szp-gpu, fake-gpu]")
    df = sweep(spec, out=tmp_path / "w", progress=False, allow_plugins=True)
    assert len(df) == 6 and df["bound_ok"].all()
    # szp-gpu without a GPU: its NumPy reference, measured and verified, and it says so
    szp = df[df["codec"] == "szp-gpu"]
    assert szp["status"].isin(["ok", "gpu_unavailable"]).all() and (szp["ratio"] > 1).all()
    assert (df.loc[df["codec"] == "fake-gpu", "status"] == "ok").all()
    att = _attempts(tmp_path / "w")
    assert (att["worker"] == "gpuworker").all(), att[["worker", "detail"]]
    details = _details(att)
    assert len({d["worker_pid"] for d in details}) == 1  # one process for every task
    assert sorted(d["task_no"] for d in details) == list(range(1, 7))
    assert all(d["device"] == "cuda:0" and "gpu_pool_bytes_after" in d for d in details)
    # one field for all six: read once, kept (read-only) for the tasks after the first
    assert sorted(d["field_reused"] for d in details) == [False] + [True] * 5
    assert "CPU reference" in details[0]["cuda"] or "device" in details[0]["cuda"]

    spawned = sweep(spec, out=tmp_path / "s", progress=False, allow_plugins=True, task_start="spawn")
    satt = _attempts(tmp_path / "s")
    assert (satt["worker"] == "local").all()
    assert len({d["pid"] for d in _details(satt)}) == 6  # one fresh interpreter per task
    cols = ["task_key", "status", "ratio", "max_abs_err", "psnr", "bound_ok", "device", "max_rel_err", "ssim"]
    pd.testing.assert_frame_equal(df[cols].sort_values("task_key").reset_index(drop=True),
                                  spawned[cols].sort_values("task_key").reset_index(drop=True))


def test_a_hung_task_kills_its_worker_which_is_replaced(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[{id: fake-gpu, options: {behaviour: hang}}, fake-gpu]", bounds="[1.0e-2]", timeout=4)
    t0 = time.monotonic()
    df = _with_behaviour(sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True), tmp_path / "run")
    assert time.monotonic() - t0 < 40
    hung = df[(df["behaviour"] == "hang")]
    assert len(hung) == 1 and hung["status"].iloc[0] == "codec_timeout"
    ok = df[~(df["behaviour"] == "hang")]
    assert (ok["status"] == "ok").all()
    att = _attempts(tmp_path / "run")
    pids = [d["worker_pid"] for d in _details(att)]
    assert (att["worker"] == "gpuworker").all()
    # the hung task came first (the spec's order): the task after it ran in a new worker
    assert len(set(pids)) == 2
    for pid in pids:  # no worker outlives the sweep
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_a_segfault_costs_only_its_task_and_the_worker_is_replaced(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[szp-gpu, {id: fake-gpu, options: {behaviour: segfault}}, fake-gpu]",
                 bounds="[1.0e-2, 1.0e-3]")
    df = _with_behaviour(sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True), tmp_path / "run")
    assert len(df) == 6
    crashed = df[(df["behaviour"] == "segfault")]
    assert (crashed["status"] == "codec_crashed").all()
    assert crashed["error"].str.contains("SIGSEGV").all(), crashed["error"].tolist()
    # faulthandler's stack went to that attempt's log, not to another task's
    assert crashed["error"].str.contains("Fatal Python error").all()
    assert df.loc[~(df["behaviour"] == "segfault"), "status"].isin(["ok", "gpu_unavailable"]).all()
    details = _details(_attempts(tmp_path / "run"))
    assert len({d["worker_pid"] for d in details}) == 3  # the first, and one after each crash


def test_an_interrupted_gpu_worker_sweep_resumes_without_repeating_stored_tasks(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[fake-gpu, {id: fake-gpu, options: {behaviour: hang}}]",
                 bounds="[1.0e-1, 1.0e-2]", timeout=120)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.Popen([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                             "--out", str(out), "--no-progress", "--allow-plugins"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and done < 2:  # the two plain tasks come first
            time.sleep(0.3)
            if (out / "results.sqlite").is_file():
                with ResultStore(out / "results.sqlite") as store:
                    done = len(store.finished_keys())
        assert done == 2, proc.stderr.read().decode() if proc.poll() is not None else "timed out"
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    workers = {d["worker_pid"] for d in _details(_attempts(out))}
    time.sleep(0.5)
    for pid in workers:  # the worker went with the driver (its hung task too)
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    # resume with the hang replaced by a plain run: only the two unfinished tasks run
    text = spec.read_text().replace("timeout_s: 120", "timeout_s: 3")
    spec.write_text(text)
    df = _with_behaviour(sweep(spec, out=out, resume=True, progress=False, allow_plugins=True), out)
    assert len(df) == 4
    att = _attempts(out)
    stored = att[att["outcome"].notna() & (att["outcome"] != "")] if "outcome" in att else att
    assert df["task_key"].is_unique
    assert (df.loc[~(df["behaviour"] == "hang"), "status"] == "ok").all()
    assert (df.loc[(df["behaviour"] == "hang"), "status"] == "codec_timeout").all()
    assert len(stored) >= 4


def test_a_worker_that_cannot_start_is_a_clear_error_and_its_tasks_spawn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = {"PYTHONHOME": str(tmp_path / "no-such-python-home"), "PYTHONPATH": ""}
    with pytest.raises(GpuWorkerError, match="did not start"):
        GpuWorker("cuda:0", dict(os.environ, **broken))
    import perfscout.sweep.runner as runner

    monkeypatch.setattr(runner, "GpuWorker", lambda dev, env, **kw: GpuWorker(dev, {**env, **broken}, **kw))
    spec = _spec(tmp_path, "[fake-gpu]", bounds="[1.0e-1, 1.0e-2]")
    df = sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True)
    assert (df["status"] == "ok").all() and len(df) == 2
    att = _attempts(tmp_path / "run")
    assert (att["worker"] == "local").all()  # each task in a fresh interpreter
    assert len({d["pid"] for d in _details(att)}) == 2


def test_the_worker_goes_when_its_stdin_closes_and_reports_its_context() -> None:
    worker = GpuWorker("cuda:0", dict(os.environ, PYTHONPATH=str(ROOT)))
    assert worker.alive and not worker.busy
    assert "perfscout.tools.evaluate" in worker.ready["preloaded"] and worker.ready["cuda"]
    pid = worker.pid
    worker.close()
    assert not worker.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(GpuWorkerError):
        worker.spawn(Path("t.json"), Path("r.json"), Path("l.txt"))


def test_a_task_that_grows_the_worker_past_its_memory_limit_is_killed_and_the_worker_replaced(
        tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[{id: fake-gpu, options: {behaviour: hog}}, fake-gpu]", bounds="[1.0e-2]",
                 extra="memory_limit_mb: 256\n")
    t0 = time.monotonic()
    df = _with_behaviour(sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True), tmp_path / "run")
    assert time.monotonic() - t0 < 40  # killed long before its 60 s sleep
    hog = df[df["behaviour"] == "hog"].iloc[0]
    assert hog["status"] == "codec_crashed"
    assert "exceeded the task limit of 256 MiB" in hog["error"] and "GPU worker" in hog["error"], hog["error"]
    assert (df.loc[df["behaviour"] != "hog", "status"] == "ok").all()
    assert len({d["worker_pid"] for d in _details(_attempts(tmp_path / "run"))}) == 2


def test_a_task_that_leaves_the_context_unusable_retires_its_worker(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "[{id: fake-gpu, options: {behaviour: poison}}, fake-gpu]", bounds="[1.0e-1, 1.0e-2]")
    df = _with_behaviour(sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True), tmp_path / "run")
    assert (df["status"] == "ok").all() and len(df) == 4  # the poisoning tasks themselves finished
    att = _attempts(tmp_path / "run")
    details = _details(att)
    retired = [d for d in details if d.get("worker_retired")]
    assert len(retired) == 2 and all("poisoned" in d["worker_retired"] for d in retired)
    # every task after a poisoning one got a fresh worker: 3 workers for 4 tasks (poison, poison, plain, plain)
    assert len({d["worker_pid"] for d in details}) == 3
