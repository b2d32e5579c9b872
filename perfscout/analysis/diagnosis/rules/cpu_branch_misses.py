"""cpu_branch_misses: mispredicted branches flush the pipeline often."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make, perf_cmd
from perfscout.state.records import Finding

ID = "cpu_branch_misses"
ROLE = "cause"
READS = {"branch-misses": ("branch-misses",), "branches": ("branches",), "cycles": ("cycles",)}

#: A mispredict flushes ~15-20 cycles of work on current cores (16 used here).
MISPREDICT_CYCLES = 16.0
#: Mispredicts costing >= 5 % of the cycles (a 2 % miss rate in branchy code reaches it).
COST_SHARE_MIN = 0.05


def check(ctx: CpuContext) -> Finding | None:
    miss, cyc = ctx.val("branch-misses"), ctx.val("cycles")
    if miss is None or not cyc:
        return None
    share = min(1.0, miss * MISPREDICT_CYCLES / cyc)
    if share < COST_SHARE_MIN:
        return None
    ev = [ctx.derived("mispredict_cycle_share", share, [ctx.name_of("branch-misses"), ctx.name_of("cycles")],
                      "fraction", f">= {COST_SHARE_MIN:.0%} at {MISPREDICT_CYCLES:.0f} cycles/miss"),
          ctx.ev("branch-misses")]
    br = ctx.val("branches")
    if br:
        ev.append(ctx.derived("branch_miss_rate", miss / br, [ctx.name_of("branch-misses"),
                                                            ctx.name_of("branches")], "fraction"))
    return make(
        ctx, ID, "cause", f"Branch mispredictions cost about {share:.0%} of cycles",
        confidence=0.7, evidence=ev,
        recommendation=("Remove data-dependent branches from the hot loop: compute both sides and "
                        "select (branchless min/max, masks), sort or partition the data so the branch "
                        "becomes predictable, or hoist invariant conditions out of the loop."),
        verify=f"branch-misses should fall; {perf_cmd('branches,branch-misses,cycles')}",
        not_when="the branch guards rare, expensive work (predication would do that work every time)",
        expected_gain=share,
    )
