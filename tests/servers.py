"""Helpers for tests that start a real local server (llama-cpp, `langgraph dev`, PostgreSQL).

Each server runs in its own process session so that stopping it takes its children too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(url: str, proc: subprocess.Popen, log_path: Path, *, timeout_s: float,
                       what: str, poll_s: float = 0.5) -> None:
    """Poll ``url`` until it answers 200; fail with the server's log tail if it dies or stalls."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not come up:\n" + Path(log_path).read_text()[-3000:])
        time.sleep(poll_s)


def stop_group(proc: subprocess.Popen, *, grace_s: float) -> None:
    """SIGTERM the server's process group, then SIGKILL it if it has not exited in time."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
