"""The ``perf stat`` event vocabulary that the profiler and the diagnosis both read.

Here, in ``state/``, because two layers speak it: ``tools/perf_stat.py`` asks perf for these
events and marks a profile as having hardware counters or not, and the CPU rules of
``analysis/diagnosis`` look events up by the same names. Neither imports the other for it.
"""

from __future__ import annotations

#: The hardware events perf stat counts by default (they need a PMU: absent in most VMs).
HARDWARE_EVENTS = ("cycles", "instructions", "branches", "branch-misses",
                   "cache-references", "cache-misses")
#: Software events the kernel counts without a PMU.
SOFTWARE_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults")
DEFAULT_EVENTS = HARDWARE_EVENTS + SOFTWARE_EVENTS


def event_base(event: str) -> str:
    """The event underneath perf's spelling: ``cycles:u``, ``cpu_core/cycles/`` -> ``cycles``."""
    e = event.split(":")[0]
    if "/" in e:  # cpu_core/cycles/ -> cycles
        parts = [p for p in e.split("/") if p]
        e = parts[-1] if parts else e
    return e
