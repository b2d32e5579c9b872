"""perfscout.io.write_atomic and atomic_path: the one temp-file-and-rename writer every layer uses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from perfscout.io import atomic_path, write_atomic, write_json_atomic, write_new


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_text_bytes_and_chunks(tmp_path):
    write_atomic(tmp_path / "a.txt", "héllo")
    write_atomic(tmp_path / "b.bin", b"\x00\x01")
    write_atomic(tmp_path / "c.bin", iter([b"ab", b"cd"]))
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "héllo"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "c.bin").read_bytes() == b"abcd"
    assert _leftovers(tmp_path) == []


def test_a_failure_midway_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "record.json"
    target.write_text("old")

    def chunks():
        yield b"new, half"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_atomic(target, chunks())
    assert target.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_mode_follows_the_umask_like_a_plain_open(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "r.md", "x", fsync=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.md").stat().st_mode) == 0o644


def test_never_writes_through_a_planted_temp_name_or_link(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep")
    target = tmp_path / "run" / "report.md"
    write_json_atomic(target, {"a": float("nan")}, mkdir=True)
    assert '"a": NaN' in target.read_text()
    # a link planted at the target is replaced by the new file, not followed
    target.unlink()
    target.symlink_to(outside)
    write_atomic(target, "new")
    assert outside.read_text() == "keep" and not target.is_symlink() and target.read_text() == "new"


def test_missing_parent_without_mkdir_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "nope" / "f.txt", "x")


def test_atomic_path_for_writers_that_take_a_path(tmp_path):
    target = tmp_path / "out" / "results.csv"
    with atomic_path(target, mkdir=True) as tmp:
        assert tmp.parent == target.parent and tmp.exists() and not target.exists()
        tmp.write_text("a,b\n1,2\n")  # as pandas' to_csv(path) would
    assert target.read_text() == "a,b\n1,2\n"
    assert _leftovers(target.parent) == []


def test_atomic_path_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "results.sqlite"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            Path(f"{tmp}-wal").write_text("journal")  # SQLite's companion of the temp file
            raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def test_write_new_creates_whole_files_and_never_overwrites(tmp_path):
    target = tmp_path / "key"
    assert write_new(target, b"first", mode=0o600) is True
    assert target.read_bytes() == b"first" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert write_new(target, b"second") is False  # taken: the first writer's bytes stay
    assert target.read_bytes() == b"first"
    assert _leftovers(tmp_path) == []


def test_write_new_leaves_a_planted_link_and_its_target_alone(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    target = tmp_path / "key"
    target.symlink_to(outside)
    assert write_new(target, b"secret") is False
    assert target.is_symlink() and outside.read_bytes() == b"keep"
    assert _leftovers(tmp_path) == []


def test_write_new_that_fails_mid_write_leaves_no_file(tmp_path, monkeypatch):
    target = tmp_path / "key"

    def full(fd):  # noqa: ANN001, ANN202
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        write_new(target, b"x" * 32)
    assert not target.exists() and _leftovers(tmp_path) == []


def test_write_new_without_hard_links_creates_the_file_in_place(tmp_path, monkeypatch):
    def no_links(src, dst):  # noqa: ANN001, ANN202 - a file system that refuses link(2)
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "key"
    assert write_new(target, b"k" * 32) is True
    assert target.read_bytes() == b"k" * 32 and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert write_new(target, b"other") is False and target.read_bytes() == b"k" * 32
    assert _leftovers(tmp_path) == []


def test_the_temp_file_of_write_new_is_never_readable_by_others(tmp_path, monkeypatch):
    """The key's bytes are written into a file that was 0600 from its creation, not chmod-ed
    after (another user could open it in between)."""
    created = []
    real_open = os.open

    def watching(path, flags, mode=0o777, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        fd = real_open(path, flags, mode, *args, **kwargs)
        if str(path).endswith(".tmp"):
            created.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return fd

    monkeypatch.setattr(os, "open", watching)
    write_new(tmp_path / "key", b"secret")
    assert created == [0o600]
