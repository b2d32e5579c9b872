"""On a real GPU: a tiny sweep's CUDA tasks run in one long-lived worker, with the spawned results.

Two szp-gpu tasks (and cuSZp's when its library is available) on a 64 MiB synthetic float32
field, once through the CLI with the default ``--task-start fork`` (one GPU worker for the
device) and once with ``--task-start spawn`` (a fresh interpreter per task): the worker ran
every task in one process that made one CUDA context, and both runs give the same compression
ratios and bound verdicts, on the GPU (not the CPU reference).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfscout.tools.results_store import ResultStore

pytestmark = pytest.mark.gpu

pytest.importorskip("cupy", reason="CuPy is needed for the GPU worker test")

ROOT = Path(__file__).resolve().parents[2]


def _codecs() -> list[str]:
    from perfscout.codecs.gpu_peers.cuszp import CuSZpCodec

    ok, _why = CuSZpCodec.availability()
    return ["szp-gpu", "cuszp"] if ok else ["szp-gpu"]


def _sweep(spec: Path, out: Path, *extra: str) -> float:
    # keep the caller's path (the GPU machine's wheels live on it), the checkout first
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                          "--out", str(out), "--no-progress", *extra], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    return time.monotonic() - t0


def _warm_kernel_cache() -> None:
    """Build szp's kernels once in this process, so that CuPy's on-disk kernel cache is warm for
    both sweeps: otherwise the first sweep alone pays the NVRTC builds (seen on the H200: 41 s
    for the first run against 19 s for the second), and the timing print compares nothing."""
    import cupy as cp
    import numpy as np

    from perfscout.codecs.szp import gpu as G
    from perfscout.codecs.szp.codec import SZPGpuCodec

    x = cp.asarray(np.random.default_rng(0).standard_normal((64, 64, 64)).astype(np.float32))
    for bnd in ("auto", 1, 2, 3):  # auto: the range pass and every candidate's compress kernel
        codec = SZPGpuCodec("rel", 1e-3, block_ndim=bnd)
        G.decompress_device(codec.compress_on_device(x))
    cp.cuda.Device().synchronize()


def test_cuda_tasks_share_one_worker_and_match_spawned_tasks(tmp_path: Path) -> None:
    _warm_kernel_cache()
    codecs = _codecs()
    spec = tmp_path / "gpu.yaml"
    # szp-gpu at two bounds, cuSZp (when built) at one: 2 or 3 tasks on one device
    spec.write_text("name: gpuworker\nrepeats: 1\ntimeout_s: 120\n"
                    "datasets: [{synthetic: 'smooth:256,256,256', dtype: f32}]\n"
                    "devices: ['cuda:0']\nmodes: [rel]\n"
                    "experiments:\n"
                    "  - {name: szp, codecs: [szp-gpu], bounds: [1.0e-2, 1.0e-3]}\n"
                    + ("  - {name: cuszp, codecs: [cuszp], bounds: [1.0e-3]}\n" if "cuszp" in codecs else ""))
    t_worker = _sweep(spec, tmp_path / "worker")
    t_spawn = _sweep(spec, tmp_path / "spawn", "--task-start", "spawn")
    with ResultStore(tmp_path / "worker" / "results.sqlite") as store:
        worker, watt = store.results(), store.attempts()
    with ResultStore(tmp_path / "spawn" / "results.sqlite") as store:
        spawned, satt = store.results(), store.attempts()
    n = 3 if "cuszp" in codecs else 2
    assert len(worker) == len(spawned) == n
    # on the GPU, not the CPU reference
    assert worker["status"].isin(["ok", "bound_violated", "bound_overshoot"]).all(), worker[["codec", "status", "error"]]
    assert (worker["device_name"].str.len() > 0).all()
    assert (watt["worker"] == "gpuworker").all() and (satt["worker"] == "local").all()
    details = [json.loads(d) for d in watt["detail"]]
    assert len({d["worker_pid"] for d in details}) == 1, details  # every task in one worker process
    assert sorted(d["task_no"] for d in details) == list(range(1, n + 1))
    # CuPy's pool released after each task: no task's arrays (>= the 64 MiB field) left behind
    assert all(0 <= d["gpu_pool_bytes_after"] < 2**26 for d in details), details
    assert len({json.loads(d)["pid"] for d in satt["detail"]}) == n
    cols = ["task_key", "codec", "bound", "status", "ratio", "bound_ok", "max_abs_err"]
    a = worker[cols].sort_values("task_key").reset_index(drop=True)
    b = spawned[cols].sort_values("task_key").reset_index(drop=True)
    assert a.equals(b), f"worker:\n{a}\nspawned:\n{b}"
    print(f"\nGPU worker sweep {t_worker:.1f} s, spawned {t_spawn:.1f} s for {n} CUDA tasks ({details[0]['cuda']})")
