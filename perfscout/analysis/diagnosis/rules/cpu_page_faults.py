"""cpu_page_faults: page faults take a measurable share of the CPU time."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make, perf_cmd
from perfscout.state.records import Finding

ID = "cpu_page_faults"
ROLE = "cause"
READS = {"page-faults": ("page-faults", "faults"), "task-clock": ("task-clock",)}

#: A minor fault (first touch of an anonymous page: zeroing 4 KiB + kernel entry) costs ~1 us.
FAULT_COST_S = 1e-6
#: Faults costing >= 5 % of the CPU time are worth removing (allocation reuse is cheap).
COST_SHARE_MIN = 0.05


def check(ctx: CpuContext) -> Finding | None:
    pf, cpu_s = ctx.val("page-faults", "faults"), ctx.seconds()
    if pf is None or not cpu_s:
        return None
    share = pf * FAULT_COST_S / cpu_s
    if share < COST_SHARE_MIN:
        return None
    return make(
        ctx, ID, "cause", f"Page faults: {pf:,.0f} faults, about {min(share, 1):.0%} of CPU time",
        confidence=0.6,
        evidence=[ctx.derived("fault_time_share", min(share, 1.0), [ctx.name_of("page-faults", "faults"),
                                                                   ctx.name_of("task-clock")], "fraction",
                              f">= {COST_SHARE_MIN:.0%} at {FAULT_COST_S * 1e6:.0f} us/fault"),
                  ctx.ev("page-faults", "faults"), ctx.ev("task-clock")],
        recommendation=("Allocate once and reuse buffers instead of allocating per iteration, use "
                        "huge pages for large arrays (madvise(MADV_HUGEPAGE) / THP), and pre-touch "
                        "memory outside the timed region."),
        verify=f"page-faults should fall; {perf_cmd('task-clock,page-faults')}",
        not_when="the faults are the one-time first touch of data the program must read anyway",
        expected_gain=min(share, 0.99),
    )
