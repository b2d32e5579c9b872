"""Limits a contained child process puts on itself: its address space, its parent's death.

Both ways perfscout runs code it does not trust to stay well-behaved use these: the
out-of-process evaluation (:mod:`perfscout.tools.isolate`) and the sweep's task processes
(:mod:`perfscout.sweep.worker`). They live here, below both, so that neither imports the other.
"""

from __future__ import annotations

import os
import resource
import signal


def limit_memory(limit_mb: int, device: str, *, base_bytes: int = 0) -> None:
    """Limit this process's address space to ``base_bytes`` + ``limit_mb`` MiB (CPU only).

    ``base_bytes`` is what a forked child already maps (its parent's address space), so
    the limit is on what the codec adds."""
    # Address-space limits break CUDA (it reserves huge virtual ranges); GPU tasks are
    # watched by the parent's resident-memory check instead.
    if device == "cpu" and limit_mb > 0:
        limit = int(base_bytes) + limit_mb * 2**20
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def address_space_bytes() -> int:
    """This process's current virtual size (VmSize), 0 where /proc cannot tell."""
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def resident_mb(pid: int) -> float:
    """A process's resident size (VmRSS) in MiB, 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def die_with_parent() -> None:
    """Ask Linux to SIGKILL us when our parent dies (even by SIGKILL), so that no orphan
    keeps running a hung codec or races a resumed sweep for the same task."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's timeout still applies
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(3)
