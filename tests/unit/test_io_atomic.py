"""perfscout.io.write_atomic: the one temp-file-and-rename writer every layer uses."""

from __future__ import annotations

import os
import stat

import pytest

from perfscout.io import write_atomic, write_json_atomic


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
