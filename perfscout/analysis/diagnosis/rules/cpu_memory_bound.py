"""cpu_memory_bound: TopDown level-1/2 share 'memory' is high (Memory-bound)."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import TOPDOWN, CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Finding

ID = "cpu_memory_bound"
ROLE = "cause"
READS = {"memory": TOPDOWN["memory"]}

#: Intel TMA flags a memory-bound share above ~20 % (loads waiting on caches or DRAM).
SHARE_MIN = 0.20


def check(ctx: CpuContext) -> Finding | None:
    share = ctx.share("memory")
    if share is None or share < SHARE_MIN:
        return None
    return make(
        ctx, ID, "cause", f"Memory-bound: {share:.0%} of pipeline slots (TopDown)",
        confidence=0.75, evidence=[ctx.ev(*TOPDOWN["memory"], threshold=f">= {SHARE_MIN:.0%}")],
        recommendation="Reduce cache misses and bytes: tile for cache reuse, use narrower types, access sequentially, and prefetch; if DRAM bandwidth is saturated, only fewer bytes help.",
        verify="the memory share should fall; perf stat -M TopdownL1 -- <your program>",
        not_when="another TopDown category is larger: fix that one first",
        expected_gain=share,
    )
