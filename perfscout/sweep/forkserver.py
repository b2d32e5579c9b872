"""A task server: one process with the heavy imports done, forking one contained child per task.

Starting ``python -m perfscout.sweep.worker`` for every task costs an interpreter and the
imports of numpy, pydantic, pandas, the codec libraries and the evaluation (about 0.6 s of
CPU on the 2-core VM, most of a small task). The server does that once per sweep session
and then forks a fresh child for each task: the child starts with everything imported,
and is as contained as a spawned one —

- its own session and process group (``setsid``), so the driver's ``killpg`` on a timeout or
  a memory overrun reaches it and everything it started;
- its own address-space limit (:func:`perfscout.tools.process_limits.limit_memory`, on what
  the task adds to the preloaded server it was forked from) and the driver's resident-memory
  watch (also on what it adds: its RSS less the server's);
- SIGKILL when the server dies, and the server dies with the driver (``PR_SET_PDEATHSIG``
  both ways), so no orphan keeps running a hung codec;
- a segfault, an abort or ``os._exit`` in the codec ends only that child: the server reaps
  it and reports the exit status, the driver writes the ``codec_crashed`` record.

A child never returns to the server's loop: it runs :func:`perfscout.sweep.worker.run_task`
and leaves with ``os._exit``. Nothing a task imports or registers (plug-ins) survives it, so
tasks cannot leak state into each other; the server itself runs no codec code.

Protocol (JSON lines; the driver writes the server's stdin and reads its stdout)::

    server -> {"event": "ready", "pid": P, "preloaded": [...], "missing": {...}}
    driver -> {"id": N, "task": PATH, "result": PATH, "log": PATH, "env": {...}}
    server -> {"event": "forked", "id": N, "pid": C}     (or "event": "error", "id": N, "error": ...)
    server -> {"event": "exit", "id": N, "pid": C, "returncode": RC}   (RC < 0: killed by signal -RC)

CPU tasks only: a CUDA context does not survive ``fork``, so CUDA tasks go to a long-lived
worker per device instead (:mod:`.gpuworker`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from perfscout.sweep import serverproc
from perfscout.tools.process_limits import resident_mb

#: Imported by the server before it forks anything (a missing one is skipped and reported).
PRELOAD = ("numpy", "pandas", "pydantic", "perfscout.state.records", "perfscout.sweep.spec",
           "perfscout.sweep.worker", "perfscout.tools.evaluate", "perfscout.tools.bounds",
           "perfscout.analysis.metrics", "perfscout.datasets", "perfscout.codecs.registry",
           "perfscout.codecs.sz3", "pysz", "perfscout.codecs.zfp", "zfpy", "perfscout.codecs.h5filters",
           "hdf5plugin")
#: How long the driver waits for the server's preload before it gives up on it (seconds).
START_TIMEOUT_S = 120.0
#: How long the driver waits for one fork's reply.
FORK_TIMEOUT_S = 30.0


class ForkServerError(RuntimeError):
    """The server could not be started, or it died; the driver falls back or restarts it."""


# ----------------------------------------------------------------------------- server side


def _write(out: IO[str], doc: dict[str, Any]) -> None:
    out.write(json.dumps(doc) + "\n")
    out.flush()


def _preload() -> tuple[list[str], dict[str, str]]:
    import importlib

    done, missing = [], {}
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception as exc:  # noqa: BLE001 - an absent codec library only costs its tasks the import
            missing[name] = f"{type(exc).__name__}: {exc}"
    try:  # the metric pass's compiled kernels, loaded (or compiled) once for every forked task
        from perfscout.analysis import stream_compiled

        stream_compiled.warm()
        done.append("perfscout.analysis.stream_compiled")
    except Exception as exc:  # noqa: BLE001 - without the kernels (no library, no numba): the NumPy metric pass
        missing["perfscout.analysis.stream_compiled"] = f"{type(exc).__name__}: {exc}"
    return done, missing


def _child(req: dict[str, Any], protocol_fds: tuple[int, int]) -> None:
    """In the forked child: become a contained task process, run the task, never return."""
    rc = 1
    try:
        os.setsid()  # its own process group: the driver's killpg reaches it and its children
        from perfscout.tools.process_limits import address_space_bytes, die_with_parent

        die_with_parent()  # the server's death kills it (and the server dies with the driver)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log_fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for fd in (log_fd, null_fd, *protocol_fds):
            if fd > 2:
                try:
                    os.close(fd)
                except OSError:
                    pass
        import faulthandler

        faulthandler.enable(file=sys.stderr)  # a native crash leaves a Python stack in the log
        os.environ.clear()
        os.environ.update(req.get("env") or {})
        from perfscout.sweep.worker import run_task

        rc = run_task(Path(req["task"]), Path(req["result"]), base_bytes=address_space_bytes())
    except BaseException:  # noqa: BLE001 - whatever happens, this process must not return to the loop
        import traceback

        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def serve(inp: IO[str] = sys.stdin, out: IO[str] = sys.stdout) -> int:
    """The server's loop: read requests, fork, reap, report; ends when its stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver owns Ctrl-C
    from perfscout.tools.process_limits import die_with_parent

    die_with_parent()
    done, missing = _preload()
    _write(out, {"event": "ready", "pid": os.getpid(), "preloaded": done, "missing": missing})
    in_fd, out_fd = inp.fileno(), out.fileno()
    children: dict[int, int] = {}  # pid -> request id
    buf = b""
    open_input = True
    while open_input or children:
        ready, _, _ = select.select([in_fd] if open_input else [], [], [], 0.02)
        if ready:
            chunk = os.read(in_fd, 1 << 16)
            if not chunk:
                open_input = False  # the driver is done (or gone): finish the children, then leave
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                req = json.loads(line)
                try:
                    pid = os.fork()
                except OSError as exc:
                    _write(out, {"event": "error", "id": req["id"], "error": f"fork failed: {exc}"})
                    continue
                if pid == 0:
                    _child(req, (in_fd, out_fd))
                children[pid] = req["id"]
                _write(out, {"event": "forked", "id": req["id"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rid = children.pop(pid, None)
            if rid is not None:
                _write(out, {"event": "exit", "id": rid, "pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
    return 0


# ----------------------------------------------------------------------------- driver side


@dataclass
class ForkedTask(serverproc.TaskHandle):
    """A task process forked by the server, seen from the driver (the ``Popen`` subset used)."""

    what = "forked task"

    pid: int
    server: ForkServer
    returncode: int | None = None
    note: str = ""
    #: The server's resident size when it forked this task: pages the child shares with it
    #: count in its RSS too, so the driver's memory watch measures what the task adds to them.
    baseline_mb: float = 0.0
    _done: threading.Event = field(default_factory=threading.Event)


class ForkServer:
    """The driver's handle on one task server (thread-safe; one per sweep session)."""

    def __init__(self, env: dict[str, str], log_path: Path | None = None,
                 exited: threading.Event | None = None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, dict[str, Any]] = {}  # request id -> the fork's reply, once it came
        # request id -> its task, registered before the request is sent: a task that exits
        # at once has its exit read before spawn() wakes up, and it must not be lost
        self._tasks: dict[int, ForkedTask] = {}
        self._replied = threading.Condition(self._lock)
        self._next = 0
        self._dead = ""
        #: Set whenever one of its tasks exits (or it dies): a driver waiting on it notices at once.
        self.exited = exited if exited is not None else threading.Event()
        self.proc = serverproc.start("perfscout.sweep.forkserver", env, log_path)
        self.ready = self._read_ready()
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._read_loop, name="perfscout-forkserver-reader", daemon=True)
        self._reader.start()

    def _read_ready(self) -> dict[str, Any]:
        doc = serverproc.read_ready(self.proc, START_TIMEOUT_S)
        if doc is None:
            self.close()
            raise ForkServerError(f"the task server did not start (exit status {self.proc.poll()})")
        return doc

    def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        for doc in serverproc.replies(self.proc.stdout):
            with self._lock:
                rid = doc.get("id")
                if doc.get("event") in ("forked", "error"):
                    self._pending[rid] = doc
                    if doc.get("event") == "forked" and rid in self._tasks:
                        self._tasks[rid].pid = int(doc["pid"])
                    self._replied.notify_all()
                elif doc.get("event") == "exit":
                    task = self._tasks.pop(rid, None)
                    if task is not None:
                        task._exited(int(doc["returncode"]))
                    self.exited.set()
        # EOF: the server is gone. Its children got SIGKILL from PR_SET_PDEATHSIG.
        with self._lock:
            self._dead = f"the task server (pid {self.proc.pid}) died"
            for task in self._tasks.values():
                task._exited(-signal.SIGKILL, self._dead)
            self._tasks.clear()
            self._replied.notify_all()
        self.exited.set()

    @property
    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    def spawn(self, task_path: Path, result_path: Path, log_path: Path, env: dict[str, str]) -> ForkedTask:
        """Fork one task process; raise :class:`ForkServerError` when the server cannot."""
        with self._lock:
            if self._dead:
                raise ForkServerError(self._dead)
            self._next += 1
            rid = self._next
            req = {"id": rid, "task": str(task_path), "result": str(result_path), "log": str(log_path), "env": env}
            task = ForkedTask(pid=0, server=self)
            self._tasks[rid] = task
            try:
                serverproc.send(self.proc, req)
            except OSError as exc:
                self._tasks.pop(rid, None)
                raise ForkServerError(f"the task server does not take requests: {exc}") from None
            deadline = time.monotonic() + FORK_TIMEOUT_S
            while rid not in self._pending and not self._dead:
                if not self._replied.wait(max(0.0, deadline - time.monotonic())):
                    self._tasks.pop(rid, None)
                    raise ForkServerError(f"the task server did not fork within {FORK_TIMEOUT_S:g} s")
            reply = self._pending.pop(rid, None)
            if reply is None or reply["event"] == "error":
                self._tasks.pop(rid, None)
                raise ForkServerError(str(reply.get("error")) if reply else (self._dead or "the task server died"))
            task.pid = int(reply["pid"])
            task.baseline_mb = resident_mb(self.proc.pid)
            return task

    def close(self) -> None:
        """Stop the server: its stdin closes, it waits for its children (the driver killed the
        ones it gave up on) and exits; killed if it does not within a few seconds."""
        serverproc.stop(self.proc)


def main() -> int:
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
