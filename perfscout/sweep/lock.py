"""One writer per run directory: an exclusive ``flock`` on ``DIR/.perfscout.lock``.

Two sweeps writing one run directory (a second started with ``--resume`` while the first
still runs) would each think the other's in-flight tasks were left over from a crash. The
lock makes the second refuse at once, naming the holder, or wait for it (``--wait``).
``flock`` belongs to the open file: the kernel drops it when the holder exits by any
means, SIGKILL included, so a crashed sweep never leaves a stale lock behind, and the file
descriptor is not inherited by the task processes (Python opens files non-inheritable).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from perfscout.errors import InputError

LOCK_NAME = ".perfscout.lock"


class RunDirBusy(InputError):
    """Another live process holds the run directory's lock."""


def _describe(holder: dict) -> str:
    if not holder:
        return "another process"
    parts = [f"pid {holder.get('pid', '?')}"]
    if holder.get("host"):
        parts.append(f"on {holder['host']}")
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    if holder.get("command"):
        parts.append(f"({holder['command']})")
    return " ".join(parts)


class RunDirLock:
    """``with RunDirLock(run_dir, wait=False):`` holds the directory for this process."""

    def __init__(self, run_dir: str | Path, *, wait: bool = False, command: str = "perfscout sweep",
                 on_wait: Callable[[str], None] | None = None, poll_s: float = 0.2) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.wait = wait
        self.command = command
        self.on_wait = on_wait
        self.poll_s = poll_s
        self._fd: int | None = None

    def holder(self) -> dict:
        """What the current holder wrote into the lock file (may be empty or stale)."""
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"cannot open the run directory's lock {self.path}: {exc}") from None
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise InputError(f"cannot lock {self.path}: {exc}") from None
                who = _describe(self.holder())
                if not self.wait:
                    os.close(fd)
                    raise RunDirBusy(
                        f"{self.path.parent} is being written by another sweep ({who}); one writer per "
                        "results store: wait for it to finish, stop it, or pass --wait to queue behind it"
                    ) from None
                if not told and self.on_wait is not None:
                    self.on_wait(f"waiting for the sweep that holds {self.path.parent} ({who}) ...")
                    told = True
                time.sleep(self.poll_s)
        self._fd = fd
        doc = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
               "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        try:  # who holds it, for the message a second writer gets; the flock is what counts
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(doc).encode(), 0)
        except OSError:  # a full disk: the lock still holds, the message just names nobody
            pass

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RunDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
