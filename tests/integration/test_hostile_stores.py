"""Hostile run directories and result stores: what the user already had is never written
over, a damaged store is a clear error, and a comparison of nothing is no verdict.

Real sweeps (one tiny zfp task each, real SQLite stores) are run once per module; the
cases copy and damage them: truncated, random bytes, a row whose bound broke, a store
held by another writer, a folder of the user's given as ``--out``, two runs that share
no task.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfscout.cli import app

runner = CliRunner()
SPEC = "name: tiny\nrepeats: 1\ndatasets: [{{synthetic: 'grf:{shape}'}}]\ncodecs: [zfp]\nmodes: [abs]\nbounds: [1.0e-2]\n"


def _clean(result, code: int, needle: str) -> None:  # noqa: ANN001 - click's Result
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"escaped: {exc!r}"
    said = " ".join(result.stderr.split())
    assert result.exit_code == code, (result.exit_code, said, result.stdout[-300:])
    assert needle in said and "Traceback" not in said and "unexpected" not in said, said


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("stores")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFSCOUT_HOME", str(d / "home"))
        for name, shape in (("a", "8,8"), ("b", "8,16")):
            spec = d / f"{name}.yaml"
            spec.write_text(SPEC.format(shape=shape))
            out[name] = d / f"run_{name}"
            result = runner.invoke(app, ["sweep", str(spec), "--out", str(out[name]), "--no-progress"])
            assert result.exit_code == 0, result.stderr
            out[f"{name}.yaml"] = spec
    return out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".perfscout.lock"))
    return dst


@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_a_damaged_store_is_a_clear_error_everywhere(damage: str, runs: dict[str, Path], tmp_path: Path) -> None:
    bad = _copy(runs["a"], tmp_path / "bad")
    store = bad / "results.sqlite"
    data = store.read_bytes()
    store.write_bytes(data[: len(data) // 2] if damage == "truncated" else os.urandom(len(data)))
    damaged = store.read_bytes()
    needle = "cannot open results store"
    # the report names it damaged (exit 1): the run's task results on disk say what it lost
    _clean(runner.invoke(app, ["report", str(bad)]), 1, "is damaged")
    # export and regress name it as the report does (exit 1, `report --rebuild`): test_damaged_store_reads.py
    _clean(runner.invoke(app, ["export", str(bad)]), 1, "is damaged")
    _clean(runner.invoke(app, ["regress", str(runs["a"]), str(bad)]), 1, "is damaged")
    _clean(runner.invoke(app, ["sweep", str(runs["a.yaml"]), "--out", str(bad), "--resume", "--no-progress"]),
           2, needle)
    assert store.read_bytes() == damaged, "a damaged store was written to"
    assert not (bad / "report.md").exists() or (runs["a"] / "report.md").exists()


def test_a_user_folder_is_never_a_run_directory(runs: dict[str, Path], tmp_path: Path) -> None:
    """``--out`` naming a folder of the user's (their report.md, results.csv) is refused;
    before, the sweep wrote its own files of those names over them."""
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "report.md").write_text("my notes")
    (mine / "results.csv").write_text("my,table\n")
    result = runner.invoke(app, ["sweep", str(runs["a.yaml"]), "--out", str(mine), "--no-progress", "--report"])
    _clean(result, 2, "holds files that are not a sweep's")
    assert (mine / "report.md").read_text() == "my notes" and (mine / "results.csv").read_text() == "my,table\n"
    assert sorted(os.listdir(mine)) == ["report.md", "results.csv"]
    # an empty folder and the sweep's own run directory (resumed) are fine
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runner.invoke(app, ["sweep", str(runs["a.yaml"]), "--out", str(empty), "--no-progress"]).exit_code == 0
    again = runner.invoke(app, ["sweep", str(runs["a.yaml"]), "--out", str(empty), "--resume", "--no-progress"])
    assert again.exit_code == 0 and "1 already done" in " ".join(again.stderr.split() + again.stdout.split())


def test_runs_that_share_no_task_are_not_a_verdict(runs: dict[str, Path]) -> None:
    """Two sweeps of different fields: nothing pairs. That used to print "too noisy to tell"
    and exit 0, which passes a CI gate that compared the wrong runs."""
    result = runner.invoke(app, ["regress", str(runs["a"]), str(runs["b"])])
    _clean(result, 2, "nothing was compared")
    assert "--match" in " ".join(result.stderr.split())
    as_json = runner.invoke(app, ["regress", str(runs["a"]), str(runs["b"]), "--json"])
    _clean(as_json, 2, "nothing was compared")
    assert as_json.stdout == ""
    # paired on fewer fields they compare (two fields of different sizes: the ratio differs, exit 1)
    paired = runner.invoke(app, ["regress", str(runs["a"]), str(runs["b"]), "--match", "codec,mode,bound"])
    assert paired.exit_code in (0, 1) and "1 task(s) compared" in " ".join(paired.stdout.split()), paired.stderr


def test_a_violated_bound_is_never_exported(runs: dict[str, Path], tmp_path: Path) -> None:
    broken = _copy(runs["a"], tmp_path / "broken")
    with sqlite3.connect(broken / "results.sqlite") as db:
        db.execute("UPDATE results SET bound_ok = 0, status = 'bound_violated', max_abs_err = 1.0")
    _clean(runner.invoke(app, ["export", str(broken)]), 2, "held its bound")
    named = runner.invoke(app, ["export", str(broken), "--codec", "zfp", "--mode", "abs", "--bound", "0.01", "--json"])
    _clean(named, 2, "held its bound")
    assert named.stdout == ""


def test_a_store_held_by_another_writer(runs: dict[str, Path], tmp_path: Path) -> None:
    """A second sweep on a run directory another sweep holds is refused at once (one
    writer per store); the lock is the sweep's flock, taken here by a real second holder."""
    from perfscout.sweep.lock import RunDirLock

    held = _copy(runs["a"], tmp_path / "held")
    release, taken = threading.Event(), threading.Event()

    def holder() -> None:
        with RunDirLock(held, command="test holder"):
            taken.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert taken.wait(10)
        result = runner.invoke(app, ["sweep", str(runs["a.yaml"]), "--out", str(held), "--resume", "--no-progress"])
        _clean(result, 2, "test holder")
    finally:
        release.set()
        t.join()


def test_a_regression_report_never_replaces_what_it_compares(runs: dict[str, Path]) -> None:
    store = runs["a"] / "results.sqlite"
    before = store.read_bytes()
    for flag in ("--md", "--html"):
        result = runner.invoke(app, ["regress", str(runs["a"]), str(runs["a"]), flag, str(store)])
        _clean(result, 2, "is the input")
    assert store.read_bytes() == before


def test_results_csv_cells_cannot_be_spreadsheet_formulas(runs: dict[str, Path], tmp_path: Path) -> None:
    """User-controlled text (a dataset's name, a plug-in's error text: ``=HYPERLINK(...)``,
    ``@SUM``, ``+cmd``, ``-2+3``, a tab or CR first) reaches results.csv's text cells;
    opened in a spreadsheet such a cell would run as a formula. Each is prefixed with ``'``
    (OWASP's rule), while real numbers (a negative figure, a text cell that is just a
    number) are left as they are."""
    import csv

    from perfscout.state.records import CompressionResult
    from perfscout.tools.results_store import ResultStore

    names = ["=HYPERLINK(\"http://x\",\"y\")", "@SUM(A1)", "+cmd", "-2+3", "\tTAB", "\rCR"]
    out = _copy(runs["a"], tmp_path / "run")
    with ResultStore(out / "results.sqlite") as store:  # the user-controlled text of further rows
        base = store.results().iloc[0].to_dict()
        for i, name in enumerate(names):
            row = {k: (None if v is None or (isinstance(v, float) and v != v) else v) for k, v in base.items()}
            row.update(task_key=f"k{i}", dataset=name, error=name, codec="zfp", psnr=-12.5, bound_ok=True)
            store.put_result(CompressionResult(**{k: v for k, v in row.items() if v is not None or k == "bound_ok"}))
        store.put_result(CompressionResult(**{**{k: v for k, v in base.items() if v == v and v is not None},
                                              "task_key": "num", "dataset": "-42", "error": "1e-3"}))
        store.export(out)
    with open(out / "results.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    by_key = {r["task_key"]: r for r in rows}
    for i, name in enumerate(names):
        assert by_key[f"k{i}"]["dataset"] == "'" + name, by_key[f"k{i}"]["dataset"]
        assert by_key[f"k{i}"]["error"] == "'" + name
        assert float(by_key[f"k{i}"]["psnr"]) == -12.5  # a number column is never touched
    assert by_key["num"]["dataset"] == "-42" and by_key["num"]["error"] == "1e-3"  # plain numbers stay
    for r in rows:
        for cell in r.values():
            assert not cell or cell[0] not in "=+@\t\r" and not (cell[0] == "-" and not _is_number(cell)), cell


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("damage", ["zero-length", "rows-lost", "tasks-lost", "random"])
def test_a_store_that_disagrees_with_the_task_results_on_disk_is_damaged(
        damage: str, runs: dict[str, Path], tmp_path: Path) -> None:
    """A zero-length results.sqlite beside the stored task results reported "0 of 0 task(s)
    ... every measured bound held", exit 0. A store that does not hold what raw/ holds is
    damaged: exit 1, nothing written (the store is left as it was, no report), and
    ``report --rebuild`` rebuilds it from the task results (the damaged one kept aside)."""
    bad = _copy(runs["a"], tmp_path / "bad")
    for name in ("report.md", "report.html"):
        (bad / name).unlink(missing_ok=True)
    store = bad / "results.sqlite"
    if damage == "zero-length":
        store.write_bytes(b"")
        for extra in ("results.sqlite-wal", "results.sqlite-shm"):
            (bad / extra).unlink(missing_ok=True)
    elif damage == "random":
        store.write_bytes(os.urandom(4096))
    else:
        with sqlite3.connect(store) as db:
            db.execute("DELETE FROM results" if damage == "rows-lost" else "DELETE FROM tasks")
    before = store.read_bytes()
    result = runner.invoke(app, ["report", str(bad)])
    _clean(result, 1, "is damaged")
    said = " ".join(result.stderr.split())
    assert "--rebuild" in said and "1 task result" in said, said
    assert store.read_bytes() == before, "the damaged store was written to"
    assert not (bad / "report.md").exists()
    rebuilt = runner.invoke(app, ["report", "--rebuild", str(bad)])
    assert rebuilt.exit_code == 0, rebuilt.stderr
    report = (bad / "report.md").read_text()
    assert "1 of 1 task(s) stored" in report, report[:400]
    kept = sorted(p.name for p in bad.iterdir() if p.name.startswith("results.sqlite.damaged"))
    assert kept and (bad / kept[0]).read_bytes() == before, kept
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT codec, bound_ok FROM results").fetchall() == [("zfp", 1)]
    # a store that agrees is not rebuilt (its attempt log would be lost for nothing)
    _clean(runner.invoke(app, ["report", "--rebuild", str(runs["a"])]), 2, "agrees")


def test_a_store_of_a_run_with_no_result_yet_is_not_damaged(runs: dict[str, Path], tmp_path: Path) -> None:
    """Rows that are missing because their tasks never finished (no result.json in raw/)
    are an incomplete run, not a damaged store: the report says so, exit 0."""
    partial = _copy(runs["a"], tmp_path / "partial")
    with sqlite3.connect(partial / "results.sqlite") as db:
        db.execute("DELETE FROM results")
    shutil.rmtree(partial / "raw")
    result = runner.invoke(app, ["report", str(partial)])
    assert result.exit_code == 0, result.stderr
    assert "Incomplete run" in (partial / "report.md").read_text()
