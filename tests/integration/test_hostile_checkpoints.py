"""Hostile checkpoint stores and thread ids for `perfscout runs | resume | run` (real SQLite,
the real agent on a one-task spec).

- A damaged checkpoint store (zero-length, random bytes) made ``runs`` say "no runs yet"
  while the run directory existed, and ``resume`` could not find the run; both now name the
  store as damaged (exit 1) with the run directories that can still be seen, and nothing
  writes over the damaged file.
- A thread id reused for a different request merged the old run's results into the new
  answer and replaced the old report; a fresh run on a thread that exists is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from perfscout.cli import app

runner = CliRunner()


def _said(result) -> str:  # noqa: ANN001 - click's Result
    return " ".join((result.stderr + result.stdout).split())


@pytest.fixture()
def one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "home"
    monkeypatch.setenv("PERFSCOUT_HOME", str(home))
    monkeypatch.setenv("PERFSCOUT_PLANNER", "deterministic")
    monkeypatch.setenv("PERFSCOUT_NOISE_THRESHOLD", "1e9")
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"datasets": ["synthetic:grf:8,8"], "codecs": ["zfp"], "mode": "abs",
                                    "bounds": [1e-2], "repeats": 1}))
    result = runner.invoke(app, ["run", "--spec", str(spec), "--thread-id", "t1", "--json"])
    assert result.exit_code == 0, _said(result)
    doc = json.loads(result.stdout)
    return {"home": home, "spec": spec, "report": Path(doc["report_path"]), "run_dir": Path(doc["run_dir"])}


@pytest.mark.parametrize("damage", ["zero-length", "random"])
def test_a_damaged_checkpoint_store_is_named_with_the_runs_it_still_sees(damage: str, one_run) -> None:  # noqa: ANN001
    store = one_run["home"] / "checkpoints.sqlite"
    for extra in ("-wal", "-shm"):
        Path(f"{store}{extra}").unlink(missing_ok=True)
    store.write_bytes(b"" if damage == "zero-length" else os.urandom(8192))
    before = store.read_bytes()

    runs = runner.invoke(app, ["runs"])
    said = _said(runs)
    assert runs.exit_code == 1, said
    assert "damaged" in said and "no runs yet" not in said and "Traceback" not in said, said
    assert "t1" in said and str(one_run["run_dir"].parent) in said, said
    as_json = runner.invoke(app, ["runs", "--json"])
    assert as_json.exit_code == 1 and "damaged" in _said(as_json)

    resume = runner.invoke(app, ["resume", "t1"])
    said = _said(resume)
    assert resume.exit_code == 1, said
    assert "damaged" in said and "no run with thread id" not in said and str(one_run["run_dir"]) in said, said

    fresh = runner.invoke(app, ["run", "--spec", str(one_run["spec"]), "--thread-id", "t2"])
    assert fresh.exit_code == 1 and "damaged" in _said(fresh), _said(fresh)
    assert store.read_bytes() == before, "the damaged checkpoint store was written to"
    assert one_run["report"].is_file()


def test_a_thread_id_reused_for_another_request_is_refused(one_run, tmp_path: Path) -> None:  # noqa: ANN001
    report = one_run["report"].read_text()
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"datasets": ["synthetic:grf:8,16"], "codecs": ["zfp"], "mode": "abs",
                                     "bounds": [1e-1], "repeats": 1}))
    for spec in (other, one_run["spec"]):  # another request, or the same one again
        again = runner.invoke(app, ["run", "--spec", str(spec), "--thread-id", "t1"])
        said = _said(again)
        assert again.exit_code == 2 and "t1" in said and "already" in said and "resume" in said, said
    assert one_run["report"].read_text() == report, "the old run's report was replaced"
    # a thread id whose run directory outlived its checkpoints (a store moved aside) is refused too
    store = one_run["home"] / "checkpoints.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    again = runner.invoke(app, ["run", "--spec", str(other), "--thread-id", "t1"])
    assert again.exit_code == 2 and "already" in _said(again), _said(again)
    assert one_run["report"].read_text() == report
    listed = runner.invoke(app, ["runs"])  # the fresh store knows no run; the directory is still named
    assert listed.exit_code == 0 and "not in the checkpoint store" in _said(listed) and "t1" in _said(listed)
    assert "no runs yet" not in _said(listed)
    # ... and a new thread id runs
    new = runner.invoke(app, ["run", "--spec", str(other), "--thread-id", "t3"])
    assert new.exit_code == 0, _said(new)


def test_a_checkpoint_store_linked_to_another_sqlite_file_is_refused_by_runs_resume_and_run(
        one_run, tmp_path: Path) -> None:  # noqa: ANN001
    """`runs`, `resume` and `run` name the link and exit 1; the file it points at (a real
    SQLite database of the user's) keeps every byte, and the run on disk is still named."""
    import sqlite3

    store = one_run["home"] / "checkpoints.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    victim = tmp_path / "mine.sqlite"
    with sqlite3.connect(victim) as db:
        db.execute("CREATE TABLE mine (x)")
        db.execute("INSERT INTO mine VALUES (1)")
    store.symlink_to(victim)
    before = victim.read_bytes()
    for argv in (["runs"], ["runs", "--json"], ["resume", "t1"],
                 ["run", "--spec", str(one_run["spec"]), "--thread-id", "t2"]):
        result = runner.invoke(app, argv)
        said = _said(result)
        assert result.exit_code == 1, (argv, said)
        assert "symbolic link" in said and str(store) in said and "Traceback" not in said, (argv, said)
        assert "no runs yet" not in said, said
    assert victim.read_bytes() == before, "wrote through a planted link"
    assert not Path(f"{victim}-wal").exists()
    assert one_run["report"].is_file()
