"""Run a sweep: one child process per task, results committed one by one.

Each task runs in its own interpreter (``perfscout.tools.sweep.worker``) in its own
session, so a codec that segfaults, aborts or hangs takes only its child down: the parent
writes a ``codec_crashed`` or ``codec_timeout`` record and goes on. Up to ``jobs`` children
run at once, fewer when their estimated memory would exceed the budget; CUDA tasks run one
per device so they do not disturb each other's timings. Ctrl-C (or SIGTERM) stops every
child, keeps what finished and leaves the run resumable.

The run directory::

    spec.yaml             the spec as given (spec.session-N.yaml when a resume used another)
    spec.resolved.json    the validated spec and the expanded task list
    platform.json         the platform snapshot (perfscout.tools.snapshot)
    results.sqlite        the store (WAL); results.parquet / results.csv exports
    raw/<task_key>/       task.json, result.json, log.txt (the child's stdout+stderr)
    report.md, report.html, plots/   (perfscout report DIR)
"""

from __future__ import annotations

import json
import os
import re
import platform as _platform
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from perfscout.errors import InputError, PerfscoutError
from perfscout.state.records import CompressionResult
from perfscout.tools.sweep.spec import SweepSpec, Task, expand, load_spec
from perfscout.tools.sweep.store import STORE_NAME, ResultStore

_POLL_S = 0.05


class SweepInterrupted(PerfscoutError):
    """Ctrl-C / SIGTERM stopped the sweep; finished results are kept and it can resume."""


@dataclass
class SweepOutcome:
    run_dir: Path
    run_id: str
    session: int
    total: int
    already_done: int
    ran: int
    statuses: dict[str, int] = field(default_factory=dict)


@dataclass
class _Child:
    task: Task
    proc: subprocess.Popen
    attempt_id: int
    started: float
    result_path: Path
    log: Any
    peak_rss_mb: float = 0.0
    killed_for: str = ""


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
    _write_atomic(path, json.dumps(doc, indent=1, default=str))
    return doc


def _write_atomic(path: Path, text: str) -> None:
    """Temp file + rename: a sweep killed mid-write leaves the old file or the new one, never
    half of one (a truncated platform.json would make every resume fail to parse it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _mem_available_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 4096.0


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _prepare_run_dir(spec: SweepSpec, spec_text: str | None, out: Path, store: ResultStore, resume: bool) -> None:
    spec_file = out / "spec.yaml"
    text = spec_text if spec_text is not None else yaml.safe_dump(
        spec.model_dump(mode="json", exclude_none=True), sort_keys=False
    )
    if not spec_file.is_file():
        _write_atomic(spec_file, text)
    elif resume and spec_file.read_text() != text:
        n = int(store.get_meta("sessions", "0") or 0) + 1
        _write_atomic(out / f"spec.session-{n}.yaml", text)


def _child_env(task: Task, jobs: int) -> dict[str, str]:
    env = dict(os.environ)
    # The child imports what the parent can (plug-ins named by module): same path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Children share the cores: one thread team per job unless the user chose.
    threads = str(max(1, (os.cpu_count() or 1) // max(1, jobs)))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, threads)
    if task.device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = task.device.split(":", 1)[1]
    env["PYTHONFAULTHANDLER"] = "1"  # a native crash leaves a Python stack in log.txt
    return env


# ----------------------------------------------------------------------------- the sweep


class SweepRunner:
    def __init__(self, spec: SweepSpec, out: Path, *, jobs: int | None, progress: bool, spec_text: str | None,
                 resume: bool) -> None:
        self.spec = spec
        self.out = out
        self.jobs = max(1, jobs or spec.jobs or os.cpu_count() or 1)
        budget = spec.max_memory_mb or 0.5 * _mem_available_mb()
        self.memory_budget_mb = float(budget)
        self.progress_enabled = progress
        self.spec_text = spec_text
        self.resume = resume
        self._stop = False

    # -- scheduling --------------------------------------------------------------
    def _can_start(self, task: Task, running: list[_Child]) -> bool:
        if len(running) >= self.jobs:
            return False
        if task.device.startswith("cuda") and any(c.task.device == task.device for c in running):
            return False
        used = sum(c.task.est_memory_mb for c in running)
        return not running or used + task.est_memory_mb <= self.memory_budget_mb

    def _start(self, task: Task, store: ResultStore, session: int) -> _Child:
        raw = self.out / "raw" / task.task_key
        raw.mkdir(parents=True, exist_ok=True)
        task_path, result_path = raw / "task.json", raw / "result.json"
        result_path.unlink(missing_ok=True)  # a stale record from a killed session must not count
        task_path.write_text(task.model_dump_json(indent=1))
        (raw / "run.json").write_text(json.dumps({"run_id": self.run_id, "platform_id": self.platform_id,
                                                  "session": session}))
        attempt = store.start_attempt(task.task_key, session)
        log = open(raw / "log.txt", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfscout.tools.sweep.worker", str(task_path), str(result_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=_child_env(task, self.jobs),
            start_new_session=True,  # its own process group: terminal Ctrl-C reaches only us
        )
        return _Child(task=task, proc=proc, attempt_id=attempt, started=time.monotonic(),
                      result_path=result_path, log=log)

    @staticmethod
    def _kill(child: _Child) -> None:
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.proc.wait()

    def _outcome(self, child: _Child, returncode: int) -> CompressionResult:
        """The child's record, or one written from outside when it did not write one."""
        t = child.task
        if child.result_path.is_file() and not child.killed_for:
            try:
                return CompressionResult.model_validate_json(child.result_path.read_text())
            except ValueError as exc:
                reason = f"the worker wrote an unreadable record: {exc}"
                status = "codec_crashed"
        if child.killed_for == "timeout":
            status = "codec_timeout"
            reason = f"no result after {t.timeout_s:g} s (task timeout); the child was killed"
        elif child.killed_for == "memory":
            status = "codec_crashed"
            reason = (f"resident memory {child.peak_rss_mb:.0f} MiB exceeded the task limit of "
                      f"{t.memory_limit_mb} MiB; the child was killed")
        elif not child.result_path.is_file():
            status = "codec_crashed"
            if returncode < 0:
                try:
                    name = signal.Signals(-returncode).name
                except ValueError:
                    name = f"signal {-returncode}"
                reason = f"the worker died from {name} ({returncode})"
            else:
                reason = f"the worker exited with code {returncode} without writing a result"
            tail = _log_tail(child.result_path.with_name("log.txt"))
            if tail:
                reason += f"; last output: {tail}"
        return CompressionResult(
            run_id=self.run_id, task_key=t.task_key, dataset=t.data.label, shape=t.data.shape_str,
            dtype=t.data.dtype, nbytes=t.data.nbytes, codec=t.codec, device=t.device, mode=t.mode, bound=t.bound,
            repeats=t.repeats, status=status, error=reason, platform_id=self.platform_id,
            started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    # -- main loop ---------------------------------------------------------------
    def run(self) -> SweepOutcome:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # read-only place, a file in the way: a bad --out, not a crash
            raise InputError(f"cannot create the run directory {self.out}: {exc}") from None
        store = ResultStore(self.out / STORE_NAME)
        try:
            return self._run(store)
        finally:
            store.close()

    def _run(self, store: ResultStore) -> SweepOutcome:
        if store.task_count() and not self.resume:
            raise InputError(
                f"{self.out} already holds a sweep ({len(store.finished_keys())} results); "
                "pass --resume to continue it, or choose another --out"
            )
        tasks, skipped = expand(self.spec)
        _prepare_run_dir(self.spec, self.spec_text, self.out, store, self.resume)
        self.run_id = store.get_meta("run_id") or f"{self.spec.name}-{uuid.uuid4().hex[:8]}"
        store.set_meta("run_id", self.run_id)
        self.platform_id = str(write_platform(self.out).get("platform_id", ""))
        store.add_tasks(tasks)
        store.set_meta("skipped", json.dumps([s.model_dump() for s in skipped]))
        store.set_meta("spec_name", self.spec.name)
        store.set_meta("report_options", self.spec.report.model_dump_json())
        _write_atomic(self.out / "spec.resolved.json", json.dumps({
            "spec": self.spec.model_dump(mode="json"), "base_dir": self.spec.base_dir,
            "tasks": [t.model_dump(mode="json") for t in tasks], "skipped": [s.model_dump() for s in skipped],
        }, indent=1))
        session = store.new_session()
        store.set_meta(f"session_{session}", json.dumps({"jobs": self.jobs, "memory_budget_mb": self.memory_budget_mb,
                                                         "started_at": datetime.now(timezone.utc).isoformat()}))
        done = store.finished_keys()
        pending = [t for t in tasks if t.task_key not in done]
        outcome = SweepOutcome(run_dir=self.out, run_id=self.run_id, session=session, total=len(tasks),
                               already_done=len(tasks) - len(pending), ran=0)
        console = Console(stderr=True)
        progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
            disable=not self.progress_enabled, transient=False,
        )
        old_term = None
        if threading.current_thread() is threading.main_thread():
            old_term = signal.signal(signal.SIGTERM, self._on_term)
        running: list[_Child] = []
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
                            if self._can_start(t, running):
                                running.append(self._start(queue.pop(i), store, session))
                                started = True
                                break
                    for child in list(running):
                        rc = child.proc.poll()
                        if rc is None:
                            if time.monotonic() - child.started > child.task.timeout_s:
                                child.killed_for = "timeout"
                                self._kill(child)
                                rc = child.proc.returncode
                            else:
                                rss = _rss_mb(child.proc.pid)
                                child.peak_rss_mb = max(child.peak_rss_mb, rss)
                                if rss > child.task.memory_limit_mb:
                                    child.killed_for = "memory"
                                    self._kill(child)
                                    rc = child.proc.returncode
                        if rc is None:
                            continue
                        child.log.close()
                        record = self._outcome(child, rc)
                        store.put_result(record, child.attempt_id)  # committed before we go on
                        running.remove(child)
                        outcome.ran += 1
                        outcome.statuses[record.status] = outcome.statuses.get(record.status, 0) + 1
                        bad = sum(v for k, v in outcome.statuses.items() if k != "ok")
                        progress.update(bar, advance=1, note=f"{bad} not ok" if bad else "")
                    time.sleep(_POLL_S)
        except KeyboardInterrupt:
            self._stop_all(running)
            store.export(self.out)
            raise SweepInterrupted(
                f"sweep interrupted: {outcome.already_done + outcome.ran} of {outcome.total} tasks are stored in "
                f"{self.out}; continue with: perfscout sweep SPEC --out {self.out} --resume"
            ) from None
        finally:
            # any other error too (a store that refuses a row, a failed fork): no child may
            # outlive the loop that watches its timeout, least of all in a long-lived agent
            self._stop_all(running)
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
        store.export(self.out)
        return outcome

    def _stop_all(self, running: list[_Child]) -> None:
        """Kill the children still running and close their logs (idempotent)."""
        for child in running:
            if child.proc.poll() is None:
                self._kill(child)
            child.log.close()

    def _on_term(self, signum: int, frame: Any) -> None:
        self._stop = True


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _short_frame(line: str) -> str:
    """'File "/x/y/mod.py", line 53 in f' -> 'f (mod.py:53)'."""
    m = _FRAME.search(line)
    return f"{m['func']} ({Path(m['path']).name}:{m['line']})" if m else line


def _log_tail(path: Path, limit: int = 400) -> str:
    """What the dead child said last: faulthandler's verdict and innermost frame if any."""
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    fatal = [i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")]
    if fatal:
        i = fatal[-1]
        frames = [_short_frame(ln) for ln in lines[i + 1:] if ln.startswith("File ")][:3]
        return (lines[i] + (f" in {' <- '.join(frames)}" if frames else ""))[:limit]
    lines = [ln for ln in lines if not ln.startswith("Extension modules:")]
    return " | ".join(lines[-3:])[-limit:]


def run_sweep(spec: str | Path | dict | SweepSpec, out: str | Path, *, resume: bool = False, jobs: int | None = None,
              progress: bool = True) -> SweepOutcome:
    """Run (or resume) a sweep into ``out``. See :mod:`perfscout.tools.sweep.runner`."""
    spec_text = None
    if isinstance(spec, (str, Path)) and Path(str(spec)).suffix in (".yaml", ".yml") and Path(str(spec)).is_file():
        spec_text = Path(spec).read_text()
    elif isinstance(spec, str):
        spec_text = spec
    model = load_spec(spec)
    return SweepRunner(model, Path(out), jobs=jobs, progress=progress, spec_text=spec_text, resume=resume).run()
