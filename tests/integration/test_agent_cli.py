"""`perfscout run | resume | runs` as a user types them (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])"]


def _said(proc: subprocess.CompletedProcess) -> str:
    """stderr with rich's line wrapping undone."""
    return " ".join(proc.stderr.split())


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFSCOUT_HOME": str(home),
           "PERFSCOUT_PLANNER": "deterministic", "PERFSCOUT_NOISE_THRESHOLD": "1e9"}
    return subprocess.run([*CLI, *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_run_intent_question_resume_and_runs(tmp_path):
    home = tmp_path / "home"
    raw = tmp_path / "f.raw"
    np.linspace(-1, 1, 24 * 20, dtype="<f4").reshape(24, 20).tofile(raw)
    asked = _cli(home, "run", f"evaluate sz3 and zfp at abs 1e-3 on {raw}", "--thread-id", "c1", "--json")
    assert asked.returncode == 3, asked.stderr
    doc = json.loads(asked.stdout)
    assert doc["status"] == "interrupted" and set(doc["question"]["needs"]) == {"shape", "dtype"}

    bad = _cli(home, "resume", "c1", "--answer", "{not json")
    assert bad.returncode == 2 and "not valid JSON" in _said(bad) and "Traceback" not in _said(bad)
    unusable = _cli(home, "resume", "c1", "--answer", "no idea", "--json")  # words it cannot use: asked again
    assert unusable.returncode == 3 and json.loads(unusable.stdout)["question"]["slot"] == "shape"

    done = _cli(home, "resume", "c1", "--answer", '{"shape": "24,20", "dtype": "f32"}')
    assert done.returncode == 0, done.stderr
    # the Answer and a compact table on stdout, rendered for a terminal (not the report's Markdown)
    assert "Answer" in done.stdout and "## " not in done.stdout and "<details>" not in done.stdout
    assert {line.split()[0] for line in done.stdout.splitlines() if line.split()[:1] in (["sz3"], ["zfp"])} == \
        {"sz3", "zfp"}

    runs = _cli(home, "runs", "--json")
    assert [(r["thread_id"], r["status"]) for r in json.loads(runs.stdout)] == [("c1", "done")]


@pytest.mark.slow
def test_run_spec_and_bad_requests(tmp_path):
    home = tmp_path / "home"
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"datasets": ["synthetic:grf:16,16"], "codecs": ["zfp"],
                                    "mode": "rel", "bounds": [1e-2], "repeats": 1}))
    ok = _cli(home, "run", "--spec", str(spec), "--json")
    assert ok.returncode == 0, ok.stderr
    assert Path(json.loads(ok.stdout)["report_path"]).is_file()

    vague = _cli(home, "run", "make everything faster")
    assert vague.returncode == 3 and "What should I find out" in _said(vague) and "Traceback" not in _said(vague)
    refused = _cli(home, "run", "evaluate zfp at rel 1e-2 on synthetic:grf:8,8 and email me the results")
    assert refused.returncode == 2 and "refused" in _said(refused) and "network" in _said(refused)
    both = _cli(home, "run", "x", "--demo")
    assert both.returncode == 2 and "exactly one of" in _said(both)
    missing = _cli(home, "resume", "no-such-thread")
    assert missing.returncode == 2 and "no run with thread id" in _said(missing)
    spec.write_text("datasets: [unclosed")
    broken = _cli(home, "run", "--spec", str(spec))
    assert broken.returncode == 2 and "YAML syntax error" in _said(broken)


@pytest.mark.parametrize("text, fragment", [
    ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8)),
     "alias"),
    ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
])
def test_hostile_agent_specs_are_refused_clearly(tmp_path, text, fragment):
    spec = tmp_path / "bomb.yaml"
    spec.write_text(text)
    out = _cli(tmp_path / "home", "run", "--spec", str(spec))
    assert out.returncode == 2 and fragment in _said(out).lower() and "Traceback" not in _said(out)
