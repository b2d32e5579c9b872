"""Driver-side plumbing for the sweep's long-lived helper processes: the task server
(:mod:`.forkserver`) and the GPU worker (:mod:`.gpuworker`).

Both are ``python -m <module>`` children in their own session (so one ``killpg`` ends them
and whatever they started) that read JSON requests on stdin, answer JSON lines on stdout
(the first one ``{"event": "ready", ...}``), and write their own diagnostics to a log file.
What differs between them, the protocol after the handshake, stays in their modules; this
one holds the process life cycle they share: start, handshake, stop, and the ``Popen``
subset a task handle offers the runner.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def start(module: str, env: dict[str, str], log_path: Path | None) -> subprocess.Popen[bytes]:
    """``python -m module`` with piped stdin/stdout, stderr appended to ``log_path`` (or
    dropped), in a new session.

    The pipes are unbuffered on this side: :func:`read_ready` waits on the descriptor with
    ``select``, and a buffered reader could hold the ready line in its buffer, read together
    with a line before it, while ``select`` sees nothing more to read. The replies are a few
    short lines per task, so reading them without a buffer costs nothing that counts."""
    log = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log, env=env, start_new_session=True, bufsize=0)
    finally:
        if log is not subprocess.DEVNULL:
            log.close()  # the child holds its own copy


def read_ready(proc: subprocess.Popen[bytes], timeout_s: float) -> dict[str, Any] | None:
    """The child's ``ready`` line, or None when it closed stdout, exited or took longer than
    ``timeout_s`` (the caller stops it and says so). Lines that are not JSON (a library
    printing to stdout while it is imported) are passed over."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("event") == "ready":
                return doc
        if proc.poll() is not None:
            break
    return None


def replies(stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON lines of ``stream`` until EOF, lines that are not JSON passed over."""
    for line in stream:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def send(proc: subprocess.Popen[bytes], request: dict[str, Any]) -> None:
    """One request line to the child (OSError when it no longer reads)."""
    assert proc.stdin is not None
    data = (json.dumps(request) + "\n").encode()
    while data:  # an unbuffered pipe may take part of it
        data = data[proc.stdin.write(data):]


def wait_or_kill(proc: subprocess.Popen, timeout_s: float) -> int:
    """Wait up to ``timeout_s`` for a child started in its own session to leave; past that,
    SIGKILL its whole process group (what it started too) and reap it. Its exit status."""
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait()


def stop(proc: subprocess.Popen[bytes], reader: threading.Thread | None = None, grace_s: float = 5.0) -> None:
    """Close the child's stdin (its signal to finish and leave) and wait; its process group
    is killed if it has not left within ``grace_s``. Then the reader thread (if any) is
    joined and stdout closed."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    wait_or_kill(proc, grace_s)
    if reader is not None and reader.is_alive():
        reader.join(grace_s)
    if proc.stdout is not None:
        try:
            proc.stdout.close()
        except OSError:
            pass


class TaskHandle:
    """The ``Popen`` subset (``pid``, ``poll``, ``wait``, ``returncode``) the runner uses on
    a task that runs inside a helper process; the helper's reader thread calls
    :meth:`_exited`. Subclasses are dataclasses with ``pid``, ``returncode``, ``note`` and
    ``_done`` (a :class:`threading.Event`) fields."""

    what = "task"  # how a timeout names it
    pid: int
    returncode: int | None
    note: str
    _done: threading.Event

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(f"{self.what} {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def _exited(self, rc: int, note: str = "", **fields: Any) -> None:
        """Record the exit once (later calls are ignored): ``fields`` and the note first, the
        return code last, so a caller that sees it through :meth:`poll` sees the rest too."""
        if self.returncode is not None:
            return
        for name, value in fields.items():
            setattr(self, name, value)
        self.note = note
        self.returncode = rc
        self._done.set()
