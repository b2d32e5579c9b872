"""One Dask worker per GPU, each pinned with ``CUDA_VISIBLE_DEVICES`` and declaring ``GPU=1``.

``python -m perfscout.sweep.gpu_workers SCHEDULER [--gpus N | --devices 0,1] [dask worker options]``

Sweep tasks on ``cuda`` devices are submitted with the resource annotation ``GPU=1``, so
only these workers take them, one at a time each, and the task's child process sees
exactly one GPU. The devices are the ones this process may use: the entries of its own
``CUDA_VISIBLE_DEVICES`` when set (as Slurm sets it for a job's ``--gres=gpu:N``), else
``0..N-1``. dask-jobqueue starts this module as its ``worker_command`` for clusters with
``gpus_per_job``; it accepts that command line (``--name``, ``--nthreads``,
``--memory-limit``, ...) and names the workers as dask-jobqueue expects (``NAME-0``, ...).
The module exits when its workers do and passes SIGTERM/SIGINT on to them.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from perfscout.sweep.serverproc import wait_or_kill


def device_list(gpus: int | None, devices: str | None) -> list[str]:
    if devices:
        return [d.strip() for d in devices.split(",") if d.strip()]
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if gpus is None:
        return visible
    return visible[:gpus] if len(visible) >= gpus else [str(i) for i in range(gpus)]


def worker_command(scheduler: str, name: str, memory_limit: str | None, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--name", name, "--nthreads", "1",
           "--resources", "GPU=1"]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    return cmd + extra


def start_gpu_workers(scheduler: str, devices: list[int | str], *, name: str = "gpu",
                      memory_limit: str | None = None, extra: list[str] | None = None) -> list[subprocess.Popen]:
    """Start one pinned worker per device (each in its own session, so it can be stopped whole)."""
    procs = []
    for i, dev in enumerate(devices):
        wname = name if len(devices) == 1 and name != "gpu" else f"{name}-{i}"
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(dev))
        procs.append(subprocess.Popen(worker_command(scheduler, wname, memory_limit, list(extra or [])), env=env,
                                      stdin=subprocess.DEVNULL, start_new_session=True))
    return procs


def stop_gpu_workers(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for p in procs:
        wait_or_kill(p, max(0.1, deadline - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfscout.sweep.gpu_workers", description=__doc__.split("\n")[0])
    ap.add_argument("scheduler")
    ap.add_argument("--gpus", type=int, default=None, help="workers to start (default: one per visible GPU)")
    ap.add_argument("--devices", default=None, help="explicit device ids, e.g. 0,1")
    ap.add_argument("--name", default="gpu")
    ap.add_argument("--nthreads", default=None, help="ignored: a GPU worker runs one task at a time")
    ap.add_argument("--memory-limit", default=None)
    args, extra = ap.parse_known_args(argv)
    devices = device_list(args.gpus, args.devices)
    if not devices:
        print("gpu_workers: no GPU to start a worker for (no --gpus/--devices, CUDA_VISIBLE_DEVICES empty)",
              file=sys.stderr)
        return 2
    procs = start_gpu_workers(args.scheduler, devices, name=args.name, memory_limit=args.memory_limit, extra=extra)

    def forward(signum: int, frame: object) -> None:
        stop_gpu_workers(procs)
        sys.exit(0)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [p.wait() for p in procs]
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main())
