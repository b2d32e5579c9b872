"""cpu_bad_speculation: TopDown level-1/2 share 'bad_speculation' is high (Bad speculation)."""

from __future__ import annotations

from perfscout.analysis.diagnosis.cpu_context import TOPDOWN, CpuContext
from perfscout.analysis.diagnosis.rules._cpu import make
from perfscout.state.records import Finding

ID = "cpu_bad_speculation"
ROLE = "cause"
READS = {"bad_speculation": TOPDOWN["bad_speculation"]}

#: Intel TMA flags above ~10 % of slots wasted on mispredicted paths or machine clears.
SHARE_MIN = 0.10


def check(ctx: CpuContext) -> Finding | None:
    share = ctx.share("bad_speculation")
    if share is None or share < SHARE_MIN:
        return None
    return make(
        ctx, ID, "cause", f"Bad speculation: {share:.0%} of pipeline slots (TopDown)",
        confidence=0.75, evidence=[ctx.ev(*TOPDOWN["bad_speculation"], threshold=f">= {SHARE_MIN:.0%}")],
        recommendation="Make branches predictable or branchless (see cpu_branch_misses), and look for machine clears (memory ordering conflicts, self-modifying code, 4K aliasing).",
        verify="the bad_speculation share should fall; perf stat -M TopdownL1 -- <your program>",
        not_when="another TopDown category is larger: fix that one first",
        expected_gain=share,
    )
