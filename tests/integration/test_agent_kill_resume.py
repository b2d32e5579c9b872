"""SIGKILL the agent process mid-run, resume it, and compare with an uninterrupted run.

Real processes, real SQLite checkpoints, real codecs. The side-effect ledger
(``calls.log``, one line per tool call started/finished) shows that no call that had
finished before the kill runs again.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from perfscout.graph.rundir import read_ledger
from perfscout.state.claims import answer_differences, read_claims

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])"]

SPEC = {"goal": "kill/resume", "datasets": ["synthetic:grf:192,192"], "codecs": ["sz3", "zfp"],
        "mode": "abs", "bounds": [1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4], "repeats": 3}


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PERFSCOUT_HOME": str(home),
            "PERFSCOUT_PLANNER": "deterministic", "PERFSCOUT_NOISE_THRESHOLD": "1e9"}


def _normalise(report: str) -> str:
    """Drop what legitimately differs between two runs: the run id, the timings, and the Answer
    (compared by its claims, which say how a speed verdict may differ)."""
    head, _, rest = report.partition("## Answer")
    report = head + rest.split("\n## ", 1)[1] if rest else report
    out = []
    for line in report.splitlines():
        if line.startswith("- Run:"):
            continue
        if line.startswith("|") and line.count("|") == 12:  # the results table: its last two cells are MB/s
            line = "|".join(line.split("|")[:-3])
        line = re.sub(r"\d+(?:\.\d+)? (?:vs \d+(?:\.\d+)? )?MB/s", "N MB/s", line)  # speeds in the answer
        out.append(line)
    return "\n".join(out)


@pytest.mark.slow
def test_sigkill_then_resume_repeats_no_finished_call_and_matches_a_clean_run(tmp_path):
    home = tmp_path / "home"
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    env = _env(home)
    run_dir = home / "runs" / "killed"

    proc = subprocess.Popen([*CLI, "run", "--spec", str(spec), "--thread-id", "killed", "--json"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if sum(1 for e, _, _ in read_ledger(run_dir) if e == "start") >= 4:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed: make SPEC larger"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    at_kill = read_ledger(run_dir)
    # The call started last may have finished without its checkpoint being written
    # (killed in between): it may legitimately run again. Every earlier one may not.
    in_flight = [c for e, c, _ in at_kill if e == "start"][-1]
    finished = [c for e, c, _ in at_kill if e == "done" and c != in_flight]
    assert len(finished) >= 3 and not (run_dir / "report.md").exists()

    res = subprocess.run([*CLI, "resume", "killed", "--json"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    ledger = read_ledger(run_dir)
    starts = [c for e, c, _ in ledger if e == "start"]
    dones = [c for e, c, _ in ledger if e == "done"]
    for call in finished:
        assert starts.count(call) == 1, f"{call} ran again after the resume"
    assert len(set(dones)) == 12  # every task finished ...
    assert all(dones.count(c) == 1 for c in set(dones) - {in_flight})  # ... once, bar the in-flight one

    clean = subprocess.run([*CLI, "run", "--spec", str(spec), "--thread-id", "clean", "--json"],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr[-2000:]
    killed_report = (run_dir / "report.md").read_text()
    clean_report = (home / "runs" / "clean" / "report.md").read_text()
    assert re.search(r"\| t12-zfp-cpu-abs-3e-4 \|", killed_report)
    assert _normalise(killed_report) == _normalise(clean_report)
    # The two Answers say the same: the same claims, bar a speed that one run could separate and
    # the other found too close to call (never two different winners).
    killed, clean_claims = read_claims(run_dir), read_claims(home / "runs" / "clean")
    assert answer_differences(killed.claims, clean_claims.claims) == []
    answer = killed_report.split("## Answer", 1)[1].split("\n## ", 1)[0]
    assert [p.strip() for p in answer.strip().split("\n\n")] == [c.text for c in killed.claims]
