"""Opening a results store while another process creates it: the file exists, switched to WAL,
its tables not yet committed. That is a store being made, not another program's file."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from perfscout.tools.results_store import ResultStore, StoreError


def test_a_store_being_created_opens_as_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    creator = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    creator.execute("PRAGMA journal_mode=WAL")  # the header is on disk: a file of some bytes, no table
    creator.execute("BEGIN IMMEDIATE")
    creator.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    assert path.stat().st_size > 0
    done = threading.Timer(0.5, lambda: creator.execute("COMMIT"))  # the creator's commit lands
    done.start()
    try:
        with ResultStore(path) as store:  # waits for the creator's lock, then finds its own tables
            assert store.get_meta("schema_version") is not None
            assert store.finished_keys() == set()
    finally:
        done.join()
        creator.close()


def test_an_sqlite_file_of_another_program_is_still_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE photos (id INTEGER)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        ResultStore(path)
    assert path.read_bytes() == before
