"""``perfscout export`` and ``perfscout regress`` on damaged stores (real sweeps, real SQLite
files damaged on disk; a real agent run for the checkpoint store).

They used to say only "cannot open results store" (exit 2), or, for a zero-length store or
one that had lost a table, open it for writing: SQLite laid fresh tables over it, and the
export then found "no result held its bound" while the task results sat in ``raw/``. Now
both name the damage as ``perfscout report`` does (what the store should hold, the task
results still on disk, ``perfscout report --rebuild``), exit 1, and the damaged file is
left byte for byte as it was. An agent run that did not finish, whose checkpoint store is
damaged, is named so too, with the run directories the store's home still holds.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.errors import InputError
from perfscout.tools import export as ex
from perfscout.tools import regress as rg

runner = CliRunner()
SPEC = "name: tiny\nrepeats: 1\ndatasets: [{synthetic: 'grf:8,8'}]\ncodecs: [zfp]\nmodes: [abs]\nbounds: [1.0e-2]\n"
DAMAGES = ("zero-length", "truncated", "garbage", "missing-table", "rows-lost")


def _said(result) -> str:  # noqa: ANN001 - click's Result
    return " ".join((result.stderr + result.stdout).split())


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("damaged_reads")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFSCOUT_HOME", str(d / "home"))
        (d / "s.yaml").write_text(SPEC)
        result = runner.invoke(app, ["sweep", str(d / "s.yaml"), "--out", str(d / "run"), "--no-progress"])
        assert result.exit_code == 0, result.stderr
    return d / "run"


def _damage(run: Path, how: str) -> bytes:
    """Damage ``run``'s store as ``how`` says; return its bytes afterwards."""
    store = run / "results.sqlite"
    for extra in ("-wal", "-shm"):  # the committed store alone (a WAL would hold its last pages)
        Path(f"{store}{extra}").unlink(missing_ok=True)
    if how == "zero-length":
        store.write_bytes(b"")
    elif how == "truncated":
        data = store.read_bytes()
        store.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        store.write_bytes(os.urandom(8192))
    else:
        with sqlite3.connect(store) as db:
            db.execute("DROP TABLE results" if how == "missing-table" else "DELETE FROM results")
        db.close()
        for extra in ("-wal", "-shm"):
            Path(f"{store}{extra}").unlink(missing_ok=True)
    return store.read_bytes()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".perfscout.lock"))
    return dst


def _task_key(run: Path) -> str:
    return next((run / "raw").glob("*/result.json")).parent.name


@pytest.mark.parametrize("damage", DAMAGES)
def test_export_and_regress_name_a_damaged_store_and_leave_it_alone(damage: str, sweep_run: Path,
                                                                     tmp_path: Path) -> None:
    bad = _copy(sweep_run, tmp_path / "bad")
    before = _damage(bad, damage)
    files = sorted(p.name for p in bad.iterdir())
    key = _task_key(bad)
    for argv, done in ((["export", str(bad)], "exported"), (["export", str(bad), "--json"], "exported"),
                       (["regress", str(sweep_run), str(bad)], "compared"),
                       (["regress", str(bad / "results.sqlite"), str(sweep_run), "--json"], "compared"),
                       (["regress", "--save-baseline", "b1", str(bad)], "stored")):
        result = runner.invoke(app, argv)
        said = _said(result)
        assert result.exit_code == 1, (argv, result.exit_code, said)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert f"results store {bad / 'results.sqlite'} is damaged" in said, said
        assert f"nothing was {done}" in said and f"perfscout report --rebuild {bad}" in said, said
        assert "1 task result" in said and key in said, said  # what is still on disk, by name
        assert "Traceback" not in said and result.stdout == "", said
        assert (bad / "results.sqlite").read_bytes() == before, f"{argv} wrote to the damaged store"
    # no report, no baseline copy; only SQLite's own -wal/-shm beside a store whose header says WAL
    # (a read-only reader of a WAL database makes them; the damaged file itself is unchanged)
    assert sorted(p.name for p in bad.iterdir() if not p.name.endswith(("-wal", "-shm"))) == files
    # once rebuilt, both read it again
    assert runner.invoke(app, ["report", "--rebuild", str(bad)]).exit_code == 0
    assert runner.invoke(app, ["export", str(bad), "--json"]).exit_code == 0
    rebuilt = runner.invoke(app, ["regress", str(sweep_run), str(bad), "--json"])
    assert rebuilt.exit_code in (0, 1) and json.loads(rebuilt.stdout)["tasks"], _said(rebuilt)


@pytest.mark.parametrize("damage", ["zero-length", "missing-table"])
def test_the_python_api_reads_a_damaged_store_without_writing_to_it(damage: str, sweep_run: Path,
                                                                    tmp_path: Path) -> None:
    """tools.export / tools.regress (below the sweep layer: they cannot ask check_store)
    open the store read-only: a zero-length file or a lost table is an error, not a fresh
    empty store laid over it (which is what the writer's open used to do)."""
    bad = _copy(sweep_run, tmp_path / "bad")
    before = _damage(bad, damage)
    with pytest.raises(InputError, match="cannot open results store"):
        ex.choose_setting(bad)
    with pytest.raises(InputError, match="cannot open results store"):
        rg.load_run(bad)
    assert (bad / "results.sqlite").read_bytes() == before


def test_an_agent_runs_damaged_sweep_store_is_named_with_its_other_sweeps(sweep_run: Path, tmp_path: Path) -> None:
    """An agent run directory holding the sweeps it ran (sweeps/<name>/): one damaged, the
    other sound; export names the damaged one and the sound one it can still see."""
    agent_run = tmp_path / "agent_run"
    (agent_run / "sweeps").mkdir(parents=True)
    (agent_run / "results.json").write_text(json.dumps({"records": []}))
    sound = _copy(sweep_run, agent_run / "sweeps" / "a")
    bad = _copy(sweep_run, agent_run / "sweeps" / "b")
    before = _damage(bad, "garbage")
    result = runner.invoke(app, ["export", str(agent_run)])
    said = _said(result)
    assert result.exit_code == 1 and f"results store {bad / 'results.sqlite'} is damaged" in said, said
    assert f"other sweep directories: {sound}" in said and "--rebuild" in said, said
    assert (bad / "results.sqlite").read_bytes() == before


@pytest.fixture()
def agent_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("PERFSCOUT_HOME", str(home))
    monkeypatch.setenv("PERFSCOUT_PLANNER", "deterministic")
    monkeypatch.setenv("PERFSCOUT_NOISE_THRESHOLD", "1e9")
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"datasets": ["synthetic:grf:8,8"], "codecs": ["zfp"], "mode": "abs",
                                    "bounds": [1e-2], "repeats": 1}))
    result = runner.invoke(app, ["run", "--spec", str(spec), "--thread-id", "t1", "--json"])
    assert result.exit_code == 0, _said(result)
    return Path(json.loads(result.stdout)["run_dir"])


@pytest.mark.parametrize("damage", ["zero-length", "truncated", "garbage", "missing-table"])
def test_an_unfinished_agent_run_over_a_damaged_checkpoint_store(damage: str, agent_run: Path) -> None:
    """The run's results.json gone (it did not finish) and its checkpoint store damaged:
    export says it cannot be resumed and names the damage with the run directories still
    seen (exit 1); regress still compares the observations on disk; the store is untouched."""
    home = agent_run.parent.parent
    store = home / "checkpoints.sqlite"
    with sqlite3.connect(store) as db:  # the committed store alone
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    for extra in ("-wal", "-shm"):
        Path(f"{store}{extra}").unlink(missing_ok=True)
    if damage == "zero-length":
        store.write_bytes(b"")
    elif damage == "truncated":
        data = store.read_bytes()
        store.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        store.write_bytes(os.urandom(8192))
    else:
        with sqlite3.connect(store) as db:
            db.execute("DROP TABLE checkpoints")
        db.close()
        for extra in ("-wal", "-shm"):
            Path(f"{store}{extra}").unlink(missing_ok=True)
    before = store.read_bytes()
    finished = runner.invoke(app, ["export", str(agent_run), "--json"])  # a finished run needs no checkpoint
    assert finished.exit_code == 0 and json.loads(finished.stdout)["setting"]["codec"] == "zfp", _said(finished)
    (agent_run / "results.json").unlink()
    result = runner.invoke(app, ["export", str(agent_run)])
    said = _said(result)
    assert result.exit_code == 1, said
    assert "did not finish" in said and "cannot be resumed" in said and f"checkpoint store {store} is damaged" in said
    assert agent_run.name in said and str(agent_run / "results") in said, said
    assert "Traceback" not in said
    compared = runner.invoke(app, ["regress", str(agent_run), str(agent_run), "--json"])
    assert compared.exit_code == 0 and json.loads(compared.stdout)["tasks"], _said(compared)
    assert store.read_bytes() == before, "the damaged checkpoint store was written to"
