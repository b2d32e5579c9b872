"""Sweeps on Dask: a LocalCluster, a running scheduler, or Slurm/PBS through dask-jobqueue.

What runs where:

- **the driver** (this process, ``perfscout sweep --executor dask``) expands the spec,
  holds the run directory's lock and is the *only* writer of the run directory and its
  SQLite store, exactly as in a local sweep;
- **a Dask task** per sweep task runs on a worker: it starts the same contained child as
  the local executor (forked from the worker process's task server for CPU tasks, see
  :mod:`.forkserver`, else ``python -m perfscout.sweep.worker``; the task's timeout and
  memory limit enforced by the worker), in a scratch directory on the worker, and
  returns the record and the child's log to the driver. Workers need perfscout installed
  and the datasets at the same paths (a shared file system); synthetic data needs nothing.

Exactly once: a Dask key is ``perfscout-<run_id>-<task_key>``, so one run cannot submit a
task twice; the driver stores a record only for a task that has none (the store's primary
key refuses a second). A worker that dies mid-task (killed, out of memory, node lost) makes
the scheduler run the task elsewhere, up to ``retries`` lost workers; a task that kills
every worker it touches ends as Dask's ``KilledWorker`` and is stored as ``codec_crashed``
with the workers it took down. Each attempt (which worker, when, what became of it) is in
the store's ``attempts`` table: workers announce a start with a Dask event, the driver
writes it.

GPU tasks (``device: cuda[:N]``) carry the resource annotation ``GPU=1``, so they land only
on workers that declare that resource; :mod:`.gpu_workers` starts one such worker per GPU
with ``CUDA_VISIBLE_DEVICES`` pinned (a worker pinned that way keeps its GPU for the child).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfscout.errors import InputError, PerfscoutError
from perfscout.state.records import CompressionResult
from perfscout.io import write_atomic
from perfscout.sweep.child import TaskChild, attempt_paths, child_env, failure_record
from perfscout.sweep.forkserver import ForkServer, ForkServerError
from perfscout.sweep.spec import SweepTask

if TYPE_CHECKING:
    from perfscout.sweep.outcome import SweepDriver, SweepOutcome
    from perfscout.tools.results_store import ResultStore

#: Dask event topic on which workers announce the attempts they start.
EVENT_TOPIC = "perfscout-sweep"
#: The most log text a worker sends back per attempt (the tail is what explains a crash).
LOG_LIMIT = 64 * 1024
_POLL_S = 0.05


class DaskUnavailable(InputError):
    """Dask (or dask-jobqueue) is not installed, or the cluster cannot be reached."""


class ClusterConfig(BaseModel):
    """A dask-jobqueue cluster (``--cluster slurm|pbs --cluster-config FILE``), one YAML mapping.

    ``gpus_per_job`` > 0 starts one worker per GPU in each job, each with
    ``CUDA_VISIBLE_DEVICES`` pinned and the resource ``GPU=1`` (``processes`` is then the
    GPU count); ``gres``/``-l ngpus`` directives for the GPUs are added for you.
    """

    model_config = ConfigDict(extra="forbid")

    cores: int = Field(default=1, ge=1)  # cores per job
    memory: str = "4GiB"  # per job
    walltime: str = "01:00:00"
    account: str | None = None
    queue: str | None = None
    jobs: int = Field(default=1, ge=1)  # jobs to start (each one or more workers)
    processes: int = Field(default=1, ge=1)  # worker processes per job (CPU jobs)
    gpus_per_job: int = Field(default=0, ge=0)
    python: str | None = None  # the interpreter on the compute nodes (default: this one)
    job_extra_directives: list[str] = Field(default_factory=list)
    job_script_prologue: list[str] = Field(default_factory=list)
    worker_extra_args: list[str] = Field(default_factory=list)
    local_directory: str | None = None
    log_directory: str | None = None
    interface: str | None = None
    scheduler_host: str | None = None  # where workers reach the driver's scheduler


@dataclass
class DaskOptions:
    """How to reach a Dask cluster (``perfscout sweep --executor dask ...``).

    Nothing set: a LocalCluster of ``workers`` processes (default: the sweep's jobs) with
    one thread each, on 127.0.0.1, plus ``gpus`` pinned GPU workers when the sweep has
    CUDA tasks (default: the GPUs NVML sees). ``scheduler``: the address of a running
    scheduler (``tcp://host:8786``) or its scheduler file. ``cluster`` + ``cluster_config``:
    a dask-jobqueue cluster the driver starts and stops.
    """

    scheduler: str | None = None
    cluster: Literal["slurm", "pbs"] | None = None
    cluster_config: str | Path | None = None
    workers: int | None = None
    gpus: int | None = None
    #: Lost workers a task may cause before it is recorded as crashed (the scheduler's
    #: ``allowed-failures``; a running scheduler applies its own setting).
    retries: int = 2
    #: Seconds to wait for the first worker (jobs can sit in a batch queue).
    start_timeout_s: float = 600.0

    def check(self) -> None:
        """Refuse what is wrong before the run directory is touched: Dask missing, a bad
        cluster config, no ``sbatch``/``qsub`` here (InputError / DaskUnavailable)."""
        _import_distributed()
        if self.scheduler and self.cluster:
            raise InputError("give a running scheduler or a cluster to start, not both")
        if self.cluster:
            if self.cluster_config is None:
                raise InputError("--cluster needs --cluster-config FILE (cores, memory, walltime, account, ...)")
            load_cluster_config(self.cluster_config)
            submit = {"slurm": "sbatch", "pbs": "qsub"}[self.cluster]
            if shutil.which(submit) is None:  # else jobs fail in the background and we wait for nothing
                raise DaskUnavailable(f"--cluster {self.cluster} submits jobs with {submit}, which is not on "
                                      "PATH here (run the sweep on a login node of the cluster)")

    def plan_cores(self, tasks: list[SweepTask], cores: int, jobs: int) -> dict[str, Any]:
        """Codec threads against the cores of a LocalCluster's workers (each runs one task at a
        time, so a task fits when its threads do not exceed its worker's share of the cores);
        refused before anything is stored. A running scheduler's or a batch cluster's workers
        are not this machine's: their cores are theirs to manage (noted)."""
        widest = max((t.threads for t in tasks), default=1)
        if self.scheduler or self.cluster:
            return {"max_codec_threads": widest, **({"note": "codec threads are not checked against the cores "
                                                              "of an external cluster's workers"}
                                                     if widest > 1 else {})}
        workers = max(1, self.workers or jobs)
        per_worker = max(1, cores // workers)
        if widest > per_worker:
            raise InputError(
                f"a task asks for {widest} codec threads, but each of the {workers} LocalCluster workers has "
                f"{per_worker} of the {cores} core(s): use fewer workers (--workers {max(1, cores // widest)}) "
                "or fewer threads")
        return {"cores": cores, "workers": workers, "cores_per_worker": per_worker, "max_codec_threads": widest}


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise DaskUnavailable("--executor dask needs Dask: pip install 'perfscout[dask]'") from None
    return distributed


def load_cluster_config(path: str | Path) -> ClusterConfig:
    from perfscout.io import load_yaml_file

    p = Path(path)
    # a regular file of document size (not a FIFO, a device), YAML within limits
    doc = load_yaml_file(p, "cluster config")
    if not isinstance(doc, dict):
        raise InputError(f"{p}: a cluster config is a YAML mapping (cores, memory, walltime, account, queue, ...)")
    try:
        return ClusterConfig.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors())
        raise InputError(f"{p}: invalid cluster config: {problems}") from None


def jobqueue_cluster(kind: str, cfg: ClusterConfig, retries: int) -> Any:
    """A dask-jobqueue SLURMCluster / PBSCluster from the config (not yet scaled)."""
    try:
        import dask
        import dask_jobqueue
    except ImportError:
        raise DaskUnavailable("--cluster needs dask-jobqueue: pip install 'perfscout[dask]'") from None
    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]
    directives = list(cfg.job_extra_directives)
    kwargs: dict[str, Any] = dict(
        cores=cfg.cores, memory=cfg.memory, walltime=cfg.walltime, account=cfg.account, queue=cfg.queue,
        processes=cfg.processes, python=cfg.python, job_script_prologue=list(cfg.job_script_prologue),
        worker_extra_args=list(cfg.worker_extra_args), local_directory=cfg.local_directory,
        log_directory=cfg.log_directory, interface=cfg.interface,
        scheduler_options={"dashboard_address": ":0", **({"host": cfg.scheduler_host} if cfg.scheduler_host else {})},
    )
    if cfg.gpus_per_job:
        # One pinned worker per GPU of the job (perfscout.sweep.gpu_workers).
        kwargs["processes"] = cfg.gpus_per_job
        kwargs["worker_command"] = "perfscout.sweep.gpu_workers"
        kwargs["worker_extra_args"] = [*cfg.worker_extra_args, "--gpus", str(cfg.gpus_per_job)]
        directives.append(f"--gres=gpu:{cfg.gpus_per_job}" if kind == "slurm" else f"-l ngpus={cfg.gpus_per_job}")
    kwargs["job_extra_directives"] = directives
    with dask.config.set({"distributed.scheduler.allowed-failures": retries}):
        return cls(**{k: v for k, v in kwargs.items() if v is not None})


def _gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: no GPU workers
        return 0


# ----------------------------------------------------------------------------- worker side


def run_task_on_worker(task_json: str, run_meta: dict[str, str], session: int,
                       slots_by_host: dict[str, int]) -> dict[str, Any]:
    """One attempt at one task, on a Dask worker: the contained child, then its record.

    Runs in a worker thread, which blocks while its child runs (so a child is never left
    without the thread that watches its timeout). Nothing is written to the run directory
    here: the record, the log and the task go back to the driver.
    """
    from distributed import get_worker

    task = SweepTask.model_validate_json(task_json)
    worker = get_worker()
    host = socket.gethostname()
    tag = f"s{session}-w{uuid.uuid4().hex[:10]}"
    info = {"task_key": task.task_key, "tag": tag, "worker": worker.address, "name": str(worker.name),
            "host": host, "pid": os.getpid(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            "batch_job": os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID") or ""}
    slots = max(1, slots_by_host.get(host, 0) or worker.state.nthreads)
    threads = max(task.threads, (os.cpu_count() or 1) // slots)
    # A worker started for one GPU (CUDA_VISIBLE_DEVICES set) keeps it for its child.
    pinned = "CUDA_VISIBLE_DEVICES" in os.environ
    env = child_env(task, threads, pin_gpu=not pinned)
    server = _worker_task_server(env) if task.device == "cpu" and run_meta.get("task_start") == "fork" else None
    info["task_server"] = server.pid if server is not None else None
    worker.log_event(EVENT_TOPIC, {"event": "start", "at": time.time(), **info})
    scratch = Path(tempfile.mkdtemp(prefix=f"perfscout-{task.task_key}-", dir=worker.local_directory))
    try:
        child = TaskChild.start(task, scratch, tag, run_meta, env, server=server)
        try:
            child.wait()
            record = child.outcome(run_meta.get("run_id", ""), run_meta.get("platform_id", ""))
        finally:
            child.close()
        log = child.paths["log"].read_bytes()[-LOG_LIMIT:].decode(errors="replace")
        extra = {name: child.paths[name].read_text() if child.paths[name].is_file() else None
                 for name in ("search", "evaluation")}
        return {**info, "record": record.model_dump_json(), "log": log, "task": task_json, **extra}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


_SERVER_LOCK = threading.Lock()
_SERVER: ForkServer | None = None


def _worker_task_server(env: dict[str, str]) -> ForkServer | None:
    """This worker process's task server (:mod:`.forkserver`), started on first use, replaced
    when it died; None when it cannot start (the task then spawns its interpreter).

    It is started from a thread that lives as long as the worker process: the server's
    ``PR_SET_PDEATHSIG`` fires when the *thread* that started it exits, and Dask's task
    threads may come and go; when the worker process ends, the server and its children die.
    """
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is not None and _SERVER.alive:
            return _SERVER
        if _SERVER is not None:
            _SERVER.close()
            _SERVER = None
        started: dict[str, Any] = {}
        ready = threading.Event()

        def keeper() -> None:
            try:
                started["server"] = ForkServer(env)
            except (ForkServerError, OSError) as exc:
                started["error"] = exc
            ready.set()
            threading.Event().wait()  # never returns: the server's parent thread stays alive

        threading.Thread(target=keeper, name="perfscout-task-server", daemon=True).start()
        ready.wait()
        _SERVER = started.get("server")
        return _SERVER


# ----------------------------------------------------------------------------- driver side


class _Cluster:
    """The client and whatever cluster this driver started (closed at the end)."""

    def __init__(self, opts: DaskOptions, runner: SweepDriver, pending: list[SweepTask], stack: ExitStack) -> None:
        distributed = _import_distributed()
        import dask

        self.kind = "scheduler"
        self.gpu_procs: list[Any] = []
        self.allowed_failures: int | None = opts.retries
        if opts.scheduler:
            address = opts.scheduler
            if Path(address).is_file():  # a scheduler file (dask scheduler --scheduler-file)
                try:
                    address = json.loads(Path(address).read_text())["address"]
                except (OSError, ValueError, KeyError) as exc:
                    raise InputError(f"{opts.scheduler} is not a Dask scheduler file: {exc}") from None
            self.allowed_failures = None  # the scheduler's own setting, read below
            self.client = self._connect(distributed, address, stack)
        elif opts.cluster:
            if opts.cluster_config is None:
                raise InputError("--cluster needs --cluster-config FILE (cores, memory, walltime, account, ...)")
            opts.check()
            cfg = load_cluster_config(opts.cluster_config)
            self.kind = opts.cluster
            try:
                cluster = stack.enter_context(jobqueue_cluster(opts.cluster, cfg, opts.retries))
            except (DaskUnavailable, InputError):
                raise
            except Exception as exc:  # no sbatch/qsub, a bad directive: say so, no traceback
                raise DaskUnavailable(f"cannot start the {opts.cluster} cluster: {type(exc).__name__}: {exc}") from None
            runner.console.print(f"[dim]{opts.cluster} job script:\n{cluster.job_script()}[/]")
            cluster.scale(jobs=cfg.jobs)
            self.client = self._connect(distributed, cluster, stack)
        else:
            self.kind = "local"
            n = max(1, opts.workers or runner.jobs)
            with dask.config.set({"distributed.scheduler.allowed-failures": opts.retries}):
                # death_timeout: if this driver is SIGKILLed its workers close themselves
                # (they could not write anything anyway: only the driver writes)
                cluster = stack.enter_context(distributed.LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=":0", silence_logs=50, death_timeout=60))
            self.client = self._connect(distributed, cluster, stack)
            gpus = opts.gpus if opts.gpus is not None else (
                _gpu_count() if any(t.device.startswith("cuda") for t in pending) else 0)
            if gpus:
                from perfscout.sweep.gpu_workers import start_gpu_workers

                self.gpu_procs = start_gpu_workers(cluster.scheduler_address, list(range(gpus)))
                stack.callback(_stop_all, self.gpu_procs)
        if self.allowed_failures is None:
            try:
                self.allowed_failures = int(self.client.run_on_scheduler(
                    lambda dask_scheduler: dask_scheduler.allowed_failures))
            except Exception:  # an old scheduler: the history still lists each lost worker
                self.allowed_failures = None
        self._wait_for_workers(opts.start_timeout_s, any(t.device.startswith("cuda") for t in pending))

    @staticmethod
    def _connect(distributed: Any, target: Any, stack: ExitStack) -> Any:
        try:
            return stack.enter_context(distributed.Client(target, timeout="30s"))
        except Exception as exc:  # refused, timed out, not an address: the user's to fix, no traceback
            raise DaskUnavailable(f"cannot reach the Dask scheduler {target}: {type(exc).__name__}: {exc}") from None

    def _wait_for_workers(self, timeout_s: float, needs_gpu: bool) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
            gpu = any(w.get("resources", {}).get("GPU", 0) >= 1 for w in workers)
            # any worker runs CPU tasks; GPU tasks need one that declares GPU=1
            if workers and (gpu or not needs_gpu):
                return
            if time.monotonic() > deadline:
                what = "a worker with the resource GPU=1" if workers else "any worker"
                raise DaskUnavailable(f"no {what} joined the Dask cluster within {timeout_s:g} s")
            time.sleep(0.2)

    def slots_by_host(self) -> dict[str, int]:
        slots: dict[str, int] = defaultdict(int)
        for w in self.client.scheduler_info(n_workers=-1)["workers"].values():
            slots[str(w.get("host", ""))] += int(w.get("nthreads", 1))
        # Worker-reported hosts are addresses; the task looks itself up by name too.
        return {**slots, **{socket.getfqdn(h): n for h, n in slots.items() if h}}


def _stop_all(procs: list[Any]) -> None:
    from perfscout.sweep.gpu_workers import stop_gpu_workers

    stop_gpu_workers(procs)


class _Attempts:
    """The driver's record of attempts, from worker events and finished futures."""

    def __init__(self, store: ResultStore, session: int) -> None:
        self.store = store
        self.session = session
        self.by_tag: dict[str, int] = {}
        self.open: dict[str, list[tuple[str, dict]]] = defaultdict(list)  # task_key -> [(tag, info)]

    def started(self, info: dict[str, Any]) -> int:
        tag = str(info.get("tag", ""))
        if tag in self.by_tag:
            return self.by_tag[tag]
        detail = json.dumps({k: info.get(k) for k in ("name", "host", "pid", "gpu", "batch_job", "task_server")})
        attempt = self.store.start_attempt(str(info["task_key"]), self.session, worker=str(info.get("worker", "")),
                                           detail=detail)
        self.store.set_attempt_tag(attempt, tag)
        self.by_tag[tag] = attempt
        self.open[str(info["task_key"])].append((tag, info))
        return attempt

    def close_lost(self, task_key: str, except_tag: str = "", outcome: str = "worker_lost") -> list[dict]:
        """Attempts of ``task_key`` that will never report (their worker died)."""
        lost = []
        for tag, info in self.open.pop(task_key, []):
            if tag == except_tag:
                continue
            self.store.finish_attempt(self.by_tag[tag], outcome,
                                      f"worker {info.get('worker')} ({info.get('host')}, pid {info.get('pid')}) "
                                      "was lost while running this attempt")
            lost.append(info)
        return lost


def _history(lost: list[dict]) -> str:
    return "; ".join(f"{i.get('worker')} (host {i.get('host')}, pid {i.get('pid')})" for i in lost)


def run_on_dask(runner: SweepDriver, pending: list[SweepTask], store: ResultStore, session: int,
                outcome: SweepOutcome) -> None:
    """Submit ``pending`` to Dask and store each record as it lands (the driver's loop)."""
    opts = runner.dask
    assert opts is not None
    _import_distributed()  # a clear error when Dask is missing
    events: queue.Queue = queue.Queue()
    with ExitStack() as stack:
        cluster = _Cluster(opts, runner, pending, stack)
        client = cluster.client
        outcome.dashboard = str(client.dashboard_link or "")
        # soft_wrap: an address is one unbroken line, however narrow the terminal
        runner.console.print(f"Dask {cluster.kind} cluster: scheduler {client.scheduler.address}", soft_wrap=True)
        runner.console.print(f"Dask dashboard: {outcome.dashboard or 'unavailable (pip install bokeh)'}",
                             soft_wrap=True)
        client.subscribe_topic(EVENT_TOPIC, lambda event: events.put(event[1] if isinstance(event, tuple) else event))
        stack.callback(client.unsubscribe_topic, EVENT_TOPIC)
        attempts = _Attempts(store, session)
        meta, slots = runner.run_meta(), cluster.slots_by_host()
        futures: dict[Any, SweepTask] = {}
        for t in pending:
            resources = {"GPU": 1} if t.device.startswith("cuda") else None
            fut = client.submit(run_task_on_worker, t.model_dump_json(), meta, session, slots, pure=False,
                                key=f"perfscout-{runner.run_id}-{t.task_key}", resources=resources)
            futures[fut] = t
        stack.callback(client.cancel, list(futures))  # Ctrl-C, an error: nothing left queued
        view = _WorkerProgress(runner, len(pending))
        worker_errors: list[str] = []
        with view.progress:
            remaining = dict(futures)
            while remaining:
                if runner.stopping:
                    raise KeyboardInterrupt
                _drain(events, attempts, view)
                for fut in [f for f in remaining if f.done()]:
                    task = remaining.pop(fut)
                    _drain(events, attempts, view)
                    _finish(runner, store, attempts, cluster, view, outcome, fut, task, worker_errors)
                time.sleep(_POLL_S)
        if worker_errors:
            raise PerfscoutError(
                f"{len(worker_errors)} task(s) could not run on the Dask workers and were not stored "
                f"(--resume runs them again): {worker_errors[0]}" + (" ..." if len(worker_errors) > 1 else ""))


def _drain(events: queue.Queue, attempts: _Attempts, view: _WorkerProgress) -> None:
    while True:
        try:
            msg = events.get_nowait()
        except queue.Empty:
            return
        new_start = isinstance(msg, dict) and msg.get("event") == "start" and msg.get("task_key")
        if new_start and msg.get("tag") not in attempts.by_tag:
            attempts.started(msg)
            view.started(str(msg.get("worker", "?")))


def _finish(runner: SweepDriver, store: ResultStore, attempts: _Attempts, cluster: _Cluster, view: _WorkerProgress,
            outcome: SweepOutcome, fut: Any, task: SweepTask, worker_errors: list[str]) -> None:
    from distributed import KilledWorker

    if fut.status == "finished":
        res = fut.result()
        tag = str(res["tag"])
        attempt = attempts.by_tag.get(tag)
        if attempt is None:  # its start event had not arrived (or was lost): log it now
            attempt = attempts.started(res)
            view.started(str(res.get("worker", "?")))
        lost = attempts.close_lost(task.task_key, except_tag=tag)
        work_dir = runner.task_dir(task)
        work_dir.mkdir(parents=True, exist_ok=True)
        paths = attempt_paths(work_dir, tag)
        write_atomic(paths["task"], str(res["task"]))
        write_atomic(paths["log"], str(res["log"]))
        for name in ("search", "evaluation"):  # a psnr/ratio search's outcome; the timing spread and notes
            if res.get(name):
                write_atomic(paths[name], str(res[name]))
        write_atomic(paths["result"], str(res["record"]))
        record = CompressionResult.model_validate_json(res["record"])
        if lost:  # it succeeded after taking workers down: say so, the result stands
            note = f"ran after {len(lost)} lost worker(s): {_history(lost)}"
            store.finish_attempt(attempt, "pending", note)
        # One future per task key and run, popped once: this is its only write (and the
        # store's primary key would refuse a second).
        runner.store_result(store, record, attempt, tag, outcome)
        view.finished(str(res.get("worker", "?")), record.status)
        return
    exc = fut.exception() if fut.status == "error" else None
    if isinstance(exc, KilledWorker):
        lost = attempts.close_lost(task.task_key)
        limit = cluster.allowed_failures
        reason = (f"the task took down every Dask worker it ran on ({len(lost) or 'several'} lost"
                  + (f", the scheduler's limit is {limit} retries" if limit is not None else "")
                  + (f"): {_history(lost)}" if lost else f"): {exc}"))
        record = failure_record(task, "codec_crashed", reason, runner.run_id, runner.platform_id)
        store.put_result(record)
        outcome.count(record.status)
        view.finished(lost[-1].get("worker", "?") if lost else "?", record.status)
        return
    # The task function itself failed (perfscout missing on a worker, its scratch disk full,
    # the future cancelled): nothing about the codec is known, so nothing is stored.
    detail = f"{type(exc).__name__}: {exc}" if exc is not None else f"the Dask future ended {fut.status}"
    for tag, _ in attempts.open.pop(task.task_key, []):
        store.finish_attempt(attempts.by_tag[tag], "worker_error", detail)
    worker_errors.append(f"task {task.task_key}: {detail}")
    view.failed_to_run()


class _WorkerProgress:
    """A rich view: the sweep's bar, and per worker its tasks done / not ok / running."""

    def __init__(self, runner: SweepDriver, total: int) -> None:
        self.progress = runner.progress()
        self.bar = self.progress.add_task(runner.spec.name, total=total, note="")
        self.rows: dict[str, int] = {}
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: {"done": 0, "bad": 0, "running": 0})
        self.bad = 0
        self.unrun = 0

    def _row(self, worker: str) -> None:
        c = self.counts[worker]
        note = f"done {c['done']}, not ok {c['bad']}, running {c['running']}"
        if worker not in self.rows:
            self.rows[worker] = self.progress.add_task(f"  {worker}", total=None, note=note)
        self.progress.update(self.rows[worker], note=note, completed=c["done"])

    def started(self, worker: str) -> None:
        self.counts[worker]["running"] += 1
        self._row(worker)

    def finished(self, worker: str, status: str) -> None:
        c = self.counts[worker]
        c["running"] = max(0, c["running"] - 1)
        c["done"] += 1
        if status != "ok":
            c["bad"] += 1
            self.bad += 1
        self._row(worker)
        self._advance()

    def failed_to_run(self) -> None:
        self.unrun += 1
        self._advance()

    def _advance(self) -> None:
        note = ", ".join(p for p in (f"{self.bad} not ok" if self.bad else "",
                                     f"{self.unrun} not run" if self.unrun else "") if p)
        self.progress.update(self.bar, advance=1, note=note)
