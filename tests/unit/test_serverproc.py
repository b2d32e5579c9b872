"""perfscout.sweep.serverproc: the handshake and stop the task server and GPU worker share,
against real child processes."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from perfscout.sweep import serverproc


def _child(tmp_path: Path, code: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    """``code`` as a module run by :func:`serverproc.start`, as the helpers are."""
    name = f"serverproc_child_{len(list(tmp_path.glob('*.py')))}"
    (tmp_path / f"{name}.py").write_text(code)
    return serverproc.start(name, {**os.environ, "PYTHONPATH": str(tmp_path)}, log)


def test_ready_after_noise_then_requests_and_a_clean_stop(tmp_path: Path) -> None:
    proc = _child(tmp_path, "import sys, json\n"
                  "print('a library says hello', flush=True)\n"
                  "print(json.dumps({'event': 'ready', 'pid': 1}), flush=True)\n"
                  "for line in sys.stdin:\n"
                  "    print('noise', flush=True)\n"
                  "    print(json.dumps({'echo': json.loads(line)}), flush=True)\n"
                  "print('bye', file=sys.stderr)\n", log=tmp_path / "child.log")
    assert serverproc.read_ready(proc, 30) == {"event": "ready", "pid": 1}
    serverproc.send(proc, {"id": 7})
    got: list[dict] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: got.extend(serverproc.replies(proc.stdout)))
    reader.start()
    serverproc.stop(proc, reader)
    assert proc.returncode == 0 and got == [{"echo": {"id": 7}}] and not reader.is_alive()
    assert (tmp_path / "child.log").read_text() == "bye\n"


def test_no_ready_when_the_child_exits_or_stays_silent(tmp_path: Path) -> None:
    proc = _child(tmp_path, "import sys; print('not json'); sys.exit(3)")
    assert serverproc.read_ready(proc, 30) is None
    serverproc.stop(proc)
    assert proc.returncode == 3
    proc = _child(tmp_path, "import time; time.sleep(60)")
    t0 = time.monotonic()
    assert serverproc.read_ready(proc, 0.6) is None
    serverproc.stop(proc, grace_s=0.2)  # it ignores its closed stdin: its process group is killed
    assert proc.returncode == -9 and time.monotonic() - t0 < 20
