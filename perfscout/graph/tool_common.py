"""What every agent tool shares: the artifact it returns, run info, and path confinement.

Its own module so that tool modules (graph/tools, regress_tools, ...) import it rather
than each other; nothing here is a tool.
"""

from __future__ import annotations

import os
import unicodedata
import urllib.parse
from pathlib import Path
from typing import Any

from langgraph.prebuilt import ToolRuntime

from perfscout.errors import InputError, PerfscoutError

Artifact = dict[str, Any]

#: Exceptions whose retry can succeed (the resource was busy, not wrong).
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError, ConnectionError, BlockingIOError, InterruptedError,
)

def _artifact(kind: str, *, data: Any = None, error: str = "", transient: bool = False,
              needs: dict[str, str] | None = None) -> Artifact:
    return {"kind": kind, "data": data, "error": error, "transient": transient,
            "needs": needs or {}}


#: The start of a failure's error that is a defect of perfscout itself (an AttributeError, a
#: TypeError ...), not of the input, the codec or the machine: a run with one never ends as done.
INTERNAL_ERROR = "internal error (a bug in perfscout): "


def _failure(exc: BaseException) -> tuple[str, Artifact]:
    transient = isinstance(exc, TRANSIENT_ERRORS)
    msg = f"{type(exc).__name__}: {exc}"
    if not (transient or isinstance(exc, (PerfscoutError, OSError, MemoryError))):
        msg = INTERNAL_ERROR + msg
    return f"failed: {msg}", _artifact("error", error=msg, transient=transient)


def _run_info(runtime: ToolRuntime | None) -> dict[str, str]:
    """run_id, task_key and platform_id for result records, read from the graph state."""
    state = (runtime.state if runtime is not None else None) or {}
    call_id = (runtime.tool_call_id if runtime is not None else "") or ""
    platform = state.get("platform") or {}
    return {
        "run_id": str(state.get("run_id", "")),
        "task_key": call_id.rsplit(".a", 1)[0] if call_id else "",
        "platform_id": str(platform.get("platform_id", "")),
    }


#: Set (os.pathsep-separated folders): the only places besides the working directory and
#: the runs folder a request may name, absolute paths included (a server's setting).
ALLOWED_ROOTS_ENV = "PERFSCOUT_ALLOWED_ROOTS"
#: Never data, however spelled: the system's own trees (``/var/tmp`` excepted).
SYSTEM_TREES = tuple(Path(p) for p in ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var", "/usr",
                                       "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/snap"))
_NOT_SYSTEM = (Path("/var/tmp"),)
#: Characters that render as nothing (zero-width, bidi controls): dropped in one reading.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f"
                                    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))


def allowed_roots(agent_run_dir: str = "") -> list[Path]:
    """Where paths the agent accepts may point: the working directory (the user's area, as
    for profile_command; not when it is ``/``), the runs folder holding this agent run, and
    the folders of ``$PERFSCOUT_ALLOWED_ROOTS``."""
    cwd = Path(os.path.realpath(Path.cwd()))
    roots = [cwd] if cwd != Path(cwd.anchor) else []
    if agent_run_dir:
        # the run's own folder and its siblings: perfscout's runs, which compare_runs reads
        roots.append(Path(os.path.realpath(agent_run_dir)).parent)
    roots += _env_roots()
    return roots


def _env_roots() -> list[Path]:
    return [Path(os.path.realpath(os.path.expanduser(p)))
            for p in os.environ.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if p.strip()]


def _readings(path: str) -> list[str]:
    """The spellings a path may be taken for: as written, NFKC-folded (fullwidth ．．／),
    without invisible characters, and percent-decoded. Each one is checked."""
    out = [path]
    for cand in (unicodedata.normalize("NFKC", path), path.translate(_INVISIBLE)):
        out.append(cand)
    out.append(unicodedata.normalize("NFKC", path).translate(_INVISIBLE))
    out += [urllib.parse.unquote(c) for c in list(out) if "%" in c]
    return list(dict.fromkeys(out))


def _resolve(spelling: str) -> Path:
    try:
        p = os.path.expanduser(spelling)
    except (RuntimeError, KeyError):
        p = spelling
    if not os.path.isabs(p):
        p = os.path.join(os.getcwd(), p)
    try:
        return Path(os.path.realpath(p))  # symlinks followed, ".." and "//" folded, missing parts kept
    except OSError:  # a link we may not read (/proc/1/root): the spelling, folded
        return Path(os.path.abspath(p))


def check_named_path(path: str, what: str, roots: list[Path], *, absolute_is_theirs: bool = True) -> Path:
    """``path`` resolved, or InputError when any reading of it leads outside.

    Every reading (see :func:`_readings`) is joined to the working directory, expanded
    (``~``) and resolved with ``realpath`` before the check. Inside ``roots``: accepted. A
    path the person wrote absolute (``/data/f.raw``, ``~/f.raw``) with no ``..`` is also
    theirs (``absolute_is_theirs``: a request's data, not a tool's output folder), unless ``$PERFSCOUT_ALLOWED_ROOTS`` is set, it resolves into a system tree
    (``/etc``, ``/proc``...), or a part of it names a secret (``.ssh``, ``.env``, key files:
    :mod:`perfscout.tools.secret_mask`). Anything else (``../``, a link out) is refused."""
    from perfscout.tools.secret_mask import is_secret_dir, is_secret_file

    where = " or ".join(str(r) for r in roots) or "nowhere (the working directory is /)"
    resolved: Path | None = None
    for spelling in _readings(path):
        p = _resolve(spelling)
        resolved = resolved or p
        if any(p.is_relative_to(t) for t in SYSTEM_TREES) and not any(p.is_relative_to(t) for t in _NOT_SYSTEM):
            raise InputError(f"{what} {path!r} resolves to {p}, outside the allowed folders (a system folder: never data)")
        parts = p.parts[1:]
        # each folder judged with its path (~/.config/gh is secret, a folder named gh elsewhere
        # is not), the file with its own (~/.config/hub is the hub CLI's token)
        if any(is_secret_dir(part, Path(*p.parts[:i + 2])) for i, part in enumerate(parts[:-1])) or (
                parts and is_secret_file(parts[-1], p)):
            raise InputError(f"{what} {path!r} resolves to {p}, outside the allowed folders (it names "
                             "secrets: credentials, keys, history)")
        if any(p == r or p.is_relative_to(r) for r in roots):
            continue
        written_absolute = spelling.startswith(("/", "~")) and ".." not in Path(spelling).parts
        if absolute_is_theirs and written_absolute and not os.environ.get(ALLOWED_ROOTS_ENV):
            continue
        raise InputError(f"{what} {path!r} resolves to {p}, outside the allowed folders ({where})"
                         + ("" if os.environ.get(ALLOWED_ROOTS_ENV) else
                            f" (write the absolute path, or list its folder in ${ALLOWED_ROOTS_ENV})"))
    assert resolved is not None
    return resolved


def confine(path: str, roots: list[Path], what: str) -> Path:
    """``path`` resolved (symlinks followed: a link cannot lead out) inside ``roots``, or
    InputError (every reading checked, see :func:`check_named_path`)."""
    return check_named_path(path, what, roots, absolute_is_theirs=False)
