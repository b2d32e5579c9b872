"""A long-lived worker per GPU: the imports and the CUDA context made once, CUDA tasks one at a time.

A CUDA context does not survive ``fork``, so CUDA tasks cannot come from the CPU task server
(:mod:`.forkserver`). Spawning ``python -m perfscout.sweep.worker`` per task costs about 3.4 s
per task on the H200 (imports ~1.0 s, the CUDA context ~0.8 s, ...). Instead the driver starts,
on first need, one ``python -m perfscout.sweep.gpuworker`` per device a session uses, pinned
with ``CUDA_VISIBLE_DEVICES`` (:func:`.child.child_env`), and sends it one task at a time.

What the per-task process guaranteed still holds:

- **timeout**: the worker is its own session and process group; the driver's ``killpg`` on a
  hung task kills it (and whatever it started); the task is recorded ``codec_timeout`` and the
  next CUDA task on that device gets a fresh worker;
- **crash containment**: a segfault or a CUDA fatal error ends the worker; its current task is
  recorded ``codec_crashed`` with the signal (the driver reads the worker's exit status), and the
  worker is replaced — earlier tasks' records were already written and stored;
- **memory watch**: the driver watches what the task adds to the worker's resident size when the
  task started (as for forked tasks); between tasks the worker collects garbage and releases
  CuPy's device and pinned memory pools, so one task's cached blocks do not starve the next, and
  reports what the pools still hold; a worker whose resident size has grown past one task limit
  above its start is retired before the next task;
- each task's stdout/stderr (and faulthandler's stack on a native crash) go to that attempt's log;
- the worker dies with the driver (``PR_SET_PDEATHSIG``) and ends when its stdin closes.

What a long-lived worker cannot undo: module state a task leaves behind (a plug-in's imports
stay, as they would for every task of the session anyway). ``task_start: spawn`` keeps one fresh
interpreter per task for CUDA too.

Protocol (JSON lines; the driver writes the worker's stdin and reads its stdout)::

    worker -> {"event": "ready", "pid": P, "preloaded": [...], "missing": {...}, "cuda": "..."}
    driver -> {"id": N, "task": PATH, "result": PATH, "log": PATH}
    worker -> {"event": "done", "id": N, "returncode": RC, "gpu_pool_bytes": B, "rss_mb": R}
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from perfscout.sweep import serverproc
from perfscout.sweep.forkserver import ForkServerError
from perfscout.tools.process_limits import resident_mb

#: Imported once by the worker (a missing one is skipped and reported).
PRELOAD = ("numpy", "pandas", "pydantic", "perfscout.state.records", "perfscout.sweep.spec",
           "perfscout.sweep.worker", "perfscout.tools.evaluate", "perfscout.tools.gpu_eval",
           "perfscout.tools.bounds", "perfscout.analysis.metrics", "perfscout.datasets",
           "perfscout.codecs.registry", "perfscout.codecs.szp", "perfscout.codecs.gpu_peers.cuszp",
           "perfscout.codecs.gpu_peers.nvcomp", "cupy", "cupyx")
#: How long the driver waits for the worker's preload and CUDA context (seconds).
START_TIMEOUT_S = 120.0


class GpuWorkerError(ForkServerError):
    """The GPU worker could not start or is gone; the driver replaces it or spawns the task."""


# ----------------------------------------------------------------------------- worker side


def _preload() -> tuple[list[str], dict[str, str], str]:
    import importlib

    done, missing = [], {}
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception as exc:  # noqa: BLE001 - without CuPy the codecs run their CPU reference
            missing[name] = f"{type(exc).__name__}: {exc}"
    missing.update(load_lazy_modules())
    return done, missing, _cuda_context()


def load_lazy_modules() -> dict[str, str]:
    """Load, here and now, every module imported so far with a lazy loader
    (``importlib.util.LazyLoader``: CuPy's optional submodules), {name: why not} for those
    that fail. Why: a lazy module runs its imports where it is first touched, and a library
    that keeps an import's exception to raise later (optuna, through cupyx's optimizer:
    ``No module named 'redis'``) keeps that exception's traceback, whose frames hold the
    locals of every caller, for the life of the process. Touched inside a task, that was
    the task's field (measured on the H200: the first task's 210 MB of device arrays before
    gpu_eval let go of them, and its host field still after); touched here, only this
    function's frames."""
    import importlib.util

    lazy = getattr(importlib.util, "_LazyModule", None)
    failed: dict[str, str] = {}
    if lazy is None:
        return failed
    tried: set[str] = set()
    while True:  # a module loaded here may import further lazy ones
        pending = [(name, m) for name, m in list(sys.modules.items()) if type(m) is lazy and name not in tried]
        if not pending:
            return failed
        for name, module in pending:
            tried.add(name)
            try:
                vars(module)  # any attribute (here __dict__) runs the deferred import
            except Exception as exc:  # noqa: BLE001 - an optional submodule that cannot load
                failed[name] = f"{type(exc).__name__}: {exc}"


def _cuda_context() -> str:
    """Make the CUDA context now, once (what every spawned task paid ~0.8 s for)."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return "no cupy: CUDA tasks run their codecs' CPU reference"
    try:
        cp.zeros(1, dtype=cp.uint8).sum()
        cp.cuda.Stream.null.synchronize()
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props.get("name", b"")
        return f"device {cp.cuda.Device().id}: {name.decode() if isinstance(name, bytes) else name}"
    except Exception as exc:  # noqa: BLE001 - no usable GPU: the tasks say so in their records
        return f"no CUDA context ({type(exc).__name__}: {exc})"


#: Checks run after every task: each returns "" when the process can take another task, else why
#: not. A CUDA error that poisons the context (an illegal address, a kernel fault) does not end the
#: process, but every later call in it fails: the worker retires instead (the driver starts a new
#: one) and only the task that broke it is lost. Plug-in codecs may add a check of their library.
HEALTH_CHECKS: list[Callable[[], str]] = []


def register_health_check(check: Callable[[], str]) -> None:
    """Run ``check`` after every task of a GPU worker; a non-empty answer retires the worker."""
    if check not in HEALTH_CHECKS:
        HEALTH_CHECKS.append(check)


def cuda_context_problem() -> str:
    """'' when CuPy's context still runs a kernel and synchronises, else the CUDA error."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return ""
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return ""
    except Exception:  # noqa: BLE001 - no GPU at all: the tasks ran their CPU reference
        return ""
    try:
        cp.cuda.Device().synchronize()
        int(cp.arange(4, dtype=cp.int32).sum().get())
        return ""
    except Exception as exc:  # noqa: BLE001 - a sticky CUDA error: this context is done
        return f"the CUDA context is unusable after the task ({type(exc).__name__}: {exc})"


def health_problem() -> str:
    for check in (cuda_context_problem, *HEALTH_CHECKS):
        try:
            why = check()
        except Exception as exc:  # noqa: BLE001 - a check that fails is a failed check
            why = f"health check {getattr(check, '__name__', check)} failed: {type(exc).__name__}: {exc}"
        if why:
            return why
    return ""


def release_gpu_memory() -> int:
    """Free CuPy's cached device and pinned blocks; the bytes its device pool still holds."""
    import gc

    gc.collect()  # arrays of the finished task that only a reference cycle kept alive
    cp = sys.modules.get("cupy")
    if cp is None:
        return 0
    try:
        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
        return int(pool.total_bytes())
    except Exception:  # noqa: BLE001 - a broken context: the next task finds out and says so
        return -1


class FieldCache:
    """The last field a task loaded, kept for the next task on the same data.

    A sweep's tasks come data-outermost (codecs x modes x bounds over one field), and reading
    and checking a 1 GiB field took ~0.9 s of every spawned GPU task. One field at most: a
    task on other data drops it before loading its own, so the peak is one field. The kept
    array is made read-only, so a task cannot change what the next one measures (a codec
    that wrote into its input would fail loudly rather than skew the next result)."""

    def __init__(self) -> None:
        self.key = ""
        self.data: Any = None
        #: whether the last task's field came from here (said in its attempt's detail)
        self.hit = False

    def load(self, task: Any) -> Any:
        import numpy as np

        from perfscout.sweep.worker import load_array

        key = task.data.model_dump_json()
        self.hit = key == self.key and self.data is not None
        if not self.hit:
            self.clear()
            data = load_array(task)
            array = getattr(data, "array", data)  # a datasets.Field, or a bare array
            if not isinstance(array, np.ndarray):
                return data
            array.flags.writeable = False
            self.key, self.data = key, data
        return self._fresh(self.data)

    @staticmethod
    def _fresh(data: Any) -> Any:
        """The kept field with its own notes and meta (an evaluation may add to them)."""
        if dataclasses.is_dataclass(data) and not isinstance(data, type):
            return dataclasses.replace(data, notes=list(getattr(data, "notes", [])),
                                       meta=dict(getattr(data, "meta", {})))
        return data

    def clear(self) -> None:
        import gc

        self.key, self.data = "", None
        gc.collect()

    @property
    def nbytes(self) -> int:
        return int(getattr(getattr(self.data, "array", self.data), "nbytes", 0))


def _run_one(req: dict[str, Any], quiet_fd: int, cache: FieldCache | None = None) -> int:
    """Run one task with fds 1 and 2 on its attempt's log, then put them back."""
    from perfscout.sweep.worker import run_task

    log_fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    try:
        return run_task(Path(req["task"]), Path(req["result"]), load=cache.load if cache is not None else None)
    except BaseException:  # noqa: BLE001 - a task's failure must not end the worker's loop
        import traceback

        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(quiet_fd, 1)
        os.dup2(quiet_fd, 2)


def serve(inp: IO[str] = sys.stdin, out: IO[str] = sys.stdout) -> int:
    """The worker's loop: one task at a time until its stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver owns Ctrl-C
    from perfscout.tools.process_limits import die_with_parent

    die_with_parent()
    # The protocol keeps a private copy of stdout; fds 1 and 2 belong to the task's log
    # while a task runs and to the worker's own log (its stderr) between tasks.
    proto = os.fdopen(os.dup(out.fileno()), "w")
    quiet_fd = os.dup(2)
    os.dup2(quiet_fd, 1)
    import faulthandler

    faulthandler.enable(file=sys.stderr)  # fd 2: the running task's log when it crashes
    done, missing, cuda = _preload()

    def say(doc: dict[str, Any]) -> None:
        proto.write(json.dumps(doc) + "\n")
        proto.flush()

    say({"event": "ready", "pid": os.getpid(), "preloaded": done, "missing": missing, "cuda": cuda})
    cache = FieldCache()
    for line in inp:
        if not line.strip():
            continue
        req = json.loads(line)
        cache.hit = False
        rc = _run_one(req, quiet_fd, cache)
        retire = health_problem()
        pool = release_gpu_memory() if not retire else -1
        say({"event": "done", "id": req["id"], "returncode": rc, "gpu_pool_bytes": pool,
             "rss_mb": round(resident_mb(os.getpid()), 1), "kept_field_mb": round(cache.nbytes / 2**20, 1),
             "field_reused": cache.hit, "retire": retire})
        if retire:
            print(f"gpuworker {os.getpid()}: retiring: {retire}", file=sys.stderr, flush=True)
            return 3
    return 0


# ----------------------------------------------------------------------------- driver side


@dataclass
class WorkerTask(serverproc.TaskHandle):
    """One task running in a GPU worker, seen from the driver (the ``Popen`` subset used).

    ``pid`` is the worker's: killing its process group ends the task (and the worker)."""

    what = "GPU worker task"

    pid: int
    worker: GpuWorker
    task_no: int
    returncode: int | None = None
    note: str = ""
    #: The worker's resident size when the task started: the memory watch is on what it adds.
    baseline_mb: float = 0.0
    #: The worker's report after the task ("gpu_pool_bytes", "rss_mb").
    after: dict[str, Any] = field(default_factory=dict)
    _done: threading.Event = field(default_factory=threading.Event)

    def _exited(self, rc: int, note: str = "", after: dict[str, Any] | None = None) -> None:
        super()._exited(rc, note, after=dict(after or {}))


class GpuWorker:
    """The driver's handle on one long-lived worker for one device (one task at a time)."""

    def __init__(self, device: str, env: dict[str, str], log_path: Path | None = None,
                 exited: threading.Event | None = None) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._current: WorkerTask | None = None
        self._next = 0
        self._dead = ""
        #: The worker's report after its last task (pool bytes, RSS, the field it keeps).
        self.last_report: dict[str, Any] = {}
        #: Set whenever its task finishes (or it dies): the driver's loop wakes at once.
        self.exited = exited if exited is not None else threading.Event()
        self.proc = serverproc.start("perfscout.sweep.gpuworker", env, log_path)
        self.pid = self.proc.pid
        self.ready = self._read_ready()
        self.start_rss_mb = resident_mb(self.pid)
        self._reader = threading.Thread(target=self._read_loop, name=f"perfscout-gpuworker-{device}", daemon=True)
        self._reader.start()

    def _read_ready(self) -> dict[str, Any]:
        doc = serverproc.read_ready(self.proc, START_TIMEOUT_S)
        if doc is None:
            self.close()
            raise GpuWorkerError(f"the GPU worker for {self.device} did not start (exit status {self.proc.poll()})")
        return doc

    def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        for doc in serverproc.replies(self.proc.stdout):
            if doc.get("event") != "done":
                continue
            with self._lock:
                task, self._current = self._current, None
                if doc.get("retire"):  # it exits now: no task may be sent to it any more
                    self._dead = f"the GPU worker (pid {self.pid}) retired: {doc['retire']}"
            self.last_report = doc
            if task is not None:
                task._exited(int(doc["returncode"]), after=doc)
            self.exited.set()
        # EOF: the worker is gone (killed for a timeout, crashed, or closed). Its exit status
        # is the running task's: -11 for a segfault, -9 for the driver's kill.
        rc = self.proc.wait()
        with self._lock:
            self._dead = self._dead or f"the GPU worker (pid {self.pid}) for {self.device} died"
            task, self._current = self._current, None
        if task is not None:
            task._exited(rc, "" if rc < 0 else self._dead)
        self.exited.set()

    @property
    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    @property
    def busy(self) -> bool:
        return self._current is not None

    def rss_mb(self) -> float:
        return resident_mb(self.pid)

    def grown_mb(self) -> float:
        """What the worker's resident size grew since it started, less the field it keeps for
        the next task (a leak, or pages a task left behind)."""
        return self.rss_mb() - self.start_rss_mb - float(self.last_report.get("kept_field_mb", 0.0))

    def spawn(self, task_path: Path, result_path: Path, log_path: Path, env: dict[str, str] | None = None) -> WorkerTask:
        """Hand the worker one task; :class:`GpuWorkerError` when it is gone or busy.

        ``env`` is accepted for the task server's signature; the worker's environment was
        fixed when it started (the device pin and the thread counts of a CUDA task)."""
        with self._lock:
            if self._dead or self.proc.poll() is not None:
                raise GpuWorkerError(self._dead or f"the GPU worker (pid {self.pid}) has exited")
            if self._current is not None:
                raise GpuWorkerError(f"the GPU worker for {self.device} is running a task already")
            self._next += 1
            task = WorkerTask(pid=self.pid, worker=self, task_no=self._next, baseline_mb=resident_mb(self.pid))
            self._current = task
            req = {"id": self._next, "task": str(task_path), "result": str(result_path), "log": str(log_path)}
            try:
                serverproc.send(self.proc, req)
            except OSError as exc:
                self._current = None
                raise GpuWorkerError(f"the GPU worker does not take tasks: {exc}") from None
            return task

    def close(self) -> None:
        """Stop the worker: stdin closes and it leaves after its task; killed if it does not soon."""
        serverproc.stop(self.proc, getattr(self, "_reader", None))  # no reader before the handshake


def main() -> int:
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy: a plug-in's register_health_check
    # (``from perfscout.sweep import gpuworker``) must reach the list the loop reads.
    from perfscout.sweep import gpuworker as _worker

    sys.exit(_worker.main())
