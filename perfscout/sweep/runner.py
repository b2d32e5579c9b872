"""Run a sweep: one contained child process per task, results committed one by one.

Each task runs in a process of its own (see :mod:`.child`) in its own session, so a codec
that segfaults, aborts or hangs takes only its child down: the sweep writes a
``codec_crashed`` or ``codec_timeout`` record and goes on. CPU tasks are forked from the
session's task server, which did the heavy imports once (:mod:`.forkserver`; ``task_start:
spawn`` starts a fresh interpreter per task instead); CUDA tasks go one at a time to a
long-lived worker per device (:mod:`.gpuworker`: the imports and the CUDA context made once). Locally up to
``jobs`` children run at once, fewer when their estimated memory would exceed the budget or
their codec threads (the codec option ``threads``) would add up to more than ``cores``;
CUDA tasks run one per device so they do not disturb each other's timings. On Dask (:mod:`.dask_executor`) the same child runs on a cluster's workers and
this process, the driver, stays the only writer of the run directory. Ctrl-C (or SIGTERM)
stops every child, keeps what finished and leaves the run resumable.

One writer per run directory: the sweep holds an exclusive lock (:mod:`.lock`) from start
to end, so a second sweep on the same ``--out`` refuses at once (or waits, ``wait=True``).
A full disk stops the sweep with :class:`SweepStorageFull`; every result committed before
it stays, the task being written is simply not stored and re-runs on ``--resume``.

The run directory::

    spec.yaml             the spec as given (spec.session-N.yaml when a resume used another)
    spec.resolved.json    the validated spec and the expanded task list
    platform.json         the platform snapshot (perfscout.tools.snapshot)
    results.sqlite        the store (WAL); results.parquet / results.csv exports
    raw/<task_key>/       task.json, result.json, log.txt of the stored attempt; files of
                          attempts that did not finish keep their tag (log.s1-a3.txt)
    report.md, report.html, plots/   (perfscout report DIR)
    .perfscout.lock       held by the sweep writing the directory
"""

from __future__ import annotations

import json
import os
import platform as _platform
import signal
import sqlite3
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from perfscout.io import move_into_place
from perfscout.errors import InputError, PerfscoutError
from perfscout.state.records import CompressionResult
from perfscout.io import write_atomic
from perfscout.sweep.child import TaskChild, child_env, is_disk_full, promote
from perfscout.sweep.forkserver import ForkedTask, ForkServer, ForkServerError
from perfscout.sweep.gpuworker import GpuWorker, WorkerTask
from perfscout.sweep.lock import RunDirLock
from perfscout.sweep.outcome import SweepOutcome
from perfscout.sweep.spec import Skipped, SweepSpec, SweepTask, expand, load_spec
from perfscout.tools.results_store import STORE_NAME, ResultStore

if TYPE_CHECKING:
    from perfscout.sweep.dask_executor import DaskOptions

_POLL_S = 0.05


class SweepInterrupted(PerfscoutError):
    """Ctrl-C / SIGTERM stopped the sweep; finished results are kept and it can resume."""


class SweepStorageFull(PerfscoutError):
    """The disk under the run directory filled up; what was stored is kept, --resume continues."""


# ----------------------------------------------------------------------------- run dir


def write_platform(run_dir: Path) -> dict[str, Any]:
    """Snapshot the machine once per run directory; reuse it on resume."""
    path = run_dir / "platform.json"
    if path.is_file():
        return json.loads(path.read_text())
    try:
        from perfscout.tools.snapshot import take_snapshot

        doc = json.loads(take_snapshot().model_dump_json())
        doc["source"] = "perfscout.tools.snapshot"
    except Exception as exc:  # noqa: BLE001 - the sweep still runs; the report says what is missing
        doc = {
            "platform_id": "", "source": f"snapshot tool unavailable ({type(exc).__name__}: {exc})",
            "python": sys.version.split()[0], "hostname": _platform.node(), "os": _platform.platform(),
            "cpu": {"model": _platform.processor() or _platform.machine(), "logical_cpus": os.cpu_count()},
        }
    # a sweep killed mid-write leaves the old file or the new one (a truncated platform.json
    # would make every resume fail to parse it)
    write_atomic(path, json.dumps(doc, indent=1, default=str))
    return doc


#: What a sweep writes in its run directory (the layout above): a folder holding only these
#: is a run directory (perhaps one stopped before its store existed).
RUN_DIR_NAMES = frozenset({"spec.yaml", "spec.resolved.json", "platform.json", STORE_NAME, f"{STORE_NAME}-wal",
                           f"{STORE_NAME}-shm", f"{STORE_NAME}-journal", "results.parquet", "results.csv", "raw",
                           "report.md", "report.html", "plots", ".perfscout.lock"})


def _check_out_is_a_run_dir(out: Path) -> None:
    """InputError unless ``out`` is new, empty, or a sweep's run directory: a sweep writes
    results.csv, report.md, spec.yaml, platform.json there, and a folder of the user's that
    holds files of those names (or any others) must not be written over."""
    from perfscout.io import output_dir_entries

    entries = output_dir_entries(out, "run")
    if entries is None:
        return
    if (out / STORE_NAME).is_file():
        return
    foreign = [e for e in entries if e not in RUN_DIR_NAMES and not e.startswith("spec.session-")]
    if foreign or any(e in RUN_DIR_NAMES - {".perfscout.lock", "raw"} for e in entries):
        shown = ", ".join((foreign or entries)[:5]) + (", ..." if len(foreign or entries) > 5 else "")
        raise InputError(f"{out} holds files that are not a sweep's ({shown}); a sweep writes results.csv, "
                         "report.md, spec.yaml, platform.json and more there: choose a new or empty --out")


def _mem_available_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 4096.0


def _prepare_run_dir(spec: SweepSpec, spec_text: str | None, out: Path, store: ResultStore, resume: bool) -> None:
    spec_file = out / "spec.yaml"
    text = spec_text if spec_text is not None else yaml.safe_dump(
        spec.model_dump(mode="json", exclude_none=True), sort_keys=False
    )
    if not spec_file.is_file():
        write_atomic(spec_file, text)
    elif resume and spec_file.read_text() != text:
        n = int(store.get_meta("sessions", "0") or 0) + 1
        write_atomic(out / f"spec.session-{n}.yaml", text)


# ----------------------------------------------------------------------------- the sweep


class SweepRunner:
    """The driver of one pass over a run directory (one *session*)."""

    def __init__(self, spec: SweepSpec, out: Path, *, jobs: int | None, progress: bool, spec_text: str | None,
                 resume: bool, wait: bool = False, dask: DaskOptions | None = None, cores: int | None = None,
                 task_start: str | None = None, keep_server: bool = False) -> None:
        self.spec = spec
        #: leave the task server running for the next session on this run directory (the
        #: agent's evaluations, one call each: the heavy imports are paid once, not per call)
        self.keep_server = keep_server
        #: write results.parquet/csv after the session (run_tasks may leave them to `perfscout report`)
        self.export = True
        self.out = out
        self.cores = max(1, cores or spec.cores or os.cpu_count() or 1)
        self.jobs = max(1, jobs or spec.jobs or self.cores)
        self.task_start = task_start or spec.task_start
        if self.task_start not in ("fork", "spawn"):
            raise InputError(f"task start must be fork or spawn (got {self.task_start!r})")
        self._server: ForkServer | None = None
        self._server_failed = ""
        #: one long-lived worker per CUDA device of this session (started on first need)
        self._gpu_workers: dict[str, GpuWorker] = {}
        self._gpu_failed: dict[str, str] = {}
        #: set when any forked task or GPU worker task ends: the local loop wakes at once
        self._wake = threading.Event()
        self.scheduling: dict[str, Any] = {}
        budget = spec.max_memory_mb or 0.5 * _mem_available_mb()
        self.memory_budget_mb = float(budget)
        self.progress_enabled = progress
        self.spec_text = spec_text
        self.resume = resume
        self.wait = wait
        self.dask = dask
        self.console = Console(stderr=True)
        self._stop = False
        self.run_id = ""
        self.platform_id = ""
        #: task keys this session runs again although they have a result (run_tasks' rerun)
        self._rerun: set[str] = set()

    # -- scheduling (local executor) ----------------------------------------------
    def _can_start(self, task: SweepTask, running: list[Any]) -> bool:
        if len(running) >= self.jobs:
            return False
        if task.device.startswith("cuda") and any(c.task.device == task.device for c in running):
            return False
        # codec threads share the cores: jobs x threads never exceeds them
        if running and sum(c.task.threads for c in running) + task.threads > self.cores:
            return False
        used = sum(c.task.est_memory_mb for c in running)
        return not running or used + task.est_memory_mb <= self.memory_budget_mb

    def plan_cores(self, tasks: list[SweepTask]) -> dict[str, Any]:
        """Refuse a task whose codec threads exceed the cores; say when jobs x threads is scaled down."""
        too_many = [t for t in tasks if t.threads > self.cores]
        if too_many:
            t = too_many[0]
            raise InputError(
                f"{len(too_many)} task(s) ask for more codec threads than the {self.cores} core(s) this sweep "
                f"may use (e.g. {t.codec} with threads={t.threads}); lower the codec option `threads`, or raise "
                "`cores:` / --cores if the machine has them")
        widest = max((t.threads for t in tasks), default=1)
        plan: dict[str, Any] = {"cores": self.cores, "jobs": self.jobs, "max_codec_threads": widest}
        if self.jobs * widest > self.cores:
            plan["note"] = (f"jobs {self.jobs} x codec threads {widest} would need {self.jobs * widest} cores; "
                            f"{self.cores} available: tasks start only while their threads fit "
                            f"(at most {max(1, self.cores // widest)} task(s) of {widest} threads at once)")
        return plan

    def task_dir(self, task: SweepTask) -> Path:
        return self.out / "raw" / task.task_key

    def run_meta(self) -> dict[str, str]:
        return {"run_id": self.run_id, "platform_id": self.platform_id, "task_start": self.task_start}

    def _task_server(self, task: SweepTask) -> ForkServer | GpuWorker | None:
        """The session's task server for a CPU task, its device's GPU worker for a CUDA task
        (started, or replaced when it died); None: spawn the task."""
        if self.task_start != "fork":
            return None
        if task.device.startswith("cuda"):
            return self._gpu_worker(task)
        if task.device != "cpu" or self._server_failed:
            return None
        if self._server is not None and not self._server.alive:
            self._server.close()
            self._server = None
        if self._server is None and self.keep_server:
            self._server = _take_kept_server(self.out)
            if self._server is not None:
                self._server.exited = self._wake  # its tasks now wake this session's loop
        if self._server is None:
            try:
                (self.out / "raw").mkdir(parents=True, exist_ok=True)
                env, log = child_env(task, 1), self.out / "raw" / "forkserver.log"
                if self.keep_server:
                    # started from a thread that lives as long as this process: the server dies
                    # with the thread that forked it (PR_SET_PDEATHSIG), and a tool call's thread
                    # (LangGraph's ToolNode) ends with the call
                    self._server = _server_thread().submit(ForkServer, env, log_path=log, exited=self._wake).result()
                else:
                    self._server = ForkServer(env, log_path=log, exited=self._wake)
            except (ForkServerError, OSError) as exc:
                # every task still runs, each in a fresh interpreter; the session says so
                self._server_failed = str(exc)
                self.console.print(f"[yellow]task server unavailable ({exc}); tasks start as fresh processes[/]")
                return None
        return self._server

    def _gpu_worker(self, task: SweepTask) -> GpuWorker | None:
        """The long-lived worker of the task's device; replaced when it died (a timeout, a crash)
        or when its resident size grew by more than one task's limit since it started."""
        dev = task.device
        if dev in self._gpu_failed:
            return None
        worker = self._gpu_workers.get(dev)
        if worker is None and self.keep_server:  # the one an earlier call of this run left
            worker = _take_kept_server(self.out, device=dev)
            if worker is not None:
                worker.exited = self._wake  # its tasks now wake this session's loop
                self._gpu_workers[dev] = worker
        if worker is not None and (not worker.alive or (
                not worker.busy and worker.grown_mb() > task.memory_limit_mb)):
            worker.close()
            del self._gpu_workers[dev]
            worker = None
        if worker is None:
            try:
                (self.out / "raw").mkdir(parents=True, exist_ok=True)
                log = self.out / "raw" / f"gpuworker-{dev.replace(':', '')}.log"
                env = child_env(task, task.threads)
                if self.keep_server:  # from the long-lived thread, as a kept task server (see there)
                    worker = _server_thread().submit(GpuWorker, dev, env, log_path=log, exited=self._wake).result()
                else:
                    worker = GpuWorker(dev, env, log_path=log, exited=self._wake)
            except (ForkServerError, OSError) as exc:
                self._gpu_failed[dev] = str(exc)
                self.console.print(f"[yellow]GPU worker for {dev} unavailable ({exc}); its tasks start as "
                                   "fresh processes[/]")
                return None
            self._gpu_workers[dev] = worker
        return worker

    def _start(self, task: SweepTask, store: ResultStore, session: int) -> tuple[TaskChild, int]:
        attempt = store.start_attempt(task.task_key, session, worker="local")
        tag = f"s{session}-a{attempt}"
        store.set_attempt_tag(attempt, tag)
        server = self._task_server(task)
        child = TaskChild.start(task, self.task_dir(task), tag, self.run_meta(), child_env(task, task.threads),
                                server=server)
        if isinstance(child.proc, ForkedTask):
            store.set_attempt_worker(attempt, "forkserver",
                                     json.dumps({"server_pid": child.proc.server.pid, "pid": child.proc.pid}))
        elif isinstance(child.proc, WorkerTask):
            store.set_attempt_worker(attempt, "gpuworker", json.dumps(self._worker_detail(child.proc)))
        else:
            store.set_attempt_worker(attempt, "local", json.dumps({"pid": child.proc.pid, "start": "spawn"}))
        return child, attempt

    @staticmethod
    def _worker_detail(wt: WorkerTask) -> dict[str, Any]:
        """Where a CUDA task ran: the worker's pid, its device, the task's number in it, and
        (once done) what CuPy's pool still held after the release and the worker's RSS."""
        detail: dict[str, Any] = {"worker_pid": wt.pid, "pid": wt.pid, "device": wt.worker.device,
                                  "task_no": wt.task_no, "cuda": wt.worker.ready.get("cuda", "")}
        if wt.after:
            detail["gpu_pool_bytes_after"] = wt.after.get("gpu_pool_bytes")
            detail["worker_rss_mb_after"] = wt.after.get("rss_mb")
            detail["field_reused"] = wt.after.get("field_reused")
            if wt.after.get("retire"):
                detail["worker_retired"] = wt.after["retire"]
        return detail

    def store_result(self, store: ResultStore, record: CompressionResult, attempt_id: int | None, tag: str,
                     outcome: SweepOutcome) -> None:
        """The one place a result enters the store (then its attempt's files become canonical).

        A task run again (:func:`run_tasks` ``rerun``: the agent's retry of one configuration)
        replaces its row: the earlier attempt stays in the attempt log, and its files go back
        to their attempt's tag (``result.s1-a1.json``) rather than being overwritten."""
        work = self.out / "raw" / record.task_key
        replaced = store.stored_attempt(record.task_key) if record.task_key in self._rerun else None
        if replaced is not None and replaced[1]:
            _retag(work, replaced[1])
        if record.task_key in self._rerun:
            store.put_result(record, attempt_id, replace=True)  # committed before we go on
        else:
            store.put_result(record, attempt_id)
        promote(work, tag)  # its task, record, log, search and evaluation (timing, notes) files
        outcome.count(record.status)

    # -- main loop ---------------------------------------------------------------
    def run(self) -> SweepOutcome:
        if self.dask is not None:
            self.dask.check()  # a bad cluster config leaves no run directory behind
        # The spec is expanded (every dataset sized, every task validated) before anything is
        # written: a spec refused here leaves no run directory and no empty store behind.
        planned = expand(self.spec)
        _check_out_is_a_run_dir(self.out)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # read-only place, a file in the way: a bad --out, not a crash
            raise InputError(f"cannot create the run directory {self.out}: {exc}") from None
        return self._in_store("sweep", lambda store: self._run(store, planned))

    def _in_store(self, kind: str, body: Any) -> SweepOutcome:
        """``body(store)`` with the run directory locked (one writer) and its store open; a
        full disk becomes :class:`SweepStorageFull` naming what was kept."""
        lock = RunDirLock(self.out, wait=self.wait, command=f"perfscout {kind} (pid {os.getpid()})",
                          on_wait=lambda msg: self.console.print(f"[yellow]{msg}[/]"))
        with lock:
            store = None
            try:
                store = ResultStore(self.out / STORE_NAME)
                return body(store)
            except (OSError, sqlite3.Error) as exc:
                if not is_disk_full(exc):
                    raise
                raise self._storage_full(store, exc) from None
            finally:
                if store is not None:
                    store.close()

    def _storage_full(self, store: ResultStore | None, exc: BaseException) -> SweepStorageFull:
        kept = ""
        if store is not None:
            try:
                kept = f"{len(store.finished_keys())} result(s) stored before it are kept; "
            except sqlite3.Error:
                pass
        return SweepStorageFull(
            f"no space left on the device holding {self.out} ({exc}); the sweep stopped. {kept}"
            f"free some space and continue with: perfscout sweep SPEC --out {self.out} --resume")

    def run_given(self, tasks: list[SweepTask], *, run_id: str = "", kind: str = "sweep",
                  rerun: set[str] | frozenset[str] = frozenset()) -> SweepOutcome:
        """Run ``tasks`` (already expanded) into the run directory's store: the lower-level
        entry below :meth:`run` (see :func:`run_tasks`)."""
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the run directory {self.out}: {exc}") from None

        def body(store: ResultStore) -> SweepOutcome:
            self.scheduling = self.plan_cores(tasks)
            self.run_id = store.get_meta("run_id") or run_id or f"{self.spec.name}-{uuid.uuid4().hex[:8]}"
            store.set_meta("run_id", self.run_id)
            if store.get_meta("kind") is None:
                store.set_meta("kind", kind)
            if store.get_meta("spec_name") is None:
                store.set_meta("spec_name", self.spec.name)
                store.set_meta("report_options", self.spec.report.model_dump_json())
            self.platform_id = str(write_platform(self.out).get("platform_id", ""))
            store.add_tasks(tasks)
            return self._execute(store, tasks, set(rerun))

        return self._in_store(kind, body)

    def _run(self, store: ResultStore, planned: tuple[list[SweepTask], list[Skipped]]) -> SweepOutcome:
        if store.task_count() and not self.resume:
            raise InputError(
                f"{self.out} already holds a sweep ({len(store.finished_keys())} results); "
                "pass --resume to continue it, or choose another --out"
            )
        tasks, skipped = planned
        # before anything is stored: a refusal loses nothing
        self.scheduling = (self.plan_cores(tasks) if self.dask is None
                           else self.dask.plan_cores(tasks, self.cores, self.jobs))
        if "note" in self.scheduling:
            self.console.print(f"[yellow]{self.scheduling['note']}[/]")
        _prepare_run_dir(self.spec, self.spec_text, self.out, store, self.resume)
        self.run_id = store.get_meta("run_id") or f"{self.spec.name}-{uuid.uuid4().hex[:8]}"
        store.set_meta("run_id", self.run_id)
        self.platform_id = str(write_platform(self.out).get("platform_id", ""))
        store.add_tasks(tasks)
        store.set_meta("skipped", json.dumps([s.model_dump() for s in skipped]))
        store.set_meta("spec_name", self.spec.name)
        store.set_meta("report_options", self.spec.report.model_dump_json())
        write_atomic(self.out / "spec.resolved.json", json.dumps({
            "spec": self.spec.model_dump(mode="json"), "base_dir": self.spec.base_dir,
            "tasks": [t.model_dump(mode="json") for t in tasks], "skipped": [s.model_dump() for s in skipped],
        }, indent=1))
        return self._execute(store, tasks, set())

    def _execute(self, store: ResultStore, tasks: list[SweepTask], rerun: set[str]) -> SweepOutcome:
        """One session over ``tasks``: those without a stored result (and those in ``rerun``)
        run, locally or on Dask; every result is committed as it lands."""
        self._rerun = rerun
        session = store.new_session()
        executor = "dask" if self.dask is not None else "local"
        store.set_meta(f"session_{session}", json.dumps({
            "jobs": self.jobs, "memory_budget_mb": self.memory_budget_mb, "executor": executor,
            "task_start": self.task_start, **self.scheduling,
            "started_at": datetime.now(timezone.utc).isoformat()}))
        done = store.finished_keys() - rerun
        pending = list({t.task_key: t for t in tasks if t.task_key not in done}.values())
        total = len({t.task_key for t in tasks})
        outcome = SweepOutcome(run_dir=self.out, run_id=self.run_id, session=session, total=total,
                               already_done=total - len(pending), ran=0, executor=executor,
                               scheduling=dict(self.scheduling))
        old_term = None
        if threading.current_thread() is threading.main_thread():
            old_term = signal.signal(signal.SIGTERM, self._on_term)
        try:
            if self.dask is not None:
                from perfscout.sweep.dask_executor import run_on_dask

                run_on_dask(self, pending, store, session, outcome)
            else:
                self._run_local(pending, store, session, outcome)
        except KeyboardInterrupt:
            self._export_quietly(store)
            raise SweepInterrupted(
                f"sweep interrupted: {outcome.already_done + outcome.ran} of {outcome.total} tasks are stored in "
                f"{self.out}; continue with: perfscout sweep SPEC --out {self.out} --resume"
            ) from None
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
        if self.export:
            store.export(self.out)
        return outcome

    def _export_quietly(self, store: ResultStore) -> None:
        try:
            store.export(self.out)
        except (OSError, sqlite3.Error) as exc:  # the store itself holds every result
            self.console.print(f"[yellow]results.parquet/csv not refreshed: {exc}[/]")

    def progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
            disable=not self.progress_enabled, transient=False,
        )

    def _run_local(self, pending: list[SweepTask], store: ResultStore, session: int, outcome: SweepOutcome) -> None:
        running: list[tuple[TaskChild, int]] = []
        progress = self.progress()
        try:
            with progress:
                bar = progress.add_task(self.spec.name, total=len(pending), note="")
                queue = list(pending)
                while queue or running:
                    if self._stop:
                        raise KeyboardInterrupt
                    started = True
                    while queue and started:
                        started = False
                        for i, t in enumerate(queue):
                            if self._can_start(t, [c for c, _ in running]):
                                running.append(self._start(queue.pop(i), store, session))
                                started = True
                                break
                    for child, attempt in list(running):
                        if child.poll() is None:
                            continue
                        record = child.outcome(self.run_id, self.platform_id)
                        if isinstance(child.proc, WorkerTask) and child.proc.after:
                            store.set_attempt_worker(attempt, "gpuworker",
                                                     json.dumps(self._worker_detail(child.proc)))
                        self.store_result(store, record, attempt, child.tag, outcome)
                        running.remove((child, attempt))
                        bad = sum(v for k, v in outcome.statuses.items() if k != "ok")
                        progress.update(bar, advance=1, note=f"{bad} not ok" if bad else "")
                    self._pause()
        finally:
            # Ctrl-C, a full disk, a store that refuses a row, a failed fork: no child may
            # outlive the loop that watches its timeout, least of all in a long-lived agent
            for child, _ in running:
                child.close()
            if self._server is not None:
                if self.keep_server and self._server.alive and not running:
                    _keep_server(self.out, self._server)
                else:
                    self._server.close()
                self._server = None
            for dev, worker in self._gpu_workers.items():
                # the agent's next GPU call on this run reuses it (CuPy imported, the CUDA
                # context made: what every fresh worker pays again)
                if self.keep_server and worker.alive and not worker.busy and not running:
                    _keep_server(self.out, worker, device=dev)
                else:
                    worker.close()
            self._gpu_workers.clear()

    def _pause(self) -> None:
        """Until the next check of the running children: ``_POLL_S``, or less when a forked task
        or a GPU worker's task ends (they say so at once; small tasks then start back to back)."""
        if self._server is None and not self._gpu_workers:
            time.sleep(_POLL_S)
            return
        self._wake.wait(_POLL_S)
        self._wake.clear()

    @property
    def stopping(self) -> bool:
        return self._stop

    def _on_term(self, signum: int, frame: Any) -> None:
        self._stop = True


#: The task servers and GPU workers left running between sessions (run_tasks keep_server), by
#: run directory (and device), oldest first. A server in here is idle: a session takes its own
#: out (under the lock) before using it, so evicting one never pulls a server from under a
#: running task (agent threads in one process each keep their run's server; one thread's
#: session once closed another's server while that thread had just taken it: "I/O operation
#: on closed file").
_KEPT: dict[str, Any] = {}
_KEPT_LOCK = threading.Lock()
#: At most this many kept (each is a preloaded interpreter, ~100 MB): the oldest goes first.
MAX_KEPT_SERVERS = 4


def _kept_key(out: Path, device: str) -> str:
    return str(out.resolve()) + ("" if device == "cpu" else f"#{device}")


def _keep_server(out: Path, server: Any, *, device: str = "cpu") -> None:
    """Keep ``server`` (the CPU task server, or the GPU worker of ``device``) for the next
    session on ``out``, evicting the oldest beyond :data:`MAX_KEPT_SERVERS`."""
    key = _kept_key(out, device)
    with _KEPT_LOCK:
        old = _KEPT.pop(key, None)
        stale = [old] if old is not None and old is not server else []
        _KEPT[key] = server
        while len(_KEPT) > MAX_KEPT_SERVERS:
            stale.append(_KEPT.pop(next(iter(_KEPT))))
        if not getattr(_keep_server, "registered", False):
            import atexit

            atexit.register(close_kept_servers)
            _keep_server.registered = True  # type: ignore[attr-defined]
    for other in stale:
        other.close()


_SERVER_THREAD: Any = None


def _server_thread() -> Any:
    """The one long-lived thread kept task servers are started from (see ``_task_server``)."""
    global _SERVER_THREAD
    with _KEPT_LOCK:  # two agent threads' first calls at once: still one thread
        if _SERVER_THREAD is None:
            from concurrent.futures import ThreadPoolExecutor

            _SERVER_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="perfscout-task-server")
        return _SERVER_THREAD


def _take_kept_server(out: Path, *, device: str = "cpu") -> Any:
    with _KEPT_LOCK:
        server = _KEPT.pop(_kept_key(out, device), None)
    if server is not None and not server.alive:
        server.close()
        return None
    return server


def close_kept_servers() -> None:
    """Stop the task servers kept between sessions (at exit)."""
    with _KEPT_LOCK:
        servers = list(_KEPT.values())
        _KEPT.clear()
    for server in servers:
        server.close()


#: The worker's file beside a task's record: its timing spread (per-repeat samples, cv) and
#: notes, which have no result column (``raw/<task_key>/evaluation.json``).
EVALUATION = "evaluation"


def _retag(work: Path, tag: str) -> None:
    """Put a superseded attempt's canonical files back under its tag (before a new attempt's
    files become canonical), so no record on disk is overwritten."""
    for name in ("task.json", "result.json", "log.txt", "search.json", f"{EVALUATION}.json"):
        path = work / name
        if path.is_file():
            stem, dot, ext = name.rpartition(".")
            move_into_place(path, work / f"{stem}.{tag}{dot}{ext}")


def run_tasks(tasks: list[SweepTask], out: str | Path, *, run_id: str = "", name: str = "tasks",
              kind: str = "sweep", rerun: set[str] | frozenset[str] = frozenset(), jobs: int | None = 1,
              cores: int | None = None, task_start: str | None = None, progress: bool = False,
              wait: bool = True, keep_server: bool = False, export: bool = True) -> SweepOutcome:
    """Run a given list of tasks into ``out``'s store: the entry a sweep (:func:`run_sweep`)
    and the agent's ``evaluate_codec`` share.

    Each task runs in a contained child (forked from the session's task server, the device's
    GPU worker, or spawned), its record committed to ``out/results.sqlite`` and its files
    under ``out/raw/<task_key>/`` (task.json, result.json, log.txt, search.json,
    evaluation.json), exactly as a sweep's. ``out`` may hold other files (an agent run
    directory does): nothing else in it is touched. A task that already has a result is not
    run again unless its key is in ``rerun`` (then it is a new attempt whose record replaces
    the stored one; the earlier attempt's files keep their tag). ``kind`` is stored in the
    store's meta on first use (``agent`` for an agent run directory); ``wait``: queue behind
    another writer of ``out`` (default) instead of refusing; ``keep_server``: leave the CPU
    task server and the GPU workers running for the next call on ``out``
    (:func:`close_kept_servers` stops them, at exit at the latest);
    ``export``: refresh results.parquet/csv after the session (the agent, one task a call,
    leaves them out: the store is the record).
    """
    from perfscout.sweep.spec import SweepSpec as _Spec

    runner = SweepRunner(_Spec(name=name), Path(out), jobs=jobs, progress=progress, spec_text=None, resume=True,
                         wait=wait, cores=cores, task_start=task_start, keep_server=keep_server)
    runner.export = export
    return runner.run_given(list(tasks), run_id=run_id, kind=kind, rerun=frozenset(rerun))


def run_sweep(spec: str | Path | dict | SweepSpec, out: str | Path, *, resume: bool = False, jobs: int | None = None,
              progress: bool = True, allow_plugins: bool = False, wait: bool = False,
              dask: DaskOptions | None = None, cores: int | None = None,
              task_start: str | None = None) -> SweepOutcome:
    """Run (or resume) a sweep into ``out``. See :mod:`perfscout.sweep.runner`.

    ``allow_plugins``: run the spec's ``plugins:`` (refused by default); ``wait``: queue
    behind another sweep holding ``out`` instead of refusing; ``dask``: run the tasks on a
    Dask cluster (:class:`perfscout.sweep.dask_executor.DaskOptions`); ``cores``: the cores the
    running tasks' codec threads may use together (default: the spec's ``cores``, else all);
    ``task_start``: ``fork`` (CPU tasks forked from a preloaded task server) or ``spawn``.
    """
    spec_text = None
    if isinstance(spec, (str, Path)) and Path(str(spec)).suffix in (".yaml", ".yml") and Path(str(spec)).is_file():
        try:
            spec_text = Path(spec).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            spec_text = None  # load_spec says why
    elif isinstance(spec, str):
        spec_text = spec
    model = load_spec(spec, allow_plugins=allow_plugins)
    return SweepRunner(model, Path(out), jobs=jobs, progress=progress, spec_text=spec_text, resume=resume,
                       wait=wait, dask=dask, cores=cores, task_start=task_start).run()
