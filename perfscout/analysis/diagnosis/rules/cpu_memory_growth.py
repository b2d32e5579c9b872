"""cpu_memory_growth: the program's memory grew large (peak resident set, pages first touched).

Without counters the memory a program used is still measured: its peak resident set
(getrusage ru_maxrss) and the page faults of first touching new pages (perf's page-faults,
about 4 KiB each). Listed as advice: a large footprint is often the job itself; if it is
not expected, a memory profiler says which allocation grows.
"""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import is_python, make
from perfscout.state.records import Evidence, Finding

ID = "cpu_memory_growth"
ROLE = "advice"
READS = {"page-faults": ("page-faults", "faults", "minor-faults")}

#: 256 MiB of peak resident memory (or of pages first touched) is worth a word: more than a
#: small tool's footprint, and on a shared node more than a fair share of a core's memory.
LARGE_BYTES = 256 * 2**20
#: A first-touch page fault maps one 4 KiB page (transparent huge pages make fewer, larger ones).
PAGE_BYTES = 4096


def check(ctx: CpuContext) -> Finding | None:
    rss_kib = ctx.profile.rusage.get("max_rss_kib")
    faults = ctx.val("page-faults", "faults", "minor-faults")
    if faults is None:
        faults = ctx.profile.rusage.get("minor_faults")
    peak = rss_kib * 1024 if rss_kib else None
    touched = faults * PAGE_BYTES if faults else None
    big = max(peak or 0, touched or 0)
    if big < LARGE_BYTES:
        return None
    ev: list[Evidence] = []
    said = []
    if peak:
        ev.append(Evidence(metric="host:max_rss_kib", value=rss_kib, unit="KiB", threshold=f">= {LARGE_BYTES >> 20} MiB"))
        said.append(f"peak resident memory {peak / 2**20:,.0f} MiB")
    if ctx.name_of("page-faults", "faults", "minor-faults"):
        ev.append(ctx.ev("page-faults", "faults", "minor-faults"))
        said.append(f"{faults:,.0f} page faults (about {touched / 2**20:,.0f} MiB of pages first touched)")
    cmd = " ".join(ctx.profile.command) or "<your program>"
    tool = (f"python -X tracemalloc or memray run -- {cmd}" if is_python(ctx)
            else f"heaptrack {cmd} or valgrind --tool=massif {cmd}")
    return make(
        ctx, ID, "advice", "Memory grew large: " + "; ".join(said),
        confidence=0.6, evidence=ev,
        recommendation=(f"If this footprint is not what the job needs, find which allocation grows: {tool}. "
                        "Reuse buffers instead of allocating per step, and free (or stream) data no longer used."),
        verify=f"the peak resident memory should fall: /usr/bin/time -v {cmd} (Maximum resident set size)",
        not_when="the program must hold that much data (its input or output is that large)",
        expected_gain=None,
    )
