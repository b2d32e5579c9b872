"""Many agent threads at once on one real PostgreSQL checkpointer, with kills and resumes.

Four agent processes (``perfscout run --spec``) checkpoint into the same PostgreSQL server
at the same time; two are SIGKILLed mid-run, then both are resumed at once while a third
round of threads runs in-process (``perfscout.agent.run`` from several Python threads).
Nothing may be lost or repeated: every thread ends ``done`` with every task in its report,
no tool call that had finished before a kill runs again, and a killed-and-resumed thread's
report equals an uninterrupted one's (timings aside).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from perfscout import agent
from perfscout.graph.context import Context
from perfscout.graph.rundir import read_ledger
from tests.integration.test_agent_kill_resume import _normalise
from tests.integration.test_agent_postgres import pg_url  # noqa: F401 - the suite's PostgreSQL server fixture

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])"]

#: 8 tool calls per thread: long enough to be killed in the middle.
SPEC = {"goal": "concurrent threads", "datasets": ["synthetic:grf:128,128"], "codecs": ["sz3", "zfp"],
        "mode": "abs", "bounds": [1e-1, 1e-2, 1e-3, 1e-4], "repeats": 3}
N_TASKS = 8


def _env(home: Path, url: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PERFSCOUT_HOME": str(home), "PERFSCOUT_CHECKPOINT_URL": url,
            "PERFSCOUT_PLANNER": "deterministic", "PERFSCOUT_NOISE_THRESHOLD": "1e9"}


def _starts(run_dir: Path) -> int:
    return sum(1 for e, _, _ in read_ledger(run_dir) if e == "start")


def _task_rows(report: str) -> int:
    """Distinct task ids in the report's tables (``| t3-zfp-cpu-abs-1e-3 | ...``)."""
    return len({m[1] for m in re.finditer(r"^\| (t\d+-[^ |]+) \|", report, re.M)})


def _results(report: str) -> list[str]:
    """The report's per-task table rows without their timing cells (the prose around them
    names the faster codec, which timing noise may flip between two runs)."""
    return [line for line in _normalise(report).splitlines() if line.startswith("| t")]


def test_threads_share_one_postgres_checkpointer_through_kills_and_resumes(pg_url, tmp_path):  # noqa: F811
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'perfscout[postgres]'")
    home = tmp_path / "home"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    env = _env(home, pg_url)
    ctx = Context(home=str(home), checkpoint_url=pg_url, planner="deterministic", noise_threshold=1e9)
    # The checkpointer's tables are created once, before the crowd arrives: several processes
    # creating them at the same instant race in PostgresSaver.setup() (a unique violation
    # on checkpoint_migrations; reported, perfscout/graph/checkpoint.py).
    agent.list_runs(context=ctx)
    names = ["p1", "p2", "p3", "p4"]
    procs = {n: subprocess.Popen([*CLI, "run", "--spec", str(spec), "--thread-id", n, "--json"], env=env, cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in names}
    victims = ["p2", "p4"]
    deadline = time.monotonic() + 240
    pending = set(victims)
    while pending:
        assert time.monotonic() < deadline, "the threads made no progress"
        for n in list(pending):
            assert procs[n].poll() is None, f"{n} ended before it could be killed: {procs[n].communicate()}"
            if _starts(home / "runs" / n) >= 3:
                procs[n].send_signal(signal.SIGKILL)
                pending.discard(n)
        time.sleep(0.01)
    at_kill = {}
    for n in victims:
        procs[n].wait(30)
        assert procs[n].returncode == -signal.SIGKILL
        ledger = read_ledger(home / "runs" / n)
        in_flight = [c for e, c, _ in ledger if e == "start"][-1]
        at_kill[n] = [c for e, c, _ in ledger if e == "done" and c != in_flight]
        assert not (home / "runs" / n / "report.md").exists()  # it really died mid-run

    # Resume both killed threads at once, while more threads run in-process on the same server.
    resumes = {n: subprocess.Popen([*CLI, "resume", n, "--json"], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for n in victims}
    with ThreadPoolExecutor(3) as pool:
        inproc = list(pool.map(lambda n: agent.run(dict(SPEC), thread_id=n, context=ctx), ["t1", "t2", "t3"]))
    for n, p in {**procs, **resumes}.items():
        if n in victims and p is procs[n]:
            continue
        out, err = p.communicate(timeout=400)
        assert p.returncode == 0, (n, err[-2000:])
        assert json.loads(out)["status"] == "done"
    assert all(o.status == "done" for o in inproc)

    clean = (home / "runs" / "p1" / "report.md").read_text()
    assert _task_rows(clean) == N_TASKS and len(_results(clean)) >= N_TASKS
    for n in names + ["t1", "t2", "t3"]:
        report = (home / "runs" / n / "report.md").read_text()
        assert _task_rows(report) == N_TASKS, n  # nothing lost
        assert _results(report) == _results(clean), n  # killed or not, the same measured results
    for n in victims:  # nothing repeated: no call finished before the kill ran again
        starts = [c for e, c, _ in read_ledger(home / "runs" / n) if e == "start"]
        for call in at_kill[n]:
            assert starts.count(call) == 1, f"{n}: {call} ran again after the resume"
    runs = {r.thread_id: r for r in agent.list_runs(context=ctx)}
    assert set(names + ["t1", "t2", "t3"]) <= set(runs)
    assert all(runs[n].status == "done" for n in names + ["t1", "t2", "t3"])
    assert not (home / "checkpoints.sqlite").exists()  # every checkpoint went to PostgreSQL


def test_first_use_from_many_threads_at_once_creates_the_tables_once(pg_url, tmp_path):  # noqa: F811
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'perfscout[postgres]'")
    import threading
    import uuid

    import psycopg

    from perfscout.graph.checkpoint import open_checkpointer

    name = f"fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pg_url.rsplit("/", 1)[0] + f"/{name}"
    barrier, errors = threading.Barrier(8), []

    def first_use() -> None:
        barrier.wait()
        try:
            with open_checkpointer(Context(home=str(tmp_path / "home"), checkpoint_url=url)):
                pass
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
