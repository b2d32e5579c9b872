"""One attempt at one task: the contained child process, its limits and its verdict.

Both executors use this: the local runner polls many at once, a Dask worker runs one and
waits. The child is forked from the session's task server (:mod:`.forkserver`: the imports
done once, one fresh process per task) for CPU tasks, else ``python -m perfscout.sweep.worker
TASK RESULT``; either way it runs in its own session, and this side enforces the wall-clock timeout and watches its resident memory (the
worker also limits its own address space), and when it dies without a record, writes the
``codec_crashed`` / ``codec_timeout`` record from the outside.

Every file of an attempt carries the attempt's tag (``task.s2-a17.json``,
``result.s2-a17.json``, ``log.s2-a17.txt``): a process only ever creates, reads or
removes its own attempts' files, so nothing another process runs can be mistaken for, or
destroyed by, this one.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfscout.io import move_into_place
from perfscout.io import write_atomic
from perfscout.state.records import CompressionResult
from perfscout.tools.process_limits import resident_mb
from perfscout.sweep.forkserver import ForkedTask, ForkServer, ForkServerError
from perfscout.sweep.gpuworker import GpuWorker, WorkerTask
from perfscout.sweep.spec import SweepTask

#: What the worker reads beside its task file (run identity for the record).
RUN_META = "run.json"


class StorageFull(OSError):
    """The disk under the run directory (or a worker's scratch) is full."""


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    return "database or disk is full" in text or "no space left on device" in text


def free_bytes(path: Path) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize


def attempt_paths(work_dir: Path, tag: str) -> dict[str, Path]:
    return {"task": work_dir / f"task.{tag}.json", "result": work_dir / f"result.{tag}.json",
            "log": work_dir / f"log.{tag}.txt",
            "search": work_dir / f"search.{tag}.json",  # a psnr/ratio search's outcome (sweep.worker)
            "evaluation": work_dir / f"evaluation.{tag}.json"}  # its timing spread and notes (sweep.worker)


def child_env(task: SweepTask, threads: int, pin_gpu: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    # The child imports what the parent can (plug-ins named by module): same path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # Children share the cores: one thread team per job unless the user chose.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(max(1, threads)))
    if pin_gpu and task.device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = task.device.split(":", 1)[1]
    env["PYTHONFAULTHANDLER"] = "1"  # a native crash leaves a Python stack in the log
    return env


rss_mb = resident_mb  # the driver's memory watch reads it for every running child


@dataclass
class TaskChild:
    task: SweepTask
    tag: str
    work_dir: Path
    proc: subprocess.Popen | ForkedTask | WorkerTask
    log: Any
    started: float
    peak_rss_mb: float = 0.0
    killed_for: str = ""

    @classmethod
    def start(cls, task: SweepTask, work_dir: Path, tag: str, run_meta: dict[str, Any], env: dict[str, str],
              server: ForkServer | GpuWorker | None = None) -> TaskChild:
        """Start the task's process: forked by ``server`` (CPU tasks), handed to ``server`` (the
        device's long-lived :class:`.gpuworker.GpuWorker`, CUDA tasks) or a fresh interpreter."""
        work_dir.mkdir(parents=True, exist_ok=True)
        paths = attempt_paths(work_dir, tag)
        write_atomic(paths["task"], task.model_dump_json(indent=1))
        write_atomic(work_dir / RUN_META, json.dumps(run_meta))
        on_its_device = isinstance(server, GpuWorker) == task.device.startswith("cuda")
        if server is not None and on_its_device:
            try:
                forked = server.spawn(paths["task"], paths["result"], paths["log"], env)
            except ForkServerError:
                pass  # the server is gone: this task starts the slow way, the driver replaces it
            else:
                return cls(task=task, tag=tag, work_dir=work_dir, proc=forked, log=None, started=time.monotonic())
        log = open(paths["log"], "wb")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "perfscout.sweep.worker", str(paths["task"]), str(paths["result"])],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # its own process group: terminal Ctrl-C reaches only us
            )
        except BaseException:
            log.close()
            raise
        return cls(task=task, tag=tag, work_dir=work_dir, proc=proc, log=log, started=time.monotonic())

    @property
    def paths(self) -> dict[str, Path]:
        return attempt_paths(self.work_dir, self.tag)

    def poll(self) -> int | None:
        """The exit status once finished; enforces the timeout and the memory limit."""
        rc = self.proc.poll()
        if rc is not None:
            return rc
        if time.monotonic() - self.started > self.task.timeout_s:
            self.killed_for = "timeout"
            self.kill()
            return self.proc.returncode
        # a forked task shares the server's pages: the limit is on what it adds to them
        rss = rss_mb(self.proc.pid) - getattr(self.proc, "baseline_mb", 0.0)
        self.peak_rss_mb = max(self.peak_rss_mb, rss)
        if rss > self.task.memory_limit_mb:
            self.killed_for = "memory"
            self.kill()
            return self.proc.returncode
        return None

    def wait(self, poll_s: float = 0.05) -> int:
        while (rc := self.poll()) is None:
            time.sleep(poll_s)
        return rc

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            # a forked child between fork() and its setsid(): not yet a group of its own
            if self.proc.poll() is None and self.proc.pid > 0:
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        if self.log is not None:
            self.log.close()

    def outcome(self, run_id: str, platform_id: str) -> CompressionResult:
        """The child's record, or one written from outside when it did not write one.

        Raises :class:`StorageFull` when the child could not write because the disk is
        full: that is not the codec's fault and must not become a stored result.
        """
        if self.log is not None:
            self.log.close()
        t = self.task
        result_path, log_path = self.paths["result"], self.paths["log"]
        rc = self.proc.returncode
        status, reason = "codec_crashed", ""
        if result_path.is_file() and not self.killed_for:
            try:
                return CompressionResult.model_validate_json(result_path.read_text())
            except ValueError as exc:
                reason = f"the worker wrote an unreadable record: {exc}"
        tail = log_tail(log_path)
        exited_silently = not reason and not self.killed_for and rc is not None and rc >= 0
        if exited_silently and ("No space left on device" in tail or free_bytes(self.work_dir) < 1 << 20):
            raise StorageFull(errno.ENOSPC, f"the task's process could not write its result in {self.work_dir}"
                              + (f" ({tail})" if tail else ""))
        if self.killed_for == "timeout":
            status = "codec_timeout"
            reason = f"no result after {t.timeout_s:g} s (task timeout); the child was killed"
        elif self.killed_for == "memory":
            base = getattr(self.proc, "baseline_mb", 0.0)
            reason = (f"resident memory {self.peak_rss_mb:.0f} MiB"
                      + (f" (beyond the {base:.0f} MiB {_baseline_owner(self.proc)})" if base else "")
                      + f" exceeded the task limit of {t.memory_limit_mb} MiB; the child was killed")
        elif not reason:
            if rc is not None and rc < 0:
                try:
                    name = signal.Signals(-rc).name
                except ValueError:
                    name = f"signal {-rc}"
                reason = f"the worker died from {name} ({rc})"
                if getattr(self.proc, "note", ""):  # the task server died under it
                    reason += f": {self.proc.note}"
            else:
                reason = f"the worker exited with code {rc} without writing a result"
            if tail:
                reason += f"; last output: {tail}"
        return failure_record(t, status, reason, run_id, platform_id)


def _baseline_owner(proc: Any) -> str:
    if isinstance(proc, WorkerTask):
        return "the GPU worker held when the task started"
    return "of the task server it was forked from"


def failure_record(t: SweepTask, status: str, reason: str, run_id: str, platform_id: str) -> CompressionResult:
    """A record for a task that produced none itself (crash, timeout, lost workers)."""
    return CompressionResult(
        run_id=run_id, task_key=t.task_key, dataset=t.data.label, shape=t.data.shape_str,
        dtype=t.data.dtype, nbytes=t.data.nbytes, codec=t.codec, device=t.device, mode=t.mode, bound=t.bound,
        repeats=t.repeats, status=status, error=reason, platform_id=platform_id,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def _short_frame(line: str) -> str:
    """'File "/x/y/mod.py", line 53 in f' -> 'f (mod.py:53)'."""
    m = _FRAME.search(line)
    return f"{m['func']} ({Path(m['path']).name}:{m['line']})" if m else line


def log_tail(path: Path, limit: int = 400) -> str:
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


def promote(work_dir: Path, tag: str) -> None:
    """Make a stored attempt's files the task's canonical ``task.json``, ``result.json``,
    ``log.txt`` (renames, by the attempt's owner only, after its row is committed)."""
    for path in attempt_paths(work_dir, tag).values():
        final = work_dir / (path.name.replace(f".{tag}", ""))
        if path.is_file():
            move_into_place(path, final)
