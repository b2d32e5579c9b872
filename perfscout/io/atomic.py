"""Files written whole or not at all: the one temp-file-and-rename writer of perfscout.

Every layer that writes a file a reader may open while it is being written (a run
directory's JSON, a sweep task's record, a report, a saved platform snapshot, a compressed
stream from ``perfscout eval --save``) goes through :func:`write_atomic`: the bytes go to a
temp file beside the target (unique to the process and the call, so two writers never
share one), which is renamed over the target only once it is complete. A crash, a full
disk or a file-size limit mid-write leaves the old file, or none — never half of one — and
no stray temp file. A writer that must be handed a path rather than bytes (pandas'
``to_parquet``, a SQLite database) writes to the path :func:`atomic_path` yields, with the
same guarantees. It sits at the bottom (it imports nothing of perfscout), so the tools,
the sweep engine, the graph and the CLI all call the same code; ``tests/unit/test_io_only.py``
fails on a rename-into-place written anywhere else.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _temp_beside(path: Path, mode: int = 0o666) -> tuple[int, Path]:
    """A new, empty temp file next to ``path`` (same file system, so the rename is atomic):
    O_EXCL on a name unique to this call, so a planted file or link is never written through;
    ``mode`` less the umask (0o666: as a plain open gives)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    return fd, tmp


def write_atomic(path: str | Path, data: str | bytes | Iterable[bytes], *, fsync: bool = False,
                 mkdir: bool = False, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text, bytes, or an iterable of byte chunks) to ``path`` atomically.

    ``fsync`` flushes the file to the device before the rename (for files that must survive
    a power cut: the agent's run directory); ``mkdir`` creates the parent folders first.
    Returns ``path``.
    """
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, str):
                fh.write(data.encode(encoding))
            elif isinstance(data, (bytes, bytearray, memoryview)):
                fh.write(data)
            else:
                for chunk in data:
                    fh.write(chunk)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@contextmanager
def atomic_path(path: str | Path, *, mkdir: bool = False) -> Iterator[Path]:
    """A temp path beside ``path`` for a writer that takes a path (``df.to_parquet(tmp)``, a
    SQLite file); renamed over ``path`` when the block ends without an exception, removed
    (with SQLite's ``-wal``/``-shm`` companions) when it raises."""
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_beside(path)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        raise


def write_new(path: str | Path, data: bytes, *, mode: int = 0o600, fsync: bool = True) -> bool:
    """Create ``path`` holding ``data``, whole, unless it already exists; True when this call
    made it. The bytes go to a temp file first and are hard-linked onto the name, which fails
    if the name is taken: a reader (another thread, another process) sees no file or the
    complete one, never the empty file an ``O_EXCL`` create shows between its open and its
    write, and a crash mid-write leaves no file rather than a damaged one. Two writers racing:
    one wins, the other returns False and should read the winner's bytes. The temp file has
    ``mode`` from its creation (a key is never readable by others, not even for a moment). On
    a file system without hard links the file is created in place (``O_EXCL``) instead."""
    path = Path(path)
    fd, tmp = _temp_beside(path, mode)
    try:
        _write_whole(fd, data, fsync)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some FUSE, SMB): the O_EXCL create, whole but for its window
            return _create_in_place(path, data, mode, fsync)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def _create_in_place(path: Path, data: bytes, mode: int, fsync: bool) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    except FileExistsError:
        return False
    _write_whole(fd, data, fsync)
    return True


def _write_whole(fd: int, data: bytes, fsync: bool) -> None:
    """``data`` into the new file ``fd`` (closed after), flushed to the device if ``fsync``."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def move_into_place(src: str | Path, dst: str | Path) -> Path:
    """Rename a finished file (written whole before, e.g. by :func:`write_atomic` or a child
    that has exited) onto its final name: one rename on one file system, never a write, so a
    reader sees the old file or the new one. ``src`` must be a regular file, not a link a
    program could have planted in its place."""
    src, dst = Path(src), Path(dst)
    if src.is_symlink() or not src.is_file():
        raise FileNotFoundError(f"{src} is not a regular file: nothing is moved onto {dst}")
    os.replace(src, dst)
    return dst


def write_json_atomic(path: str | Path, doc: Any, *, fsync: bool = False, mkdir: bool = False,
                      indent: int = 2) -> Path:
    """``doc`` as JSON (non-JSON values through ``str``), written with :func:`write_atomic`."""
    return write_atomic(path, json.dumps(doc, indent=indent, default=str, allow_nan=True) + "\n",
                        fsync=fsync, mkdir=mkdir)
