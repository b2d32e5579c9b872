"""A cgroup per run, where this machine lets perfscout make one: process and memory caps.

``RLIMIT_NPROC`` is never applied to the host's root user (the kernel exempts uid 0 of the
initial user namespace, capabilities or not), so for a program started by root the only
real process cap is a ``pids`` cgroup. ``RLIMIT_AS`` breaks CUDA programs (they reserve
terabytes of addresses), so a memory cap for them is a ``memory`` cgroup too. Both cgroup
v2 (``pids.max``, ``memory.max``) and v1 (``pids.max``, ``memory.limit_in_bytes``) are
handled. Where no cgroup can be created (no permission, read-only ``/sys/fs/cgroup``,
controllers not delegated) :func:`create` says why and the caller records that the rlimit
is all there is.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")


@dataclass
class RunCgroup:
    """The cgroup directories made for one run (one per v1 controller, one for v2)."""

    dirs: list[Path]
    described: dict[str, str] = field(default_factory=dict)

    def attach_fd_paths(self) -> list[bytes]:
        """``cgroup.procs`` paths, encoded in advance for the fork/exec window."""
        return [os.fsencode(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs:
            try:
                out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return out

    def memory_events_oom(self) -> bool:
        """Did the memory cap kill something? (``oom_kill N`` in v2 ``memory.events`` or
        v1 ``memory.oom_control``)."""
        for d in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    text = (d / name).read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    k, _, v = line.partition(" ")
                    if k == "oom_kill" and v.strip().isdigit() and int(v) > 0:
                        return True
        return False

    def evidence(self) -> dict[str, tuple[int | None, int | None]]:
        """controller -> (the cap read back, what the run was charged: peak memory bytes or
        current pids), read before :meth:`destroy`. None where the kernel does not say."""
        out: dict[str, tuple[int | None, int | None]] = {}
        for d in self.dirs:
            for ctrl, cap_names, used_names in (
                    ("memory", ("memory.max", "memory.limit_in_bytes"), ("memory.peak", "memory.max_usage_in_bytes")),
                    ("pids", ("pids.max",), ("pids.peak", "pids.current"))):
                cap = _first_int(d, cap_names)
                if cap is None:
                    continue
                out[ctrl] = (cap, _first_int(d, used_names))
        return out

    def destroy(self) -> None:
        """Kill whatever is left in the cgroup, then remove it."""
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _first_int(d: Path, names: tuple[str, ...]) -> int | None:
    for name in names:
        try:
            return int((d / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return None


def attach_self(paths: list[bytes]) -> None:
    """Move the calling process into the run's cgroups (runs between fork and exec)."""
    pid = str(os.getpid()).encode()
    for p in paths:
        fd = os.open(p, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)


def _own_cgroups() -> dict[str, str]:
    """controller name (``""`` for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _v2_root() -> Path | None:
    for cand in (CGROUP_FS, CGROUP_FS / "unified"):
        if (cand / "cgroup.controllers").exists():
            return cand
    return None


def create(processes: int | None, memory_bytes: int | None) -> tuple[RunCgroup | None, str]:
    """A fresh cgroup holding the caps, or ``(None, why not)``. Nothing to cap: ``(None, "")``."""
    if processes is None and memory_bytes is None:
        return None, ""
    name = f"perfscout-{os.getpid()}-{secrets.token_hex(4)}"
    own = _own_cgroups()
    made: list[Path] = []
    described: dict[str, str] = {}
    errors: list[str] = []
    v2 = _v2_root()
    wanted = {"pids": processes, "memory": memory_bytes}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    try:
        if v2 is not None and "" in own and set(wanted) <= set((v2 / "cgroup.controllers").read_text().split()):
            parent = v2 / own[""].lstrip("/")
            enabled = set((parent / "cgroup.subtree_control").read_text().split())
            for ctrl in set(wanted) - enabled:  # fails where the parent holds processes
                (parent / "cgroup.subtree_control").write_text(f"+{ctrl}")
            d = parent / name
            d.mkdir()
            made.append(d)
            if processes is not None:
                (d / "pids.max").write_text(str(processes))
                described["processes"] = f"cgroup v2 pids.max={processes}"
            if memory_bytes is not None:
                (d / "memory.max").write_text(str(memory_bytes))
                if (d / "memory.swap.max").exists():  # a cap that swaps is no cap
                    (d / "memory.swap.max").write_text("0")
                described["memory"] = f"cgroup v2 memory.max={memory_bytes} bytes"
            return RunCgroup(made, described), ""
        for ctrl, value in wanted.items():
            base = CGROUP_FS / ctrl
            if ctrl not in own or not (base / "cgroup.procs").exists():
                errors.append(f"no cgroup v1 {ctrl} hierarchy")
                continue
            d = base / own[ctrl].lstrip("/") / name
            d.mkdir()
            made.append(d)
            if ctrl == "pids":
                (d / "pids.max").write_text(str(value))
                described["processes"] = f"cgroup v1 pids.max={value}"
            else:
                (d / "memory.limit_in_bytes").write_text(str(value))
                described["memory"] = f"cgroup v1 memory.limit_in_bytes={value}"
    except OSError as exc:
        for d in made:
            try:
                d.rmdir()
            except OSError:
                pass
        return None, f"cannot create a cgroup here ({exc.strerror or exc}: {exc.filename or ''})"
    if not made:
        return None, "; ".join(errors) or "no cgroup hierarchy"
    return RunCgroup(made, described), "; ".join(errors)
