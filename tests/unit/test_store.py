"""The SQLite results store: WAL, one committed transaction per result, typed read-back, exports."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from perfscout.state.records import RESULT_COLUMNS, CompressionResult
from perfscout.sweep.spec import expand, load_spec
from perfscout.tools.results_store import ResultStore, StoreError, open_results


def record(key: str, **kw: object) -> CompressionResult:
    base = dict(run_id="r1", task_key=key, dataset="grf:8x8", shape="8,8", dtype="f32", nbytes=256, codec="sz3",
                mode="abs", bound=1e-3, ratio=3.5, psnr=70.25, compress_s=1e-3, compress_MBps=0.256,
                bound_ok=True, status="ok")
    base.update(kw)
    return CompressionResult(**base)


@pytest.fixture()
def store(tmp_path: Path) -> ResultStore:
    s = ResultStore(tmp_path / "results.sqlite")
    yield s
    s.close()


def test_store_uses_wal_and_keeps_the_design_columns(store: ResultStore) -> None:
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = [r[1] for r in store.conn.execute("PRAGMA table_info(results)")]
    assert tuple(cols) == RESULT_COLUMNS


def test_each_result_is_visible_to_another_reader_at_once(store: ResultStore) -> None:
    other = sqlite3.connect(store.path)
    store.put_result(record("a"))
    assert other.execute("SELECT task_key, ratio FROM results").fetchall() == [("a", 3.5)]
    store.put_result(record("b", status="codec_crashed", ratio=None, bound_ok=None, error="boom"))
    assert other.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 2
    other.close()


def test_results_read_back_typed_and_equal(store: ResultStore) -> None:
    recs = [record("a"), record("b", bound_ok=False, status="bound_violated", error="max err 2e-3 > 1e-3"),
            record("c", status="codec_timeout", ratio=None, psnr=None, bound_ok=None, error="no result after 5 s")]
    for r in recs:
        store.put_result(r)
    df = store.results()
    assert list(df.columns) == list(RESULT_COLUMNS)
    assert df["bound_ok"].dtype == "boolean" and df["nbytes"].dtype == "Int64" and df["ratio"].dtype == "float64"
    back = [CompressionResult(**{k: (None if pd.isna(v) else v) for k, v in row.items()})
            for row in df.sort_values("task_key").to_dict("records")]
    assert back == recs


def test_a_task_cannot_be_stored_twice(store: ResultStore) -> None:
    store.put_result(record("a"))
    with pytest.raises(StoreError, match="task a already has a result"):
        store.put_result(record("a", ratio=9.0))
    assert store.results()["ratio"].tolist() == [3.5]  # the failed insert changed nothing


def test_tasks_sessions_and_attempts(store: ResultStore, tmp_path: Path) -> None:
    spec = load_spec({"datasets": [{"synthetic": "grf:8,8"}], "codecs": ["sz3"], "bounds": [0.1, 0.01]})
    tasks, _ = expand(spec)
    store.add_tasks(tasks)
    store.add_tasks(tasks)  # idempotent, as on resume
    assert store.task_count() == 2
    assert store.new_session() == 1 and store.new_session() == 2
    attempt = store.start_attempt(tasks[1].task_key, session=2)
    store.put_result(record(tasks[1].task_key), attempt)
    store.put_result(record(tasks[0].task_key))
    att = store.attempts()
    assert att[["task_key", "session", "outcome"]].values.tolist() == [[tasks[1].task_key, 2, "ok"]]
    assert att["finished_at"].notna().all()
    # Results come back in task order, not insertion order.
    assert store.results()["task_key"].tolist() == [t.task_key for t in tasks]
    assert store.task_experiments()[tasks[0].task_key] == ["main"]


def test_store_survives_reopen_and_exports(store: ResultStore, tmp_path: Path) -> None:
    store.put_result(record("a"))
    store.put_result(record("b", status="codec_crashed", ratio=None, bound_ok=None, error="SIGSEGV"))
    store.set_meta("run_id", "r1")
    store.close()
    again = ResultStore(tmp_path / "results.sqlite")
    assert again.get_meta("run_id") == "r1"
    paths = again.export(tmp_path)
    pq = pd.read_parquet(paths["parquet"])
    csv = pd.read_csv(paths["csv"])
    assert list(pq.columns) == list(RESULT_COLUMNS) == list(csv.columns)
    pd.testing.assert_frame_equal(pq, again.results())
    assert csv["error"].fillna("").tolist() == ["", "SIGSEGV"]
    again.close()
    assert len(open_results(tmp_path)) == 2


def test_not_a_run_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a sweep run directory"):
        open_results(tmp_path)
    bad = tmp_path / "results.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open results store"):
        ResultStore(bad)


def test_a_store_from_before_a_column_gains_it_and_keeps_its_rows(tmp_path: Path) -> None:
    """A run directory written before ``chunks`` existed: resumable, its old rows read as NA."""
    path = tmp_path / "results.sqlite"
    with ResultStore(path) as s:
        s.put_result(record("old"))
    conn = sqlite3.connect(path)  # rebuild the results table as an older perfscout made it
    old_cols = [c for c in RESULT_COLUMNS if c != "chunks"]
    conn.execute(f"CREATE TABLE r2 AS SELECT {', '.join(chr(34) + c + chr(34) for c in old_cols)} FROM results")
    conn.execute("DROP TABLE results")
    conn.execute("ALTER TABLE r2 RENAME TO results")
    conn.commit()
    conn.close()
    with ResultStore(path) as s:
        s.put_result(record("new", chunks=2))
        df = s.results().set_index("task_key")
    assert pd.isna(df.loc["old", "chunks"]) and df.loc["new", "chunks"] == 2
    assert df.loc["old", "ratio"] == 3.5
