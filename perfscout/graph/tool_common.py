"""What every agent tool shares: the artifact it returns, run info, and path confinement.

Its own module so that tool modules (graph/tools, regress_tools, ...) import it rather
than each other; nothing here is a tool.
"""

from __future__ import annotations

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


def allowed_roots(agent_run_dir: str = "") -> list[Path]:
    """Where paths the agent accepts may point: the working directory (the user's area, as
    for profile_command; not when it is ``/``) and the runs folder holding this agent run."""
    cwd = Path.cwd().resolve()
    roots = [cwd] if cwd != Path(cwd.anchor) else []
    if agent_run_dir:
        # the run's own folder and its siblings: perfscout's runs, which compare_runs reads
        roots.append(Path(agent_run_dir).resolve().parent)
    return roots


def confine(path: str, roots: list[Path], what: str) -> Path:
    """``path`` resolved (symlinks followed: a link cannot lead out), or InputError."""
    p = Path(path).expanduser()
    p = (p if p.is_absolute() else Path.cwd() / p).resolve()
    if not any(p == r or p.is_relative_to(r) for r in roots):
        where = " or ".join(str(r) for r in roots) or "nowhere (the working directory is /)"
        raise InputError(f"{what} {path!r} resolves to {p}, outside {where}")
    return p
