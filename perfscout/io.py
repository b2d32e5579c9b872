"""Files written whole or not at all: the one temp-file-and-rename writer of perfscout.

Every layer that writes a file a reader may open while it is being written (a run
directory's JSON, a sweep task's record, a report, a saved platform snapshot, a compressed
stream from ``perfscout eval --save``) goes through :func:`write_atomic`: the bytes go to a
temp file beside the target (unique to the process and the call, so two writers never
share one), which is renamed over the target only once it is complete. A crash, a full
disk or a file-size limit mid-write leaves the old file, or none — never half of one — and
no stray temp file. It sits at the bottom (it imports nothing of perfscout), so the tools,
the sweep engine, the graph and the CLI all call the same code.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any


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
    # O_EXCL on a name unique to this call; mode 0o666 less the umask, as a plain open gives.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
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
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | Path, doc: Any, *, fsync: bool = False, mkdir: bool = False,
                      indent: int = 2) -> Path:
    """``doc`` as JSON (non-JSON values through ``str``), written with :func:`write_atomic`."""
    return write_atomic(path, json.dumps(doc, indent=indent, default=str, allow_nan=True) + "\n",
                        fsync=fsync, mkdir=mkdir)
