"""Tasks per second of one sweep spec: forked tasks, spawned tasks, and a Dask cluster.

``local-jobs2`` is the default local executor (CPU tasks forked from the session's task
server, which imported numpy, pydantic, the codecs and the evaluation once);
``local-jobs2-spawn`` starts a fresh interpreter per task (``--task-start spawn``, what every
task did before the task server); ``dask-local-2workers`` a LocalCluster whose workers spawn
each task's child.

Each configuration runs the whole spec into a fresh run directory through the CLI (a
separate process, as a user would), ``rounds`` times, alternating configurations so both
see the same machine load. Wall time is the CLI process's, from start to exit: it includes
interpreter start-up, the platform snapshot and, for Dask, starting and stopping the
LocalCluster, because that is what a user waits for. The driver's own figure for the
tasks alone (first attempt start to last attempt end, from the store's attempt log) is
reported beside it.

    .venv/bin/python benchmarks/sweep_scaling.py [--spec examples/sweep_quick.yaml] [--rounds 3]
        [--out benchmarks/results/sweep_scaling_cpu.json]

``--cuda`` measures CUDA-device tasks instead (szp-gpu on ``cuda:0``; without a GPU its NumPy
reference runs, so this is the per-task overhead of the process model, not GPU speed):
``cuda-worker`` sends them one at a time to the device's long-lived GPU worker (the default),
``cuda-spawn`` starts a fresh interpreter per task (``--task-start spawn``, what every CUDA task
did before the worker). ``--section NAME`` writes the figures into ``sections[NAME]`` of the
existing JSON and keeps the rest of it.

    .venv/bin/python benchmarks/sweep_scaling.py --cuda --section cuda_tasks_gpu_worker

The GPU variant (one Dask worker per GPU, ``CUDA_VISIBLE_DEVICES`` pinned) is
``benchmarks/sweep_dask_gpu.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.tools.results_store import ResultStore  # noqa: E402

CONFIGS = {
    "local-jobs2": ["--jobs", "2"],
    "local-jobs2-spawn": ["--jobs", "2", "--task-start", "spawn"],
    "dask-local-2workers": ["--executor", "dask", "--workers", "2"],
}

CUDA_CONFIGS = {
    "cuda-worker": [],
    "cuda-spawn": ["--task-start", "spawn"],
}

#: Small CUDA tasks: the process model's cost is most of each one.
CUDA_SPEC = """\
name: cuda-tasks
repeats: 1
datasets:
  - synthetic: "smooth:32,64,64"
  - synthetic: "grf:32,64,64"
codecs: [szp-gpu]
devices: ["cuda:0"]
modes: [abs, rel]
bounds: [1.0e-1, 1.0e-2, 1.0e-3, 1.0e-4, 1.0e-5]
"""


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        mem_gib = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    import dask
    import distributed

    return {"hostname": platform.node(), "cpu": cpu, "logical_cpus": os.cpu_count(), "memory_gib": round(mem_gib, 1),
            "os": platform.platform(), "python": platform.python_version(), "dask": dask.__version__,
            "distributed": distributed.__version__, "loadavg_at_start": [round(x, 2) for x in load],
            "note": "shared 2-core VM: other engineers' jobs run at the same time"}


def task_span_s(run_dir: Path) -> float:
    with ResultStore(run_dir / "results.sqlite") as store:
        att = store.attempts()
    import pandas as pd

    start = pd.to_datetime(att["started_at"]).min()
    end = pd.to_datetime(att["finished_at"]).max()
    return (end - start).total_seconds()


def _grouped(rows: list[dict]) -> list[dict]:
    """Tasks that were not ``ok``, one entry per (status, error) with a count: 20 CUDA tasks
    that ran the CPU reference for want of CuPy say so once, not 20 times."""
    groups: dict[tuple[str, str], dict] = {}
    for r in rows:
        g = groups.setdefault((r["status"], r["error"]), {"status": r["status"], "error": r["error"], "count": 0,
                                                          "example_task_key": r["task_key"]})
        g["count"] += 1
    return list(groups.values())


def run_once(spec: Path, args: list[str], out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", "sweep", str(spec),
                          "--out", str(out), "--json", "--no-progress", *args],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the CLI and everything it waited for (task processes, the task server, Dask workers)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if res.returncode != 0:
        raise SystemExit(f"sweep failed ({args}): {res.stderr[-2000:]}")
    doc = json.loads(res.stdout)
    span = task_span_s(out)
    from perfscout.tools.results_store import open_results

    df = open_results(out)
    not_ok = df[df["status"] != "ok"][["task_key", "codec", "mode", "bound", "dataset", "status", "error"]]
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "tasks": doc["tasks"], "statuses": doc["statuses"],
            "not_ok": _grouped(json.loads(not_ok.to_json(orient="records"))),
            "tasks_per_s_wall": round(doc["tasks"] / wall, 3), "task_span_s": round(span, 3),
            "tasks_per_s_span": round(doc["tasks"] / span, 3) if span > 0 else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "sweep_quick.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sweep_scaling_cpu.json")
    ap.add_argument("--config", action="append", default=None,
                    help="name=ARGS to run instead of the defaults, e.g. 'dask-gpus=--executor dask --workers 1'")
    ap.add_argument("--cuda", action="store_true", help="CUDA-device tasks: GPU worker against spawned tasks")
    ap.add_argument("--section", default=None, help="write into sections[NAME] of --out, keeping the rest")
    a = ap.parse_args()
    configs = dict(CUDA_CONFIGS if a.cuda else CONFIGS)
    tmp_spec = None
    if a.cuda:
        tmp_spec = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="cuda-tasks-", delete=False)
        tmp_spec.write(CUDA_SPEC)
        tmp_spec.close()
        a.spec = Path(tmp_spec.name)
    if a.config:
        configs = {c.split("=", 1)[0]: c.split("=", 1)[1].split() for c in a.config}
    doc: dict = {"benchmark": "sweep_scaling", "spec": CUDA_SPEC if a.cuda else str(
                     a.spec.relative_to(ROOT) if a.spec.is_relative_to(ROOT) else a.spec),
                 "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
                 "configs": {k: {"args": v, "runs": []} for k, v in configs.items()},
                 "notes": ["cpu_s is the CLI's and its reaped descendants' CPU (RUSAGE_CHILDREN): a Dask "
                           "worker's task server is killed with its worker and never reaped, so the Dask "
                           "configurations' cpu_s leaves out its tasks' CPU"]}
    with tempfile.TemporaryDirectory(prefix="perfscout-scaling-") as tmp:
        for r in range(a.rounds):
            for name, args in configs.items():
                result = run_once(a.spec, args, Path(tmp) / f"{name}-{r}")
                doc["configs"][name]["runs"].append(result)
                print(f"round {r + 1} {name}: {result}", file=sys.stderr)
    for c in doc["configs"].values():
        c["median_tasks_per_s_wall"] = statistics.median(x["tasks_per_s_wall"] for x in c["runs"])
        c["median_tasks_per_s_span"] = statistics.median(x["tasks_per_s_span"] for x in c["runs"])
        c["median_wall_s"] = statistics.median(x["wall_s"] for x in c["runs"])
        c["median_cpu_s_per_task"] = round(statistics.median(x["cpu_s"] / x["tasks"] for x in c["runs"]), 4)
    if tmp_spec is not None:
        os.unlink(tmp_spec.name)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    if a.section:
        whole = json.loads(a.out.read_text()) if a.out.is_file() else {}
        whole.setdefault("sections", {})[a.section] = doc
        a.out.write_text(json.dumps(whole, indent=1) + "\n")
    else:
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: {m: v[m] for m in ("median_wall_s", "median_tasks_per_s_wall", "median_tasks_per_s_span",
                                             "median_cpu_s_per_task")}
                      for k, v in doc["configs"].items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
