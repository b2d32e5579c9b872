"""GPU sweep on Dask, one pinned worker per GPU, against the local executor (a device run).

Runs one szp-gpu spec on every visible GPU twice: with the local executor (one task per
device at a time) and on a Dask LocalCluster to which perfscout adds one worker per GPU
(``CUDA_VISIBLE_DEVICES`` pinned, resource ``GPU=1``). Checks that both tables agree
(timings aside), that every CUDA task ran on a GPU worker and really on the GPU
(``status`` ok, an NVIDIA ``device_name``), and writes what it measured as JSON.

    python benchmarks/sweep_dask_gpu.py --out results.json [--gpus N]

On a 2-GPU host this is also the tasks/s comparison of the README's Scaling section.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.sweep.dask_executor import DaskOptions, _gpu_count  # noqa: E402
from perfscout.sweep.runner import run_sweep  # noqa: E402
from perfscout.tools.results_store import ResultStore  # noqa: E402

VOLATILE = ["run_id", "started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps", "h2d_s", "d2h_s"]


def spec(gpus: int) -> str:
    devices = ", ".join(f"cuda:{i}" for i in range(gpus))
    return f"""\
name: dask-gpu
repeats: 3
datasets:
  - synthetic: "grf:64,256,256"
  - synthetic: "smooth:64,256,256"
codecs: [szp-gpu]
devices: [{devices}]
modes: [abs, rel]
bounds: [1.0e-2, 1.0e-4]
"""


def run(spec_path: Path, out: Path, dask: DaskOptions | None) -> dict:
    t0 = time.perf_counter()
    outcome = run_sweep(spec_path, out, jobs=None, progress=False, dask=dask)
    wall = time.perf_counter() - t0
    with ResultStore(out / "results.sqlite") as store:
        df, att = store.results(), store.attempts()
    return {"wall_s": round(wall, 3), "tasks": outcome.total, "statuses": outcome.statuses,
            "tasks_per_s": round(outcome.total / wall, 3), "df": df, "attempts": att}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpus", type=int, default=None)
    a = ap.parse_args()
    gpus = a.gpus or _gpu_count()
    if not gpus:
        print("no GPU visible (NVML): nothing to measure", file=sys.stderr)
        return 2
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    except OSError as exc:
        smi = f"nvidia-smi: {exc}"
    doc: dict = {"benchmark": "sweep_dask_gpu", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 "machine": {"hostname": platform.node(), "gpus": smi.splitlines(), "logical_cpus": os.cpu_count(),
                             "python": platform.python_version()}, "spec": spec(gpus)}
    with tempfile.TemporaryDirectory() as tmp:
        sp = Path(tmp) / "spec.yaml"
        sp.write_text(spec(gpus))
        local = run(sp, Path(tmp) / "local", None)
        dask = run(sp, Path(tmp) / "dask", DaskOptions(workers=1, gpus=gpus))
    ldf, ddf, att = local["df"], dask["df"], dask["attempts"]
    stable = [c for c in ldf.columns if c not in VOLATILE]
    for df in (ldf, ddf):  # szp-gpu puts its per-run CUDA-event timings in `error` (gpu_detail=...)
        df["error"] = df["error"].fillna("").str.replace(r"gpu_detail=\{.*?\}(?=$|;)", "gpu_detail={timings}",
                                                         regex=True)
    same = ldf[stable].sort_values("task_key").reset_index(drop=True).equals(
        ddf[stable].sort_values("task_key").reset_index(drop=True))
    a_, b_ = (x[stable].sort_values("task_key").reset_index(drop=True) for x in (ldf, ddf))
    differing = {c: [a_[c].tolist(), b_[c].tolist()] for c in stable
                 if len(a_) == len(b_) and not a_[c].equals(b_[c])}
    details = [json.loads(d) for d in att["detail"]]
    doc["local"] = {k: v for k, v in local.items() if k not in ("df", "attempts")}
    doc["dask"] = {k: v for k, v in dask.items() if k not in ("df", "attempts")}
    doc["checks"] = {
        "tables_equal_timings_aside": bool(same),
        "columns_that_differ": differing,
        "unique_task_keys": bool(ddf["task_key"].is_unique and len(ddf) == len(ldf)),
        "every_task_on_a_gpu_worker": all(d["name"].startswith("gpu-") and d["gpu"] != "" for d in details),
        "gpu_workers_used": sorted({f"{d['name']} (CUDA_VISIBLE_DEVICES={d['gpu']})" for d in details}),
        "statuses_local": local["statuses"], "statuses_dask": dask["statuses"],
        "device_names": sorted(set(ddf["device_name"].dropna())),
    }
    doc["rows_dask"] = json.loads(ddf[["task_key", "dataset", "device", "device_name", "mode", "bound", "ratio",
                                       "max_abs_err", "abs_bound", "bound_ok", "status", "compress_MBps",
                                       "decompress_MBps"]].to_json(orient="records"))
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"local": doc["local"], "dask": doc["dask"], "checks": doc["checks"]}, indent=1))
    ok = doc["checks"]["tables_equal_timings_aside"] and doc["checks"]["every_task_on_a_gpu_worker"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
