"""What the viewer may serve: only paths inside the home's ``runs/``, resolved and checked.

A run id or a file name from a URL is never joined to a path unchecked: ids are a short
safe alphabet, names have no absolute or ``..`` parts, and the resolved path (symlinks
followed) must still be inside the run directory, itself inside ``runs/``. A symlink that
leads out of the home is refused like a ``..``.
"""

from __future__ import annotations

import re
from pathlib import Path

from perfscout.errors import InputError

#: A thread / run id as the agent makes them (hex) or as users give them (--thread-id).
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


class NotServed(InputError):
    """A path the viewer will not serve (outside the home, hidden, not a file)."""


def check_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id or "") or ".." in run_id:
        raise NotServed(f"not a run id: {run_id[:80]!r}")
    return run_id


def inside(path: Path, root: Path) -> Path:
    """``path`` resolved, if it is ``root`` or below it (after following symlinks)."""
    real_root = root.resolve()
    real = path.resolve()
    if real != real_root and not real.is_relative_to(real_root):
        raise NotServed("outside the perfscout home")
    return real


def run_dir(runs: Path, run_id: str) -> Path:
    """``runs/<run_id>`` resolved (it may not exist yet); refused when it leads out of ``runs/``."""
    check_run_id(run_id)
    path = inside(runs / run_id, runs)
    if path == runs.resolve():
        raise NotServed(f"not a run id: {run_id!r}")
    return path


def _child(root: Path, name: str, what: str) -> Path:
    """``root/name`` resolved: relative, no ``..``, no hidden parts, inside ``root``."""
    if not name or "\x00" in name or "\\" in name or name.startswith("/"):
        raise NotServed(f"not a {what} name: {name[:80]!r}")
    parts = name.split("/")
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise NotServed(f"not a {what} name: {name[:80]!r}")
    return inside(root.joinpath(*parts), root)


def child_file(root: Path, name: str) -> Path:
    """A regular file ``root/name`` (see :func:`_child`)."""
    path = _child(root, name, "file")
    if not path.is_file():
        raise NotServed(f"no such file: {name[:80]!r}")
    return path


def child_dir(root: Path, name: str) -> Path:
    """A directory ``root/name`` by the same rules as :func:`child_file`."""
    path = _child(root, name, "folder")
    if not path.is_dir():
        raise NotServed(f"no such folder: {name[:80]!r}")
    return path
