"""The SQLite checkpoint store is opened only as a regular file: a symbolic link (to another
SQLite database, or dangling), a directory or a FIFO in its place, or a link planted as its
journal/WAL, is refused with an error naming it, and nothing is written through it. Real
SQLite files, the real langgraph saver."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from perfscout.graph.checkpoint import CheckpointStoreDamaged, check_checkpoint_store, open_checkpointer
from perfscout.graph.context import Context


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "mine.sqlite"
    with sqlite3.connect(v) as db:
        db.execute("CREATE TABLE mine (x)")
        db.execute("INSERT INTO mine VALUES (42)")
    return v


def _ctx(home: Path, url: str = "") -> Context:
    home.mkdir(parents=True, exist_ok=True)
    return Context(home=str(home), checkpoint_url=url)


@pytest.mark.parametrize("how", ["home", "url"])
def test_a_store_linked_to_another_sqlite_file_is_refused_and_the_file_is_unchanged(
        how: str, tmp_path: Path, victim: Path) -> None:
    home = tmp_path / "home"
    store = home / "checkpoints.sqlite" if how == "home" else tmp_path / "link.sqlite"
    ctx = _ctx(home, "" if how == "home" else f"sqlite:///{store}")
    store.symlink_to(victim)
    before = victim.read_bytes()
    for attempt in (lambda: check_checkpoint_store(ctx), lambda: open_checkpointer(ctx).__enter__()):
        with pytest.raises(CheckpointStoreDamaged, match="symbolic link") as err:
            attempt()
        assert str(store) in str(err.value) and str(victim) in str(err.value), err.value
        assert err.value.exit_code == 1
    assert victim.read_bytes() == before
    assert not Path(f"{victim}-wal").exists() and not Path(f"{victim}-journal").exists()


def test_a_dangling_link_is_refused_and_its_target_not_created(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home)
    target = tmp_path / "elsewhere.sqlite"
    (home / "checkpoints.sqlite").symlink_to(target)
    with pytest.raises(CheckpointStoreDamaged, match="symbolic link"):
        with open_checkpointer(ctx):
            pass
    assert not target.exists()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_store_that_is_not_a_regular_file_is_refused(kind: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home)
    store = home / "checkpoints.sqlite"
    store.mkdir() if kind == "directory" else os.mkfifo(store)
    with pytest.raises(CheckpointStoreDamaged, match="a directory" if kind == "directory" else "a FIFO") as err:
        with open_checkpointer(ctx):
            pass
    assert str(store) in str(err.value)


@pytest.mark.parametrize("sidecar", ["-wal", "-journal", "-shm"])
def test_a_link_planted_as_the_stores_journal_is_refused(sidecar: str, tmp_path: Path, victim: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home)
    link = Path(f"{home / 'checkpoints.sqlite'}{sidecar}")
    link.symlink_to(victim)
    before = victim.read_bytes()
    with pytest.raises(CheckpointStoreDamaged, match="symbolic link") as err:
        with open_checkpointer(ctx):
            pass
    assert str(link) in str(err.value)
    assert victim.read_bytes() == before


def test_a_fresh_store_is_a_regular_file_of_its_owner_and_works(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ctx = _ctx(home)
    with open_checkpointer(ctx) as saver:
        assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}) is None
    st = os.lstat(home / "checkpoints.sqlite")
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    with sqlite3.connect(home / "checkpoints.sqlite") as db:
        assert "checkpoints" in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    with open_checkpointer(ctx):  # and opens again as it is
        pass
    check_checkpoint_store(ctx)
