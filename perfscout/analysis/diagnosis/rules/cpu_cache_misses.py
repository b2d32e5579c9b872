"""cpu_cache_misses: last-level cache misses cost a large share of the cycles."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make, perf_cmd
from perfscout.state.records import Finding

ID = "cpu_cache_misses"
ROLE = "cause"
READS = {"cache-misses": ("cache-misses", "LLC-load-misses"), "instructions": ("instructions",),
         "cycles": ("cycles",)}

#: A last-level miss costs ~80-150 ns of DRAM latency, ~200-300 cycles; the estimate
#: uses 200 cycles and assumes no overlap (an upper bound).
MISS_PENALTY_CYCLES = 200.0
#: Misses that could cost >= 10 % of the cycles are worth restructuring for.
COST_SHARE_MIN = 0.10


def check(ctx: CpuContext) -> Finding | None:
    miss, cyc = ctx.val("cache-misses", "LLC-load-misses"), ctx.val("cycles")
    if miss is None or not cyc:
        return None
    share = min(1.0, miss * MISS_PENALTY_CYCLES / cyc)
    if share < COST_SHARE_MIN:
        return None
    ev = [ctx.derived("miss_cycle_share", share, [ctx.name_of("cache-misses", "LLC-load-misses"),
                                                  ctx.name_of("cycles")], "fraction",
                      f">= {COST_SHARE_MIN:.0%} at {MISS_PENALTY_CYCLES:.0f} cycles/miss"),
          ctx.ev("cache-misses", "LLC-load-misses")]
    ins = ctx.val("instructions")
    if ins:
        ev.append(ctx.derived("llc_mpki", miss / ins * 1000, [ctx.name_of("cache-misses", "LLC-load-misses"),
                                                             ctx.name_of("instructions")], "miss/kinst"))
    return make(
        ctx, ID, "cause", f"Cache misses: last-level misses could cost up to {share:.0%} of cycles",
        confidence=0.65, evidence=ev,
        recommendation=("Make memory access cache-friendly: iterate in storage order (row-major "
                        "inner loop on the last index), block/tile loops so the working set fits "
                        "in L2/LLC, turn arrays of structs into structs of arrays for the hot fields, "
                        "and avoid pointer chasing in the hot loop."),
        verify=f"cache-misses should fall; {perf_cmd('cache-references,cache-misses,cycles,instructions')}",
        not_when="the data is streamed once (then misses are compulsory: bandwidth is the limit)",
        expected_gain=share,
    )
